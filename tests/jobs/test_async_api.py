"""Async requests over real HTTP: gunicorn (gevent workers) + a render worker (python -m app.worker) +
a real Redis server (Valkey) + a real TorchServe serving the fake models of
tests/fixtures/torchserve_fake (the real weights cannot be downloaded here), all on loopback.

Two app instances share the Redis server under different key prefixes: ``app`` with a worker in its
"pod" (shared runtime folder), and ``tight`` with no worker, a queue bound of 2 and a small rate
limit, for the 503 and 429 answers.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from tests.support import stack, wait
from tests.support.answers import assert_error
from tests.support.jobstack import WorkerProcess, app_and_worker
from tests.support.receiver import CallbackReceiver

pytestmark = [pytest.mark.redis, pytest.mark.e2e, pytest.mark.timeout(600),
              pytest.mark.usefixtures("models_find_the_drawing")]

SECRET = "webhook-test-secret"


@pytest.fixture(scope="module")
def page():
    return stack.page_with_character("char1", (800, 600), (200, 60))



@pytest.fixture(scope="module")
def workdir():
    path = stack.make_workdir("dp-async-")
    yield path
    stack.remove(path)


def _env(redis_server, torchserve, workdir: Path, **extra: str) -> dict[str, str]:
    return {"DOODLEPOD_REDIS_URL": redis_server.url, "DOODLEPOD_TORCHSERVE_URL": torchserve.inference_url,
            "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": torchserve.management_url, "DOODLEPOD_TORCHSERVE_RETRIES": "0",
            "DOODLEPOD_RENDER_SIZE": "160", "DOODLEPOD_RENDER_MAX_FRAMES": "20", "DOODLEPOD_RENDER_PROCESSES": "1",
            "DOODLEPOD_LOCAL_DIR": str(workdir / "files"), "DOODLEPOD_WEBHOOK_SECRET": SECRET,
            "DOODLEPOD_WEBHOOK_ALLOW": "127.0.0.1/32",
            "DOODLEPOD_JOBS_VISIBILITY_TIMEOUT_S": "5", "DOODLEPOD_MAX_INFLIGHT": "4", **extra}


@pytest.fixture(scope="module")
def pod(redis_server, torchserve, workdir):
    """The app and one render worker sharing a runtime folder (render slots, metrics), as in a pod."""
    env = _env(redis_server, torchserve, workdir, DOODLEPOD_RUNTIME_DIR=str(workdir / "pod"),
               DOODLEPOD_RATE_LIMIT_PER_MIN="6000", DOODLEPOD_RATE_LIMIT_BURST="1000")
    with app_and_worker(workdir, env) as app:
        yield app


@pytest.fixture(scope="module")
def tight(redis_server, torchserve, workdir):
    """An app without a worker, a queue bound of 2 and a bucket of 5 requests refilled at 0.5/s. It trusts
    loopback as a proxy, so each test sends as a client of its own (X-Forwarded-For) with a full bucket,
    whatever the module's other tests spent."""
    app = stack.Gunicorn(workdir / "tight", _env(
        redis_server, torchserve, workdir, DOODLEPOD_RUNTIME_DIR=str(workdir / "tight-run"),
        DOODLEPOD_REDIS_PREFIX="tight:", DOODLEPOD_JOBS_MAX_QUEUED="2", DOODLEPOD_RATE_LIMIT_PER_MIN="30",
        DOODLEPOD_RATE_LIMIT_BURST="5", DOODLEPOD_RETRY_AFTER_S="4", DOODLEPOD_TRUSTED_PROXIES="127.0.0.1/32"))
    try:
        yield app.start()
    finally:
        app.stop()


def _post(server, page, headers=None, motions="dab", **form):
    data = stack.encode(page[0], "PNG")
    return requests.post(f"{server.url}/animate", files={"image": ("drawing.png", data, "image/png")},
                         data={"motions": motions, **form}, headers=headers or {}, timeout=120)


ASYNC = {"Prefer": "respond-async"}


def _metrics(server) -> dict[str, float]:
    text = requests.get(f"{server.url}/metrics", timeout=10).text
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(doodlepod_[^ ]+) ([0-9.e+-]+)$", text, re.MULTILINE)}


def _wait_ended(server, location: str, timeout: float = 120) -> dict:
    seen: list[dict] = []

    def ended() -> dict | None:
        seen.append(requests.get(server.url + location, timeout=10).json())
        return seen[-1] if seen[-1]["status"] in ("succeeded", "failed") else None

    return wait.until(ended, timeout, lambda: f"{location} ended: {seen[-1:]}", every=0.2)



def test_async_request_answers_202_with_location_then_the_job_succeeds(pod, page):
    resp = _post(pod, page, ASYNC, motions="dab,zombie")
    assert resp.status_code == 202, resp.text
    job = resp.json()
    assert re.fullmatch(r"/jobs/[0-9a-f]{32}", resp.headers["Location"]) and resp.headers["Location"].endswith(job["id"])
    assert int(resp.headers["Retry-After"]) >= 1 and resp.headers["Preference-Applied"] == "respond-async"
    assert job["status"] == "queued" and job["created"] and job["updated"]
    polled = requests.get(pod.url + resp.headers["Location"], timeout=10)
    assert polled.status_code == 200 and polled.json()["status"] in ("queued", "running", "succeeded")
    done = _wait_ended(pod, resp.headers["Location"])
    assert done["status"] == "succeeded", done
    assert set(done["animations"]) == {"dab", "zombie"} and done["timings_ms"]["animate_all"] > 0
    assert done["attempts"] == 1 and done["updated"] >= done["created"] and "error" not in done
    for url in done["animations"].values():
        gif = requests.get(url, timeout=10)
        assert gif.status_code == 200 and gif.content[:6] == b"GIF89a"
    assert "Retry-After" not in requests.get(pod.url + resp.headers["Location"], timeout=10).headers


def test_without_the_header_requests_stay_synchronous(pod, page):
    resp = _post(pod, page)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert set(body) == {"id", "animations", "character", "timings_ms"} and "dab" in body["animations"]


def test_unknown_and_malformed_job_ids_are_404(pod):
    for job_id in ("0" * 32, "not-a-job", "../../etc"):
        assert_error(requests.get(f"{pod.url}/jobs/{job_id}", timeout=10), 404, "not_found")


def test_bad_async_requests_are_refused_before_queueing(pod, page):
    assert_error(requests.post(f"{pod.url}/animate", files={"image": ("x.png", b"not an image", "image/png")},
                                headers=ASYNC, timeout=10), 400, "unreadable_image")
    assert_error(_post(pod, page, ASYNC, motions="no_such_motion"), 400, "unknown_motion")
    assert_error(_post(pod, page, ASYNC, callback_url="ftp://example.com/hook"), 400, "bad_request")
    assert_error(_post(pod, page, callback_url="http://127.0.0.1:9/hook"), 400, "bad_request")  # sync


def test_the_same_idempotency_key_twice_renders_once_and_another_body_gets_422(pod, page, torchserve):
    key = str(uuid.uuid4())
    headers = {**ASYNC, "Idempotency-Key": key}
    with ThreadPoolExecutor(2) as ex:   # at once: the two must still make one job
        first, second = ex.map(lambda _: _post(pod, page, headers), range(2))
    assert first.status_code == second.status_code == 202, (first.text, second.text)
    assert first.json()["id"] == second.json()["id"]
    assert first.headers["Location"] == second.headers["Location"]
    assert "true" in (first.headers.get("Idempotent-Replayed"), second.headers.get("Idempotent-Replayed"))
    done = _wait_ended(pod, first.headers["Location"])
    assert done["status"] == "succeeded"
    third = _post(pod, page, headers)   # after the end: still the same job, not a new render
    assert third.status_code == 202 and third.json()["id"] == done["id"] and third.json()["status"] == "succeeded"
    assert pod.worker.log_text().count(f"job {done['id']} start") == 1
    other = _post(pod, page, headers, motions="zombie")
    assert_error(other, 422, "idempotency_key_reused")

    # synchronous requests: the second answer is the first one, and the models ran once
    calls = len(torchserve.calls())
    sync_key = {"Idempotency-Key": str(uuid.uuid4())}
    a = _post(pod, page, sync_key)
    b = _post(pod, page, sync_key)
    assert a.status_code == b.status_code == 200 and a.json() == b.json()
    assert b.headers.get("Idempotent-Replayed") == "true"
    assert len([c for c in torchserve.calls()[calls:] if c.startswith("detector")]) == 1
    assert_error(_post(pod, page, sync_key, motions="zombie"), 422, "idempotency_key_reused")




def test_the_webhook_arrives_signed_and_is_retried_with_backoff(pod, page):
    receiver = CallbackReceiver(fail_first=2)
    before = _metrics(pod)
    try:
        resp = _post(pod, page, ASYNC, callback_url=receiver.url)
        assert resp.status_code == 202, resp.text
        job_id = resp.json()["id"]
        receiver.wait(3)
        times = []
        for headers, body in receiver.received:
            # What a receiver does: HMAC-SHA256 of the raw body with the shared secret, constant-time compare.
            expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
            assert hmac.compare_digest(headers["X-Doodlepod-Signature"], expected)
            event = json.loads(body)
            assert event["event"] == "job.succeeded" and event["job"]["id"] == job_id
            assert event["job"]["status"] == "succeeded" and "dab" in event["job"]["animations"]
            assert headers["X-Doodlepod-Delivery"] == f"{job_id}.succeeded"
            times.append(event["sent_at"])
        forged = receiver.received[0][1].replace(b"succeeded", b"failed", 1)
        assert not hmac.compare_digest(receiver.received[0][0]["X-Doodlepod-Signature"],
                                       "sha256=" + hmac.new(SECRET.encode(), forged, hashlib.sha256).hexdigest())
        def settled() -> dict | None:
            job = requests.get(f"{pod.url}/jobs/{job_id}", timeout=10).json()
            return job if job["webhook"]["status"] != "pending" else None

        job = wait.until(settled, 20, "the webhook's delivery settled", every=0.2)
        assert job["webhook"] == {"url": receiver.url, "status": "delivered", "attempts": 3}
        keys = {f'doodlepod_webhooks_total{{outcome="{o}"}}': n for o, n in (("delivered", 1), ("retried", 2))}
        seen: list[dict] = []

        def counted() -> bool:   # the worker counts each outcome beside the job's record: wait for both
            seen.append(_metrics(pod))
            return all(seen[-1].get(k, 0) - before.get(k, 0) == n for k, n in keys.items())

        wait.until(counted, 10, lambda: f"webhook counters 1 delivered, 2 retried: {before} -> {seen[-1:]}", every=0.2)
    finally:
        receiver.close()
    # backoff: the retries came about 1 s and 2 s apart (x0.8-1.2 jitter)
    from datetime import datetime
    t = [datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() for s in times]
    assert 0.7 <= t[1] - t[0] <= 2.5 and 1.5 <= t[2] - t[1] <= 3.5, t


def _client(n: int) -> dict[str, str]:
    """Headers of an async request from a client of its own (tight trusts loopback as a proxy)."""
    return {**ASYNC, "X-Forwarded-For": f"198.51.100.{n}"}


def _fill_the_queue(tight, page, client: dict[str, str]) -> requests.Response:
    """Queue jobs on tight (no worker takes them) until one is refused 503; return that answer. The
    queue may hold jobs from the module's earlier tests: only its bound of 2 is known."""
    answers = [_post(tight, page, client)]
    while answers[-1].status_code == 202 and len(answers) <= 2:
        answers.append(_post(tight, page, client))
    assert [r.status_code for r in answers[:-1]] == [202] * (len(answers) - 1), [r.text for r in answers]
    return answers[-1]


def _use_up_the_bucket(tight, page, client: dict[str, str]) -> tuple[list[requests.Response], float]:
    """Send as ``client`` until a 429; return the answers and how long that took."""
    t0 = time.monotonic()
    answers = [_post(tight, page, client)]
    while answers[-1].status_code != 429 and len(answers) < 30:
        answers.append(_post(tight, page, client))
    return answers, time.monotonic() - t0


def test_a_full_queue_is_503_with_retry_after(tight, page):
    body = assert_error(_fill_the_queue(tight, page, _client(11)), 503, "queue_full")
    assert "2 jobs" in body["message"]
    assert _post(tight, page, _client(11)).headers["Retry-After"] == "4"


def test_over_the_rate_limit_is_429_with_ratelimit_headers(tight, page):
    client = _client(29)                      # a full bucket of 5, refilled at 0.5/s (queue full or not)
    answers, took = _use_up_the_bucket(tight, page, client)
    resp = answers[-1]
    allowed = answers[:-1]
    # A full bucket allows 5 at once; what refilled while they were sent may allow a few more.
    assert 5 <= len(allowed) <= 5 + took * 0.5 + 1, ([r.status_code for r in answers], took)
    assert all(r.status_code in (202, 503) and r.headers["RateLimit-Limit"] == "5" for r in allowed)
    assert_error(resp, 429, "rate_limited")
    assert resp.headers["RateLimit-Limit"] == "5" and resp.headers["RateLimit-Remaining"] == "0"
    assert resp.headers["RateLimit-Policy"] == "5;w=10" and 1 <= int(resp.headers["Retry-After"]) <= 2
    assert int(resp.headers["RateLimit-Reset"]) <= 10
    # Synchronous requests store work too: the same bucket. Refused, or, if a token came back meanwhile,
    # allowed with none left (a bucket of their own would have 4 left).
    sync = _post(tight, page, {"X-Forwarded-For": client["X-Forwarded-For"]})
    assert sync.headers["RateLimit-Limit"] == "5"
    if sync.status_code == 429:
        assert_error(sync, 429, "rate_limited")
        resp = sync
    else:
        assert sync.headers["RateLimit-Remaining"] == "0", (sync.status_code, dict(sync.headers))
        answers, _ = _use_up_the_bucket(tight, page, client)
        resp = answers[-1]
        assert resp.status_code == 429, [r.status_code for r in answers]
    # Retry-After is rounded up from the bucket's own clock at the refusal: after it, a token is back.
    time.sleep(int(resp.headers["Retry-After"]))
    assert _post(tight, page, client).status_code != 429     # (202, or 503 while the queue is full)


def test_metrics_show_queue_depth_oldest_age_outcomes_and_rejections(pod, tight, page):
    # What this test counts, it does itself (the module's other tests may have run or not).
    assert_error(_fill_the_queue(tight, page, _client(31)), 503, "queue_full")
    assert _use_up_the_bucket(tight, page, _client(32))[0][-1].status_code == 429
    t = _metrics(tight)
    assert t['doodlepod_jobs_queue_depth{state="queued"}'] == 2 and t["doodlepod_jobs_queue_limit"] == 2
    assert t["doodlepod_jobs_oldest_age_seconds"] > 0 and t["doodlepod_jobs_redis_up"] == 1
    assert t["doodlepod_rate_limited_total"] >= 1
    assert t['doodlepod_errors_total{code="queue_full",status="503"}'] >= 1
    before = _metrics(pod)
    resp = _post(pod, page, ASYNC)
    assert resp.status_code == 202, resp.text
    assert _wait_ended(pod, resp.headers["Location"])["status"] == "succeeded"
    keys = [f'doodlepod_jobs_total{{event="{e}"}}' for e in ("submitted", "succeeded")]  # succeeded: by the worker
    seen: list[dict] = []

    def counted() -> bool:
        seen.append(_metrics(pod))
        return all(seen[-1].get(k, 0) - before.get(k, 0) >= 1 for k in keys)

    wait.until(counted, 10, lambda: f"one more job submitted and succeeded: {before} -> {seen[-1:]}", every=0.2)


def test_redis_stopped_async_is_json_503_ping_says_why_sync_works_and_queued_jobs_survive(
        pod, page, redis_server):
    pod.worker.stop()                                   # so the next job stays queued
    queued = _post(pod, page, ASYNC)
    assert queued.status_code == 202
    job_id = queued.json()["id"].encode()               # in the append-only file before the kill
    wait.until(lambda: any(job_id in f.read_bytes() for f in redis_server.folder.rglob("*.aof*") if f.is_file()), 10,
               "the job in the append-only file")
    redis_server.kill()                                 # SIGKILL: no chance to save anything more
    try:
        body = assert_error(_post(pod, page, ASYNC), 503, "jobs_unavailable")
        assert "Redis" in body["message"]
        assert int(_post(pod, page, ASYNC).headers["Retry-After"]) >= 1
        assert_error(requests.get(pod.url + queued.headers["Location"], timeout=10), 503, "jobs_unavailable")
        ping = requests.get(f"{pod.url}/ping", timeout=10)
        assert ping.status_code == 200, ping.text        # still ready: synchronous requests work
        jobs = ping.json()["components"]["jobs"]
        assert ping.json()["status"] == "degraded" and jobs["ok"] is False and jobs["required"] is False
        assert "Redis" in jobs["detail"] and "not reachable" in jobs["detail"]
        sync = _post(pod, page, {"Idempotency-Key": "k-while-redis-is-down"})   # key: not honoured without Redis
        assert sync.status_code == 200 and "dab" in sync.json()["animations"], sync.text
        metrics = requests.get(f"{pod.url}/metrics", timeout=10).text
        assert "doodlepod_jobs_redis_up 0.0" in metrics
    finally:
        redis_server.start()                             # same port, same folder: the AOF is replayed
    job = requests.get(pod.url + queued.headers["Location"], timeout=10).json()
    assert job["status"] == "queued", job
    pod.worker.start()
    assert _wait_ended(pod, queued.headers["Location"])["status"] == "succeeded"
    assert requests.get(f"{pod.url}/ping", timeout=10).json()["components"]["jobs"]["ok"] is True


def test_character_animations_can_be_async_too(pod, page):
    data = stack.encode(page[0], "PNG")
    created = requests.post(f"{pod.url}/characters", files={"image": ("drawing.png", data, "image/png")},
                            timeout=120)
    assert created.status_code == 201, created.text
    cid = created.json()["id"]
    resp = requests.post(f"{pod.url}/characters/{cid}/animations", json={"motions": ["dab", "zombie"], "size": 128},
                         headers={**ASYNC, "If-Match": '"1"'}, timeout=60)
    assert resp.status_code == 202, resp.text
    assert resp.headers["Location"] == f"/jobs/{resp.json()['id']}" and resp.json()["kind"] == "character_animations"
    done = _wait_ended(pod, resp.headers["Location"])
    assert done["status"] == "succeeded", done
    assert done["id"] == resp.json()["id"] and done["character"] == {"id": cid, "version": 1}
    assert set(done["animations"]) == {"dab", "zombie"} and done["size"] == 128 and done["cached"] == []
    assert requests.get(done["animations"]["dab"], timeout=10).content[:6] == b"GIF89a"
    # checked before queueing: a stale If-Match, an unknown character
    assert_error(requests.post(f"{pod.url}/characters/{cid}/animations", json={"motions": ["dab"]},
                                headers={**ASYNC, "If-Match": '"7"'}, timeout=30), 412, "version_mismatch")
    assert_error(requests.post(f"{pod.url}/characters/{'0' * 32}/animations", json={"motions": ["dab"]},
                                headers=ASYNC, timeout=30), 404, "not_found")


def test_an_idle_worker_leaves_the_only_render_slot_to_synchronous_requests(redis_server, torchserve, workdir, page):
    """A small pod has one render slot (DOODLEPOD_MAX_INFLIGHT=1): a worker with nothing to do
    must not hold it while it waits for jobs, or every synchronous request is told 503 overloaded."""
    env = _env(redis_server, torchserve, workdir, DOODLEPOD_RUNTIME_DIR=str(workdir / "one-slot"),
               DOODLEPOD_REDIS_PREFIX="one-slot:", DOODLEPOD_MAX_INFLIGHT="1")
    app = stack.Gunicorn(workdir / "one-slot-app", env)
    worker = WorkerProcess(workdir, env, name="one-slot-worker")
    try:
        app.start()
        worker.start()
        # the worker's job threads have seen TorchServe ready and are looking for work
        wait.until(lambda: "models ready" in worker.log_text(), 60, "the worker's models ready line")
        codes = [_post(app, page).status_code for _ in range(4)]
        assert codes == [200] * 4, codes
        # and the worker still takes a job as soon as one waits
        resp = _post(app, page, headers=ASYNC)
        assert resp.status_code == 202, resp.text
        assert _wait_ended(app, resp.headers["Location"], timeout=60)["status"] == "succeeded"
    finally:
        worker.stop()
        app.stop()
