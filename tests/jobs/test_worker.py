"""The render worker (``python -m app.worker``) end to end: a real Redis server, a real TorchServe
serving the fake models of tests/fixtures/torchserve_fake (the real weights cannot be downloaded
here), the real pipeline and render processes, local storage on disk.

Jobs are queued with the engine directly here; tests/jobs/test_async_api.py does the same over HTTP.
"""
from __future__ import annotations

import io
import os
import signal
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from PIL import Image

from app import worker as worker_module
from app.errors import ApiError, DeadlineExceeded, ModelServerUnavailable, NoCharacter, RenderFailed
from app.jobs.queue import JobQueue
from tests.support import procs, stack, wait
from tests.support.jobstack import WorkerProcess

pytestmark = [pytest.mark.redis, pytest.mark.e2e, pytest.mark.timeout(600),
              pytest.mark.usefixtures("models_find_the_drawing")]

MOTIONS = ["dab", "jumping", "zombie"]


@pytest.fixture(scope="module")
def page():
    return stack.page_with_character("char1", (1000, 800), (250, 120))



@pytest.fixture
def workdir():
    path = stack.make_workdir("dp-jobs-worker-")
    yield path
    stack.remove(path)


def _env(redis_server, torchserve, workdir: Path, pod: str, **extra: str) -> dict[str, str]:
    return {"DOODLEPOD_REDIS_URL": redis_server.url, "DOODLEPOD_TORCHSERVE_URL": torchserve.inference_url,
            "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": torchserve.management_url, "DOODLEPOD_TORCHSERVE_RETRIES": "0",
            "DOODLEPOD_RENDER_SIZE": "200", "DOODLEPOD_RENDER_PROCESSES": "2",
            "DOODLEPOD_LOCAL_DIR": str(workdir / "files"), "DOODLEPOD_RUNTIME_DIR": str(workdir / pod),
            "DOODLEPOD_JOBS_VISIBILITY_TIMEOUT_S": "3", "DOODLEPOD_JOBS_MAX_ATTEMPTS": "3",
            "DOODLEPOD_WORKER_CONCURRENCY": "1", "DOODLEPOD_MAX_INFLIGHT": "2", **extra}


def _queue(redis_server) -> JobQueue:
    return JobQueue(redis_server.url, max_attempts=3, visibility_s=3)


def _submit(q: JobQueue, image: Image.Image) -> str:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    payload = {"motions": MOTIONS, "format": "gif", "joints": None, "bbox": None, "base_url": "http://testserver"}
    return q.submit("animate", payload, buf.getvalue()).job["id"]


def _wait_status(q: JobQueue, job_id: str, statuses: set[str], timeout: float) -> dict:
    def reached() -> dict | None:
        job = q.get(job_id)
        return job if job and job["status"] in statuses else None

    return wait.until(reached, timeout, lambda: f"job {job_id} {statuses}: {q.get(job_id)}", every=0.2)


def _wait_log(worker: WorkerProcess, text: str, timeout: float) -> None:
    wait.until(lambda: text in worker.log_text(), timeout, f"{text!r} in the worker's log:\n{worker.log_text()[-3000:]}")


def test_a_worker_killed_mid_render_loses_nothing(redis_server, torchserve, workdir, page):
    """SIGKILL to the worker (and its render processes) while it renders: another worker takes the
    job over after the visibility timeout and it succeeds, once."""
    q = _queue(redis_server)
    first = WorkerProcess(workdir, _env(redis_server, torchserve, workdir, "pod-a",
                                        DOODLEPOD_RENDER_FPS="native"), "worker-a").start()
    try:
        job_id = _submit(q, page[0])
        _wait_log(first, "stage=pose", 120)        # detection and pose done: the renders are starting
        wait.until(lambda: any(procs.state(p) == "R" for p in procs.descendants(first.proc.pid)), 30,
                   "a render process at work")
        # frozen where it is (SIGSTOP to its group), so that the status read and the kill see the same
        # moment: a fast machine could end 200 px renders between the look and the kill
        os.killpg(first.proc.pid, signal.SIGSTOP)
        assert q.get(job_id)["status"] == "running"
        first.kill(signal.SIGKILL)
    finally:
        first.stop()
    assert f"job {job_id} succeeded" not in first.log_text()
    killed_at = time.monotonic()
    second = WorkerProcess(workdir, _env(redis_server, torchserve, workdir, "pod-b"), "worker-b").start()
    try:
        job = _wait_status(q, job_id, {"succeeded", "failed"}, 180)
    finally:
        second.stop()
    assert job["status"] == "succeeded", job
    assert job["attempts"] == 2 and time.monotonic() - killed_at >= 3 - 0.5
    assert "(redelivered)" in second.log_text()
    assert set(job["animations"]) == set(MOTIONS)
    for motion, url in job["animations"].items():
        key = url.removeprefix("http://testserver/files/")
        assert key != url and key.endswith(f"/{motion}.gif"), url
        with Image.open(workdir / "files" / key) as gif:
            assert gif.format == "GIF" and gif.n_frames > 1
    assert q.redis.xlen(q.stream) == 0


def test_a_job_that_always_fails_ends_failed_after_n_tries_and_stays_visible(redis_server, torchserve, workdir,
                                                                              page):
    q = _queue(redis_server)
    torchserve.set_control(detector={"mode": "nonwhite", "status": 500})
    worker = WorkerProcess(workdir, _env(redis_server, torchserve, workdir, "pod-a")).start()
    try:
        job_id = _submit(q, page[0])
        job = _wait_status(q, job_id, {"succeeded", "failed"}, 120)
    finally:
        worker.stop()
    assert job["status"] == "failed" and job["attempts"] == 3, job
    assert job["error"]["code"] == "model_server_error" and "after 3 attempts" in job["error"]["message"]
    assert worker.log_text().count(f"job {job_id} start") == 3
    assert [f[b"job"].decode() for _, f in q.redis.xrange(q.dead)][-1:] == [job_id]
    assert q.get(job_id) == job                     # still readable after the worker stopped


def test_a_client_error_fails_at_once_without_retries(redis_server, torchserve, workdir):
    q = _queue(redis_server)
    worker = WorkerProcess(workdir, _env(redis_server, torchserve, workdir, "pod-a")).start()
    try:
        job_id = _submit(q, Image.new("RGB", (400, 300), "white"))   # a blank page: no character
        job = _wait_status(q, job_id, {"succeeded", "failed"}, 120)
    finally:
        worker.stop()
    assert job["status"] == "failed" and job["attempts"] == 1
    assert job["error"]["code"] == "no_character" and job["error"]["status"] == 422


# --- the retry rule, in process: a real Redis and TorchServe, test job kinds in place of the pipeline --------

class _Jobs:
    """A worker with one job thread in this process, on its own queue prefix, running the test's job kinds."""

    def __init__(self, redis_server, torchserve, tmp_path: Path, retry_delay_s: float) -> None:
        from app.characters.torchserve import TorchServeClient
        from app.config import load_settings
        from app.render.admission import InflightSlots
        from app.worker import Worker

        settings = load_settings({}, worker_concurrency=1, request_deadline_s=30.0, ping_timeout_s=5.0)
        self.queue = JobQueue(redis_server.url, f"retry-{tmp_path.name}:", max_attempts=3, visibility_s=30)
        services = SimpleNamespace(settings=settings, jobs=self.queue, pool=None,
                                   slots=InflightSlots(tmp_path / "slots", 1),
                                   torchserve=TorchServeClient(torchserve.inference_url, torchserve.management_url))
        self.worker = Worker(services, tmp_path, retry_delay_s=retry_delay_s)
        self.thread = threading.Thread(target=self.worker.run, name="worker-under-test", daemon=True)

    def __enter__(self) -> _Jobs:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.worker.stop.set()
        self.thread.join(60)
        assert not self.thread.is_alive(), "the worker did not stop"

    def submit(self, kind: str) -> str:
        return self.queue.submit(kind, {}).job["id"]


@pytest.mark.parametrize("error", [RenderFailed("the renderer failed"), DeadlineExceeded("past the deadline"),
                                   NoCharacter("no drawn character"), ApiError("a bug")],
                         ids=lambda e: e.code)
def test_a_deterministic_failure_ends_failed_after_one_attempt(redis_server, torchserve, tmp_path, monkeypatch,
                                                               error):
    calls: list[str] = []

    def fails(_ctx, _payload, _input, job_id, _deadline):
        calls.append(job_id)
        raise error

    monkeypatch.setitem(worker_module.HANDLERS, "test_fails", fails)
    with _Jobs(redis_server, torchserve, tmp_path, retry_delay_s=0.0) as jobs:
        job_id = jobs.submit("test_fails")
        job = _wait_status(jobs.queue, job_id, {"succeeded", "failed"}, 60)
        assert jobs.queue.redis.zcard(jobs.queue.delayed) == 0       # nothing waits to run it again
    assert job["status"] == "failed" and job["attempts"] == 1, job
    assert job["error"] == {"code": error.code, "status": error.status, "message": error.message}
    assert calls == [job_id]


def test_a_retryable_failure_is_requeued_with_a_delay_while_the_thread_takes_other_work(redis_server, torchserve,
                                                                                      tmp_path, monkeypatch):
    """One job thread: job A fails with TorchServe unavailable and is requeued 3 s out; job B, queued after A,
    is done in the meantime by that same thread (a thread sleeping on A's back-off could not), then A's
    second attempt runs no earlier than its not-before time and succeeds."""
    delay = 3.0
    events: dict[str, float] = {}

    def flaky(_ctx, _payload, _input, job_id, _deadline):
        if "a_failed" not in events:
            events["a_failed"] = time.time()
            raise ModelServerUnavailable("TorchServe is restarting")
        events["a_again"] = time.time()
        return {"done": "a"}

    def quick(_ctx, _payload, _input, job_id, _deadline):
        events["b_ran"] = time.time()
        return {"done": "b"}

    monkeypatch.setitem(worker_module.HANDLERS, "test_flaky", flaky)
    monkeypatch.setitem(worker_module.HANDLERS, "test_quick", quick)
    with _Jobs(redis_server, torchserve, tmp_path, retry_delay_s=delay) as jobs:
        a = jobs.submit("test_flaky")
        wait.until(lambda: "a_failed" in events, 60, "job A failed once")
        b = jobs.submit("test_quick")
        done_b = _wait_status(jobs.queue, b, {"succeeded", "failed"}, 60)
        waiting_a = jobs.queue.get(a)
        not_before = float(jobs.queue.raw_job(a).get("not_before") or 0)
        done_a = _wait_status(jobs.queue, a, {"succeeded", "failed"}, 60)
    assert done_b["status"] == "succeeded" and done_b["done"] == "b"
    assert waiting_a["status"] == "queued" and waiting_a["attempts"] == 1, waiting_a     # B ran during A's delay
    assert events["b_ran"] < events["a_failed"] + delay <= not_before + 0.5
    assert done_a["status"] == "succeeded" and done_a["attempts"] == 2 and done_a["done"] == "a", done_a
    assert events["a_again"] >= events["a_failed"] + delay - 0.5



def test_queued_jobs_leave_a_render_slot_to_synchronous_requests(redis_server, torchserve, tmp_path, monkeypatch):
    """Issue 41 S4: one client's queued jobs held both of the pod's slots for minutes while another
    client's /animate got 503. With two slots and two job threads, jobs take one; a synchronous request
    finds the other while they run."""
    from app.characters.torchserve import TorchServeClient
    from app.config import load_settings
    from app.render.admission import InflightSlots
    from app.worker import Worker

    running: list[int] = []
    most = [0]

    def slow(_ctx, _payload, _input, job_id, _deadline):
        running.append(1)
        most[0] = max(most[0], len(running))
        time.sleep(1.5)
        running.pop()
        return {}

    monkeypatch.setitem(worker_module.HANDLERS, "test_slow", slow)
    settings = load_settings({}, worker_concurrency=2, request_deadline_s=30.0, ping_timeout_s=5.0)
    queue = JobQueue(redis_server.url, f"leave-{tmp_path.name}:", max_attempts=1, visibility_s=30)
    slots = InflightSlots(tmp_path / "slots", 2)
    services = SimpleNamespace(settings=settings, jobs=queue, pool=None, slots=slots,
                               torchserve=TorchServeClient(torchserve.inference_url, torchserve.management_url))
    worker = Worker(services, tmp_path)
    ids = [queue.submit("test_slow", {}).job["id"] for _ in range(4)]
    thread = threading.Thread(target=worker.run, name="worker-under-test", daemon=True)
    thread.start()
    try:
        wait.until(lambda: running, 60, "a job started")
        free = []
        for _ in range(20):                       # while the jobs run, a request looks for a slot
            slot = slots.acquire()
            free.append(slot is not None)
            if slot is not None:
                slot.release()
            time.sleep(0.1)
        for job_id in ids:
            assert _wait_status(queue, job_id, {"succeeded", "failed"}, 60)["status"] == "succeeded"
    finally:
        worker.stop.set()
        thread.join(60)
    assert all(free), free
    assert most[0] == 1
