"""The queue engine (app/jobs/queue.py) against a real Redis server: the Lua state changes, the
bound, redelivery after the visibility timeout, fencing of a worker that lost its job, dead letters."""
from __future__ import annotations

import time

import pytest
import redis

from app.jobs.queue import JobQueue, JobsUnavailable, QueueFull
from tests.support import wait

pytestmark = [pytest.mark.redis, pytest.mark.timeout(120)]


@pytest.fixture
def queue(redis_server, request):
    q = JobQueue(redis_server.url, prefix=f"t{abs(hash(request.node.name)) % 10**8}:", max_queued=3,
                 max_attempts=2, visibility_s=0.5, job_ttl_s=600)
    yield q
    for key in q.redis.scan_iter(q.prefix + "*"):
        q.redis.delete(key)


def test_submit_take_start_succeed_and_read_back(queue):
    sub = queue.submit("animate", {"motions": ["dab"]}, b"\x89PNG...", client="c1")
    job_id = sub.job["id"]
    assert sub.job["status"] == "queued" and queue.get(job_id)["status"] == "queued"
    assert queue.stats().queued == 1
    taken = queue.take("w1", 100)
    assert taken.job_id == job_id and not taken.redelivered
    started = queue.start(taken, "w1")
    assert started.verdict == "run" and started.input == b"\x89PNG..." and started.job["payload"] == '{"motions":["dab"]}'
    assert queue.get(job_id)["status"] == "running" and queue.get(job_id)["attempts"] == 1
    assert queue.stats().running == 1
    assert queue.succeed(taken, started.owner, {"animations": {"dab": "http://x/dab.gif"}})
    job = queue.get(job_id)
    assert job["status"] == "succeeded" and job["animations"] == {"dab": "http://x/dab.gif"}
    assert queue.redis.xlen(queue.stream) == 0 and not queue.redis.exists(queue.input_key(job_id))
    assert 0 < queue.redis.ttl(queue.job_key(job_id)) <= 600
    assert queue.take("w1", 50) is None


def test_the_queue_is_bounded(queue):
    for _ in range(3):
        queue.submit("animate", {}, b"x")
    with pytest.raises(QueueFull) as err:
        queue.submit("animate", {}, b"x")
    assert err.value.status == 503 and "Retry-After" in err.value.headers
    # an ended job frees its place
    taken = queue.take("w1", 100)
    started = queue.start(taken, "w1")
    queue.succeed(taken, started.owner, {})
    queue.submit("animate", {}, b"x")


def test_a_stopped_workers_job_is_redelivered_and_the_old_owner_is_fenced(queue):
    job_id = queue.submit("animate", {}, b"x").job["id"]
    first = queue.take("w1", 100)
    a = queue.start(first, "w1")
    assert queue.take("w2", 50) is None           # not yet idle for the visibility timeout
    again = wait.until(lambda: queue.take("w2", 50), 10, "the job redelivered after the visibility timeout")
    assert again.redelivered and again.job_id == job_id
    b = queue.start(again, "w2")
    assert b.verdict == "run" and queue.get(job_id)["attempts"] == 2
    assert not queue.succeed(first, a.owner, {"by": "w1"})   # w1 lost the job: its result is refused
    assert queue.succeed(again, b.owner, {"by": "w2"})
    assert queue.get(job_id)["by"] == "w2"


def test_a_heartbeat_keeps_the_job(queue):
    queue.submit("animate", {}, b"x")
    taken = queue.take("w1", 100)
    queue.start(taken, "w1")
    for _ in range(4):
        time.sleep(0.25)
        assert queue.heartbeat("w1", [taken.entry_id]) == {taken.entry_id}
        assert queue.take("w2", 10) is None
    assert queue.heartbeat("w2", [taken.entry_id]) == set()   # not w2's to renew


def test_attempts_used_up_by_dead_workers_end_failed_and_dead_lettered(queue):
    job_id = queue.submit("animate", {}, b"x", callback_url="http://127.0.0.1:9/hook").job["id"]
    for worker in ("w1", "w2"):
        taken = wait.until(lambda: queue.take(worker, 100), 10, f"the job delivered to {worker}")
        assert queue.start(taken, worker).verdict == "run"
    taken = wait.until(lambda: queue.take("w3", 100), 10, "the job delivered to w3")
    assert queue.start(taken, "w3").verdict == "dead"
    job = queue.get(job_id)
    assert job["status"] == "failed" and job["attempts"] == 2 and job["error"]["code"] == "attempts_exhausted"
    assert job["webhook"]["status"] == "pending" and queue.redis.xlen(queue.hooks) == 1
    assert [f[b"job"].decode() for _, f in queue.redis.xrange(queue.dead)] == [job_id]
    assert queue.redis.xlen(queue.stream) == 0


def test_retry_requeues_at_the_end_and_keeps_the_count(queue):
    job_id = queue.submit("animate", {}, b"x").job["id"]
    taken = queue.take("w1", 100)
    started = queue.start(taken, "w1")
    assert queue.retry(taken, started.owner, {"code": "model_server_unavailable"}, time.time())
    again = queue.take("w1", 100)
    assert again.job_id == job_id and queue.start(again, "w1").verdict == "run"
    assert queue.get(job_id)["attempts"] == 2


def test_redis_down_is_a_503_not_a_crash():
    q = JobQueue("redis://127.0.0.1:9/0", timeout_s=0.5)
    with pytest.raises(JobsUnavailable) as err:
        q.submit("animate", {}, b"x")
    assert err.value.status == 503 and err.value.headers["Retry-After"]
    with pytest.raises(JobsUnavailable):
        q.get("abc")
    check = q.check()
    assert not check["ok"] and "not reachable" in check["detail"]
    with pytest.raises(redis.exceptions.ConnectionError):
        q.redis.ping()


def test_has_work_sees_new_and_abandoned_entries_and_consumes_nothing(queue):
    assert not queue.has_work()
    job_id = queue.submit("animate", {"motions": ["dab"]}, b"x").job["id"]
    assert queue.has_work() and queue.has_work()          # asking twice takes nothing
    taken = queue.take("w1", 100)
    assert taken is not None and taken.job_id == job_id
    assert not queue.has_work()                           # delivered, its worker still within the timeout
    wait.until(queue.has_work, queue.visibility_s + 10, "the job up for taking over")  # its worker stopped
    assert queue.take("w2", 0).job_id == job_id


def test_redis_out_of_memory_says_so_not_unreachable(queue):
    queue.redis.config_set("maxmemory-policy", "noeviction")
    queue.redis.config_set("maxmemory", "1")
    try:
        with pytest.raises(JobsUnavailable) as err:
            queue.submit("animate", {}, b"x")
    finally:
        queue.redis.config_set("maxmemory", "0")
    assert err.value.status == 503 and "out of memory" in err.value.message
    assert "not reachable" not in err.value.message


def test_a_job_record_never_shows_callback_credentials(queue):
    job_id = queue.submit("animate", {}, b"x", callback_url="https://user:secret@hooks.example.com/in").job["id"]
    shown = queue.get(job_id)["webhook"]["url"]
    assert shown == "https://hooks.example.com/in" and "secret" not in shown
