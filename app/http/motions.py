"""GET /motions: the motion library (built-ins plus the operator's) by category, each motion with
the URL of its preview on the reference character, and the default selection.

POST /motions: a motion from a video of a person (multipart field ``video``: MP4, MOV or WebM),
made by a render worker: 202 with ``Location: /jobs/{id}`` at once; the job reports ``progress``
(frames read by the pose model) and ends with ``motion`` (its ``name``, frames, fps, ``expires``),
which this client then names in ``motions`` like a library motion (app/motions/own.py).
A video with no person ends the job ``failed`` with 422 ``no_person``.
"""
from __future__ import annotations

import logging
import uuid

from flask import Blueprint, jsonify, request

from ..deadline import Deadline
from ..intake import body
from ..intake.models import VideoForm
from ..intake.read import read, takes
from ..jobs.price import stored_bytes
from ..motions.library import categories
from ..orders import VideoOrder
from ..services import services
from ..shares import freed
from .api import base_url, request_deadline
from .jobs import admit_work, check_pod_storage, client, submit

log = logging.getLogger("doodlepod.http")

bp = Blueprint("motions", __name__)

#: Where queued videos wait in the storage (never served under /files; swept on expiry if left behind).
QUEUED_VIDEOS = "queued-videos/"
#: Room for the multipart envelope and form fields around the video, bytes.
_FORM_OVERHEAD = 64 * 1024


@bp.get("/motions")
def list_motions():
    svc = services()
    base = base_url()
    motions = [{**m.as_json(), "preview": f"{base}/motions/{m.name}/preview.gif"} for m in svc.motions.values()]
    return jsonify(default=list(svc.settings.default_motions), categories=categories(svc.motions), motions=motions)


@bp.post("/motions")
@takes(VideoForm)
def make_motion():
    """Queue the video for the pose model (always async: it takes seconds per second of video)."""
    svc = services()
    deadline = request_deadline()
    admit_work()
    limit = int(svc.settings.video_max_mb * 2**20)
    # this route's body bound is DOODLEPOD_VIDEO_MAX_MB, not the app's DOODLEPOD_MAX_UPLOAD_MB
    request.max_content_length = limit + _FORM_OVERHEAD
    body.buffer_body(request.environ, limit + _FORM_OVERHEAD,
                     min(svc.settings.body_timeout_s, deadline.check("upload")))
    fields = read(VideoForm, respond_async=True)
    video = fields.video
    # The video waits in the storage (it is a file), the job names it: Redis holds no video bytes. It counts
    # in the client's storage share (this request's meter) until its job ends, and in the pod's budget.
    key = f"{QUEUED_VIDEOS}{uuid.uuid4().hex}.video"
    # the part of the video to use (the job checks a start past its end): absent, its first seconds
    order = VideoOrder.of(fields, client=client(), video_key=key, video_bytes=len(video), base_url=base_url())
    check_pod_storage(len(video) + stored_bytes(order, len(video), svc.settings))  # before it is stored
    svc.storage.put(key, video, "application/octet-stream", deadline)
    kept = False
    try:
        answer = submit(order, None, fields.callback_url, input_bytes=len(video))
        kept = answer.status_code == 202 and "Idempotent-Replayed" not in answer.headers
        return answer
    finally:
        if not kept:  # refused, or a repeat of a request whose job has its own copy
            try:
                svc.storage.delete(key, Deadline(10))
                freed(len(video))
            except Exception:  # noqa: BLE001 - the expiry sweep removes it; the answer stands
                log.warning("queued video %s not removed", key)
