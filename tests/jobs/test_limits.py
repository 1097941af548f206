"""Token buckets (app/clients/ratelimit.py) and idempotency records (app/jobs/idempotency.py) on a real Redis."""
from __future__ import annotations

import pytest

from app.clients import client_id
from app.clients.ratelimit import RateLimiter
from app.errors import BadRequest
from app.jobs.idempotency import (
    IdempotencyInProgress,
    IdempotencyKeyReused,
    SyncIdempotency,
    fingerprint,
    validate_key,
)
from tests.support import wait

pytestmark = [pytest.mark.redis, pytest.mark.timeout(60)]


def test_token_bucket_allows_the_burst_then_refuses_until_a_token_is_back(r):
    limiter = RateLimiter(r, "rl:", per_min=120, burst=3)      # 2 tokens per second
    got = [limiter.take("c1") for _ in range(4)]
    assert [d.allowed for d in got] == [True, True, True, False]
    assert [d.remaining for d in got] == [2, 1, 0, 0]
    refused = got[-1].headers()
    assert refused["RateLimit-Limit"] == "3" and refused["RateLimit-Remaining"] == "0"
    assert refused["Retry-After"] == "1" and refused["RateLimit-Policy"] == "3;w=2"
    assert 0 < float(refused["RateLimit-Reset"]) <= 2
    assert "Retry-After" not in got[0].headers()
    assert limiter.take("c2").allowed                          # other clients have their own bucket
    wait.until(lambda: limiter.take("c1").allowed, 5, "one token refilled", every=0.1)
    assert not limiter.take("c1").allowed


def test_client_ids_hash_tokens_and_keep_addresses_apart():
    assert client_id("secret", "10.0.0.1") != client_id("other", "10.0.0.1")
    assert client_id("secret", "10.0.0.1") != client_id("secret", "10.0.0.2")   # one phone cannot drain all
    assert "secret" not in client_id("secret", "")
    assert client_id("", "10.0.0.1") == "a-10.0.0.1" != client_id("", "10.0.0.2")


def test_fingerprint_ignores_field_order_and_sees_file_content():
    a = fingerprint("POST", "/animate", [("format", "gif"), ("motions", "dab")], [("image", b"png1")])
    b = fingerprint("post", "/animate", [("motions", "dab"), ("format", "gif")], [("image", b"png1")])
    assert a == b
    assert a != fingerprint("POST", "/animate", [("format", "gif"), ("motions", "dab")], [("image", b"png2")])
    assert a != fingerprint("POST", "/characters", [("format", "gif"), ("motions", "dab")], [("image", b"png1")])


def test_fingerprint_of_a_form_with_an_unreadable_part_name():
    """werkzeug names a part whose Content-Disposition name it cannot read None (here: a name ending in a
    backslash, which escapes the closing quote); the fingerprint must still order and tell it apart."""
    from werkzeug.test import EnvironBuilder
    from werkzeug.wrappers import Request

    body = (b'--b\r\nContent-Disposition: form-data; name="x\\"\r\n\r\nv1\r\n'
            b'--b\r\nContent-Disposition: form-data; name="y"\r\n\r\nv2\r\n--b--\r\n')
    environ = EnvironBuilder(method="POST", data=body, content_type="multipart/form-data; boundary=b").get_environ()
    fields = list(Request(environ).form.items(multi=True))
    assert (None, "v1") in fields
    got = fingerprint("POST", "/animate", fields, [(None, b"f"), ("image", b"png")])
    assert got == fingerprint("POST", "/animate", fields[::-1], [("image", b"png"), (None, b"f")])
    assert got != fingerprint("POST", "/animate", [("None", "v1"), ("y", "v2")], [(None, b"f"), ("image", b"png")])


@pytest.mark.parametrize("bad", ["", " ", "x" * 256, "caf\u00e9", "a\nb"])
def test_bad_keys_are_400(bad):
    with pytest.raises(BadRequest):
        validate_key(bad)
    assert validate_key(None) == "" and validate_key(" k1 ") == "k1"


def test_sync_records_replay_the_response_refuse_other_bodies_and_running_twice(r):
    idem = SyncIdempotency(r, "p:", ttl_s=100, running_ttl_s=5, retry_after_s=2)
    claim, record = idem.begin("c1", "k1", "fp-a")
    assert claim is not None and record is None
    assert 0 < r.ttl(claim.redis_key) <= 6                       # a claim lives as long as a request
    with pytest.raises(IdempotencyInProgress) as running:
        idem.begin("c1", "k1", "fp-a")
    assert running.value.status == 409 and running.value.headers["Retry-After"] == "2"
    with pytest.raises(IdempotencyKeyReused) as reused:
        idem.begin("c1", "k1", "fp-b")
    assert reused.value.status == 422
    idem.complete(claim, 200, {"animations": {"dab": "u"}})
    assert 95 < r.ttl(claim.redis_key) <= 100
    again, record = idem.begin("c1", "k1", "fp-a")
    assert again is None and record["response"] == {"status": 200, "body": {"animations": {"dab": "u"}}}
    assert idem.begin("c2", "k1", "fp-b")[0] is not None         # keys are per client


def test_a_server_error_frees_the_key_for_a_retry(r):
    idem = SyncIdempotency(r, "p:", ttl_s=100, running_ttl_s=5, retry_after_s=2)
    claim, _ = idem.begin("c1", "k2", "fp")
    idem.complete(claim, 503, {"error": "overloaded"})
    assert idem.begin("c1", "k2", "fp")[0] is not None


@pytest.mark.parametrize("status,code", [(429, "render_share_used"), (429, "rate_limited"),
                                         (409, "idempotency_in_progress"), (408, "request_timeout"),
                                         (503, "overloaded")])
def test_an_answer_that_invites_a_retry_is_not_replayed_to_that_retry(r, status, code):
    """Issue 41 S12: a 429 stored under its key for 24 h answered the retry its Retry-After invited."""
    idem = SyncIdempotency(r, "p:", ttl_s=100, running_ttl_s=5, retry_after_s=2)
    claim, _ = idem.begin("c1", "k3", "fp")
    idem.complete(claim, status, {"error": code})
    retry, record = idem.begin("c1", "k3", "fp")
    assert retry is not None and record is None  # the retry runs
    idem.complete(retry, 422, {"error": "no_character"})  # an answer that would repeat is kept
    assert idem.begin("c1", "k3", "fp")[1]["response"]["status"] == 422
