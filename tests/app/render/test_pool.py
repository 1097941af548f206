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
