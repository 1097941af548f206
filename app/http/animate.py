"""POST /animate (multipart: the photo and its options) and POST / (the old mobile client's JSON).

Both read the whole body first (under DOODLEPOD_BODY_TIMEOUT_S and the size limit) and check every
field (their models: :mod:`app.intake.models`), then take a render slot (503 at once when the pod is full) and
run :class:`app.pipeline.Pipeline` under the request's deadline, so a slow upload or a bad field
never holds a slot; an
``Idempotency-Key`` makes a retry answer the first response (app/http/jobs.py). Every request
first takes a token from the client's rate limit. With ``Prefer: respond-async`` POST /animate
checks the fields the same way, then queues the work for a render worker and answers 202 at once.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from flask import Blueprint, jsonify

from ..deadline import Deadline
from ..intake.bvh import check_upload
from ..intake.models import AnimateForm, LegacyRequest, RenderRequest
from ..intake.read import read, takes
from ..jobs.queue import REDIS_ERRORS
from ..motions.library import resolve
from ..orders import AnimateOrder
from ..render.pipeline import Result
from ..services import services
from .api import base_url, read_body, render_slot, request_deadline
from .jobs import admit_work, client, idempotent, submit, wants_async
from .models_ready import check_models_ready

log = logging.getLogger("doodlepod.http")

bp = Blueprint("animate", __name__)


@bp.post("/animate")
@takes(AnimateForm)
def animate():
    """The drawing (multipart ``image``, or the bare image) and its options (:class:`AnimateForm`).
    With ``Prefer: respond-async``: 202 and a job (app/http/jobs.py)."""
    deadline = request_deadline()
    admit_work()  # the client's rate limit, before its body is read
    read_body(deadline)  # before the fields, the Idempotency-Key fingerprint, and any slot
    if wants_async():
        return _animate_async(read(AnimateForm, respond_async=True))
    return idempotent(lambda: _animate(read(AnimateForm), deadline))


def _animate_async(fields: AnimateForm):
    """Check the request as the synchronous path would, then queue its order (202 + Location)."""
    motions = motion_list(fields.motions)
    order = _order(fields, motions)
    if not fields.every_character:  # a scene's canvas is its page's shape: priced once the page is read
        services().pipeline.check_output(order.format, order.size, None, motions)
    check_image_header(fields.image)
    return submit(order, fields.image, fields.callback_url)


def _order(fields: AnimateForm | LegacyRequest, motions: list, **given: Any) -> AnimateOrder:
    """The work order of the request's ``fields``, its motions resolved (:func:`motion_list`)."""
    return AnimateOrder.of(fields, motions=[m.name for m in motions], base_url=base_url(), **given)


def motion_list(names: list[str], defaults: bool = True, own: Deadline | None = None) -> list:
    """The motions the request names, resolved once (:func:`app.motions.library.resolve`): the library's;
    the default motions when it names none and ``defaults`` (False: it brings its own clip); with ``own``
    (a deadline; synchronous requests only) also the asking client's own motions, made from its videos and
    copied for this request (the caller calls their ``remove()`` when it ends)."""
    svc = services()
    return resolve(svc.motions, names, svc.settings.default_motions if defaults else (),
                   None if own is None else (lambda unknown: _own_motions(unknown, own)))


def _own_motions(names: list[str], deadline: Deadline) -> dict[str, Any]:
    svc = services()
    if svc.own_motions is None:
        return {}
    try:
        return svc.own_motions.find(client(), names, Path(svc.pipeline.scratch_dir) / "uploads", deadline)
    except REDIS_ERRORS as exc:  # the library still works without Redis; own motions are then unknown
        log.warning("own motions not looked up: Redis unavailable (%s)", type(exc).__name__)
        return {}


def check_image_header(data: bytes) -> None:
    """What an async request can be refused for before it is queued (type, pixel count: the header);
    the decode itself happens in the worker."""
    from ..images import open_checked

    open_checked(data, services().settings.max_image_pixels).close()


def _animate(fields: AnimateForm, deadline: Deadline):
    if fields.every_character:   # every character of the photo together (a scene, app/scenes/)
        order = _order(fields, motion_list(fields.motions))
        check_image_header(fields.image)
        check_models_ready(order.joints is None)
        with render_slot():
            timings: dict[str, float] = {}
            answer = services().scenes.animate_photo(order, fields.image, services().motions, deadline, timings)
        return jsonify(**answer, timings_ms=timings)
    clip = uploaded_clip(fields, deadline)
    named: list = []
    try:
        named = motion_list(fields.motions, defaults=clip is None, own=deadline)
        order = _order(fields, named)
        services().pipeline.check_output(order.format, order.size, None, named + ([clip] if clip else []))  # now
        check_image_header(fields.image)  # type, size: before a render slot is taken for it
        check_models_ready(order.joints is None)
        with render_slot():  # only now: the body is in and every field checked
            result = _run(order, fields.image, named + ([clip] if clip else []), deadline)
    finally:
        for motion in named + ([clip] if clip else []):
            if hasattr(motion, "remove"):  # an uploaded clip or a client's own motion, copied for this request
                motion.remove()
    extra = {"warnings": result.warnings} if result.warnings else {}
    return jsonify(id=result.id, animations=result.animations, character=result.character,
                   timings_ms=result.timings_ms, **extra)


@bp.post("/")
@takes(LegacyRequest)
def legacy_animate():
    """The old mobile client: JSON ``{"file": <base64 image>}`` -> flat ``{motion: url}``."""
    deadline = request_deadline()
    admit_work()
    read_body(deadline)
    return idempotent(lambda: _legacy_animate(read(LegacyRequest), deadline))


def _legacy_animate(fields: LegacyRequest, deadline: Deadline):
    motions = motion_list([])
    order = _order(fields, motions, format=services().settings.default_format)
    check_models_ready(order.joints is None)
    with render_slot():
        result = _run(order, fields.file, motions, deadline)
    return jsonify(result.animations)


def _run(order: AnimateOrder, image: bytes, motions: list, deadline: Deadline) -> Result:
    """Run the pipeline (the caller holds a render slot): ``motions`` are the order's, and a client's clip."""
    log.info("animate motions=%s format=%s bytes=%d client_joints=%s deadline=%.1fs",
             ",".join(m.name for m in motions), order.format, len(image), order.joints is not None,
             deadline.remaining())
    result = services().pipeline.run(order, image, motions, deadline)
    log.info("timings_ms %s", json.dumps(result.timings_ms))
    return result


def uploaded_clip(fields: AnimateForm | RenderRequest, deadline: Deadline):
    """The request's own BVH clip (``bvh``, ``start_frame``, ``end_frame``), checked in a render
    process and saved for this request (:mod:`app.intake.bvh`), or None. The caller removes it when
    the request ends."""
    if fields.bvh is None:
        return None
    svc = services()

    def in_pool(fn, *args):
        return svc.pool.wait(svc.pool.submit(fn, *args), deadline, "check:bvh")

    return check_upload(fields.bvh, fields.start_frame, fields.end_frame, svc.settings,
                        Path(svc.pipeline.scratch_dir) / "uploads", run=in_pool)
