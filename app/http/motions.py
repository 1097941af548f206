"""GET /motions: the motion library (built-ins plus the operator's) and the default selection."""
from __future__ import annotations

from flask import Blueprint, jsonify

from ..services import services

bp = Blueprint("motions", __name__)


@bp.get("/motions")
def list_motions():
    svc = services()
    return jsonify(default=list(svc.settings.default_motions), motions=[m.as_json() for m in svc.motions.values()])
