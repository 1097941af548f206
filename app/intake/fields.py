"""The fields of a request, each read and bounded before any work starts: motion names, joints, boxes,
sizes, frame counts. JSON text in a form field is decoded within :func:`app.intake.body.parse_json`'s
bounds and DOODLEPOD_MAX_FIELD_KB. Coordinates are image pixels (see :mod:`app.coordinates`).
"""
from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import numpy as np

from .. import coordinates
from ..deadline import Deadline
from ..errors import BadRequest, TooLarge, UnknownMotion, animator_boundary
from ..services import services
from .body import parse_json

log = logging.getLogger("doodlepod.http")


def motion_list(raw: list[str] | None, defaults: bool = True, own: Deadline | None = None) -> list:
    """The motions asked for (repeated fields and/or comma lists), duplicates dropped; the default
    motions when none is named and ``defaults`` (False: the request brings its own clip).

    ``own``: a deadline, to also look names up among the asking client's own motions (made from
    their videos by POST /motions; synchronous requests only). Those come back as files copied for
    this request: the caller calls their ``remove()`` when it ends."""
    svc = services()
    library = svc.motions
    names: list[str] = []
    for item in raw or []:
        check_field_size(item, "motions")
        names += [n.strip() for n in item.split(",") if n.strip()]
    if not names and defaults:
        names = list(svc.settings.default_motions)
    unknown = [n for n in names if n not in library]
    found = _own_motions(unknown, own) if own is not None and unknown else {}
    unknown = [n for n in unknown if n not in found]
    if unknown:
        for motion in found.values():
            motion.remove()
        shown = ", ".join(repr(n[:40]) for n in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
        raise UnknownMotion(f"unknown motion(s): {shown}; GET /motions lists the {len(library)} available")
    seen: dict[str, None] = dict.fromkeys(names)
    return [library[n] if n in library else found[n] for n in seen]


def _own_motions(names: list[str], deadline: Deadline) -> dict[str, Any]:
    """The asking client's own motions among ``names``, copied to the scratch folder (name -> motion)."""
    from ..http.jobs import client
    from ..jobs.queue import REDIS_ERRORS

    svc = services()
    if svc.own_motions is None:
        return {}
    folder = Path(svc.pipeline.scratch_dir) / "uploads"
    found: dict[str, Any] = {}
    try:
        for n in dict.fromkeys(names):
            motion = svc.own_motions.resolve(client(), n, folder, deadline)
            if motion is not None:
                found[n] = motion
    except REDIS_ERRORS as exc:  # the library still works without Redis; own motions are then unknown
        log.warning("own motions not looked up: Redis unavailable (%s)", type(exc).__name__)
    except BaseException:
        for motion in found.values():
            motion.remove()
        raise
    return found


#: What :func:`json_field` answers for a field the request did not send (or sent empty).
ABSENT = object()


def check_field_size(text: str, name: str) -> None:
    """413 ``too_large`` when the field ``name`` is over DOODLEPOD_MAX_FIELD_KB."""
    limit = services().settings.max_field_kb * 1024
    if len(text) > limit:
        raise TooLarge(f"'{name}' is over the limit of {limit / 1024:g} KiB")


def json_field(raw: Any, name: str) -> Any:
    """A form/JSON field: absent or empty -> ABSENT; JSON text is decoded within the bounds of
    :func:`app.intake.body.parse_json` and DOODLEPOD_MAX_FIELD_KB; decoded values (the old client's JSON
    body, bounded already) pass."""
    if raw is None or raw == "":
        return ABSENT
    if isinstance(raw, str):
        check_field_size(raw, name)
        return parse_json(raw, name)
    return raw


def parse_joints(raw: Any) -> list | None:
    """Client joints: JSON text or an already decoded value, in uploaded-image pixels (see docs). Joints
    that make no skeleton (missing names, coordinates that are not numbers) are ``invalid_character``."""
    value = json_field(raw, "joints")
    if value is ABSENT:
        return None
    from animator.skeleton import skeleton_from_client

    with animator_boundary():
        joints = skeleton_from_client(value)
    coordinates.check_spread(joints)  # 422 now, before a render slot (the image's bounds are checked once decoded)
    return joints


def parse_bbox(raw: Any) -> list[float] | None:
    """Client box [left, top, right, bottom] in uploaded-image pixels."""
    value = json_field(raw, "bbox")
    if value is ABSENT:
        return None
    try:
        box = [float(v) for v in value] if isinstance(value, list) else []
    except (TypeError, ValueError, OverflowError):
        box = []
    if len(box) != 4 or not all(math.isfinite(v) for v in box):
        raise BadRequest("'bbox' must be [left, top, right, bottom]: four finite numbers, in pixels")
    return box


def parse_joint_moves(raw: Any):
    """PATCH joints: a mapping ``{name: [x, y]}`` moves the joints it names (any subset); a skeleton
    list (``[{"name", "loc", "parent"}]``) replaces the skeleton."""
    value = json_field(raw, "joints")
    if value is ABSENT:
        return None
    if isinstance(value, dict) and "skeleton" not in value:
        moves: dict[str, tuple[float, float]] = {}
        for name, xy in value.items():
            try:
                x, y = (float(v) for v in xy)
            except (TypeError, ValueError):
                raise BadRequest(f"'joints.{name}': expected [x, y] numbers, got {xy!r}") from None
            if not (np.isfinite(x) and np.isfinite(y)):
                raise BadRequest(f"'joints.{name}': coordinates must be finite numbers")
            moves[str(name)] = (x, y)
        if not moves:
            raise BadRequest("'joints' is empty")
        return moves
    return parse_joints(value)


def parse_max_frames(raw: Any, settings) -> int | None:
    """The optional ``max_frames`` of a render request (the whole clip in at most that many frames,
    e.g. a quick preview): None when absent, else an integer from 1 to DOODLEPOD_RENDER_MAX_FRAMES
    (when that setting caps every animation)."""
    if raw is None or raw == "":
        return None
    value = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, str) and raw.strip().isdigit():
        value = int(raw.strip())
    hi = settings.render_max_frames or MAX_FRAMES_LIMIT
    if value is None or not 1 <= value <= hi:
        raise BadRequest(f"'max_frames' must be an integer from 1 to {hi}, got {str(raw)[:40]!r}")
    return value




#: Largest ``max_frames`` a client may ask for when DOODLEPOD_RENDER_MAX_FRAMES sets no cap.
MAX_FRAMES_LIMIT = 10_000




def parse_size(raw: Any, settings) -> int:
    """The ``size`` of a render request: an integer within the settings' bounds."""
    if raw is None or raw == "":
        return int(min(max(settings.render_size, settings.render_size_min), settings.render_size_max))
    value = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, str) and raw.strip().isdigit():
        value = int(raw.strip())
    if value is None:
        raise BadRequest(f"'size' must be an integer number of pixels, got {str(raw)[:40]!r}")
    lo, hi = settings.render_size_min, settings.render_size_max
    if not lo <= value <= hi:
        raise BadRequest(f"'size' must be from {lo} to {hi} pixels, got {value}")
    return value
