"""GET /motions/<name>/preview.gif: a library motion played by the reference character (public, as
an ``<img>`` cannot send a token; it only ever shows the library's own motions on the library's own
character). The first call makes the preview (:mod:`app.motions.previews`: one small render, one at
a time per worker, bounded by the request's deadline), every call redirects to the stored file."""
from __future__ import annotations

from flask import Blueprint, redirect

from ..errors import NotFound
from ..services import services
from .api import base_url, request_deadline

bp = Blueprint("motion_previews", __name__)


@bp.get("/motions/<name>/preview.gif")
def motion_preview(name: str):
    svc = services()
    motion = svc.motions.get(name)
    if motion is None or svc.previews is None:
        raise NotFound(f"no motion {name[:64]!r} in the library (GET /motions lists them)")
    url = svc.previews.ensure(motion, request_deadline(), base_url())
    response = redirect(url, 302)
    response.headers["Cache-Control"] = "public, max-age=3600"
    return response
