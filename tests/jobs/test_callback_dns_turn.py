"""A client's callback name lookup at submit holds its turn until the lookup ends, and a lookup finds a
thread or is refused at once (issue 41 S9). The lookup threads are the app's BoundedResolver; the slow
name server is a lookup function that sleeps (tests/jobs/test_shares_slow_dns_e2e.py plays a real one)."""
from __future__ import annotations

import time

import pytest

from app.clients import lookups
from app.clients.lookups import BoundedResolver
from app.config import load_settings
from app.errors import ApiError
from app.jobs import webhooks
from tests.support import wait

SLOW_S = 1.5
TIMEOUT_S = 0.3


def _slow_lookup(host: str, port: int) -> list[str]:
    if host.endswith(".slow.example"):
        time.sleep(SLOW_S)  # a name server that answers late: the thread waits that long
    return ["93.184.216.34"]


@pytest.fixture
def resolver(monkeypatch):
    resolver = BoundedResolver(threads=2, timeout_s=TIMEOUT_S, lookup=_slow_lookup)
    monkeypatch.setattr(lookups, "_SUBMIT_RESOLVER", resolver)
    yield resolver
    _lookups_ended(resolver)  # before the next test


def _lookups_ended(resolver) -> None:
    """Wait for the slow lookups to end (a sleep of their length ended before them on a loaded machine)."""
    wait.until(lambda: resolver.running() == 0, SLOW_S + 10, "the slow lookups ended", every=0.02)


def _answer(url: str, client: str) -> tuple[int, str, float]:
    settings = load_settings({}, webhook_secret="s", webhook_dns_timeout_s=TIMEOUT_S, webhook_dns_threads=2)
    t0 = time.monotonic()
    try:
        webhooks.validate_callback_url(url, settings, client=client)
        return 200, "", time.monotonic() - t0
    except ApiError as exc:
        return exc.status, exc.code, time.monotonic() - t0


def test_a_clients_turn_lasts_as_long_as_its_lookup(resolver):
    assert _answer("http://a1.slow.example/hook", "A")[:2] == (422, "callback_url_refused")  # dns_timeout
    # the request stopped waiting, the lookup goes on holding a thread: the client's next one waits its turn
    status, code, took = _answer("http://a2.slow.example/hook", "A")
    assert (status, code) == (429, "callback_dns_share_used") and took < 0.1
    assert resolver.running("A") == 1
    _lookups_ended(resolver)
    assert _answer("http://fast.example/hook", "A")[:2] == (200, "")  # its turn came back when the lookup ended


def test_no_free_lookup_thread_refuses_at_once(resolver):
    assert _answer("http://a.slow.example/hook", "A")[:2] == (422, "callback_url_refused")
    assert _answer("http://b.slow.example/hook", "B")[:2] == (422, "callback_url_refused")
    status, code, took = _answer("http://fast.example/hook", "C")  # both threads wait on slow names
    assert (status, code) == (503, "callback_dns_busy") and took < 0.1, (status, code, took)
    _lookups_ended(resolver)
    assert _answer("http://fast.example/hook", "C")[:2] == (200, "")
