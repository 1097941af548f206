"""What one client may store, with Redis: one Idempotency-Key makes one character, and the rate limit
counts across the pod's workers. Real gunicorn (gevent, 2 workers) + Valkey on loopback; the client
sends its joints, so no model is called."""
from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from tests.support import stack

pytestmark = [pytest.mark.redis, pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def page():
    image, joints = stack.page_with_character("char1", (700, 700), (60, 40))
    return stack.encode(image), {k: list(v) for k, v in joints.items()}


@pytest.fixture(scope="module")
def server(redis_server):
    def env(workdir: Path) -> dict[str, str]:
        return {"DOODLEPOD_REDIS_URL": redis_server.url, "DOODLEPOD_TORCHSERVE_URL": "http://127.0.0.1:9",
                "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": "http://127.0.0.1:9", "DOODLEPOD_TORCHSERVE_RETRIES": "0",
                "DOODLEPOD_RENDER_PROCESSES": "1", "DOODLEPOD_WORKERS": "2", "DOODLEPOD_MAX_INFLIGHT": "4",
                "DOODLEPOD_LOCAL_DIR": str(workdir / "files"), "DOODLEPOD_RATE_LIMIT_PER_MIN": "1",
                "DOODLEPOD_RATE_LIMIT_BURST": "6", "DOODLEPOD_TRUSTED_PROXIES": "127.0.0.1/32"}

    with stack.app_server("dp-stored-redis-", env) as app:
        yield app


def _create(server, page, headers) -> requests.Response:
    data, joints = page
    return requests.post(f"{server.url}/characters", files={"image": ("d.png", data, "image/png")},
                         data={"joints": json.dumps(joints)}, headers=headers, timeout=120)


def test_one_idempotency_key_makes_one_character(server, page):
    key = {"Idempotency-Key": str(uuid.uuid4())}
    first = _create(server, page, key)
    assert first.status_code == 201, first.text
    again = _create(server, page, key)
    assert again.status_code == 201 and again.headers.get("Idempotent-Replayed") == "true"
    assert again.json()["id"] == first.json()["id"]
    # the replay is the first answer whole: the document's version and place too, as the contract says
    assert again.headers["ETag"] == first.headers["ETag"] and again.headers["Location"] == first.headers["Location"]
    files = Path(server.env["DOODLEPOD_LOCAL_DIR"]) / "characters"
    assert [p.name for p in files.iterdir()] == [first.json()["id"]]


def test_the_rate_limit_is_shared_by_the_pods_workers(server, page):
    client = {"X-Forwarded-For": "198.51.100.61"}   # a bucket of its own, whatever ran before
    with ThreadPoolExecutor(8) as pool:   # 2 workers: each would allow 6 on its own
        answers = list(pool.map(lambda _: _create(server, page, client), range(8)))
    codes = sorted(r.status_code for r in answers)
    assert codes.count(429) == 2 and all(c in (201, 503) for c in codes if c != 429), codes
