"""The motions a request names, looked up: the library's, or the asking client's own (made from their
videos). The names themselves are read and bounded by :data:`app.intake.shapes.Motions`.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ..deadline import Deadline
from ..errors import UnknownMotion
from ..motions.library import pick
from ..services import services

log = logging.getLogger("doodlepod.http")


def motion_list(names: list[str], defaults: bool = True, own: Deadline | None = None, client: str = "") -> list:
    """The motions named, duplicates dropped; the default motions when none is named and ``defaults``
    (False: the request brings its own clip).

    ``own``: a deadline, to also look names up among the motions of ``client`` (made from their
    videos by POST /motions; synchronous requests only). Those come back as files copied for this
    request: the caller calls their ``remove()`` when it ends."""
    svc = services()
    library = svc.motions
    if not names and defaults:
        names = list(svc.settings.default_motions)
    unknown = [n for n in names if n not in library]
    found = _own_motions(unknown, own, client) if own is not None and unknown else {}
    try:
        return pick(library, names, found)
    except UnknownMotion:
        for motion in found.values():
            motion.remove()
        raise


def _own_motions(names: list[str], deadline: Deadline, client: str) -> dict[str, Any]:
    """The client's own motions among ``names``, copied to the scratch folder (name -> motion)."""
    from ..jobs.queue import REDIS_ERRORS

    svc = services()
    if svc.own_motions is None:
        return {}
    folder = Path(svc.pipeline.scratch_dir) / "uploads"
    found: dict[str, Any] = {}
    try:
        for n in dict.fromkeys(names):
            motion = svc.own_motions.resolve(client, n, folder, deadline)
            if motion is not None:
                found[n] = motion
    except REDIS_ERRORS as exc:  # the library still works without Redis; own motions are then unknown
        log.warning("own motions not looked up: Redis unavailable (%s)", type(exc).__name__)
    except BaseException:
        for motion in found.values():
            motion.remove()
        raise
    return found
