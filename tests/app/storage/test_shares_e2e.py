"""Each client's share of the storage, over real HTTP: gunicorn with gevent workers on loopback, local
storage with a budget, no Redis (the shares count in the worker's memory; tests/jobs/test_shares_redis.py
counts them in Redis). Every request sends its own joints and box, so no model is called (TorchServe
points at a closed port). Clients are told apart by X-Forwarded-For from the trusted proxy (loopback).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests

from tests.support import stack
from tests.support.answers import assert_error

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

FILLER = "203.0.113.7"
OTHER = "198.51.100.1"


def _env(workdir: Path, **extra: str) -> dict[str, str]:
    return {"DOODLEPOD_TORCHSERVE_URL": "http://127.0.0.1:9", "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": "http://127.0.0.1:9",
            "DOODLEPOD_TORCHSERVE_RETRIES": "0", "DOODLEPOD_LOCAL_DIR": str(workdir / "files"),
            "DOODLEPOD_RENDER_PROCESSES": "1", "DOODLEPOD_RENDER_SIZE": "96", "DOODLEPOD_RENDER_MAX_FRAMES": "6",
            "DOODLEPOD_TRUSTED_PROXIES": "127.0.0.1/32", **extra}


@pytest.fixture(scope="module")
def page():
    image, joints = stack.page_with_character("char1", (800, 700), (150, 50))
    return stack.encode(image), {k: list(v) for k, v in joints.items()}


@pytest.fixture(scope="module")
def shared():
    """A 12 MiB storage budget, and a share of 1.5 MiB per client."""
    with stack.app_server("dp-shares-", lambda w: _env(w, DOODLEPOD_STORAGE_BUDGET_MB="12",
                                                        DOODLEPOD_CLIENT_STORAGE_MB="1.5")) as server:
        yield server


def _create(server, page, client: str) -> requests.Response:
    data, joints = page
    return requests.post(f"{server.url}/characters", files={"image": ("d.png", data, "image/png")},
                         data={"joints": json.dumps(joints)}, headers={"X-Forwarded-For": client}, timeout=120)


def _fill(server, page, client: str, most: int = 40) -> tuple[list[str], requests.Response]:
    """Characters made by ``client`` until it is refused; (their ids, the refusal)."""
    made = []
    for _ in range(most):
        r = _create(server, page, client)
        if r.status_code != 201:
            return made, r
        made.append(r.json()["id"])
    raise AssertionError(f"{client} stored {most} characters without being refused")


def test_a_client_past_its_storage_share_gets_429_and_others_go_on(shared, page):
    made, refused = _fill(shared, page, FILLER)
    body = assert_error(refused, 429, "storage_share_used")
    assert "DOODLEPOD_CLIENT_STORAGE_MB" in body["message"] and int(refused.headers["Retry-After"]) >= 1
    assert 2 <= len(made) <= 12, len(made)          # a share of 1.5 MiB, not the 12 MiB budget
    # the same host spelled as an IPv4-mapped IPv6 address is the same client
    assert_error(_create(shared, page, f"::ffff:{FILLER}"), 429, "storage_share_used")
    # another client is not refused for the filler's use
    assert _create(shared, page, OTHER).status_code == 201
    # what the filler deletes goes back to its share
    for cid in made:
        assert requests.delete(f"{shared.url}/characters/{cid}", headers={"X-Forwarded-For": FILLER},
                               timeout=60).status_code == 204
    assert _create(shared, page, FILLER).status_code == 201


def test_addresses_of_one_ipv6_56_share_one_storage_share(shared, page):
    made, refused = _fill(shared, page, "2001:db8:7:1::1")
    assert_error(refused, 429, "storage_share_used")
    assert_error(_create(shared, page, "2001:db8:7:1:ffff:ffff:ffff:fffe"), 429, "storage_share_used")
    assert_error(_create(shared, page, "2001:db8:7:2::1"), 429, "storage_share_used")  # another /64 of the home
    assert _create(shared, page, "2001:db8:7:100::1").status_code == 201    # the next /56: another client


@pytest.fixture(scope="module")
def bucketed():
    """A rate-limit bucket of 3 requests refilled at 1 per minute."""
    with stack.app_server("dp-shares-rl-", lambda w: _env(w, DOODLEPOD_RATE_LIMIT_PER_MIN="1",
                                                           DOODLEPOD_RATE_LIMIT_BURST="3")) as server:
        yield server


def test_the_rate_limit_counts_an_ipv6_56_and_both_spellings_of_an_ipv4_host_as_one_client(bucketed, page):
    answers = [_create(bucketed, page, f"2001:db8:9:{i + 1:x}::1") for i in range(4)]  # four /64s of one /56
    assert [r.status_code for r in answers[:3]] == [201, 201, 201], [r.text[:200] for r in answers]
    assert_error(answers[3], 429, "rate_limited")
    assert _create(bucketed, page, "2001:db8:9:100::1").status_code == 201          # another /56
    mixed = [_create(bucketed, page, a) for a in ("192.0.2.5", "::ffff:192.0.2.5", "192.0.2.5", "::ffff:c000:205")]
    assert [r.status_code for r in mixed[:3]] == [201, 201, 201]
    assert_error(mixed[3], 429, "rate_limited")
