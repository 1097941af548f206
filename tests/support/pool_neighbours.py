"""Run as a script inside a memory cgroup (tests/support/cgroup.py): a render pool of two processes,
sized from the cgroup as the app's is (app/render/memory.py), runs a neighbour's task while a hog
asks for more memory than the whole cgroup; prints what each got, as JSON."""
from __future__ import annotations

import json
import sys
import time


def neighbour(hog_done: str) -> str:
    """Runs until the hog's outcome is known (at most 60 s): in flight whatever the hog meets."""
    import os

    import numpy as np
    block = np.ones(200 * 2**20, dtype=np.uint8)  # a normal render's worth, resident
    end = time.monotonic() + 60
    while not os.path.exists(hog_done) and time.monotonic() < end:
        time.sleep(0.05)
    return f"ok {int(block.sum() // 2**20)}"


def hog(mb: int) -> str:
    import numpy as np
    block = np.ones(mb * 2**20, dtype=np.uint8)  # a mask drawn at 91,000 x 98,000 px, say
    return f"hog got {block.size // 2**20} MiB"


def main() -> None:
    from app.deadline import Deadline
    from app.render.memory import container_memory_mb, render_process_memory_mb
    from app.render.pool import RenderPool

    own_limit = sys.argv[2] != "--no-limit" if len(sys.argv) > 2 else True
    container = container_memory_mb()
    limit = render_process_memory_mb(0, 2, 1) if own_limit else 0
    pool = RenderPool(2, sys.argv[1], memory_limit_mb=limit)
    out: dict[str, object] = {"container_mb": container, "process_limit_mb": limit}
    try:
        pool.warm()
        hog_done = f"{sys.argv[1]}/hog-done"
        near = pool.submit(neighbour, hog_done)
        time.sleep(0.5)
        for name, task in (("hog", pool.submit(hog, 4096)), ("neighbour", near)):
            try:
                out[name] = pool.wait(task, Deadline(90), name)
            except Exception as exc:  # noqa: BLE001 - reported to the test
                out[name] = f"{type(exc).__name__}: {getattr(exc, 'code', '')} {exc}"
            open(hog_done, "w").close()
    finally:
        pool.shutdown()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
