"""A render process runs one thread, so the GIF's forked runs (animator.parallel) may fork in it; it
still dies with the worker that started it."""
import threading

from app.deadline import Deadline
from app.render.pool import RenderPool


def _threads(_: float) -> int:
    return threading.active_count()


def test_a_render_process_runs_no_thread_but_its_own(tmp_path):
    pool = RenderPool(1, tmp_path / "spill")
    try:
        assert pool.run(_threads, 0.0, deadline=Deadline(60), stage="test") == 1
    finally:
        pool.shutdown()
