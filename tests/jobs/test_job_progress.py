"""A render's progress on its way to GET /jobs/{id}: written by the render process (throttled), read by
the parent, written into the job record by the worker (throttled, only while the job runs), shown by
the queue. (End to end over HTTP: tests/app/render/test_one_slot_shared.py.)"""
from __future__ import annotations

import json

from app import worker as worker_module
from app.jobs.queue import JobQueue
from app.render import pool, process


def test_render_process_writes_its_progress_throttled(tmp_path, monkeypatch):
    stem = tmp_path / "job"
    clock = [100.0]
    monkeypatch.setattr(process.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(process, "_progress", [str(stem) + ".progress", 0.0])
    job = pool.PoolTask(future=None, in_path=str(stem) + ".in", out_path=str(stem) + ".out")  # type: ignore[arg-type]
    assert job.progress() is None
    process.report_progress(0, 50)
    assert job.progress() == (0, 50)
    process.report_progress(1, 50)               # within PROGRESS_EVERY_S of the last write: skipped
    assert job.progress() == (0, 50)
    clock[0] += process.PROGRESS_EVERY_S + 0.01
    process.report_progress(2, 50)
    assert job.progress() == (2, 50)
    process.report_progress(50, 50)              # the last frame is always written
    assert job.progress() == (50, 50)
    job.remove_files()
    assert job.progress() is None
    monkeypatch.setattr(process, "_progress", [None, 0.0])
    process.report_progress(1, 2)                # outside a pool job: nothing, no error


class _Queue:
    def __init__(self) -> None:
        self.writes: list[dict] = []

    def progress(self, job_id: str, progress: dict) -> bool:
        self.writes.append(progress)
        return True


def test_worker_writes_progress_at_most_every_fifth_of_a_second_and_each_new_stage(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(worker_module.time, "monotonic", lambda: clock[0])
    w = worker_module.Worker.__new__(worker_module.Worker)
    w.queue = _Queue()
    report = w._reporter("j1")
    report({"stage": "rendering", "frames_done": 0})
    for i in range(1, 100):                   # a hundred frames within 0.1 s: none written
        clock[0] += 0.001
        report({"stage": "rendering", "frames_done": i})
    report({"stage": "storing", "frames_done": 100})    # a new stage: written at once
    clock[0] += worker_module.PROGRESS_EVERY_S
    report({"stage": "storing", "frames_done": 100})
    assert [(p["stage"], p["frames_done"]) for p in w.queue.writes] == [
        ("rendering", 0), ("storing", 100), ("storing", 100)]


def test_worker_writes_the_last_frame_at_once(monkeypatch):
    """The ended job keeps the last figures written: a throttled last frame would leave a
    succeeded job at 41 of 45 frames."""
    clock = [0.0]
    monkeypatch.setattr(worker_module.time, "monotonic", lambda: clock[0])
    w = worker_module.Worker.__new__(worker_module.Worker)
    w.queue = _Queue()
    report = w._reporter("j1")
    for i in range(46):
        clock[0] += 0.001
        report({"stage": "pose", "frames_done": i, "frames_total": 45})
    assert [p["frames_done"] for p in w.queue.writes] == [0, 45]


def test_the_job_shows_its_stage_and_figures():
    base = {"id": "a" * 32, "created": "t", "updated": "t", "kind": "character_animations"}
    figures = {"stage": "rendering", "frames_done": 3, "frames_total": 10,
               "motions": {"dab": {"frames_done": 3, "frames_total": 10}}}
    assert JobQueue.public({**base, "status": "queued", "progress": json.dumps(figures)})["progress"] == {
        "stage": "queued"}                  # a retried job starts again from the queue
    assert JobQueue.public({**base, "status": "running"})["progress"] == {"stage": "starting"}
    assert JobQueue.public({**base, "status": "running", "progress": json.dumps(figures)})["progress"] == figures
    done = JobQueue.public({**base, "status": "succeeded", "progress": json.dumps(figures)})["progress"]
    assert done == {**figures, "stage": "succeeded"}
