"""HTTP endpoints of characters: POST/GET/PATCH/DELETE /characters, POST /characters/{id}/animations.

The steps themselves are in :mod:`app.characters.resource`; this module reads requests and writes answers.
Every answer carrying a document has ``ETag: "<version>"``; PATCH and POST .../animations honour
``If-Match`` (412 ``version_mismatch`` when stale), GET honours ``If-None-Match`` (304).
"""
from __future__ import annotations

import logging
from functools import partial
from typing import Any

from flask import Blueprint, Response, jsonify, request

from animator import FORMATS

from ..characters.resource import Edit, version_matches
from ..errors import ApiError, BadMask, BadRequest, VersionMismatch
from ..intake.fields import motion_list, parse_bbox, parse_joint_moves, parse_joints, parse_max_frames, parse_size
from ..jobs.webhooks import validate_callback_url
from ..services import services
from .animate import read_drawing, uploaded_clip
from .api import base_url, json_body, read_body, render_slot, request_deadline, request_priority
from .jobs import admit_work, idempotent, submit, wants_async

log = logging.getLogger("doodlepod.http")

bp = Blueprint("characters", __name__)


def _answer(record, status: int = 200, timings: dict[str, float] | None = None,
            extra: dict[str, Any] | None = None) -> Response:
    base = base_url()
    storage = services().storage
    response = jsonify({**record.public(lambda key: storage.url(key, base)), **(extra or {})})
    response.status_code = status
    _tag(response, record.version, timings)
    return response


def _tag(response: Response, version: int, timings: dict[str, float] | None) -> None:
    response.headers["ETag"] = f'"{version}"'
    response.headers["Cache-Control"] = "no-cache"
    if timings:
        response.headers["Server-Timing"] = ", ".join(
            f"{name.replace(':', '.')};dur={ms:.1f}" for name, ms in timings.items())


@bp.post("/characters")
def create_character():
    """Multipart ``image`` (or a raw image body), optional ``joints`` and ``bbox`` (image pixels)."""
    deadline = request_deadline()
    admit_work()  # the client's rate limit: every character stores a few MB
    read_body(deadline)  # the whole body, and its fields checked, before a render slot
    return idempotent(lambda: _create_character(deadline))


#: Said in a character's answer (``warnings``), or in the error of one the models missed, while the model
#: server runs tiny random-initialised models (its answers name their weights).
TINY_MODELS = {"code": "tiny_models",
               "message": "the model server runs tiny random-initialised models (built for tests, never trained): "
                          "the box, mask and joints they find are meaningless; place the box and joints by hand"}


def _create_character(deadline) -> Response:
    image = read_drawing()
    form = request.form if request.files or request.form else {}
    joints = parse_joints(form.get("joints")) if form else None
    bbox = parse_bbox(form.get("bbox")) if form else None
    models = services().torchserve
    try:
        with render_slot():
            timings: dict[str, float] = {}
            record = services().characters.create(image, joints, bbox, deadline, timings)
    except ApiError as exc:
        if models.runs_tiny_models and joints is None:
            exc.details["warnings"] = [TINY_MODELS]
        raise
    # the models placed something of it: say what they are
    tiny = models.runs_tiny_models and joints is None
    response = _answer(record, 201, timings, {"warnings": [TINY_MODELS]} if tiny else None)
    response.headers["Location"] = f"/characters/{record.id}"
    return response


@bp.get("/characters/<cid>")
def get_character(cid: str):
    record, _ = services().characters.load(cid, request_deadline())
    if _none_match(request.headers.get("If-None-Match"), record.version):
        response = Response(status=304)
        _tag(response, record.version, None)
        return response
    return _answer(record)


def _none_match(header: str | None, version: int) -> bool:
    return bool(header) and version_matches(header, version)


@bp.patch("/characters/<cid>")
def edit_character(cid: str):
    """JSON ``{"bbox"?, "joints"?}``, or multipart with a ``mask`` PNG (and optionally ``joints``)."""
    deadline = request_deadline()
    admit_work()  # an edit stores a new version's files
    read_body(deadline)
    change = _read_edit()
    with render_slot():
        timings: dict[str, float] = {}
        record = services().characters.edit(cid, change, request.headers.get("If-Match"), deadline, timings)
    return _answer(record, 200, timings)


_EDIT_FIELDS = {"bbox", "joints"}


def _read_edit() -> Edit:
    if request.is_json:  # application/json, or any +json type (e.g. merge-patch+json)
        body = json_body()
        if not isinstance(body, dict):
            raise BadRequest('expected a JSON object {"bbox"?, "joints"?}')
        fields: dict[str, Any] = body
        mask = None
    elif request.mimetype in ("multipart/form-data", "application/x-www-form-urlencoded"):
        fields = dict(request.form)
        upload = request.files.get("mask")
        mask = upload.read() if upload is not None else None
        if upload is not None and not mask:
            raise BadMask("the mask file is empty")
        extra_files = set(request.files) - {"mask"}
        if extra_files:
            raise BadRequest(f"unknown file field(s): {', '.join(sorted(extra_files))}; send 'mask'")
    else:
        raise BadRequest("send JSON {\"bbox\"?, \"joints\"?} or a multipart form with a 'mask' PNG")
    unknown = set(fields) - _EDIT_FIELDS
    if unknown:
        names = ", ".join(str(n)[:40] for n in sorted(unknown, key=str)[:5])
        raise BadRequest(f"unknown field(s): {names}; a PATCH takes bbox, joints or a mask file")
    change = Edit(bbox=parse_bbox(fields.get("bbox")), joints=parse_joint_moves(fields.get("joints")), mask=mask)
    if change.bbox is None and change.joints is None and change.mask is None:
        raise BadRequest("nothing to change: send bbox, joints or a mask")
    if change.bbox is not None and change.mask is not None:
        raise BadRequest("a new bbox makes a new texture grid: send the bbox first, then a mask of the new "
                         "texture's size")
    return change


@bp.delete("/characters/<cid>")
def delete_character(cid: str):
    services().characters.delete(cid, request_deadline())
    return Response(status=204)


def _animate_character_async(cid: str, motions, fmt: str, side: int, frames: int | None, callback: Any,
                             deadline) -> Response:
    """Check what can be checked now (the character exists, If-Match, motions), then queue the render."""
    if request.files or request.form.get("bvh"):
        raise BadRequest("a 'bvh' clip cannot be sent with 'Prefer: respond-async'; send it synchronously")
    chosen = motion_list(motions)
    record, _ = services().characters.load(cid, deadline)      # 404 now, not a failed job later
    if_match = request.headers.get("If-Match")
    if if_match is not None and not version_matches(if_match, record.version):
        raise VersionMismatch(f"character {cid} is at version {record.version}, not {if_match.strip()}")
    payload = {"character": cid, "motions": [m.name for m in chosen], "format": fmt, "size": side,
               "max_frames": frames, "if_match": if_match, "base_url": base_url()}
    url = validate_callback_url(callback if isinstance(callback, str) else None, services().settings)
    return submit("character_animations", payload, None, url)


@bp.post("/characters/<cid>/animations")
def animate_character(cid: str):
    """``motions`` (names, repeated or comma-separated), ``format``, ``size``, ``max_frames`` (optional:
    the whole clip in at most that many frames, for quick previews): form fields or JSON; a
    multipart request may add the client's own clip (file ``bvh``, optional ``start_frame``,
    ``end_frame``), answered under ``upload``. With ``Prefer: respond-async``: 202 and a job
    (app/http/jobs.py), optional ``callback_url``; no ``bvh`` clip."""
    deadline = request_deadline()
    admit_work()  # renders are stored (the render cache)
    read_body(deadline)
    settings = services().settings
    if request.is_json:  # application/json, or any +json type (e.g. merge-patch+json)
        body = json_body()
        if not isinstance(body, dict):
            raise BadRequest('expected a JSON object {"motions"?, "format"?, "size"?, "max_frames"?}')
        raw = body.get("motions")
        motions = [raw] if isinstance(raw, str) else raw
        if motions is not None and not (isinstance(motions, list) and all(isinstance(m, str) for m in motions)):
            raise BadRequest("'motions' must be a list of motion names (GET /motions lists them)")
        fmt, size, max_frames = body.get("format"), body.get("size"), body.get("max_frames")
        callback = body.get("callback_url")
    else:
        motions, fmt, size = request.form.getlist("motions"), request.form.get("format"), request.form.get("size")
        max_frames = request.form.get("max_frames")
        callback = request.form.get("callback_url")
        if request.files:
            unknown = set(request.files) - {"bvh"}
            if unknown:
                raise BadRequest(f"unknown file field(s): {', '.join(sorted(unknown))}; send 'bvh'")
    fmt = str(fmt or settings.default_format).lower()
    if fmt not in FORMATS:
        raise BadRequest(f"format must be one of {', '.join(FORMATS)}")
    side = parse_size(size, settings)
    frames = parse_max_frames(max_frames, settings)
    if fmt == "mp4" and side % 2:
        raise BadRequest(f"MP4 needs an even size, got {side}")
    if wants_async():
        return _animate_character_async(cid, motions, fmt, side, frames, callback, deadline)
    if callback:
        raise BadRequest("callback_url needs the header 'Prefer: respond-async'")
    clip = uploaded_clip()  # the client's own BVH clip (file or text field), if any
    chosen: list = []
    try:
        # own=deadline: names of the client's motions made from videos resolve too (copied for this request)
        chosen = motion_list(motions, defaults=clip is None, own=deadline) + ([clip] if clip else [])
        timings: dict[str, float] = {}
        record, urls, hits = services().characters.render(cid, chosen, fmt, side, request.headers.get("If-Match"),
                                                          deadline, timings, base_url(),
                                                          partial(render_slot, request_priority()),
                                                          max_frames=frames)
    finally:
        for motion in chosen or ([clip] if clip else []):
            if hasattr(motion, "remove"):  # an uploaded clip or a client's own motion, copied for this request
                motion.remove()
    log.info("character %s v%d animations %s: %d cached, %d rendered", cid, record.version,
             ",".join(urls), len(hits), len(urls) - len(hits))
    response = jsonify(id=record.id, version=record.version, format=fmt, size=side, animations=urls,
                       cached=hits)
    _tag(response, record.version, timings)
    return response

