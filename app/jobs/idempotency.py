"""``Idempotency-Key`` on POSTs that create work: a retried request never renders twice.

A client sends a key of its choosing (a UUID, say) with a POST. Within ``DOODLEPOD_IDEMPOTENCY_TTL_S``
(24 h) the same key from the same client with the same request answers what the first one answered:
the same job for an async request (202, same ``Location``), the stored response for a synchronous
one (``Idempotent-Replayed: true``). The same key with another request is 422
``idempotency_key_reused``; while the first synchronous request is still running, 409
``idempotency_in_progress``.

"The same request" is a fingerprint of the method, path and *content*: form fields and JSON in a
canonical order and each file's SHA-256, so two uploads of the same photo with different multipart
boundaries match. Records live in Redis (``<prefix>idem:<client>:<sha256 of the key>``) with their
TTL; async records are written by the same Lua script that queues the job (app/jobs/queue.py).
"""
from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import BadRequest, ClientError, retry_after_header

log = logging.getLogger("doodlepod.idempotency")

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
#: Statuses that ask the client to try the same request again later: never stored as its answer.
RETRY_LATER = frozenset({408, 409, 425, 429})


class IdempotencyKeyReused(ClientError):
    """The `Idempotency-Key` was used within 24 h for a different request."""
    status, code = 422, "idempotency_key_reused"


class IdempotencyInProgress(ClientError):
    """A synchronous request with the same `Idempotency-Key` is still running; retry after it ends
    (`Retry-After`)."""
    status, code, retryable = 409, "idempotency_in_progress", True

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message, headers=retry_after_header(retry_after))


def validate_key(raw: str | None) -> str:
    """The header's value, or '' when absent; 400 for an empty, too long or non-printable key."""
    if raw is None:
        return ""
    key = raw.strip()
    if not key or len(key) > MAX_KEY_LENGTH or not key.isascii() or not key.isprintable():
        raise BadRequest(f"{HEADER} must be 1 to {MAX_KEY_LENGTH} printable ASCII characters")
    return key


def fingerprint(method: str, path: str, fields: Iterable[tuple[str, str]] = (),
                files: Iterable[tuple[str, bytes]] = (), json_body: Any = None) -> str:
    """SHA-256 of the request's content, independent of multipart boundaries and field order."""
    canon = {"method": method.upper(), "path": path,
             "fields": _sorted_pairs([k, v] for k, v in fields),
             "files": _sorted_pairs([name, hashlib.sha256(data).hexdigest()] for name, data in files),
             "json": json_body}
    return hashlib.sha256(json.dumps(canon, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _sorted_pairs(pairs: Iterable[list]) -> list[list]:
    """Pairs in a canonical order; a part whose name the multipart parser could not read has the name
    None, which plain sorting cannot compare with a string (a 500 once), so the order is that of their JSON."""
    return sorted(pairs, key=lambda pair: json.dumps(pair))


def redis_key(prefix: str, client: str, key: str) -> str:
    return f"{prefix}idem:{client}:{hashlib.sha256(key.encode()).hexdigest()[:40]}"


def check_record(raw: str, fp: str, key: str) -> dict[str, Any]:
    """The stored record if it was made by the same request; else 422."""
    record = json.loads(raw)
    if record.get("fp") != fp:
        raise IdempotencyKeyReused(f"{HEADER} '{key[:64]}' was already used for a different request; use a "
                                   "new key for a new request")
    return record


@dataclass
class Claim:
    """A synchronous request's hold on its key (complete it with the response, or abandon it)."""

    redis_key: str
    fp: str


class SyncIdempotency:
    """Records of synchronous requests: claim -> run -> store the response (or drop the claim)."""

    def __init__(self, redis_client, prefix: str, ttl_s: int, running_ttl_s: float, retry_after_s: int) -> None:
        self.redis = redis_client
        self.prefix = prefix
        self.ttl_s = ttl_s
        self.running_ttl_s = int(running_ttl_s) + 1
        self.retry_after_s = retry_after_s

    def begin(self, client: str, key: str, fp: str) -> tuple[Claim | None, dict[str, Any] | None]:
        """``(claim, None)`` for a first request, ``(None, record)`` for a repeat (a job or a response).

        A claim only lives as long as a request may run (the deadline), so a pod that died mid-request
        does not lock the key for a day. Raises 422 (other request) or 409 (first one still running).
        """
        rkey = redis_key(self.prefix, client, key)
        running = json.dumps({"fp": fp, "state": "running"})
        if self.redis.set(rkey, running, nx=True, ex=self.running_ttl_s):
            return Claim(rkey, fp), None
        raw = self.redis.get(rkey)
        if raw is None:  # expired in between: try once more
            if self.redis.set(rkey, running, nx=True, ex=self.running_ttl_s):
                return Claim(rkey, fp), None
            raw = self.redis.get(rkey) or running.encode()
        record = check_record(raw.decode() if isinstance(raw, bytes) else raw, fp, key)
        if record.get("state") == "running":
            raise IdempotencyInProgress(f"a request with {HEADER} '{key[:64]}' is still running; retry when it "
                                        "has finished", self.retry_after_s)
        return None, record

    def complete(self, claim: Claim, status: int, body: Any, headers: dict[str, str] | None = None,
                 retryable: bool = False) -> None:
        """Store the final response for ``ttl_s``; ``headers``: the ones a replay must carry too (ETag,
        Location). An answer that invites a retry is never stored (the key is freed instead, so the
        retry it invites runs): a 5xx, a 408, 409 or 429 (a share used, the rate limit, the same key
        still running), and any error the code marks ``retryable``. Replaying a 429 for 24 h would
        refuse the retry its Retry-After asked for."""
        if retryable or status >= 500 or status in RETRY_LATER:
            self.abandon(claim)
            return
        response = {"status": status, "body": body, **({"headers": headers} if headers else {})}
        record = json.dumps({"fp": claim.fp, "response": response}, separators=(",", ":"))
        self.redis.set(claim.redis_key, record, ex=self.ttl_s)

    def abandon(self, claim: Claim) -> None:
        self.redis.delete(claim.redis_key)
