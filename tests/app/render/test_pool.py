"""The render pool (app/render/pool.py) and how the pipeline shares the CPUs among renders."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.deadline import Deadline
from app.errors import DeadlineExceeded
from app.render import steps
from tests.support import wait


def test_render_pool_recovers_from_a_dead_process_and_cleans_spill_files(tmp_path: Path) -> None:
    import time as _time

    from app.render.pool import RenderFailed, RenderPool

    pool = RenderPool(1, tmp_path / "spill")
    try:
        assert pool.run(steps.warm, 0.0, deadline=Deadline(120), stage="warm") > 0
        with pytest.raises(RenderFailed, match="died during crash"):
            pool.run(os._exit, 3, deadline=Deadline(120), stage="crash")      # e.g. the OOM killer
        pid = pool.run(steps.warm, 0.0, deadline=Deadline(120), stage="after")  # a fresh pool serves again
        assert pid > 0
        with pytest.raises(DeadlineExceeded, match="during slow"):
            pool.run(_time.sleep, 1.5, deadline=Deadline(0.3), stage="slow")
        # once the slow job finishes (1.5 s), its spill files go with it
        wait.until(lambda: not list((tmp_path / "spill").iterdir()), 10, "spill files must not outlive their job")
    finally:
        pool.shutdown()


@pytest.mark.parametrize("cpus,inflight,motions,want", [
    (2, 1, 3, 1),    # the default on 2 CPUs: a 3-motion request fills both with its motions
    (2, 1, 1, 2),    # a one-motion request gets the CPU its motions leave idle
    (4, 2, 1, 2),    # two one-motion requests at once share 4 CPUs
    (4, 2, 3, 1),
    (16, 1, 1, 4),   # at most MAX_PROCESSES_PER_RENDER
    (1, 1, 1, 1),
])
def test_processes_per_render_shares_the_cpus_among_admitted_motions(cpus, inflight, motions, want):
    from app.render.pipeline import MAX_PROCESSES_PER_RENDER, processes_per_render

    assert MAX_PROCESSES_PER_RENDER == 4
    assert processes_per_render(cpus, inflight, motions) == want


def _sleep_then(seconds: float, value: int) -> int:
    import time as _time
    _time.sleep(seconds)
    return value


def _killed_by_the_oom_killer() -> None:
    import signal as _signal
    os.kill(os.getpid(), _signal.SIGKILL)


def _allocate(mb: int) -> int:
    import numpy as np
    block = np.ones(mb * 2**20, dtype=np.uint8)  # touched: resident, as a drawn mask is
    return int(block[-1])


def test_a_dead_render_process_fails_only_its_own_task(tmp_path: Path) -> None:
    """Issue 41 S2: one process killed (the OOM killer's SIGKILL) while another client's task runs
    in the other process: that task still answers, and the pool serves on with both processes."""
    from app.render.pool import RenderFailed, RenderPool

    pool = RenderPool(2, tmp_path / "spill")
    try:
        pool.warm()
        neighbour = pool.submit(_sleep_then, 1.5, 7)
        victim = pool.submit(_killed_by_the_oom_killer)
        with pytest.raises(RenderFailed, match="died during hog"):
            pool.wait(victim, Deadline(60), "hog")
        assert pool.wait(neighbour, Deadline(60), "neighbour") == 7
        # the dead process's lane got a fresh process: two tasks at once run in parallel again
        tasks = [pool.submit(_sleep_then, 0.5, i) for i in range(2)]
        assert [pool.wait(t, Deadline(60), "after") for t in tasks] == [0, 1]
    finally:
        pool.shutdown()


def test_a_render_process_past_its_memory_limit_fails_its_task_alone(tmp_path: Path) -> None:
    """Issue 41 S2, held to the price: a task that asks for more than the process's hard limit gets
    422 render_too_large naming the bound, the process lives on, the neighbour's task answers."""
    from app.errors import RenderTooLarge
    from app.render.pool import RenderPool

    pool = RenderPool(2, tmp_path / "spill", memory_limit_mb=600)
    try:
        pool.warm()
        neighbour = pool.submit(_sleep_then, 1.0, 7)
        assert pool.run(_allocate, 64, deadline=Deadline(60), stage="small") == 1  # a normal task fits
        with pytest.raises(RenderTooLarge, match="DOODLEPOD_RENDER_PROCESS_MEMORY_MB=600"):
            pool.run(_allocate, 4096, deadline=Deadline(60), stage="hog")
        assert pool.wait(neighbour, Deadline(60), "neighbour") == 7
        assert pool.run(_allocate, 64, deadline=Deadline(60), stage="after") == 1
    finally:
        pool.shutdown()


@pytest.mark.parametrize("own_limit", [True, False], ids=["process-limit", "cgroup-only"])
def test_under_the_pods_memory_limit_a_hog_fails_alone(tmp_path: Path, own_limit: bool) -> None:
    """Issue 41 S2 under the app container's own memory limit (a 3 GiB cgroup, pod.yaml's): a render
    asking 4 GiB while another client's render runs. With the render process's own limit (sized
    from the cgroup) the hog gets 422 render_too_large and nothing is killed; with the cgroup's
    alone the OOM killer kills the hog's process, and still only the hog's task fails."""
    import json
    import subprocess
    import sys

    from tests.support.cgroup import join, memory_cgroup

    with memory_cgroup(3072) as procs:
        args = [sys.executable, "-m", "tests.support.pool_neighbours", str(tmp_path / "spill")]
        run = subprocess.run(args + ([] if own_limit else ["--no-limit"]), capture_output=True, text=True,
                             timeout=120, preexec_fn=lambda: join(procs), cwd=Path(__file__).parents[3])
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["container_mb"] == 3072, out
    assert out["neighbour"] == "ok 200", out  # the other client's render answered
    if own_limit:
        assert out["process_limit_mb"] == 1344, out
        assert out["hog"].startswith("RenderTooLarge: render_too_large"), out
        assert "DOODLEPOD_RENDER_PROCESS_MEMORY_MB=1344" in out["hog"], out
    else:
        assert out["hog"].startswith("RenderFailed: render_failed"), out
