"""GET /files/<key>: the animations of the local storage (public: the URLs the API answers).

Never a character's or a scene's document (``characters/...``, ``character.json``, ``scenes/...``,
``scene.json``): those go through the API (GET /characters/{id}, GET /scenes/{id}), behind the bearer
token; never a video waiting for the worker (``queued-videos/``)
nor a client's motion made from a video (``motions/own/``: used by name in that client's renders only).
"""
from __future__ import annotations

from flask import Blueprint, send_file

from ..characters.resource import DOCUMENT
from ..characters.resource import PREFIX as DOCUMENTS
from ..errors import NotFound
from ..motions.own import PREFIX as OWN_MOTIONS
from ..scenes.resource import DOCUMENT as SCENE_DOCUMENT
from ..scenes.resource import PREFIX as SCENES
from ..services import services
from ..storage.backends import LocalStorage
from .motions import QUEUED_VIDEOS

bp = Blueprint("files", __name__)

#: Keys under these are never served here, and no file named like a document is.
PRIVATE = (DOCUMENTS, SCENES, QUEUED_VIDEOS, OWN_MOTIONS)
DOCUMENT_NAMES = (DOCUMENT, SCENE_DOCUMENT)


@bp.get("/files/<path:key>")
def get_file(key: str):
    storage = services().storage
    if not isinstance(storage, LocalStorage):
        raise NotFound("files are served by S3 in this deployment")
    if key.startswith(PRIVATE) or key.rsplit("/", 1)[-1] in DOCUMENT_NAMES:
        # documents go through the API only; queued videos are the worker's input; clients' own motions
        # are read by the app for their owner's renders (a public path would need only the job's id)
        raise NotFound(f"no file {key[:80]}")
    path = storage.path_of(key)
    if path is None:
        raise NotFound(f"no file {key}")
    return send_file(path, conditional=True, max_age=86400)
