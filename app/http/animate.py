"""POST /animate (multipart: the photo and its options) and POST / (the old mobile client's JSON).

Both read the whole body first (under DOODLEPOD_BODY_TIMEOUT_S and the size limit) and check every
field (sizes, JSON depth, joints), then take a render slot (503 at once when the pod is full) and
run :class:`app.pipeline.Pipeline` under the request's deadline, so a slow upload or a bad field
never holds a slot; an
``Idempotency-Key`` makes a retry answer the first response (app/http/jobs.py). Every request
first takes a token from the client's rate limit. With ``Prefer: respond-async`` POST /animate
checks the fields the same way, then queues the work for a render worker and answers 202 at once.
"""
from __future__ import annotations

import base64
import binascii
import io
import json
import logging
from pathlib import Path
from typing import Any

from flask import Blueprint, g, jsonify, request

from animator import FORMATS

from ..deadline import Deadline
from ..errors import BadRequest, TooLarge, UnsupportedType
from ..intake.body import parse_json
from ..intake.bvh import read_bvh_upload
from ..intake.fields import ABSENT, json_field, motion_list, parse_bbox, parse_joints, parse_size
from ..jobs.webhooks import validate_callback_url
from ..render.pipeline import AnimateRequest, Result
from ..services import services
from .api import base_url, read_body, render_slot, request_deadline
from .jobs import admit_work, idempotent, submit, wants_async

log = logging.getLogger("doodlepod.http")

bp = Blueprint("animate", __name__)


@bp.post("/animate")
def animate():
    """Multipart form: ``image`` (file), optional ``motions``, ``format``, ``joints``, ``bbox``, and a
    client's own clip: ``bvh`` (file) with optional ``start_frame``, ``end_frame``. With
    ``Prefer: respond-async`` also ``callback_url`` (and no ``bvh``: clips are synchronous only)."""
    deadline = request_deadline()
    admit_work()  # the client's rate limit, before its body is read
    if wants_async():
        read_body(deadline)
        return _animate_async()
    read_body(deadline)  # before the Idempotency-Key fingerprint reads it, and before any slot
    return idempotent(lambda: _animate(deadline))


def _animate_async():
    """Check the request as the synchronous path would, then queue it (202 + Location)."""
    image = read_drawing()
    fmt = _format()
    side = _size(fmt)
    if "bvh" in request.files or request.form.get("bvh"):
        raise BadRequest("a 'bvh' clip cannot be sent with 'Prefer: respond-async'; send it synchronously")
    motions = motion_list(request.form.getlist("motions"))
    joints = json_field(request.form.get("joints"), "joints")
    joints = None if joints is ABSENT else joints
    if joints is not None:
        parse_joints(joints)  # 400 now, not a failed job later
    _check_image_header(image)
    payload = {"motions": [m.name for m in motions], "format": fmt, "size": side, "joints": joints,
               "bbox": parse_bbox(request.form.get("bbox")), "base_url": base_url()}
    callback = validate_callback_url(request.form.get("callback_url"), services().settings)
    return submit("animate", payload, image, callback)


def _check_image_header(data: bytes) -> None:
    """What an async request can be refused for before it is queued (type, pixel count: the header);
    the decode itself happens in the worker."""
    from ..images import open_checked

    open_checked(data, services().settings.max_image_pixels).close()


def read_drawing() -> bytes:
    """The uploaded drawing: the multipart field ``image``, or the raw body with an ``image/*`` type
    (POST /animate and POST /characters take it the same way)."""
    upload = request.files.get("image")
    if upload is None:
        if request.mimetype.startswith("image/"):
            image, declared = request.get_data(), request.mimetype
        else:
            raise BadRequest("send the drawing as the multipart form field 'image'")
    else:
        image, declared = upload.read(), upload.mimetype
    if declared and not (declared.startswith("image/") or declared in ("application/octet-stream", "")):
        _reject_if_not_image(image, declared)
    return image


def _animate(deadline: Deadline):
    image = read_drawing()
    fmt = _format()
    side = _size(fmt)
    joints, bbox = parse_joints(request.form.get("joints")), parse_bbox(request.form.get("bbox"))
    clip = uploaded_clip(deadline)
    named: list = []
    try:
        named = motion_list(request.form.getlist("motions"), defaults=clip is None, own=deadline)
        with render_slot():  # only now: the body is in and every field checked
            result = _run({"image": image, "motions": named + ([clip] if clip else []), "format": fmt,
                           "size": side, "joints": joints, "bbox": bbox, "deadline": deadline})
    finally:
        for motion in named + ([clip] if clip else []):
            if hasattr(motion, "remove"):  # an uploaded clip or a client's own motion, copied for this request
                motion.remove()
    return jsonify(id=result.id, animations=result.animations, character=result.character,
                   timings_ms=result.timings_ms)


def _format() -> str:
    """The ``format`` field (default DOODLEPOD_DEFAULT_FORMAT); ``callback_url`` only with async."""
    fmt = (request.form.get("format") or services().settings.default_format).lower()
    if fmt not in FORMATS:
        raise BadRequest(f"format must be one of {', '.join(FORMATS)}")
    if request.form.get("callback_url") and not wants_async():
        raise BadRequest("callback_url needs the header 'Prefer: respond-async'")
    return fmt


def _size(fmt: str) -> int:
    """The ``size`` field: the animations' side in pixels within DOODLEPOD_RENDER_SIZE_MIN..MAX
    (400 beyond, never ignored), the server's default when absent; even for MP4."""
    side = parse_size(request.form.get("size"), services().settings)
    if fmt == "mp4" and side % 2:
        raise BadRequest(f"MP4 needs an even size, got {side}")
    return side


@bp.post("/")
def legacy_animate():
    """The old mobile client: JSON ``{"file": <base64 image>}`` -> flat ``{motion: url}``."""
    deadline = request_deadline()
    admit_work()
    raw = read_body(deadline)
    return idempotent(lambda: _legacy_animate(deadline, raw))


def _legacy_animate(deadline: Deadline, raw: bytes):
    try:
        body = parse_json(raw, "body")
    except BadRequest:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("file"), str):
        raise BadRequest('expected JSON {"file": "<base64 image>"}')
    text = body["file"]
    if text.startswith("data:") and "," in text:  # tolerate data: URLs
        text = text.split(",", 1)[1]
    try:
        image = base64.b64decode(text, validate=False)
    except (binascii.Error, ValueError):
        raise BadRequest("'file' is not valid base64") from None
    settings = services().settings
    if len(image) > settings.max_upload_mb * 2**20:
        raise TooLarge(f"image over the limit of {settings.max_upload_mb:g} MiB")
    job = {"image": image, "motions": motion_list(None), "format": settings.default_format,
           "joints": parse_joints(body.get("joints")), "bbox": parse_bbox(body.get("bbox")), "deadline": deadline}
    with render_slot():
        result = _run(job)
    return jsonify(result.animations)


def _run(job_kwargs: dict[str, Any]) -> Result:
    """Run the pipeline (the caller holds a render slot)."""
    job = AnimateRequest(deadline=job_kwargs.pop("deadline"), base_url=base_url(), request_id=g.request_id,
                         **job_kwargs)
    log.info("animate motions=%s format=%s bytes=%d client_joints=%s deadline=%.1fs",
             ",".join(m.name for m in job.motions), job.format, len(job.image), job.joints is not None,
             job.deadline.remaining())
    result = services().pipeline.run(job)
    log.info("timings_ms %s", json.dumps(result.timings_ms))
    return result


def uploaded_clip(deadline: Deadline | None = None):
    """The request's own BVH clip (form field ``bvh``, optional ``start_frame``/``end_frame``),
    checked in a render process and saved for them (:mod:`app.intake.bvh`), or None. The caller
    removes it when the request ends."""
    svc = services()
    limit = deadline or request_deadline()

    def in_pool(fn, *args):
        return svc.pool.wait(svc.pool.submit(fn, *args), limit, "check:bvh")

    return read_bvh_upload(request.files, request.form, svc.settings, Path(svc.pipeline.scratch_dir) / "uploads",
                           run=in_pool)


def _reject_if_not_image(data: bytes, declared: str) -> None:
    """A part declared as, say, text/plain: accept it only if it really is an image we read."""
    from PIL import Image

    from ..images import ACCEPTED_FORMATS, ACCEPTED_TEXT

    try:
        with Image.open(io.BytesIO(data)) as im:
            if im.format in ACCEPTED_FORMATS:
                return
    except Exception:
        pass
    raise UnsupportedType(f"uploads of type {declared} are not supported; send {ACCEPTED_TEXT}")
