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

from ..characters.resource import Edit, check_version
from ..errors import ApiError
from ..intake.models import CharacterEdit, CharacterForm, RenderRequest
from ..intake.read import read, takes
from ..orders import CharacterOrder
from ..render.pipeline import warnings_of
from ..services import services
from .animate import check_image_header, motion_list, uploaded_clip
from .api import base_url, read_body, render_slot, request_deadline, request_priority
from .jobs import admit_work, idempotent, meter_storage, submit, wants_async
from .models_ready import check_models_ready

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
@takes(CharacterForm)
def create_character():
    """The drawing (multipart ``image``, or the bare image), optional ``joints`` and ``bbox`` (image pixels)."""
    deadline = request_deadline()
    admit_work()  # the client's rate limit: every character stores a few MB
    read_body(deadline)  # the whole body, and its fields checked, before a render slot
    return idempotent(lambda: _create_character(read(CharacterForm), deadline))


#: Said in a character's answer (``warnings``), or in the error of one the models missed, while the model
#: server runs tiny random-initialised models (its answers name their weights).
TINY_MODELS = {"code": "tiny_models",
               "message": "the model server runs tiny random-initialised models (built for tests, never trained): "
                          "the box, mask and joints they find are meaningless; place the box and joints by hand"}


def _create_character(fields: CharacterForm, deadline) -> Response:
    check_image_header(fields.image)  # type, size: before a render slot is taken for it
    check_models_ready(fields.joints is None)
    models = services().torchserve
    found: list[str] = []  # the finders that placed the box or joints, when not trained models
    try:
        with render_slot():
            timings: dict[str, float] = {}
            record = services().characters.create(fields.image, fields.joints, fields.bbox, deadline, timings,
                                                  found=found)
    except ApiError as exc:
        if models.runs_tiny_models and fields.joints is None and not found:
            exc.details["warnings"] = [TINY_MODELS]
        raise
    # the models placed something of it: say what they are
    tiny = models.runs_tiny_models and fields.joints is None and not found
    warnings = [TINY_MODELS] if tiny else warnings_of(found)
    response = _answer(record, 201, timings, {"warnings": warnings} if warnings else None)
    response.headers["Location"] = f"/characters/{record.id}"
    return response


@bp.get("/characters/<cid>")
def get_character(cid: str):
    record, _ = services().characters.load(cid, request_deadline())
    if request.if_none_match.contains_weak(str(record.version)):
        response = Response(status=304)
        _tag(response, record.version, None)
        return response
    return _answer(record)


@bp.patch("/characters/<cid>")
@takes(CharacterEdit)
def edit_character(cid: str):
    """JSON ``{"bbox"?, "joints"?}``, or multipart with a ``mask`` PNG (and optionally ``joints``)."""
    deadline = request_deadline()
    admit_work()  # an edit stores a new version's files
    read_body(deadline)
    fields = read(CharacterEdit)
    found: list[str] = []  # a new box without joints: the finders that fitted its skeleton
    with render_slot():
        timings: dict[str, float] = {}
        change = Edit(bbox=fields.bbox, joints=fields.joints, mask=fields.mask)
        record = services().characters.edit(cid, change, request.headers.get("If-Match"), deadline, timings,
                                            found=found)
    warnings = warnings_of(found)
    return _answer(record, 200, timings, {"warnings": warnings} if warnings else None)


@bp.delete("/characters/<cid>")
def delete_character(cid: str):
    meter_storage(check=False)  # what the delete frees goes back to the client's storage share
    services().characters.delete(cid, request_deadline())
    return Response(status=204)


def _order(cid: str, fields: RenderRequest, motions: list) -> CharacterOrder:
    """The work order of the request's ``fields``, its motions resolved (:func:`motion_list`)."""
    return CharacterOrder.of(fields, character=cid, motions=[m.name for m in motions],
                             if_match=request.headers.get("If-Match"), base_url=base_url())


def _animate_character_async(cid: str, fields: RenderRequest, deadline) -> Response:
    """Check what can be checked now (the character exists, If-Match, motions), then queue the render."""
    motions = motion_list(fields.motions)
    order = _order(cid, fields, motions)
    services().pipeline.check_output(order.format, order.size, order.max_frames, motions)  # 422 now
    record, _ = services().characters.load(cid, deadline)      # 404 now, not a failed job later
    check_version(order.if_match, "character", cid, record.version)
    return submit(order, None, fields.callback_url)


@bp.post("/characters/<cid>/animations")
@takes(RenderRequest)
def animate_character(cid: str):
    """What to render (:class:`RenderRequest`, JSON or a form); a form may add the client's own clip
    (``bvh``), answered under ``upload``. With ``Prefer: respond-async``: 202 and a job
    (app/http/jobs.py), optional ``callback_url``; no ``bvh`` clip."""
    deadline = request_deadline()
    admit_work()  # renders are stored (the render cache)
    read_body(deadline)
    if wants_async():
        return _animate_character_async(cid, read(RenderRequest, respond_async=True), deadline)
    return idempotent(lambda: _animate_character_now(cid, read(RenderRequest), deadline))


def _animate_character_now(cid: str, fields: RenderRequest, deadline) -> Response:
    """The synchronous render (once per Idempotency-Key: a repeat gets the first answer)."""
    clip = uploaded_clip(fields, deadline)  # the client's own BVH clip (file or text field), if any
    chosen: list = []
    try:
        # own=deadline: names of the client's motions made from videos resolve too (copied for this request)
        chosen = motion_list(fields.motions, defaults=clip is None, own=deadline)
        order = _order(cid, fields, chosen)
        chosen += [clip] if clip else []
        services().pipeline.check_output(order.format, order.size, order.max_frames, chosen)  # before any work
        timings: dict[str, float] = {}
        record, urls, hits = services().characters.render(order, chosen, deadline, timings,
                                                          partial(render_slot, request_priority()))
    finally:
        for motion in chosen or ([clip] if clip else []):
            if hasattr(motion, "remove"):  # an uploaded clip or a client's own motion, copied for this request
                motion.remove()
    log.info("character %s v%d animations %s: %d cached, %d rendered", cid, record.version,
             ",".join(urls), len(hits), len(urls) - len(hits))
    response = jsonify(id=record.id, version=record.version, format=fields.format, size=fields.size,
                       animations=urls, cached=hits)
    _tag(response, record.version, timings)
    return response

