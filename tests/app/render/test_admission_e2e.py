"""Admission end to end: a pod admits what its CPUs can run, lets one request per slot wait a few
seconds, and its 503s (answered at once beyond that) say honestly when to retry.

Real gunicorn with gevent workers and a render process pool, real HTTP on loopback. Requests send
their own joints, so no model is called (TorchServe's address points at a closed port).
"""
from __future__ import annotations

import json
import math
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from app.config import available_cpus, default_max_inflight
from tests.support import hold, stack, wait

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

SLOW = "dab,jumping,zombie,wave_hello,jumping_jacks"  # several CPU-seconds at 512 px on any machine


@pytest.fixture(scope="module")
def app():
    """Default admission settings (DOODLEPOD_MAX_INFLIGHT and DOODLEPOD_RETRY_AFTER_S unset)."""
    closed = f"http://127.0.0.1:{stack.free_port()}"

    def env(workdir: Path) -> dict[str, str]:
        return {"DOODLEPOD_TORCHSERVE_URL": closed, "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": closed,
                "DOODLEPOD_LOCAL_DIR": str(workdir / "files"), "DOODLEPOD_RENDER_SIZE": "512"}

    with stack.app_server("dp-admission-", env) as server:
        yield server


@pytest.fixture(scope="module")
def page():
    image, joints = stack.page_with_character("char1", (800, 700), (150, 50))
    return stack.encode(image), json.dumps({k: list(v) for k, v in joints.items()})


def _post(server, page, motions: str) -> requests.Response:
    data, joints = page
    return requests.post(f"{server.url}/animate", files={"image": ("drawing.png", data, "image/png")},
                         data={"joints": joints, "motions": motions}, timeout=300)


def _gauge(server, name: str) -> float:
    text = requests.get(f"{server.url}/metrics", timeout=10).text
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith(name) and not line.startswith("#"))


def _in_flight(server) -> float:
    return _gauge(server, "doodlepod_renders_in_flight")


def test_admits_what_the_cpus_can_run_and_retry_after_is_measured(app, page):
    slots = default_max_inflight(3, available_cpus())           # 3 default motions, this machine's CPUs
    assert f"max_inflight={slots} " in app.log_text()
    # one completed request: its slot time becomes the estimate
    t0 = time.monotonic()
    first = _post(app, page, SLOW)
    took = time.monotonic() - t0
    assert first.status_code == 200, first.text
    # the slots busy, and (when a slot is expected free within the default wait of 10 s) one request
    # per slot waiting for one: the next client is refused at once
    waiters = slots if took < 10 - 1 else 0
    with ThreadPoolExecutor(slots + waiters) as pool:
        busy = [pool.submit(_post, app, page, SLOW) for _ in range(slots)]
        stack.wait_for(lambda: _in_flight(app) == slots, 60, f"{slots} renders in flight")
        # the render processes are stopped until the 503 is read: the holders cannot end meanwhile (a
        # machine three times faster ended them between the looks, and the fifth request got a slot)
        with hold.paused(hold.app_render_processes(app.proc.pid)):
            t1 = time.monotonic()
            busy += [pool.submit(_post, app, page, SLOW) for _ in range(waiters)]
            wait.until(lambda: _gauge(app, "doodlepod_renders_waiting") == waiters, 30, f"{waiters} requests waiting",
                       every=0.02)
            t2 = time.monotonic()
            resp = _post(app, page, "dab")
            answered = time.monotonic() - t2
            assert resp.status_code == 503 and resp.json()["error"] == "overloaded", resp.text
            assert answered < 0.5, f"the 503 took {answered:.2f} s"
            retry = int(resp.headers["Retry-After"])
            # about the time a request like the first holds a slot, less what the holders have had, plus a
            # slot time per slot for the requests waiting
            queued = took * waiters / slots
            low = max(1, math.ceil(took - (time.monotonic() - t1) - 2.0 + queued))
            assert low <= retry <= math.ceil(took + queued) + 1, (retry, took, waiters)
            message = resp.json()["message"]
            assert f"retry in {retry} s" in message and message.count("retry") == 1, message
        for f in busy:  # the waiters too: they got a slot when one freed
            assert f.result(timeout=300).status_code == 200
    assert _in_flight(app) == 0
