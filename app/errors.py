"""Error types of the API and how they become HTTP answers.

Every failure a client can see is an :class:`ApiError` with a stable ``code`` (the JSON ``error``
field clients switch on), an HTTP status and a human message. The classes form four families, so a
caller can catch or test a whole kind at once:

- :class:`ClientError` (4xx): the request cannot succeed as sent; do not retry it unchanged.
- :class:`UpstreamError` (502): TorchServe or the storage answered wrongly.
- :class:`Unavailable` (503): the pod or a neighbour is busy or down; retry after ``Retry-After``.
- :class:`DeadlineExceeded` (504): the request ran out of time.

:func:`animator_boundary` is the boundary into the animator library: every call into it runs inside,
and the animator's exceptions come out as these (one table, :data:`ANIMATOR_ERRORS`, applied by
:func:`from_animator`). :func:`register` installs handlers that turn them, werkzeug's HTTP errors
and any unexpected exception into ``{"error": code, "message": text}`` plus one log line; clients
never see a stack trace.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from animator import errors as animator_errors

log = logging.getLogger("doodlepod.errors")


class ApiError(Exception):
    """Base of the errors the API answers with. ``headers`` are added to the response."""

    status = 500
    code = "internal_error"
    #: True when the same request may succeed later unchanged: a client may retry it, and the render
    #: worker requeues an async job that failed with it (:mod:`app.jobs.retry`). False for failures that
    #: would repeat: the request itself (4xx), a render that failed, a deadline, a bug.
    retryable = False

    def __init__(self, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers = dict(headers or {})
        #: Fields the JSON answer carries beside ``error`` and ``message`` (e.g. ``warnings``).
        self.details: dict[str, object] = {}


# --- 4xx: the request itself ---------------------------------------------------------------------

class ClientError(ApiError):
    """The request cannot succeed as sent (4xx)."""
    status, code = 400, "bad_request"


class BadRequest(ClientError):
    """The request itself is malformed (missing field, bad JSON, a field of the wrong type)."""
    status, code = 400, "bad_request"


class UnreadableImage(ClientError):
    """The upload claims to be an image but cannot be decoded (truncated, corrupt, empty)."""
    status, code = 400, "unreadable_image"


class ImageTooSmall(ClientError):
    """An image under :data:`app.images.MIN_SIDE` pixels on a side: refused before the models see it."""
    status, code = 422, "image_too_small"


class UnknownMotion(ClientError):
    """A requested motion is not in the library (GET /motions lists them)."""
    status, code = 400, "unknown_motion"


class Unauthorized(ClientError):
    """Bearer token missing or wrong (only when DOODLEPOD_AUTH_TOKEN is set)."""
    status, code = 401, "unauthorized"

    def __init__(self, message: str) -> None:
        super().__init__(message, headers={"WWW-Authenticate": 'Bearer realm="doodlepod"'})


class NotFound(ClientError):
    """No such path, file, or character (a character also once deleted or expired)."""
    status, code = 404, "not_found"


class TooLarge(ClientError):
    """Body over DOODLEPOD_MAX_UPLOAD_MB or image over DOODLEPOD_MAX_IMAGE_PIXELS."""
    status, code = 413, "too_large"


class UnsupportedType(ClientError):
    """A file that is not an image type we read (e.g. GIF, PDF, SVG)."""
    status, code = 415, "unsupported_type"


class NoCharacter(ClientError):
    """The detector found no drawn character, or the segmentation left no pixels."""
    status, code = 422, "no_character"


class NoSkeleton(ClientError):
    """The pose model found no skeleton (or more than one) in the character's box."""
    status, code = 422, "no_skeleton"


class RequestTimeout(ClientError):
    """The request's body did not all arrive within DOODLEPOD_BODY_TIMEOUT_S."""
    status, code = 408, "request_timeout"


class InvalidCharacter(ClientError):
    """The character cannot be animated: client joints that make no usable skeleton (missing joints,
    coordinates that are not numbers), a skeleton that cannot be rigged, an empty mask."""
    status, code = 422, "invalid_character"


class BadMask(ClientError):
    """A mask sent to PATCH /characters/{id} is not a readable PNG image."""
    status, code = 400, "bad_mask"


class MaskWrongSize(ClientError):
    """The mask is not of the texture's size (the document's ``texture.width`` x ``texture.height``)."""
    status, code = 422, "mask_wrong_size"


class DegenerateSkeleton(InvalidCharacter):
    """Client joints that make no usable skeleton: all (or nearly all) on one spot."""
    status, code = 422, "degenerate_skeleton"


class JointsOutsideImage(InvalidCharacter):
    """Joints sent for a character lie outside the uploaded image."""
    status, code = 422, "joints_outside_image"


class BoxOutsideImage(ClientError):
    """The box sent for a character is empty or lies outside the uploaded image."""
    status, code = 422, "bbox_outside_image"


class VersionMismatch(ClientError):
    """``If-Match`` names a version of the character that is no longer current: nothing changed."""
    status, code = 412, "version_mismatch"


class EditConflict(ClientError):
    """Without ``If-Match``, an edit lost every race to concurrent edits of the character; retry."""
    status, code, retryable = 409, "edit_conflict", True


class InvalidMotion(ClientError):
    """A motion (BVH clip or its configs) sent with the request cannot be used."""
    status, code = 422, "invalid_motion"


class InvalidVideo(ClientError):
    """A video sent to POST /motions cannot be used: unreadable, too long or too large a frame."""
    status, code = 422, "invalid_video"


class NoPerson(ClientError):
    """The pose model found no person in the video (or in too few of its frames)."""
    status, code = 422, "no_person"


class OutputTooLarge(ClientError):
    """The file asked for would pass a bound of its format (a sprite sheet's pixels): fewer frames
    (``max_frames``) or a smaller ``size`` fit."""
    status, code = 422, "output_too_large"


class RenderTooLarge(ClientError):
    """The render asked for more memory than a render process may use
    (DOODLEPOD_RENDER_PROCESS_MEMORY_MB): the work is too large for this pod as sent."""
    status, code = 422, "render_too_large"


class TooManyCharacters(ClientError):
    """More characters sent or named than a scene holds (DOODLEPOD_SCENE_MAX_CHARACTERS)."""
    status, code = 422, "too_many_characters"


class TooManyMotions(ClientError):
    """POST /animate with ``every_character`` naming more motions than DOODLEPOD_SCENE_MAX_MOTIONS (each is
    a scene render of every character, one after the other under one render slot)."""
    status, code = 422, "too_many_motions"


class SceneTooLarge(ClientError):
    """A scene render over the work bound (characters x frames x pixels, DOODLEPOD_SCENE_MAX_WORK_MPX)."""
    status, code = 422, "scene_too_large"


class TooManyConnections(ClientError):
    """The client (its address) holds DOODLEPOD_CLIENT_CONNECTIONS connections open to this worker
    already; answered by the gunicorn worker before any request is read (:mod:`app.gunicorn_worker`)."""
    status, code, retryable = 429, "too_many_connections", True


# --- 5xx: our neighbours and ourselves -----------------------------------------------------------

class RenderFailed(ApiError):
    """A render process died (e.g. killed for memory) or the renderer failed on valid input."""
    status, code = 500, "render_failed"


class UpstreamError(ApiError):
    """TorchServe or the storage answered, but wrongly (502): a restarting model worker or a storage
    hiccup, which a later attempt may not meet."""
    status, code = 502, "upstream_error"
    retryable = True


class ModelServerError(UpstreamError):
    """TorchServe answered, but with an error or an answer we cannot read."""
    status, code = 502, "model_server_error"


class StorageFailed(UpstreamError):
    """Uploading to (or reaching) the storage failed after retries."""
    status, code = 502, "storage_error"


class Unavailable(ApiError):
    """Busy or down for now (503): retry after ``retry_after`` seconds (the ``Retry-After`` header).

    Without an explicit ``retry_after`` the error handler sends DOODLEPOD_RETRY_AFTER_S.
    """
    status, code, retryable = 503, "unavailable", True

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        headers = {"Retry-After": str(max(1, int(retry_after)))} if retry_after is not None else None
        super().__init__(message, headers=headers)


class ModelServerUnavailable(Unavailable):
    """TorchServe is down, not ready, or overloaded (503/507) after retries. ``down``: it is not there
    at all (refuses connections after retries, or has not loaded the model); unlike a busy or slow one,
    the app's own ink finder may answer in its place (DOODLEPOD_FINDER_FALLBACK)."""
    status, code = 503, "model_server_unavailable"

    def __init__(self, message: str, retry_after: float | None = None, *, down: bool = False) -> None:
        super().__init__(message, retry_after)
        self.down = down


class ModelsUnavailable(Unavailable):
    """The models are still being prepared or started (``make run`` on a fresh machine): known before
    TorchServe is called, answered at once with an estimate in ``Retry-After``."""
    status, code = 503, "models_unavailable"


class VideoReadTimeout(Unavailable):
    """ffmpeg did not describe a video in time (a busy machine, not a broken file): the job may be retried."""
    status, code = 503, "video_read_timeout"


class Overloaded(Unavailable):
    """All render slots of the pod are busy: retry after ``retry_after`` seconds."""
    status, code = 503, "overloaded"

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message, retry_after)


class InsufficientStorage(Unavailable):
    """Free disk below DOODLEPOD_MIN_FREE_DISK_MB: refuse work before starting it."""
    status, code = 503, "low_disk_space"


class CallbackDnsBusy(Unavailable):
    """Every thread that looks callback names up is waiting on slow name servers: a ``callback_url`` is
    refused at once rather than queued until its lookup's bound runs out."""
    status, code = 503, "callback_dns_busy"


class StorageFull(Unavailable):
    """The app's stored files reached DOODLEPOD_STORAGE_BUDGET_MB; expired ones are swept to make room."""
    status, code = 503, "storage_full"


class DeadlineExceeded(ApiError):
    """The request ran past its deadline (DOODLEPOD_REQUEST_DEADLINE_S or X-Deadline-Seconds)."""
    status, code = 504, "deadline_exceeded"


# --- the animator's errors at the boundary -------------------------------------------------------

#: The animator's exception types -> the API error each becomes, most specific first. Everything the
#: animator raises on bad input (a character, clip or config it cannot use) is the client's to fix:
#: 422, never a 500. RenderError means the renderer failed on input it accepted: ours to fix.
ANIMATOR_ERRORS: tuple[tuple[type[Exception], type[ApiError]], ...] = (
    (animator_errors.CharacterError, InvalidCharacter),
    (animator_errors.BVHError, InvalidMotion),
    (animator_errors.ConfigError, InvalidMotion),
    (animator_errors.OutputTooLarge, OutputTooLarge),
    (animator_errors.NoPersonError, NoPerson),
    (animator_errors.VideoTimeout, VideoReadTimeout),
    (animator_errors.VideoError, InvalidVideo),
    (animator_errors.RenderError, RenderFailed),
    (animator_errors.AnimatorError, InvalidCharacter),
)


def from_animator(exc: Exception, doing: str = "") -> ApiError:
    """The API error for ``exc``, an exception the animator raised. Its message is ``doing``, the
    field the animator names (if any) and the animator's message: ``"<doing>, <field>: <message>"``."""
    for animator_type, api_type in ANIMATOR_ERRORS:
        if isinstance(exc, animator_type):
            break
    else:
        raise TypeError(f"not an animator error: {type(exc).__name__}") from exc
    text = getattr(exc, "message", None) or str(exc)
    where = ", ".join(part for part in (doing, getattr(exc, "field", None)) if part)
    return api_type(f"{where}: {text}" if where else text)


@contextmanager
def animator_boundary(doing: str = "") -> Iterator[None]:
    """Run a call into the animator: an animator exception raised inside leaves as its API error
    (:func:`from_animator`; ``doing`` says what was being done), without the animator's traceback.

    ``with animator_boundary("the character cannot be rigged"): character = animator.Character(...)``
    """
    try:
        yield
    except animator_errors.AnimatorError as exc:
        raise from_animator(exc, doing) from None


class TooManyFields(TooLarge):
    """A form with more parts than the server parses (werkzeug's ``max_form_parts``)."""
    status, code = 413, "too_many_fields"
