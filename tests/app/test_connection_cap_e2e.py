"""Issue 41 S11: one client's slow-header connections must not keep the probes (and everyone else) out.

A gevent worker serves DOODLEPOD_WORKER_CONNECTIONS (200) connections and stops accepting past them; a
connection trickling its headers holds its place until gunicorn's header timeout (5 s). Measured before
the cap: 400 such connections from one address, /healthz from another took 4.0 s each (over the
pod's 3 s liveness timeout) with the worker at 1% CPU: the pool was full, not the CPU busy. With
DOODLEPOD_CLIENT_CONNECTIONS (40, the app's default and pod.yaml's) the hostile address holds 40 and
the rest are answered 429 too_many_connections at once.

Real gunicorn with a gevent worker on loopback; the hostile client is 127.0.0.2 (the whole of 127/8 is
loopback), the probe 127.0.0.1. No model is called.
"""
from __future__ import annotations

import time

import pytest
import requests

from app.clients.connections import ConnectionCap
from tests.support import stack
from tests.support.slowheaders import SlowHeaders

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

HOSTILE = "127.0.0.2"
SLOW = 400
LIVENESS_TIMEOUT_S = 3.0  # pod.yaml's livenessProbe timeoutSeconds


def test_the_cap_counts_a_client_by_its_folded_address_and_spares_trusted_proxies():
    cap = ConnectionCap(2, trusted=("10.0.0.0/8",), ipv6_prefix=56)
    a, b = cap.admit(("2001:db8:1:200::1", 5)), cap.admit(("2001:db8:1:2ff::9", 6))  # one /56: one client
    assert a == b == "2001:db8:1:200::/56" and cap.admit(("2001:db8:1:201::1", 7)) is None
    assert cap.admit(("::ffff:192.0.2.1", 1)) == cap.admit(("192.0.2.1", 2)) == "192.0.2.1"
    assert cap.admit(("192.0.2.1", 3)) is None
    assert all(cap.admit(("10.1.2.3", n)) == "" for n in range(10))   # a proxy carries many clients
    assert cap.admit("") == ""                                         # a UNIX socket's peer
    cap.release(a)
    assert cap.admit(("2001:db8:1:2aa::1", 8)) == a                      # a place given back is taken again
    cap.release(a), cap.release(a), cap.release(a)
    assert a not in cap.open                                             # no count below zero is kept
    assert ConnectionCap(0).admit(("192.0.2.1", 1)) == ""               # 0: no cap


@pytest.fixture(scope="module")
def app():
    # The pod's settings that matter here: one worker, 200 connections, the cap at its default.
    env = lambda w: {"DOODLEPOD_TORCHSERVE_URL": "http://127.0.0.1:9",  # noqa: E731
                     "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": "http://127.0.0.1:9",
                     "DOODLEPOD_LOCAL_DIR": str(w / "files"), "DOODLEPOD_RENDER_PROCESSES": "1",
                     "DOODLEPOD_WORKERS": "1", "DOODLEPOD_WORKER_CONNECTIONS": "200"}
    with stack.app_server("dp-conncap-", env) as server:
        yield server


def test_slow_header_connections_from_one_client_leave_the_probes_in_time(app):
    with SlowHeaders(app.port, HOSTILE, SLOW) as slow:
        time.sleep(2.0)   # the pool is as full as this client can make it
        seconds = []
        for _ in range(12):
            t0 = time.perf_counter()
            resp = requests.get(f"{app.url}/healthz", timeout=30)
            seconds.append(time.perf_counter() - t0)
            assert resp.status_code == 200
            time.sleep(0.5)
        refused = [a for a in slow.answers if a.startswith(b"HTTP/1.1 429 ")]
    assert max(seconds) < LIVENESS_TIMEOUT_S, (f"/healthz took {[round(s, 2) for s in seconds]} s beside "
                                               f"{SLOW} slow-header connections")
    assert refused and b'"error": "too_many_connections"' in refused[0] and b"Retry-After: 5" in refused[0]
    assert "client 127.0.0.2 holds 40 connections" in app.log_text()
