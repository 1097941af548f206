"""GET /motions: the motion library (built-ins plus the operator's) by category, each motion with
the URL of its preview on the reference character, and the default selection.

POST /motions: a motion from a video of a person (multipart field ``video``: MP4, MOV or WebM),
made by a render worker: 202 with ``Location: /jobs/{id}`` at once; the job reports ``progress``
(frames read by the pose model) and ends with ``motion`` (its ``name``, frames, fps, ``expires``),
which this client then names in ``motions`` like a library motion (app/motions/own.py).
A video with no person ends the job ``failed`` with 422 ``no_person``.
"""
from __future__ import annotations

from flask import Blueprint, jsonify, request

from ..intake import body
from ..intake.models import VideoForm
from ..intake.read import read, takes
from ..motions.library import categories
from ..services import services
from .api import base_url, request_deadline
from .jobs import admit_work, client, submit

bp = Blueprint("motions", __name__)

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
    body.buffer_body(request.environ, limit + _FORM_OVERHEAD, min(svc.settings.body_timeout_s, deadline.remaining()))
    fields = read(VideoForm, respond_async=True)
    # the part of the video to use (the job checks a start past its end): absent, its first seconds
    window = {k: v for k, v in (("start_s", fields.start), ("end_s", fields.end)) if v is not None}
    return submit("motion_from_video", {"client": client(), "base_url": base_url(), **window}, fields.video,
                  fields.callback_url)
