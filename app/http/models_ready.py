"""A photo only the models can read, refused at once while they are known not to be there yet.

While `make run` is still preparing the models (its state file says so, :mod:`app.characters.preparation`)
and the app's own ink finder does not stand in (DOODLEPOD_FINDER_FALLBACK off), a request whose photo
needs the detector or the pose model gets ``503 models_unavailable`` with Retry-After before it takes a
render slot and its photo is decoded (issue 41 S16: it used to be decoded under a slot, for nothing).
A request that brings its own joints needs no model and goes on.
"""
from __future__ import annotations

from ..services import services


def check_models_ready(needs_models: bool) -> None:
    """Raise :class:`app.errors.ModelsUnavailable` when ``needs_models`` and the models are not there yet."""
    svc = services()
    if needs_models and not svc.settings.finder_fallback and svc.preparation is not None:
        svc.preparation.check()
