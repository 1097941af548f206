"""Signed job callbacks: when a job with a ``callback_url`` ends, the worker POSTs its record there.

Body (JSON): ``{"event": "job.succeeded" | "job.failed", "job": <as GET /jobs/{id}>, "sent_at": ISO time}``.
Headers: ``X-Doodlepod-Signature: sha256=<hex HMAC-SHA256 of the raw body, keyed with
DOODLEPOD_WEBHOOK_SECRET>``, ``X-Doodlepod-Event``, and ``X-Doodlepod-Delivery`` (the same on every
retry of one callback, so a receiver can drop repeats). A receiver recomputes the HMAC over the
bytes it received and compares in constant time (:func:`verify` shows how).

Delivery is retried on connection errors, timeouts, 408, 425, 429 and 5xx answers with exponential
backoff (1, 2, 4 ... s, at most 60 s, or the receiver's Retry-After) up to
DOODLEPOD_WEBHOOK_ATTEMPTS times; any other answer ends it. The outcome (``delivered`` or
``failed``, and the number of attempts) is kept in the job's record.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests

from ..errors import BadRequest

log = logging.getLogger("doodlepod.webhooks")

SIGNATURE_HEADER = "X-Doodlepod-Signature"
MAX_URL_LENGTH = 2048
_RETRY_STATUSES = {408, 425, 429}


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, header: str) -> bool:
    """What a receiver does: recompute the signature over the raw body, compare in constant time."""
    return hmac.compare_digest(sign(secret, body), header or "")


def validate_callback_url(raw: str | None, secret: str) -> str:
    """The callback URL of a request ('' if none); 400 unless http(s) with a host, and webhooks configured."""
    url = (raw or "").strip()
    if not url:
        return ""
    if not secret:
        raise BadRequest("callback_url is not available: this server has no DOODLEPOD_WEBHOOK_SECRET to sign "
                         "callbacks with; poll GET /jobs/{id} instead")
    parts = urlsplit(url)
    if len(url) > MAX_URL_LENGTH or parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadRequest(f"callback_url must be an http(s) URL of at most {MAX_URL_LENGTH} characters")
    return url


def body_for(job: dict[str, Any], sent_at: str) -> bytes:
    return json.dumps({"event": f"job.{job['status']}", "job": job, "sent_at": sent_at},
                      separators=(",", ":")).encode()


@dataclass
class Outcome:
    delivered: bool
    attempts: int
    detail: str
    interrupted: bool = False  # the worker is stopping: leave the callback for another worker


def deliver(url: str, job: dict[str, Any], secret: str, *, attempts: int, timeout_s: float,
            now: Callable[[], str], stop: threading.Event | None = None, base_backoff_s: float = 1.0,
            session: requests.Session | None = None) -> Outcome:
    """POST the signed record of ``job`` to ``url`` until a 2xx, a final answer, or ``attempts`` tries."""
    http = session or requests.Session()
    delivery = f"{job['id']}.{job['status']}"
    detail = ""
    for attempt in range(1, attempts + 1):
        body = body_for(job, now())
        headers = {"Content-Type": "application/json", SIGNATURE_HEADER: sign(secret, body),
                   "X-Doodlepod-Event": f"job.{job['status']}", "X-Doodlepod-Delivery": delivery,
                   "User-Agent": "doodlepod-webhooks/1"}
        wait = min(60.0, base_backoff_s * 2 ** (attempt - 1)) * random.uniform(0.8, 1.2)
        try:
            resp = http.post(url, data=body, headers=headers, timeout=timeout_s, allow_redirects=False)
        except requests.RequestException as exc:
            detail = f"{type(exc).__name__}"
        else:
            if 200 <= resp.status_code < 300:
                log.info("webhook job=%s delivered to %s (attempt %d)", job["id"], _host(url), attempt)
                return Outcome(True, attempt, f"HTTP {resp.status_code}")
            detail = f"HTTP {resp.status_code}"
            if resp.status_code not in _RETRY_STATUSES and resp.status_code < 500:
                log.warning("webhook job=%s refused by %s: %s; not retried", job["id"], _host(url), detail)
                return Outcome(False, attempt, detail)
            retry_after = resp.headers.get("Retry-After", "")
            if retry_after.isdigit():
                wait = min(60.0, float(retry_after))
        if attempt < attempts:
            log.info("webhook job=%s to %s failed (%s), attempt %d/%d; retrying in %.1f s", job["id"], _host(url),
                     detail, attempt, attempts, wait)
            if stop is not None and stop.wait(wait):
                return Outcome(False, attempt, detail, interrupted=True)
            if stop is None:
                time.sleep(wait)
    log.warning("webhook job=%s to %s failed after %d attempts: %s", job["id"], _host(url), attempts, detail)
    return Outcome(False, attempts, detail)


def _host(url: str) -> str:
    return urlsplit(url).netloc
