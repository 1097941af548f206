"""Async jobs reserve what they will store against their client's storage share when they are queued
(issue 41 S6: ten jobs queued with an empty share stored 199 MiB against a 40 MiB share). The real app
in process and a real Redis (Valkey on loopback); no worker runs, so nothing is stored yet."""
from __future__ import annotations

import io
import json
import time

import pytest

from app.jobs.price import animation_bytes
from tests.support import stack

pytestmark = [pytest.mark.redis, pytest.mark.timeout(300)]


def test_queued_jobs_count_in_the_storage_share_from_their_admission(make_app, redis_server):
    app = make_app(redis_url=redis_server.url, redis_prefix=f"s6-{time.monotonic_ns()}:", client_storage_mb=8.0,
                   render_size=400, render_max_frames=60, trusted_proxies=("127.0.0.1/32",))
    client = app.test_client()
    page, joints = stack.page_with_character("char1", (700, 700), (60, 40))
    image = stack.encode(page)
    each = 2 * len(image) + 3 * animation_bytes(400, 60)   # the photo's files and three 400 px animations
    fits = int(8 * 2**20 // each) + 1                      # the share is checked before each admission
    answers = []
    for _ in range(10):
        resp = client.post("/animate", data={"image": (io.BytesIO(image), "d.png"), "motions": "dab,jumping,zombie",
                                             "joints": json.dumps({k: list(v) for k, v in joints.items()})},
                           headers={"Prefer": "respond-async", "X-Forwarded-For": "203.0.113.7"},
                           content_type="multipart/form-data")
        answers.append((resp.status_code, (resp.get_json() or {}).get("error", "")))
        if resp.status_code != 202:
            break
    assert answers[:fits] == [(202, "")] * fits, answers
    assert answers[fits] == (429, "storage_share_used"), answers   # before the jobs share (10) or anything stored
    other = client.post("/animate", data={"image": (io.BytesIO(image), "d.png"), "motions": "dab",
                                          "joints": json.dumps({k: list(v) for k, v in joints.items()})},
                        headers={"Prefer": "respond-async", "X-Forwarded-For": "198.51.100.7"},
                        content_type="multipart/form-data")
    assert other.status_code == 202, other.get_data(as_text=True)[:300]  # another client's share is its own
