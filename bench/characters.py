#!/usr/bin/env python
"""Latency of the characters API's correction loop: move a joint, render one motion, ask again.

Starts the app under gunicorn (gevent worker, the app's default settings unless DOODLEPOD_*
variables say otherwise) on loopback with local storage in a temporary folder, or on moto's S3
server with ``--s3``. The character is created once from a fixture drawing on a page with client
joints (no model call is needed for any measured step, so no TorchServe is started). Then:

1. ``PATCH /characters/{id}`` moving one joint (``--edits`` times): rig check + overlay + store;
2. ``POST /characters/{id}/animations`` one motion at 256x256, 15 fps, after each of ``--renders``
   edits (a new version, so a cache miss: the render itself);
3. the same request again (``--hits`` times): a cache hit, answered from the storage.

Prints p50/p95 of each with its target (PATCH p50 <= 150 ms, render p50 <= 400 ms,
cache hit p50 <= 30 ms) and met/MISSED, plus the machine's load average.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import requests
from common import load_avg, pct, stack

TARGETS_MS = {"patch joints": 150.0, "render 1 motion 256px": 400.0, "cache hit": 30.0}


def timed(fn) -> tuple[float, requests.Response]:
    t0 = time.perf_counter()
    resp = fn()
    return (time.perf_counter() - t0) * 1e3, resp


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--edits", type=int, default=30)
    ap.add_argument("--renders", type=int, default=10)
    ap.add_argument("--hits", type=int, default=50)
    ap.add_argument("--motion", default="dab")
    ap.add_argument("--character", default="char1")
    ap.add_argument("--s3", action="store_true", help="store on moto's S3 server instead of local disk")
    args = ap.parse_args()

    workdir = stack.make_workdir("dp-bench-char-")
    env = {"DOODLEPOD_LOCAL_DIR": str(workdir / "files"), "DOODLEPOD_RENDER_FPS": "15",
           "DOODLEPOD_ACCESS_LOG": "false"}
    env = {**env, **{k: v for k, v in os.environ.items() if k.startswith("DOODLEPOD_")}}
    moto = None
    if args.s3:
        moto = stack.MotoS3().start()
        env.update({**stack.S3_ENV, "DOODLEPOD_STORAGE": "s3", "DOODLEPOD_S3_BUCKET": moto.bucket,
                    "DOODLEPOD_S3_ENDPOINT_URL": moto.endpoint, "DOODLEPOD_S3_REGION": "us-east-1"})
    server = stack.Gunicorn(workdir, env)
    try:
        server.start()
        page, joints = stack.page_with_character(args.character, (1200, 900), (300, 150))
        resp = requests.post(f"{server.url}/characters", files={"image": ("d.png", stack.encode(page), "image/png")},
                             data={"joints": json.dumps({k: list(v) for k, v in joints.items()})}, timeout=120)
        resp.raise_for_status()
        url = f"{server.url}/characters/{resp.json()['id']}"
        hand = list(joints["left_hand"])

        def edit(i: int) -> tuple[float, requests.Response]:
            moved = [hand[0] + (i % 7) - 3, hand[1] + (i % 5) - 2]
            return timed(lambda: requests.patch(url, json={"joints": {"left_hand": moved}}, timeout=60))

        def render() -> tuple[float, requests.Response]:
            return timed(lambda: requests.post(f"{url}/animations", json={"motions": [args.motion], "size": 256},
                                               timeout=120))

        results: dict[str, list[float]] = {name: [] for name in TARGETS_MS}
        edit(0)
        render()                                           # warm-up: imports and config caches in the pool
        for i in range(args.edits):
            ms, r = edit(i + 1)
            r.raise_for_status()
            results["patch joints"].append(ms)
        for i in range(args.renders):
            edit(100 + i)[1].raise_for_status()
            ms, r = render()
            r.raise_for_status()
            assert r.json()["cached"] == [], r.text
            results["render 1 motion 256px"].append(ms)
        for _ in range(args.hits):
            ms, r = render()
            r.raise_for_status()
            assert r.json()["cached"] == [args.motion], r.text
            results["cache hit"].append(ms)
    finally:
        server.stop()
        if moto is not None:
            moto.stop()
        stack.remove(workdir)

    # The same render in this process, for context on a loaded machine: wall and CPU time of
    # steps.render_stored (what the render process runs), without the pool's niceness or HTTP.
    import animator
    from app.config import load_settings
    from app.motions.library import load_motions
    from app.render import steps

    char = animator.load_character(stack.CHARACTERS / args.character)
    motion = load_motions()[args.motion]
    files = steps.character_files([(j.name, j.loc, j.parent) for j in char.skeleton], texture=char.texture,
                                 mask=char.mask)
    walls, cpus = [], []
    for _ in range(4):
        steps._rigs.cache_clear()  # as after an edit: a new version, rigged anew (its decoded files are kept)
        w0, c0 = time.perf_counter(), time.process_time()
        steps.render_stored(files["texture"], files["mask"], [(j.name, j.loc, j.parent) for j in char.skeleton],
                           str(motion.motion_cfg), str(motion.retarget_cfg),
                           animator.RenderOptions(width=256, height=256, format="gif", fps=15.0,
                                                  threads=load_settings().render_threads))
        walls.append((time.perf_counter() - w0) * 1e3)
        cpus.append((time.process_time() - c0) * 1e3)
    print(f"characters API, {'S3 (moto)' if args.s3 else 'local disk'} storage, {args.character} + {args.motion}, "
          f"{os.cpu_count()} CPUs, load average {load_avg()}")
    print(f"{'step':26} {'n':>4} {'p50 ms':>8} {'p95 ms':>8} {'target':>8}")
    missed = 0
    for name, values in results.items():
        p50 = pct(values, 50)
        ok = p50 <= TARGETS_MS[name]
        missed += not ok
        print(f"{name:26} {len(values):4d} {p50:8.1f} {pct(values, 95):8.1f} {TARGETS_MS[name]:8.0f}  "
              f"{'met' if ok else 'MISSED'}")
    print(f"{'(in-process render, wall)':26} {3:4d} {pct(walls[1:], 50):8.1f} {max(walls[1:]):8.1f}")
    print(f"{'(in-process render, CPU)':26} {3:4d} {pct(cpus[1:], 50):8.1f} {max(cpus[1:]):8.1f}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
