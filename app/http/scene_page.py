"""GET /studio-scenes: the studio's scenes page (app/templates/scenes.html), a person's client of the
scenes API: a photo of a drawn scene in, every character moving on it out.

It lives at the top level, like /studio, so the page's relative API paths (``scenes``, ``jobs/...``)
resolve to the API wherever the app is mounted (the page's policy forbids a ``<base>``).
"""
from __future__ import annotations

from flask import Blueprint, Response

from .studio import serve_page

bp = Blueprint("scene_page", __name__)


@bp.get("/studio-scenes")
def page() -> Response:
    return serve_page("scenes.html")
