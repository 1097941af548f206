"""The ``api`` blueprint: the parent of every authenticated endpoint, and what they share.

Child blueprints (animate, motions, and the others registered in :mod:`app.routes`) are registered
on :data:`api`, so its ``before_request`` hook, the bearer-token check, runs for each of them and
for nothing else: probes, metrics, files and pages stay public without an allow-list.
"""
from __future__ import annotations

import hmac
import time
from contextlib import contextmanager
from typing import Iterator

from flask import Blueprint, g, request

from .. import metrics
from ..deadline import Deadline
from ..errors import BadRequest, Overloaded, Unauthorized
from ..services import services

api = Blueprint("api", __name__)


@api.before_request
def require_bearer_token() -> None:
    """With DOODLEPOD_AUTH_TOKEN set, every API request needs ``Authorization: Bearer <token>``."""
    expected = services().settings.auth_token
    if not expected:
        return
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("this server needs 'Authorization: Bearer <token>'")
    if not hmac.compare_digest(token.strip().encode(), expected.encode()):
        raise Unauthorized("the bearer token is not valid")


def request_deadline() -> Deadline:
    """This request's deadline: DOODLEPOD_REQUEST_DEADLINE_S, or the client's shorter
    ``X-Deadline-Seconds``, counted from the request's arrival."""
    limit = services().settings.request_deadline_s
    asked = request.headers.get("X-Deadline-Seconds")
    if asked:
        try:
            value = float(asked)
        except ValueError:
            raise BadRequest("X-Deadline-Seconds must be a number of seconds") from None
        if not value > 0:
            raise BadRequest("X-Deadline-Seconds must be > 0")
        limit = min(limit, value)
    elapsed = time.perf_counter() - g.t0
    return Deadline(limit - elapsed)


@contextmanager
def render_slot() -> Iterator[None]:
    """Hold one of the pod's render slots, or answer 503 + Retry-After at once (before reading the body)."""
    svc = services()
    slot = svc.slots.try_acquire()
    if slot is None:
        raise Overloaded(f"all {svc.settings.max_inflight} render slots are busy; retry in "
                         f"{svc.settings.retry_after_s} s", svc.settings.retry_after_s)
    metrics.RENDERS_IN_FLIGHT.inc()
    try:
        yield
    finally:
        metrics.RENDERS_IN_FLIGHT.dec()
        slot.release()


def base_url() -> str:
    """The URL this request reached the app at (scheme and host, no trailing slash)."""
    return request.host_url.rstrip("/")
