"""Error types of the API and how they become HTTP answers.

Every failure a client can see is an :class:`ApiError` subclass with a stable ``code`` (the JSON
``error`` field clients switch on), an HTTP status and a human message. :func:`register` installs
handlers that turn them, werkzeug's HTTP errors and any unexpected exception into
``{"error": code, "message": text}`` plus one log line; clients never see a stack trace.
"""
from __future__ import annotations

import logging

from flask import Flask, jsonify
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

log = logging.getLogger("doodlepod.errors")


class ApiError(Exception):
    """Base of the errors the API answers with. ``headers`` are added to the response."""

    status = 500
    code = "internal_error"

    def __init__(self, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers = dict(headers or {})


class BadRequest(ApiError):
    """The request itself is malformed (missing field, bad JSON, bad joints)."""
    status, code = 400, "bad_request"


class UnreadableImage(ApiError):
    """The upload claims to be an image but cannot be decoded (truncated, corrupt, empty)."""
    status, code = 400, "unreadable_image"


class UnknownMotion(ApiError):
    """A requested motion is not in the library (GET /motions lists them)."""
    status, code = 400, "unknown_motion"


class Unauthorized(ApiError):
    """Bearer token missing or wrong (only when DOODLEPOD_AUTH_TOKEN is set)."""
    status, code = 401, "unauthorized"

    def __init__(self, message: str) -> None:
        super().__init__(message, headers={"WWW-Authenticate": 'Bearer realm="doodlepod"'})


class NotFound(ApiError):
    status, code = 404, "not_found"


class TooLarge(ApiError):
    """Body over DOODLEPOD_MAX_UPLOAD_MB or image over DOODLEPOD_MAX_IMAGE_PIXELS."""
    status, code = 413, "too_large"


class UnsupportedType(ApiError):
    """A file that is not PNG, JPEG or WebP (e.g. HEIC, GIF, PDF)."""
    status, code = 415, "unsupported_type"


class NoCharacter(ApiError):
    """The detector found no drawn character, or the segmentation left no pixels."""
    status, code = 422, "no_character"


class NoSkeleton(ApiError):
    """The pose model found no skeleton (or more than one) in the character's box."""
    status, code = 422, "no_skeleton"


class InvalidCharacter(ApiError):
    """The character cannot be animated (e.g. client joints that make no usable skeleton)."""
    status, code = 422, "invalid_character"


class ModelServerError(ApiError):
    """TorchServe answered, but with an error or an answer we cannot read."""
    status, code = 502, "model_server_error"


class StorageFailed(ApiError):
    """Uploading to (or reaching) the storage failed after retries."""
    status, code = 502, "storage_error"


class ModelServerUnavailable(ApiError):
    """TorchServe is down, not ready, or overloaded (503/507) after retries."""
    status, code = 503, "model_server_unavailable"


class Overloaded(ApiError):
    """All render slots of the pod are busy: retry after ``retry_after`` seconds."""
    status, code = 503, "overloaded"

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message, headers={"Retry-After": str(int(retry_after))})


class InsufficientStorage(ApiError):
    """Free disk below DOODLEPOD_MIN_FREE_DISK_MB: refuse work before starting it."""
    status, code = 503, "low_disk_space"


class DeadlineExceeded(ApiError):
    """The request ran past its deadline (DOODLEPOD_REQUEST_DEADLINE_S or X-Deadline-Seconds)."""
    status, code = 504, "deadline_exceeded"


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None):
    response = jsonify(error=code, message=message)
    response.status_code = status
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response


def register(app: Flask) -> None:
    """Install the JSON error handlers on ``app``."""

    def on_api_error(exc: ApiError):
        level = logging.ERROR if exc.status >= 500 and exc.status not in (503, 504) else logging.WARNING
        log.log(level, "error status=%d code=%s message=%s", exc.status, exc.code, exc.message)
        _count(exc.status, exc.code)
        return error_response(exc.status, exc.code, exc.message, exc.headers)

    def on_http_error(exc: HTTPException):
        if isinstance(exc, RequestEntityTooLarge):
            limit = app.config.get("MAX_CONTENT_LENGTH") or 0
            return on_api_error(TooLarge(f"request body over the limit of {limit / 2**20:.0f} MiB"))
        code = (exc.name or "error").lower().replace(" ", "_")
        status = exc.code or 500
        log.warning("error status=%d code=%s message=%s", status, code, exc.description)
        _count(status, code)
        return error_response(status, code, exc.description or exc.name)

    def on_unexpected(exc: Exception):
        log.exception("error status=500 code=internal_error unexpected %s", type(exc).__name__)
        _count(500, "internal_error")
        return error_response(500, "internal_error", "internal error; the request id in X-Request-ID "
                              "identifies it in the server logs")

    app.register_error_handler(ApiError, on_api_error)
    app.register_error_handler(HTTPException, on_http_error)
    app.register_error_handler(Exception, on_unexpected)


def _count(status: int, code: str) -> None:
    from . import metrics  # local import: metrics needs the multiprocess dir set first
    metrics.ERRORS.labels(code=code, status=str(status)).inc()
