"""The app's HTTP endpoints, one blueprint (``bp``) per module.

Public: :mod:`.health` (probes, metrics), :mod:`.files` (the local storage's files),
:mod:`.motion_previews` (the library's previews, shown in ``<img>`` tags), :mod:`.studio` (the
studio page, whose API calls carry the person's token) and :mod:`.reference` (the OpenAPI document
and its page). Behind the
bearer token: the children of :mod:`.api`'s ``api`` blueprint (:mod:`.animate`, :mod:`.motions`,
:mod:`.characters`, :mod:`.scenes`, :mod:`.jobs`), which inherit its auth hook. A new endpoint module
adds its ``bp`` to one of the two lists below.
"""
from __future__ import annotations

from flask import Flask

from . import (
    animate,
    characters,
    files,
    health,
    jobs,
    motion_previews,
    motions,
    reference,
    scene_page,
    scenes,
    studio,
)
from .api import api

#: Children of ``api``: bearer auth applies.
API_CHILDREN = (animate.bp, motions.bp, characters.bp, scenes.bp, jobs.bp)
#: Registered on the app directly: no auth.
PUBLIC = (health.bp, files.bp, motion_previews.bp, studio.bp, scene_page.bp, reference.bp)

for _child in API_CHILDREN:  # once, at import: a blueprint's children are fixed before its first use
    api.register_blueprint(_child)


def register_blueprints(app: Flask) -> None:
    """Register the API (with its children) and the public blueprints on ``app``."""
    app.register_blueprint(api)
    for blueprint in PUBLIC:
        app.register_blueprint(blueprint)
