"""HTTP endpoints of scenes: POST/GET/PATCH/DELETE /scenes, POST /scenes/{id}/animations.

The steps are in :mod:`app.scenes.resource`; the request shapes are :mod:`app.intake.models`'
``SceneForm``, ``SceneEdit`` and ``SceneRenderRequest``; this module reads requests and writes answers.
Answers carrying a document have ``ETag: "<version>"``; PATCH and POST .../animations honour ``If-Match``.
"""
from __future__ import annotations

import logging
from contextlib import nullcontext
from functools import partial
from typing import Any

from flask import Blueprint, Response, jsonify, request

from ..errors import ApiError
from ..intake.models import SceneEdit, SceneForm, SceneRenderRequest
from ..intake.read import read, takes
from ..motions.library import pick
from ..orders import SceneOrder
from ..render.pipeline import warnings_of
from ..scenes.resource import SceneEdit as Change
from ..services import services
from .api import base_url, read_body, render_slot, request_deadline, request_priority
from .characters import TINY_MODELS
from .jobs import admit_work, idempotent, meter_storage, submit, wants_async
from .models_ready import check_models_ready

log = logging.getLogger("doodlepod.http")

bp = Blueprint("scenes", __name__)


def _answer(record, status: int = 200, extra: dict[str, Any] | None = None) -> Response:
    base = base_url()
    storage = services().storage
    body = services().scenes.public(record, request_deadline(), lambda key: storage.url(key, base))
    response = jsonify({**body, **(extra or {})})
    response.status_code = status
    response.headers["ETag"] = f'"{record.version}"'
    # no-store, not no-cache: a page the browser's Back brings back reads its fetches from the cache without
    # asking (Chromium's back/forward loads), so a scene whose character was fixed meanwhile showed its old box
    response.headers["Cache-Control"] = "no-store"
    return response


def _known(names: list[str]) -> None:
    """Every motion name is in the library (400 unknown_motion otherwise)."""
    pick(services().motions, names)


def _picture(background: dict[str, Any] | None, deadline) -> bytes | None:
    """An uploaded background picture, decoded and downsized like a photo (PNG); None without one."""
    if background is None or "picture" not in background:
        return None
    return services().pipeline.decode(background.pop("picture"), deadline, {}).png


@bp.post("/scenes")
@takes(SceneForm)
def create_scene():
    """The photo (multipart ``image``) and optionally the characters found on it, or (JSON) characters
    that exist; ``motions``, ``background`` (:class:`SceneForm`)."""
    deadline = request_deadline()
    admit_work()
    read_body(deadline)
    return idempotent(lambda: _create_scene(read(SceneForm), deadline))


def _create_scene(fields: SceneForm, deadline) -> Response:
    svc = services()
    _known(fields.motions + [c["motion"] for c in fields.characters or [] if "motion" in c])
    motions = fields.motions or None
    background = fields.background or {"kind": "page"}
    if fields.image is None:
        with render_slot() if "picture" in background else nullcontext():
            picture = _picture(background, deadline)
        record = svc.scenes.from_characters(fields.characters, motions, background, picture, deadline)
        response = _answer(record, 201)
    else:
        by_models = fields.characters is None           # the detector and the pose model find them
        check_models_ready(by_models)
        found: list[str] = []                            # the ink finders that did, where no trained models
        try:
            with render_slot():
                timings: dict[str, float] = {}
                picture = _picture(background, deadline)
                record, skipped = svc.scenes.from_photo(fields.image, fields.characters, motions, background,
                                                        picture, deadline, timings, found)
        except ApiError as exc:
            if by_models and svc.torchserve.runs_tiny_models:
                exc.details["warnings"] = [TINY_MODELS]
            raise
        extra: dict[str, Any] = {"skipped": skipped}
        if by_models and svc.torchserve.runs_tiny_models:   # what they found is noise: say so
            extra["warnings"] = [TINY_MODELS]
        elif warnings_of(found):                            # the ink finder's: to be checked
            extra["warnings"] = warnings_of(found)
        response = _answer(record, 201, extra)
    response.headers["Location"] = f"/scenes/{record.id}"
    return response


@bp.get("/scenes/<sid>")
def get_scene(sid: str):
    record, _ = services().scenes.load(sid, request_deadline())
    return _answer(record)


@bp.patch("/scenes/<sid>")
@takes(SceneEdit)
def edit_scene(sid: str):
    """Move, drop or add characters, change motions or the background (:class:`SceneEdit`)."""
    deadline = request_deadline()
    admit_work()
    read_body(deadline)
    fields = read(SceneEdit)
    _known([c["motion"] for c in (fields.characters or []) + (fields.add or []) if "motion" in c]
           + ([fields.motion] if fields.motion else []))
    change = Change(characters=fields.characters, add=fields.add, motion=fields.motion,
                    background=fields.background)
    if fields.background is not None and "picture" in fields.background:
        with render_slot():
            change.background_png = _picture(change.background, deadline)
    library = services().motions
    cutting = any("bbox" in item for item in fields.add or [])   # new characters cut from the page: render work
    with render_slot() if cutting else nullcontext():
        record = services().scenes.edit(sid, change, request.headers.get("If-Match"), lambda m: m in library,
                                        deadline)
    return _answer(record)


@bp.delete("/scenes/<sid>")
def delete_scene(sid: str):
    meter_storage(check=False)  # what the delete frees goes back to the client's storage share
    services().scenes.delete(sid, request_deadline())
    return Response(status=204)


@bp.post("/scenes/<sid>/animations")
@takes(SceneRenderRequest)
def animate_scene(sid: str):
    """``format``, ``size`` (the canvas's longer side), ``max_frames`` (:class:`SceneRenderRequest`). With
    ``Prefer: respond-async``: 202 and a job, optional ``callback_url``."""
    deadline = request_deadline()
    admit_work()
    read_body(deadline)
    svc = services()
    if wants_async():
        fields = read(SceneRenderRequest, respond_async=True)
        order = _order(sid, fields)
        record, _ = svc.scenes.load(sid, deadline)         # 404 now, not a failed job later
        svc.scenes.plan(record, svc.motions, order)        # the work bound: 422 now
        return submit(order, None, fields.callback_url)
    fields = read(SceneRenderRequest)
    return idempotent(lambda: _animate_scene(_order(sid, fields), deadline))


def _order(sid: str, fields: SceneRenderRequest) -> SceneOrder:
    """The work order of the request's ``fields``."""
    return SceneOrder.of(fields, scene=sid, if_match=request.headers.get("If-Match"), base_url=base_url())


def _animate_scene(order: SceneOrder, deadline) -> Response:
    timings: dict[str, float] = {}
    record, out = services().scenes.render(order, services().motions, deadline, timings,
                                           partial(render_slot, request_priority()))
    response = jsonify(id=record.id, version=record.version, format=order.format, size=order.size,
                       animation=out["url"], width=out["width"], height=out["height"], cached=out["cached"],
                       timings_ms=timings)
    response.headers["ETag"] = f'"{record.version}"'
    return response
