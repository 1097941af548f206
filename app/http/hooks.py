"""Hooks every request goes through: its id, one summary log line, and the request metrics.

The request id is the client's ``X-Request-ID`` when it is a short safe token, else a new one; it is
echoed in the answer's ``X-Request-ID`` and stamped on every log line of the request.
"""
from __future__ import annotations

import logging
import re
import time

from flask import Flask, Response, g, request

from .. import metrics
from ..intake.body import stop_reading_unread
from ..render.pipeline import new_request_id

log = logging.getLogger("doodlepod.http")

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
#: Probes and scrapes: counted in the metrics, not logged (they arrive every few seconds).
_QUIET_ENDPOINTS = ("/ping", "/healthz", "/live", "/metrics")


def install_hooks(app: Flask) -> None:
    app.before_request(_begin)
    app.after_request(_finish)


def _begin() -> None:
    g.t0 = time.perf_counter()
    incoming = request.headers.get("X-Request-ID", "")
    g.request_id = incoming if _REQUEST_ID.match(incoming) else new_request_id()
    from .api import request_client
    request_client()  # who is asking, once, before any room needs it (app.clients.current)


def _finish(response: Response) -> Response:
    response.headers["X-Request-ID"] = g.get("request_id", "-")
    if response.status_code >= 400:  # refused before its body was read: not drained on the event loop
        stop_reading_unread(request.environ)
    endpoint = request.url_rule.rule if request.url_rule is not None else "unmatched"
    elapsed = time.perf_counter() - g.get("t0", time.perf_counter())
    metrics.REQUESTS.labels(endpoint=endpoint, method=request.method, status=str(response.status_code)).inc()
    metrics.REQUEST_SECONDS.labels(endpoint=endpoint).observe(elapsed)
    if endpoint not in _QUIET_ENDPOINTS:
        log.info("%s %s -> %d in %.1f ms client=%s", request.method, request.path, response.status_code,
                 elapsed * 1e3, _client())
    if 400 <= response.status_code < 500:
        _pace_refusal()
    return response


def _pace_refusal() -> None:
    """Hold a refusal back when its client was refused too often of late (:mod:`app.clients.refusals`)."""
    from ..services import services

    pacer = services().refusals
    if pacer is None:
        return
    from .api import request_client

    hold = pacer.hold_s(request_client())
    if hold > 0:
        time.sleep(hold)  # gevent's sleep under gunicorn: this greenlet waits, the loop serves others


def _client() -> str:
    """The client's address as rate limits see it (DOODLEPOD_TRUSTED_PROXIES); the peer if that fails."""
    try:
        from .api import client_address
        return client_address()
    except Exception:  # noqa: BLE001 - a log line must never fail a response
        return request.remote_addr or "-"
