"""Each client's share of the job queue, and video work apart from the render slots, on a real Redis
server (Valkey on loopback): the queue itself (app/jobs/queue.py, submit.lua), the worker's video
threads (app/worker.py), and POST /motions over real HTTP (gunicorn, no worker, no model)."""
from __future__ import annotations

import os
import threading
import time
from types import SimpleNamespace

import pytest
import redis
import requests

from app import worker as worker_module
from app.config import load_settings
from app.jobs.queue import JobQueue, QueueFull
from app.orders import AnimateOrder, VideoOrder
from app.render.admission import InflightSlots
from app.shares import JobsShareUsed, QueuedBytesShareUsed, VideoShareUsed
from tests.support import stack
from tests.support.answers import assert_error

pytestmark = [pytest.mark.redis, pytest.mark.timeout(300)]

BAD, GOOD = "a-203.0.113.9", "a-198.51.100.9"


def _queue(redis_server, name: str, **kw) -> JobQueue:
    return JobQueue(redis_server.url, f"{name}-{time.monotonic_ns()}:", **kw)


def _end(queue: JobQueue, stream: str | None = None) -> None:
    taken = queue.take("t", block_ms=0, stream=stream)
    started = queue.start(taken, "t")
    assert queue.succeed(taken, started.owner, {})


def test_a_client_past_its_queued_jobs_gets_429_and_others_are_still_queued(redis_server):
    queue = _queue(redis_server, "jobs", max_queued=8, client_max_jobs=3)
    for _ in range(3):
        queue.submit("animate", {}, b"x", client=BAD)
    with pytest.raises(JobsShareUsed) as refused:
        queue.submit("animate", {}, b"x", client=BAD)
    assert refused.value.status == 429 and refused.value.code == "jobs_share_used"
    assert int(refused.value.headers["Retry-After"]) >= 1
    queue.submit("animate", {}, b"x", client=GOOD)           # not refused for the other's use
    _end(queue)                                              # one of BAD's ended: room again
    queue.submit("animate", {}, b"x", client=BAD)
    for _ in range(4):
        queue.submit("animate", {}, b"x", client=f"a-192.0.2.{_}")
    with pytest.raises(QueueFull):                           # the global bound stays
        queue.submit("animate", {}, b"x", client=GOOD)


def test_a_clients_queued_bytes_are_bounded_whether_in_redis_or_in_the_storage(redis_server):
    queue = _queue(redis_server, "bytes", client_max_bytes=3 * 2**20)
    queue.submit("animate", {}, os.urandom(2 * 2**20), client=BAD)
    with pytest.raises(QueuedBytesShareUsed):
        queue.submit("animate", {}, os.urandom(2 * 2**20), client=BAD)
    with pytest.raises(QueuedBytesShareUsed):                 # a video kept in the storage counts too
        queue.submit("motion_from_video", {"video_key": "k"}, None, client=BAD, input_bytes=2 * 2**20)
    queue.submit("animate", {}, os.urandom(2 * 2**20), client=GOOD)


def test_videos_have_a_stream_and_a_share_of_their_own(redis_server):
    queue = _queue(redis_server, "videos", client_max_videos=2)
    for _ in range(2):
        queue.submit("motion_from_video", {"video_key": "k"}, None, client=BAD, input_bytes=10)
    with pytest.raises(VideoShareUsed):
        queue.submit("motion_from_video", {"video_key": "k"}, None, client=BAD, input_bytes=10)
    queue.submit("animate", {}, b"x", client=BAD)            # renders are another share
    assert queue.redis.xlen(queue.video_stream) == 2 and queue.redis.xlen(queue.stream) == 1
    assert queue.stats().queued == 3
    _end(queue, queue.video_stream)
    queue.submit("motion_from_video", {"video_key": "k"}, None, client=BAD, input_bytes=10)


def test_video_jobs_run_without_a_render_slot_and_renders_wait_for_one(redis_server, tmp_path, monkeypatch):
    ran: list[str] = []
    monkeypatch.setitem(worker_module.HANDLERS, "motion_from_video", lambda *a, **k: ran.append("video") or {})
    monkeypatch.setitem(worker_module.HANDLERS, "animate", lambda *a, **k: ran.append("render") or {})
    settings = load_settings({}, worker_concurrency=1, worker_video_concurrency=1, request_deadline_s=30.0)
    queue = _queue(redis_server, "worker")
    slots = InflightSlots(tmp_path / "slots", 1)
    held = slots.acquire()                                   # a synchronous request holds the only slot
    worker = worker_module.Worker(SimpleNamespace(settings=settings, jobs=queue, pool=None, slots=slots,
                                                  torchserve=None, storage=None), tmp_path)
    worker._models_ready = lambda: True
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        # the handlers are the test's; the payloads are real orders (the worker reads them back first)
        queue.submit("animate", AnimateOrder(motions=("dab",), format="gif", base_url="http://h").to_json(), b"x",
                     client=GOOD)
        queue.submit("motion_from_video", VideoOrder(client=BAD, base_url="http://h").to_json(), None, client=BAD,
                     input_bytes=1)
        t_end = time.monotonic() + 20
        while "video" not in ran and time.monotonic() < t_end:
            time.sleep(0.05)
        assert ran == ["video"], ran                         # the video ran; the render waits for the slot
        held.release()
        while "render" not in ran and time.monotonic() < t_end:
            time.sleep(0.05)
        assert ran == ["video", "render"], ran
    finally:
        worker.stop.set()
        thread.join(30)


# --- POST /motions over real HTTP ------------------------------------------------------------------

@pytest.fixture(scope="module")
def motions_app(redis_server):
    r = redis.Redis.from_url(redis_server.url)
    r.config_set("maxmemory", str(24 * 2**20))               # a small Redis: 24 MiB
    r.config_set("maxmemory-policy", "noeviction")
    env = lambda w: {"DOODLEPOD_REDIS_URL": redis_server.url, "DOODLEPOD_REDIS_PREFIX": "motions-http:",  # noqa: E731
                     "DOODLEPOD_TORCHSERVE_URL": "http://127.0.0.1:9",
                     "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": "http://127.0.0.1:9",
                     "DOODLEPOD_LOCAL_DIR": str(w / "files"), "DOODLEPOD_RENDER_PROCESSES": "1",
                     "DOODLEPOD_TRUSTED_PROXIES": "127.0.0.1/32", "DOODLEPOD_CLIENT_QUEUED_MB": "20",
                     "DOODLEPOD_CLIENT_MAX_VIDEOS": "5"}
    try:
        with stack.app_server("dp-shares-q-", env) as server:
            server.files = server.workdir / "files"
            yield server
    finally:
        r.config_set("maxmemory", "0")


def _video(mib: float) -> bytes:
    return b"\x00\x00\x00\x18ftypisom" + os.urandom(int(mib * 2**20))


def _post_video(server, client: str, mib: float = 8) -> requests.Response:
    return requests.post(f"{server.url}/motions", files={"video": ("v.mp4", _video(mib), "video/mp4")},
                         headers={"X-Forwarded-For": client}, timeout=60)


def test_queued_videos_wait_in_the_storage_not_in_redis_and_one_client_cannot_fill_the_queue(
        redis_server, motions_app):
    answers = [_post_video(motions_app, "203.0.113.9") for _ in range(3)]
    assert [a.status_code for a in answers[:2]] == [202, 202], [a.text[:200] for a in answers]
    assert_error(answers[2], 429, "queued_bytes_share_used")      # 2 x 8 MiB queued; 8 more pass 20 MiB
    r = redis.Redis.from_url(redis_server.url)
    assert r.info("memory")["used_memory"] < 8 * 2**20          # no video bytes in Redis
    stored = sorted((motions_app.files / "queued-videos").iterdir())
    assert len(stored) == 2 and all(p.stat().st_size > 8 * 2**20 for p in stored)   # the refused one removed
    hidden = requests.get(f"{motions_app.url}/files/queued-videos/{stored[0].name}", timeout=10)
    assert hidden.status_code == 404                            # the worker's input, never served
    other = _post_video(motions_app, "198.51.100.9")             # another client is not refused
    assert other.status_code == 202, other.text
