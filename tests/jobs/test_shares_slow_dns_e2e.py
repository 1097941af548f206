"""Slow callback names at submit, through the real resolver: gunicorn with gevent workers whose
/etc/resolv.conf names a name server on loopback that answers 6 s late (tests/support/slowdns.py: a
mount namespace of the app's own; root only, skipped elsewhere with the reason), a real Redis server.

The finding: ``callback_url`` was resolved inside the request with no timeout on gevent's resolver
pool, so 12 submissions waiting on a slow name held another client's submit 14 s. Now a lookup is
bounded (DOODLEPOD_WEBHOOK_DNS_TIMEOUT_S), runs on threads of its own, and a client has one at a time."""
from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.support import slowdns, stack, wait

pytestmark = [pytest.mark.redis, pytest.mark.e2e, pytest.mark.timeout(300)]

WHY_NOT = slowdns.unavailable()
DNS_TIMEOUT_S = 1.5


@pytest.fixture(scope="module")
def app(redis_server):
    if WHY_NOT:
        pytest.skip(f"slow DNS cannot be played here: {WHY_NOT}")
    dns = slowdns.SlowDns(delay_s=6.0)
    workdir = stack.make_workdir("dp-slowdns-")
    env = {"DOODLEPOD_REDIS_URL": redis_server.url, "DOODLEPOD_REDIS_PREFIX": "slowdns:",
           "DOODLEPOD_TORCHSERVE_URL": "http://127.0.0.1:9", "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": "http://127.0.0.1:9",
           "DOODLEPOD_LOCAL_DIR": str(workdir / "files"), "DOODLEPOD_RENDER_PROCESSES": "1",
           "DOODLEPOD_WORKERS": "1", "DOODLEPOD_TRUSTED_PROXIES": "127.0.0.1/32",
           "DOODLEPOD_WEBHOOK_SECRET": "s", "DOODLEPOD_WEBHOOK_ALLOW": "127.0.0.1/32",
           "DOODLEPOD_WEBHOOK_DNS_TIMEOUT_S": str(DNS_TIMEOUT_S)}
    server = stack.Gunicorn(workdir, env, preexec=slowdns.resolved_by(dns.resolv_conf(workdir)))
    try:
        yield server.start()
    finally:
        server.stop()
        dns.close()
        stack.remove(workdir)


def _submit(app, address: str, callback_url: str, image: bytes, joints: str) -> tuple[int, str, float]:
    t0 = time.monotonic()
    resp = requests.post(f"{app.url}/animate", headers={"Prefer": "respond-async", "X-Forwarded-For": address},
                         files={"image": ("d.png", image, "image/png")},
                         data={"joints": joints, "motions": "dab", "callback_url": callback_url}, timeout=60)
    code = resp.json().get("error", "") if resp.status_code >= 400 else ""
    return resp.status_code, code, time.monotonic() - t0


def test_slow_callback_names_are_bounded_one_per_client_and_hold_nobody_else(app):
    page, joints = stack.page_with_character("char1", (700, 600), (100, 50))
    image, joints_json = stack.encode(page), json.dumps({k: list(v) for k, v in joints.items()})
    with ThreadPoolExecutor(13) as pool:
        slow = [pool.submit(_submit, app, "203.0.113.80", f"http://h{n}.slow.soak.test:8080/hook", image, joints_json)
                for n in range(12)]
        # One slow name is being looked up once the others are refused for it (the client's one lookup).
        wait.until(lambda: any(f.done() for f in slow), 30, "a slow submission refused while one is looked up")
        other = pool.submit(_submit, app, "198.51.100.80", "http://127.0.0.1:9/hook", image, joints_json).result()
        answers = [f.result() for f in slow]
    assert other[0] == 202 and other[2] < 1.0, f"another client's submit took {other[2]:.1f} s: {other}"
    codes = sorted((status, code) for status, code, _ in answers)
    assert (422, "callback_url_refused") in codes, codes          # the one lookup ran out its bound
    assert codes.count((429, "callback_dns_share_used")) >= 10, codes   # the others: one at a time
    assert all(c in ((422, "callback_url_refused"), (429, "callback_dns_share_used")) for c in codes), codes
    assert max(s for _, _, s in answers) < DNS_TIMEOUT_S + 1.5, answers  # never the name server's 6 s
