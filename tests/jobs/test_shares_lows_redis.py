"""Smaller hardening findings that need a real Redis server (Valkey on loopback): the video size bound
of POST /motions, Idempotency-Key on a synchronous render of a character, and why a callback failed.
gunicorn with gevent workers on loopback; requests send their own joints, so no model is called."""
from __future__ import annotations

import json
import os
import threading
import time
from types import SimpleNamespace

import pytest
import requests

from app.config import load_settings
from app.jobs.queue import JobQueue
from app.worker import Worker
from tests.support import stack

pytestmark = [pytest.mark.redis, pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def app(redis_server):
    env = lambda w: {"DOODLEPOD_REDIS_URL": redis_server.url, "DOODLEPOD_REDIS_PREFIX": "lows:",  # noqa: E731
                     "DOODLEPOD_TORCHSERVE_URL": "http://127.0.0.1:9",
                     "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": "http://127.0.0.1:9",
                     "DOODLEPOD_LOCAL_DIR": str(w / "files"), "DOODLEPOD_RENDER_PROCESSES": "1",
                     "DOODLEPOD_RENDER_SIZE": "96", "DOODLEPOD_RENDER_MAX_FRAMES": "4"}
    with stack.app_server("dp-lows-r-", env) as server:
        yield server


def test_a_video_up_to_the_video_limit_is_taken_though_over_the_upload_limit(app):
    video = b"\x00\x00\x00\x18ftypisom" + os.urandom(25 * 2**20)     # 25 MiB: over 20, under 32
    resp = requests.post(f"{app.url}/motions", files={"video": ("v.mp4", video, "video/mp4")}, timeout=120)
    assert resp.status_code == 202, resp.text[:300]
    too_big = b"\x00\x00\x00\x18ftypisom" + os.urandom(33 * 2**20)
    resp = requests.post(f"{app.url}/motions", files={"video": ("v.mp4", too_big, "video/mp4")}, timeout=120)
    assert resp.status_code == 413 and "32" in resp.json()["message"], resp.text[:300]


def test_a_synchronous_character_render_honours_idempotency_key(app):
    image, joints = stack.page_with_character("char1", (800, 700), (150, 50))
    made = requests.post(f"{app.url}/characters", files={"image": ("d.png", stack.encode(image), "image/png")},
                         data={"joints": json.dumps({k: list(v) for k, v in joints.items()})}, timeout=120)
    assert made.status_code == 201, made.text[:300]
    url = f"{app.url}/characters/{made.json()['id']}/animations"
    first = requests.post(url, data={"motions": "dab"}, headers={"Idempotency-Key": "k-render-1"}, timeout=120)
    again = requests.post(url, data={"motions": "dab"}, headers={"Idempotency-Key": "k-render-1"}, timeout=120)
    assert first.status_code == 200, first.text[:300]
    assert again.status_code == 200 and again.headers.get("Idempotent-Replayed") == "true"
    assert again.json() == first.json()
    assert again.headers["ETag"] == first.headers["ETag"]   # the replay carries the documented header too
    other = requests.post(url, data={"motions": "zombie"}, headers={"Idempotency-Key": "k-render-1"}, timeout=120)
    assert other.status_code == 422 and other.json()["error"] == "idempotency_key_reused"


def test_a_refused_callback_says_why_in_the_job(redis_server, tmp_path):
    settings = load_settings({}, webhook_secret="s", webhook_allow=(), webhook_attempts=2)
    queue = JobQueue(redis_server.url, f"why-{tmp_path.name}:")
    job = queue.submit("test", {}, callback_url="http://127.0.0.1:9/h", client="a-203.0.113.1").job["id"]
    taken = queue.take("t", block_ms=0)
    assert queue.succeed(taken, queue.start(taken, "t").owner, {})
    worker = Worker(SimpleNamespace(settings=settings, jobs=queue, pool=None, slots=None, torchserve=None), tmp_path)
    loop = threading.Thread(target=worker._webhook_loop, args=("hooks",), daemon=True)
    loop.start()
    try:
        t_end = time.monotonic() + 20
        while queue.get(job)["webhook"]["status"] == "pending" and time.monotonic() < t_end:
            time.sleep(0.05)
    finally:
        worker.stop.set()
        loop.join(10)
    hook = queue.get(job)["webhook"]
    assert hook["status"] == "failed" and hook["attempts"] == 1
    assert hook["detail"].startswith("refused: loopback") and "DOODLEPOD_WEBHOOK_ALLOW" in hook["detail"]
