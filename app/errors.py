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
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from animator import errors as animator_errors

log = logging.getLogger("doodlepod.errors")


def retry_after_header(seconds: float) -> dict[str, str]:
    """The ``Retry-After`` header that asks a client to come back in ``seconds``: whole seconds
    (RFC 9110's delay-seconds), rounded up, at least 1. Every answer that says when to retry writes it here."""
    return {"Retry-After": str(max(1, math.ceil(seconds)))}


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """The delay a ``Retry-After`` header among ``headers`` asks for, in seconds; None when there is none
    or it is not delay-seconds (an HTTP date is not read). Every reader of one (an error's, a callback
    receiver's) reads it here."""
    value = (headers.get("Retry-After") or "").strip()
    return float(value) if value.isdigit() else None


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
    """Missing `image`, bad JSON or format; JSON nested deeper than 10 levels, a number longer than 32
    characters, `NaN`/`Infinity`, a non-finite `bbox`; a value out of bounds or an unknown field (the message
    names it); a request gunicorn refuses (a control character in a header), in JSON too."""
    status, code = 400, "bad_request"


class UnreadableImage(ClientError):
    """An upload that cannot be decoded (corrupt, truncated, empty, bad base64)."""
    status, code = 400, "unreadable_image"


class ImageTooSmall(ClientError):
    """An image under 32 pixels on a side (from its header): refused before the models see it.

    The side is :data:`app.images.MIN_SIDE`."""
    status, code = 422, "image_too_small"


class UnknownMotion(ClientError):
    """A motion not in `GET /motions`."""
    status, code = 400, "unknown_motion"


class Unauthorized(ClientError):
    """`DOODLEPOD_AUTH_TOKEN` is set and the bearer token is missing or wrong."""
    status, code = 401, "unauthorized"

    def __init__(self, message: str) -> None:
        super().__init__(message, headers={"WWW-Authenticate": 'Bearer realm="doodlepod"'})


class NotFound(ClientError):
    """Unknown path, character (also one deleted or expired), job or file (a `/files` path with a control
    character too)."""
    status, code = 404, "not_found"


class TooLarge(ClientError):
    """Body over `DOODLEPOD_MAX_UPLOAD_MB`, declared or chunked (refused as soon as it passes the limit); a
    JSON body over `DOODLEPOD_MAX_JSON_KB` (256 KiB; POST /, whose JSON carries a base64 image, may send
    `DOODLEPOD_MAX_UPLOAD_MB`) or with more than 20,000 tokens (brackets, commas, colons, strings), refused
    before it is decoded; a form or JSON field over `DOODLEPOD_MAX_FIELD_KB`; an image over
    `DOODLEPOD_MAX_IMAGE_PIXELS` (checked from the header, before decoding); a BVH clip over its bounds."""
    status, code = 413, "too_large"


class UnsupportedType(ClientError):
    """Not PNG, JPEG, WebP or HEIC/HEIF (e.g. AVIF, GIF, BMP, PDF, text)."""
    status, code = 415, "unsupported_type"


class NoCharacter(ClientError):
    """No drawn figure found, or nothing left after segmentation."""
    status, code = 422, "no_character"


class NoSkeleton(ClientError):
    """The pose model found no skeleton (or more than one) in the character's box."""
    status, code = 422, "no_skeleton"


class RequestTimeout(ClientError):
    """The body did not all arrive within `DOODLEPOD_BODY_TIMEOUT_S`."""
    status, code = 408, "request_timeout"


class InvalidCharacter(ClientError):
    """Joints that make no skeleton (missing names, coordinates that are not numbers, more than 128
    joints or a joint name over 64 characters), that cannot be rigged or lie off the drawing; an empty mask."""
    status, code = 422, "invalid_character"


class BadMask(ClientError):
    """A mask sent to `PATCH /characters/{id}` is not a readable PNG image."""
    status, code = 400, "bad_mask"


class MaskWrongSize(ClientError):
    """The mask is not of the texture's size (the document's `texture.width` x `texture.height`)."""
    status, code = 422, "mask_wrong_size"


class DegenerateSkeleton(InvalidCharacter):
    """Client joints piled on (nearly) one spot: they span under 16 px or fewer than 8 sit apart."""
    status, code = 422, "degenerate_skeleton"


class JointsOutsideImage(InvalidCharacter):
    """Joints sent for a character lie outside the uploaded image."""
    status, code = 422, "joints_outside_image"


class BoxOutsideImage(ClientError):
    """The box sent for a character is empty or lies outside the uploaded image."""
    status, code = 422, "bbox_outside_image"


class VersionMismatch(ClientError):
    """`If-Match` names a version of the character that is no longer current: nothing changed."""
    status, code = 412, "version_mismatch"


class EditConflict(ClientError):
    """Without `If-Match`, an edit lost every race to concurrent edits of the character; retry."""
    status, code, retryable = 409, "edit_conflict", True


class InvalidMotion(ClientError):
    """A motion sent with the request (a BVH clip, its frame range or its configs) cannot be used."""
    status, code = 422, "invalid_motion"


class InvalidVideo(ClientError):
    """A video sent to `POST /motions` cannot be used: unreadable, too long or with too large frames."""
    status, code = 422, "invalid_video"


class NoPerson(ClientError):
    """The pose model found no person in the video (or in too few of its frames)."""
    status, code = 422, "no_person"


class OutputTooLarge(ClientError):
    """The file asked for would pass its format's bound (a sprite sheet over 64 Mpx of trimmed frames or
    16384 px a side): ask for fewer frames (`max_frames`) or a smaller `size`. A sheet is priced before
    the render, queued or not (each frame at half its canvas): the answer's `fits` names the largest
    `size` and the most `max_frames` that fit; one priced under the bound that still passes it is
    refused while packing, after the render."""
    status, code = 422, "output_too_large"


class RenderTooLarge(ClientError):
    """The render needed more memory than one render process may use
    (`DOODLEPOD_RENDER_PROCESS_MEMORY_MB`, from the container's memory limit): it failed alone, other renders
    went on. Fewer frames (`max_frames`), a smaller `size` or fewer characters."""
    status, code = 422, "render_too_large"


class TooManyCharacters(ClientError):
    """More characters sent or named than a scene holds (`DOODLEPOD_SCENE_MAX_CHARACTERS`)."""
    status, code = 422, "too_many_characters"


class TooManyMotions(ClientError):
    """`POST /animate` with `every_character` named more motions than `DOODLEPOD_SCENE_MAX_MOTIONS`: each
    is a scene render of every character, one after the other under one render slot."""
    status, code = 422, "too_many_motions"


class SceneTooLarge(ClientError):
    """A scene render over the work bound (characters x frames x pixels, `DOODLEPOD_SCENE_MAX_WORK_MPX`
    million): fewer frames (`max_frames`), a smaller `size` or fewer characters."""
    status, code = 422, "scene_too_large"


class TooManyConnections(ClientError):
    """The client (its address) holds `DOODLEPOD_CLIENT_CONNECTIONS` (40) connections open to the worker
    already: answered before the request is read, and the connection closed (`Retry-After`). Reuse a
    connection (keep-alive) or close one.

    Written by the gunicorn worker itself (:mod:`app.gunicorn_worker`), never raised."""
    status, code, retryable = 429, "too_many_connections", True


# --- 5xx: our neighbours and ourselves -----------------------------------------------------------

class RenderFailed(ApiError):
    """A render process died (only the render it ran fails; its process is replaced), or the renderer
    failed on input it accepted."""
    status, code = 500, "render_failed"


class UpstreamError(ApiError):
    """TorchServe or the storage answered, but wrongly (502): a restarting model worker or a storage
    hiccup, which a later attempt may not meet."""
    status, code = 502, "upstream_error"
    retryable = True


class ModelServerError(UpstreamError):
    """TorchServe answered an error, garbage, more than 8 MiB, or an answer cut off mid-body (after
    retries)."""
    status, code = 502, "model_server_error"


class StorageFailed(UpstreamError):
    """The storage failed (an upload, or reaching it) after retries."""
    status, code = 502, "storage_error"


class Unavailable(ApiError):
    """Busy or down for now (503): retry after ``retry_after`` seconds (the ``Retry-After`` header).

    Without an explicit ``retry_after`` the error handler sends DOODLEPOD_RETRY_AFTER_S.
    """
    status, code, retryable = 503, "unavailable", True

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message, headers=None if retry_after is None else retry_after_header(retry_after))


class ModelServerUnavailable(Unavailable):
    """TorchServe busy or slow after retries (down or without the model: only with
    `DOODLEPOD_FINDER_FALLBACK=false`, else the app's ink finder answers).

    ``down``: it is not there at all (refuses connections after retries, or has not loaded the model);
    unlike a busy or slow one, the app's own ink finder may answer in its place (DOODLEPOD_FINDER_FALLBACK)."""
    status, code = 503, "model_server_unavailable"

    def __init__(self, message: str, retry_after: float | None = None, *, down: bool = False) -> None:
        super().__init__(message, retry_after)
        self.down = down


class ModelsUnavailable(Unavailable):
    """The models are still being prepared or started (`make run` on a fresh machine builds the model
    stack in the background): answered at once, before TorchServe is called, with `Retry-After` (the estimate,
    at most 300 s); `/ping`'s `models` says how far. Only with `DOODLEPOD_FINDER_FALLBACK=false`: by default
    the app's own ink finder answers the photo meanwhile (`warnings`: `found_by_ink_finder_in_app`). A drawing
    sent with its joints needs no model and is animated meanwhile; a photo is refused before it takes a render
    slot or is decoded."""
    status, code = 503, "models_unavailable"


class VideoReadTimeout(Unavailable):
    """A job's video: ffmpeg did not describe it in time (its header within 20 s, or its stream within 10 s
    of decoding): a busy machine, not a broken file. The worker retries the job."""
    status, code = 503, "video_read_timeout"


class Overloaded(Unavailable):
    """All render slots busy and the waiting room full, or no slot expected free within
    `DOODLEPOD_ADMISSION_WAIT_S` (answered at once), or a background request whose slot a render took. Its
    `Retry-After` is measured from recent render times unless `DOODLEPOD_RETRY_AFTER_S` fixes it."""
    status, code = 503, "overloaded"

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message, retry_after)


class InsufficientStorage(Unavailable):
    """Free disk below `DOODLEPOD_MIN_FREE_DISK_MB`: work is refused before it starts."""
    status, code = 503, "low_disk_space"


class CallbackDnsBusy(Unavailable):
    """Every thread that looks `callback_url` names up (`DOODLEPOD_WEBHOOK_DNS_THREADS`) is waiting on a
    slow name server: refused at once rather than queued until its lookup's bound runs out."""
    status, code = 503, "callback_dns_busy"


class StorageFull(Unavailable):
    """The app's stored files and its queued jobs' storage reservations reached `DOODLEPOD_STORAGE_BUDGET_MB`,
    or the work (an async job's price, an uploaded video) would pass it; the expiry sweep frees room."""
    status, code = 503, "storage_full"


class DeadlineExceeded(ApiError):
    """The request ran past its deadline (`DOODLEPOD_REQUEST_DEADLINE_S` or `X-Deadline-Seconds`; the
    message names the stage), including a TorchServe answer that trickles in: its whole exchange, body
    included, is bounded by the time left."""
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
    """A multipart form with more parts than the server parses (1000, werkzeug's `max_form_parts`)."""
    status, code = 413, "too_many_fields"
