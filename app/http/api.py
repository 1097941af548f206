"""The ``api`` blueprint: the parent of every authenticated endpoint, and what they share.

Child blueprints (animate, motions, and the others registered in :mod:`app.http`) are registered
on :data:`api`, so its ``before_request`` hook, the bearer-token check, runs for each of them and
for nothing else: probes, metrics, files and pages stay public without an allow-list.
"""
from __future__ import annotations

import hmac
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flask import Blueprint, g, request
from werkzeug.http import parse_dict_header

from .. import metrics
from ..clients import client_id, forwarded_client, trusted_peer
from ..deadline import Deadline
from ..errors import ApiError, BadRequest, Overloaded, RequestTimeout, Unauthorized
from ..intake import body
from ..intake.read import body_limit
from ..services import services

api = Blueprint("api", __name__)


@api.before_request
def require_bearer_token() -> None:
    """With DOODLEPOD_AUTH_TOKEN set, every API request needs ``Authorization: Bearer <token>``."""
    expected = services().settings.auth_token
    if not expected:
        return
    token = bearer_token()
    if not token:
        raise Unauthorized("this server needs 'Authorization: Bearer <token>'")
    if not hmac.compare_digest(token.encode(), expected.encode()):
        raise Unauthorized("the bearer token is not valid")


def bearer_token() -> str:
    """The request's bearer token ('' without one), as Werkzeug reads ``Authorization``."""
    auth = request.authorization
    return (auth.token or "") if auth is not None and auth.type == "bearer" else ""


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


def read_body(deadline: Deadline) -> bytes:
    """The request's whole body, read now: within DOODLEPOD_BODY_TIMEOUT_S (and the deadline) and
    its route's size bound (DOODLEPOD_MAX_JSON_KB for JSON, DOODLEPOD_MAX_UPLOAD_MB for a body that
    carries a file: :func:`app.intake.read.body_limit`), declared or chunked (408 / 413 beyond, see
    :mod:`app.intake.body`).

    Call it before :func:`render_slot`: a slow upload must hold no slot while it trickles in.
    """
    settings = services().settings
    left = deadline.check("upload")  # a deadline already past (X-Deadline-Seconds: 2e-308) is 504, not 408
    limit = body_limit(settings)
    if left >= settings.body_timeout_s:
        return body.buffer_body(request.environ, limit, settings.body_timeout_s)
    try:
        return body.buffer_body(request.environ, limit, left)
    except RequestTimeout:  # the request's deadline ran out while the body came, not the body's own time
        raise deadline.exceeded("upload") from None


def json_body() -> Any:
    """The request's JSON body decoded within :func:`app.intake.body.parse_json`'s bounds (depth, number
    length), or None when it is not JSON that fits them (as ``request.get_json(silent=True)``)."""
    try:
        return body.parse_json(request.get_data(), "body", max_bytes=body_limit(services().settings))
    except ApiError:
        return None


def request_priority() -> str:
    """The request's render priority: :data:`BACKGROUND` when it says ``Priority: u=6`` or ``u=7``
    (RFC 9218's lowest urgencies; the studio's previews send u=7), else :data:`RENDER`."""
    from ..render.admission import BACKGROUND, RENDER

    urgency = parse_dict_header(request.headers.get("Priority", "")).get("u")
    return BACKGROUND if (urgency or "").strip() in ("6", "7") else RENDER


def _slots_text(count: int) -> str:
    return "the render slot is" if count == 1 else f"all {count} render slots are"


def _render_share_used(share: int, slots: Any) -> Exception:
    from ..shares import RenderShareUsed

    wait = max(1, math.ceil(slots.mean_duration() or 2.0))
    return RenderShareUsed(f"this client holds or waits for {share} render slot{'s' if share > 1 else ''} "
                           f"already, its share (DOODLEPOD_CLIENT_RENDER_SLOTS); retry in {wait} s", wait)


@contextmanager
def render_slot(priority: str | None = None) -> Iterator[Any]:
    """Hold one of the pod's render slots (after the body is in and its fields are checked: see
    :func:`read_body`), or answer 503 + Retry-After. A person's request may wait a few seconds for
    one (DOODLEPOD_ADMISSION_WAIT_S, within its deadline); background work (``priority``
    :data:`BACKGROUND`, from :func:`request_priority` where a route can give a slot up) never
    waits. Yields the :class:`app.render.admission.Slot`: background work calls its ``check()`` while
    it renders, to give the slot up when a request wants it."""
    from ..clients import digest
    from ..render.admission import BACKGROUND, RENDER

    svc = services()
    priority = priority or RENDER
    owner = digest(request_client())
    share = svc.settings.client_render_slots if priority != BACKGROUND else 0
    # the client's own share (0: none), not the pod's overload: 429 at once
    if share and svc.slots.claims(owner) >= share:
        raise _render_share_used(share, svc.slots)
    wait_s = 0.0 if priority == BACKGROUND else min(svc.settings.admission_wait_s,
                                                   request_deadline().remaining() - 1.0)
    if wait_s > 0:
        metrics.RENDERS_WAITING.inc()
        try:
            slot = svc.slots.acquire(priority, wait_s, owner=owner, share=share)
        finally:
            metrics.RENDERS_WAITING.dec()
    else:
        slot = svc.slots.acquire(priority, owner=owner)
    if slot is None:
        if priority == BACKGROUND:  # not a client turned away: it does not count in others' Retry-After
            wait = max(1, math.ceil(svc.slots.expected_wait()))
            raise Overloaded(f"{_slots_text(svc.settings.max_inflight)} in use; background work waits; "
                             f"retry in {wait} s", wait)
        if share and svc.slots.claims(owner) >= share:  # a request of the same client raced this one
            raise _render_share_used(share, svc.slots)
        wait = svc.settings.retry_after_s or svc.slots.retry_after()  # 0: measured, see InflightSlots
        raise Overloaded(f"{_slots_text(svc.settings.max_inflight)} in use; retry in {wait} s", wait)
    metrics.RENDERS_IN_FLIGHT.inc()
    completed = False
    try:
        yield slot
        completed = True
    finally:
        metrics.RENDERS_IN_FLIGHT.dec()
        slot.release(completed=completed)  # a completed request's slot time feeds the Retry-After estimate


def base_url() -> str:
    """The base of the URLs answered to this request: the scheme and host it reached the app at when
    it came through a trusted proxy (DOODLEPOD_FORWARDED_ALLOW_IPS), else empty, for URLs relative
    to the server: a client's own Host header never goes into a URL (DOODLEPOD_PUBLIC_URL, when set,
    wins over both in the storage)."""
    if not trusted_peer(request.remote_addr, services().settings.forwarded_allow_ips):
        return ""
    return request.host_url.rstrip("/")


def client_address() -> str:
    """The client's address: the TCP peer, or, when the peer is one of DOODLEPOD_TRUSTED_PROXIES, the
    right-most address of X-Forwarded-For that is not a trusted proxy itself (the left part of the
    header is whatever the client wrote, so it is never believed). Cached on the request."""
    cached = g.get("client_address")
    if cached is not None:
        return cached
    g.client_address = address = forwarded_client(request.remote_addr or "",
                                                  request.headers.getlist("X-Forwarded-For"),
                                                  services().settings.trusted_proxies)
    return address


def request_client() -> str:
    """The client of the current request (:mod:`app.clients` says what names one); the bearer token
    counts only when the server checks tokens. Computed once per request (``g.client_identity``)."""
    cached = g.get("client_identity")
    if cached is not None:
        return cached
    token = ""
    if services().settings.auth_token:
        token = bearer_token()
    g.client_identity = who = client_id(token, client_address(), services().settings.client_ipv6_prefix)
    return who
