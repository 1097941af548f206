"""GET /files/<key>: the animations of the local storage (public: the URLs the API answers)."""
from __future__ import annotations

from flask import Blueprint, send_file

from ..errors import NotFound
from ..services import services
from ..storage.backends import LocalStorage

bp = Blueprint("files", __name__)


@bp.get("/files/<path:key>")
def get_file(key: str):
    storage = services().storage
    if not isinstance(storage, LocalStorage):
        raise NotFound("files are served by S3 in this deployment")
    path = storage.path_of(key)
    if path is None:
        raise NotFound(f"no file {key}")
    return send_file(path, conditional=True, max_age=86400)
