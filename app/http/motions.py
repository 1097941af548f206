"""GET /motions: the motion library (built-ins plus the operator's) by category, each motion with
the URL of its preview on the reference character, and the default selection.

POST /motions: a motion from a video of a person (multipart field ``video``: MP4, MOV or WebM),
made by a render worker: 202 with ``Location: /jobs/{id}`` at once; the job reports ``progress``
(frames read by the pose model) and ends with ``motion`` (its ``name``, frames, fps, ``expires``),
which this client then names in ``motions`` like a library motion (app/motions/own.py).
A video with no person ends the job ``failed`` with 422 ``no_person``.
"""
from __future__ import annotations

import math

from flask import Blueprint, jsonify, request

from ..errors import BadRequest
from ..intake import body
from ..intake.video import read_video_upload
from ..jobs.webhooks import validate_callback_url
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
def make_motion():
    """Queue the video for the pose model (always async: it takes seconds per second of video)."""
    svc = services()
    deadline = request_deadline()
    admit_work()
    limit = int(svc.settings.video_max_mb * 2**20)
    body.buffer_body(request.environ, limit + _FORM_OVERHEAD, min(svc.settings.body_timeout_s, deadline.remaining()))
    video = read_video_upload(request.files, limit)
    window = _window(request.form, svc.settings.video_max_seconds)
    callback = validate_callback_url(request.form.get("callback_url"), svc.settings)
    return submit("motion_from_video", {"client": client(), "base_url": base_url(), **window}, video, callback)


def _window(form, max_seconds: float) -> dict[str, float]:
    """The optional ``start`` and ``end`` fields (seconds of the video): ``{"start_s"?, "end_s"?}``.
    What needs the video's length (a start past its end) is checked by the job."""
    out: dict[str, float] = {}
    for field, raw in (("start", form.get("start")), ("end", form.get("end"))):
        if raw is None or not str(raw).strip():
            continue
        try:
            value = float(raw)
        except ValueError:
            raise BadRequest(f"'{field}' must be a number of seconds, got {str(raw)[:40]!r}") from None
        if not (math.isfinite(value) and value >= 0):
            raise BadRequest(f"'{field}' must be 0 or more seconds, got {str(raw)[:40]}")
        out[f"{field}_s"] = value
    start, end = out.get("start_s", 0.0), out.get("end_s")
    if end is not None and end <= start:
        raise BadRequest(f"'end' ({end:g} s) must come after 'start' ({start:g} s)")
    if end is not None and end - start > max_seconds + 1e-6:
        raise BadRequest(f"the window {start:g}-{end:g} s is {end - start:.2f} s long; at most {max_seconds:g} s "
                         "of a video are used (DOODLEPOD_VIDEO_MAX_SECONDS): choose a shorter window")
    return out
