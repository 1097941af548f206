"""Callback lanes per client and callback name lookups within their bounds (app/worker.py,
app/jobs/webhooks.py, app/jobs/egress.py). A real Redis server (Valkey) and receivers on loopback;
slow DNS is an injected lookup function that sleeps, run by the same BoundedResolver the app uses (the
app meeting a slow name server through the system resolver: test_shares_slow_dns_e2e.py)."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

from app.clients.lanes import Lanes
from app.clients.lookups import BoundedResolver
from app.config import load_settings
from app.jobs.egress import Allowance
from app.jobs.queue import JobQueue
from app.jobs.webhooks import deliver
from app.worker import Worker
from tests.support import wait
from tests.support.rawhttp import Tarpit
from tests.support.receiver import CallbackReceiver

pytestmark = [pytest.mark.redis, pytest.mark.timeout(120)]

SECRET = "lanes-secret"
REPO = Path(__file__).resolve().parents[2]


def test_lanes_count_per_receiver_and_per_client():
    lanes = Lanes(total=8, each=2, per_client=2)
    assert lanes.try_start(("http://a:1", "bad")) and lanes.try_start(("http://b:2", "bad"))
    assert not lanes.try_start(("http://c:3", "bad"))        # the client's two lanes are taken
    assert lanes.try_start(("http://c:3", "good"))           # another client's callback goes
    lanes.end(("http://a:1", "bad"))
    assert lanes.try_start(("http://d:4", "bad"))


def _ended_job_with_callback(queue: JobQueue, url: str, client: str) -> str:
    """A job with a callback that ended, so its callback is due (as the render worker ends one)."""
    job = queue.submit("test", {}, callback_url=url, client=client).job["id"]
    taken = queue.take("tester", block_ms=0)
    started = queue.start(taken, "tester")
    assert queue.succeed(taken, started.owner, {"animations": {}})
    return job


@contextmanager
def _webhook_loop(settings, queue: JobQueue, tmp_path: Path):
    """The render worker's webhook loop over ``queue``, started on entry (the callbacks already due
    first), stopped on exit."""
    worker = Worker(SimpleNamespace(settings=settings, jobs=queue, pool=None, slots=None, torchserve=None),
                    tmp_path)
    loop = threading.Thread(target=worker._webhook_loop, args=("hooks-under-test",), daemon=True)
    loop.start()
    try:
        yield
    finally:
        worker.stop.set()
        loop.join(15)


def _lag(queue: JobQueue, receiver: CallbackReceiver, client: str) -> float:
    """Seconds from a job of ``client`` ending to its callback's arrival at ``receiver``."""
    t0 = time.monotonic()
    _ended_job_with_callback(queue, receiver.url, client)
    receiver.wait(1, timeout=30)
    return receiver.arrived[0][0] - t0


def test_a_client_with_slow_receivers_on_many_ports_holds_only_its_own_lanes(redis_server, tmp_path):
    settings = load_settings({}, webhook_secret=SECRET, webhook_allow=("127.0.0.1/32",), webhook_timeout_s=3.0,
                             webhook_attempts=3, webhook_concurrency=8, client_webhook_lanes=2)
    queue = JobQueue(redis_server.url, f"lanes-{tmp_path.name}:", max_queued=100)
    tarpits = [Tarpit(every=1.0) for _ in range(4)]          # a status line at 1 byte/s, on 4 ports
    good = CallbackReceiver()
    try:
        for i in range(8):
            _ended_job_with_callback(queue, tarpits[i % 4].url, "a-203.0.113.66")
        with _webhook_loop(settings, queue, tmp_path):
            wait.until(lambda: sum(t.connections for t in tarpits) >= 2, 20,   # the slow ones took their lanes
                       lambda: f"the slow client's callbacks on its 2 lanes: {[t.connections for t in tarpits]}")
            lag = _lag(queue, good, "a-198.51.100.2")
    finally:
        for t in tarpits:
            t.close()
        good.close()
    assert lag < 1.5, f"another client's callback arrived {lag:.1f} s late"


def test_a_callback_waiting_out_its_backoff_holds_no_lane(redis_server, tmp_path):
    settings = load_settings({}, webhook_secret=SECRET, webhook_allow=("127.0.0.1/32",), webhook_timeout_s=2.0,
                             webhook_attempts=3, webhook_concurrency=8, client_webhook_lanes=1)
    queue = JobQueue(redis_server.url, f"backoff-{tmp_path.name}:", max_queued=100)
    failing, good = CallbackReceiver(fail_first=100), CallbackReceiver()
    try:
        _ended_job_with_callback(queue, failing.url, "a-203.0.113.67")    # 500, then backoff 1 s, 2 s
        with _webhook_loop(settings, queue, tmp_path):
            failing.wait(1, timeout=30)
            lag = _lag(queue, good, "a-203.0.113.67")                     # the same client's next one
    finally:
        failing.close()
        good.close()
    assert lag < 0.8, f"the client's next callback waited {lag:.1f} s behind a backoff"


def test_a_slow_name_at_delivery_ends_within_the_attempts_bound():
    def slow_lookup(host: str, port: int) -> list[str]:
        time.sleep(6)
        return ["127.0.0.1"]

    t0 = time.monotonic()
    outcome = deliver("http://slow.example.com/h", {"id": "j1", "status": "succeeded"}, SECRET, attempts=1,
                      timeout_s=1.0, now=lambda: "t", allow=Allowance.parse(["127.0.0.1/32"]),
                      resolve=BoundedResolver(threads=2, timeout_s=30, lookup=slow_lookup))
    took = time.monotonic() - t0
    assert not outcome.delivered and outcome.detail == "timeout", outcome
    assert took < 2.0, took


_GEVENT_SCRIPT = r'''
import json, sys, time
from gevent import monkey
monkey.patch_all()
import gevent, socket
from app.config import load_settings
from app.errors import ApiError
from app.clients import lookups
from app.jobs import webhooks

sleep = monkey.get_original("time", "sleep")
def lookup(host, port):
    if host.startswith("slow"):
        sleep(8)
    return ["93.184.215.14"]

settings = load_settings({}, webhook_secret="s", webhook_dns_timeout_s=1.0, webhook_dns_threads=4)
resolver = lookups.submit_resolver(settings)
resolver.lookup = lookup
out = {"hostile": []}

def hostile(i):
    t0 = time.monotonic()
    try:
        webhooks.validate_callback_url(f"http://slow{i}.example.com/h", settings, client="a-203.0.113.66")
        out["hostile"].append(("ok", 0))
    except ApiError as e:
        out["hostile"].append((e.code, round(time.monotonic() - t0, 2)))

def other():
    gevent.sleep(0.2)
    t0 = time.monotonic()
    webhooks.validate_callback_url("http://fast.example.com/h", settings, client="a-198.51.100.2")
    out["other_s"] = round(time.monotonic() - t0, 2)
    t0 = time.monotonic()
    socket.getaddrinfo("localhost", 80)                      # gevent's own resolver pool: free
    out["gevent_resolver_s"] = round(time.monotonic() - t0, 2)

gevent.joinall([gevent.spawn(hostile, i) for i in range(12)] + [gevent.spawn(other)])
print(json.dumps(out))
'''


def test_slow_callback_names_at_submit_are_bounded_one_per_client_and_off_gevents_resolver():
    done = subprocess.run([sys.executable, "-c", _GEVENT_SCRIPT], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    codes = sorted(code for code, _ in out["hostile"])
    assert codes.count("callback_dns_share_used") == 11, out     # one lookup at a time per client
    assert codes.count("callback_url_refused") == 1, out         # ... which ends at the bound: dns_timeout
    assert max(s for code, s in out["hostile"] if code == "callback_url_refused") < 2.0, out
    assert out["other_s"] < 0.5 and out["gevent_resolver_s"] < 0.5, out


def test_a_job_counts_in_its_clients_share_until_its_callback_is_delivered(redis_server, tmp_path):
    """A client whose receivers answer slowly cannot pile up callbacks without end: a job with a
    callback still to be delivered counts in DOODLEPOD_CLIENT_MAX_QUEUED like a queued one."""
    from app.shares import JobsShareUsed

    queue = JobQueue(redis_server.url, f"hookshare-{tmp_path.name}:", max_queued=100, client_max_jobs=2)
    bad = "a-203.0.113.68"
    first = _ended_job_with_callback(queue, "http://127.0.0.1:9/hook", bad)
    _ended_job_with_callback(queue, "http://127.0.0.1:9/hook", bad)
    with pytest.raises(JobsShareUsed):                       # both ended, both callbacks still due
        queue.submit("test", {}, callback_url="http://127.0.0.1:9/hook", client=bad)
    queue.submit("test", {}, client="a-198.51.100.3")        # another client is not refused for it
    taken = queue.take("hooks", block_ms=0, stream=queue.hooks, group="webhooks")
    assert taken.job_id == first
    queue.webhook_done(taken, "delivered", 1)                # one callback delivered: room again
    queue.submit("test", {}, client=bad)


def test_many_waiting_callbacks_of_one_client_do_not_stall_anothers(redis_server, tmp_path):
    """The callbacks waiting for their client's lane are many (up to its jobs share); the webhook loop
    still takes the ones behind them in the stream, so another client's callback goes at once."""
    settings = load_settings({}, webhook_secret=SECRET, webhook_allow=("127.0.0.1/32",), webhook_timeout_s=3.0,
                             webhook_attempts=2, webhook_concurrency=2, client_webhook_lanes=1)
    queue = JobQueue(redis_server.url, f"stall-{tmp_path.name}:", max_queued=100, client_max_jobs=20)
    tarpit, good = Tarpit(every=1.0), CallbackReceiver()
    try:
        for _ in range(12):                                  # more than 4 x the lanes wait for one lane
            _ended_job_with_callback(queue, tarpit.url, "a-203.0.113.69")
        with _webhook_loop(settings, queue, tmp_path):
            wait.until(lambda: tarpit.connections >= 1, 20, "the slow client's callback on its one lane")
            lag = _lag(queue, good, "a-198.51.100.4")
    finally:
        tarpit.close()
        good.close()
    assert lag < 1.5, f"another client's callback waited {lag:.1f} s behind one client's queue"
