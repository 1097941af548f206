"""GET /motions: the motion library (built-ins plus the operator's) by category, each motion with
the URL of its preview on the reference character, and the default selection."""
from __future__ import annotations

from flask import Blueprint, jsonify

from ..render.motions import categories
from ..services import services
from .api import base_url

bp = Blueprint("motions", __name__)


@bp.get("/motions")
def list_motions():
    svc = services()
    base = base_url()
    motions = [{**m.as_json(), "preview": f"{base}/motions/{m.name}/preview.gif"} for m in svc.motions.values()]
    return jsonify(default=list(svc.settings.default_motions), categories=categories(svc.motions), motions=motions)
