"""The JSON answers of errors: every failure a client sees is an :class:`app.errors.ApiError`'s code,
status and message as JSON (never an HTML page), counted in the errors metric and logged once.

The error classes are :mod:`app.errors` (shared: the render processes raise them too); their answers are
here, with Flask and the metrics, which the render processes never load.
"""
from __future__ import annotations

import logging

from flask import Flask, jsonify
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from ..errors import ApiError, ClientError, DeadlineExceeded, TooLarge, TooManyFields, Unavailable, retry_after_header

log = logging.getLogger("doodlepod.errors")


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None,
                   details: dict[str, object] | None = None):
    response = jsonify(**(details or {}), error=code, message=message)
    response.status_code = status
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response


def register(app: Flask) -> None:
    """Install the JSON error handlers on ``app``."""

    def on_api_error(exc: ApiError):
        level = logging.WARNING if isinstance(exc, (ClientError, Unavailable, DeadlineExceeded)) else logging.ERROR
        log.log(level, "error status=%d code=%s message=%s", exc.status, exc.code, exc.message)
        _count(exc.status, exc.code)
        headers = dict(exc.headers)
        if isinstance(exc, Unavailable) and "Retry-After" not in headers:
            settings = app.config.get("SETTINGS")
            # 0 (the default) is automatic: overloaded answers carry a measured value of their own,
            # the rest (model server down, low disk) a few seconds
            headers.update(retry_after_header(getattr(settings, "retry_after_s", 0) or 3))
        return error_response(exc.status, exc.code, exc.message, headers, exc.details)

    def on_http_error(exc: HTTPException):
        if isinstance(exc, RequestEntityTooLarge):
            return on_api_error(_too_large(app))
        code = (exc.name or "error").lower().replace(" ", "_")
        status = exc.code or 500
        log.warning("error status=%d code=%s message=%s", status, code, exc.description)
        _count(status, code)
        # werkzeug's own headers stay (a 405's Allow, a 416's Content-Range); the body is ours
        headers = {k: v for k, v in exc.get_headers() if k.lower() != "content-type"}
        return error_response(status, code, exc.description or exc.name, headers)

    def on_unexpected(exc: Exception):
        log.exception("error status=500 code=internal_error unexpected %s", type(exc).__name__)
        _count(500, "internal_error")
        return error_response(500, "internal_error", "internal error; the request id in X-Request-ID "
                              "identifies it in the server logs")

    app.register_error_handler(ApiError, on_api_error)
    app.register_error_handler(HTTPException, on_http_error)
    app.register_error_handler(Exception, on_unexpected)


def _too_large(app: Flask) -> ApiError:
    """What a 413 from werkzeug means: the body over MAX_CONTENT_LENGTH, or (the body within it) a
    multipart form with more parts than ``max_form_parts`` or a field over ``max_form_memory_size``."""
    from flask import request

    limit = app.config.get("MAX_CONTENT_LENGTH") or 0
    declared = request.content_length
    if declared is not None and limit and declared <= limit:
        parts = request.max_form_parts
        fields = request.max_form_memory_size
        detail = f"more than {parts} parts" if parts else "too many parts"
        if fields:
            detail += f", or a field over {fields // 1024} KiB"
        return TooManyFields(f"the form has {detail}; send the image and the few fields the API names")
    return TooLarge(f"request body over the limit of {limit / 2**20:.0f} MiB")


def _count(status: int, code: str) -> None:
    from .. import metrics  # local import: metrics needs the multiprocess dir set first
    metrics.ERRORS.labels(code=code, status=str(status)).inc()
