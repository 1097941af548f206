"""A client's own motion clip: the field ``bvh`` (optional ``start_frame``, ``end_frame``).

The clip is checked in the request, before any other work: its size (:data:`app.intake.shapes.BvhFile`),
its joint and frame counts and its duration against the settings (``DOODLEPOD_BVH_MAX_*``), its syntax (an error names
the line), the frame range, and whether its skeleton is a humanoid the animator can retarget
without a hand-written config (:mod:`animator.auto_retarget`; an error lists what is missing). A
bad clip answers 422 ``invalid_motion`` naming the field and the line. The checked file goes to the
pod's scratch folder, cut to the chosen frames, where the render processes read it (big inputs
travel as files) and derive its motion and retarget configs; it is removed when the request ends.
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..errors import InvalidMotion, animator_boundary
from ..motions.library import UploadedMotion

log = logging.getLogger("doodlepod.bvh")

#: The name an uploaded clip's animation has in the answer's ``animations``.
UPLOAD_NAME = "upload"


@dataclass(frozen=True)
class Clip:
    """A client's BVH clip as sent, bounded in size (:data:`app.intake.shapes.BvhFile`), not yet checked."""

    name: str
    data: bytes


def check_upload(clip: Clip, start: int | None, end: int | None, settings: Any, folder: Path,
                 run: Callable[..., dict[str, Any]] | None = None) -> UploadedMotion:
    """The request's ``bvh`` clip (read and bounded in size by :data:`app.intake.shapes.BvhFile`),
    checked, cut to ``start``..``end`` and written to ``folder``.

    The request writes the raw file (I/O only); parsing, checking and cutting (:func:`check_clip`,
    up to a few hundred ms for a large clip) run through ``run(fn, *args)``: the app passes one
    that runs it in a render process, so the gevent loop never does that work (default: in this
    process).

    Raises:
        InvalidMotion: the clip cannot be used (the message names the field and the line).
    """
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"upload-{secrets.token_hex(16)}.bvh"   # never a name the client chose (X-Request-ID)
    path.write_bytes(clip.data)
    limits = (settings.bvh_max_joints, settings.bvh_max_frames, float(settings.bvh_max_seconds))
    try:
        facts = (run or _inline)(check_clip, str(path), clip.name, start, end, limits)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    log.info("bvh upload %s: %d frames, %d joints, %s joint names; checked in pid %d", clip.name, facts["frames"],
             facts["joints"], facts["family"], facts["pid"])
    return UploadedMotion(UPLOAD_NAME, path, facts["frames"], facts["joints"], facts["frame_time_s"],
                          facts["family"], facts["sha256"])


def _inline(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


def check_clip(path: str, name: str, start: int | None, end: int | None,
               limits: tuple[int, int, float]) -> dict[str, Any]:
    """Parse and check the clip at ``path`` and rewrite it cut to frames ``start``..``end - 1``
    (a render-process job: it takes file paths and returns small facts).

    ``limits``: (most joints, most frames, most seconds of the chosen frames). Returns frames,
    joints, frame_time_s, family (of the joint names) and sha256 of the cut clip. Raises
    :class:`InvalidMotion` naming the field (and the line, for a syntax error).
    """
    from animator.auto_retarget import derive_motion_config, find_body
    from animator.bvh import parse_bvh

    max_joints, max_frames, max_seconds = limits
    text = Path(path).read_bytes().decode("utf-8", errors="replace")
    with animator_boundary(f"field 'bvh' ({name})"):  # a BVHError is invalid_motion (422)
        bvh = parse_bvh(text, None, max_joints=max_joints, max_frames=max_frames)
    n = bvh.n_frames
    first = 0 if start is None else start
    if not 0 <= first < n:
        raise InvalidMotion(f"field 'start_frame': {first} is outside the clip's frames 0..{n - 1}")
    if end is not None and not first < end <= n:
        raise InvalidMotion(f"field 'end_frame': {end} must be after start_frame ({first}) and at most the "
                            f"clip's {n} frames (it is exclusive)")
    last = n if end is None else end
    seconds = (last - first) * bvh.frame_time
    if seconds > max_seconds:
        raise InvalidMotion(f"field 'bvh' ({name}): the selected frames last {seconds:.1f} s; at most "
                            f"{max_seconds:g} s are accepted (DOODLEPOD_BVH_MAX_SECONDS): "
                            "pick a range with start_frame / end_frame")
    with animator_boundary(f"field 'bvh' ({name})"):
        body = find_body(bvh)
        derive_motion_config(bvh, name, first, end, body=body)
    clip = _cut(text, first, last)
    tmp = Path(path).with_suffix(".part")
    tmp.write_bytes(clip)
    os.replace(tmp, path)
    return {"frames": last - first, "joints": bvh.n_joints, "frame_time_s": bvh.frame_time, "family": body.family,
            "sha256": hashlib.sha256(clip).hexdigest(), "pid": os.getpid()}


def _cut(text: str, start: int, end: int) -> bytes:
    """The clip with only frames ``start``..``end - 1`` (the text of a clip that parsed)."""
    lines = text.splitlines()
    motion = next(i for i, ln in enumerate(lines) if ln.strip().upper() == "MOTION")
    timing = next(i for i in range(motion + 1, len(lines)) if re.match(r"\s*frame\s+time\s*:", lines[i], re.I))
    rows = [ln for ln in lines[timing + 1:] if ln.strip()]
    head = [ln for ln in lines[:timing + 1] if not re.match(r"\s*frames\s*:", ln, re.I)]
    head.insert(len(head) - 1, f"Frames: {end - start}")
    return ("\n".join(head + rows[start:end]) + "\n").encode()
