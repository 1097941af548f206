"""A client's own motion clip: the multipart field ``bvh`` (optional ``start_frame``, ``end_frame``).

The clip is checked here, in the request, before any other work: its size, its joint and frame
counts and its duration against the settings (``DOODLEPOD_BVH_MAX_*``), its syntax (an error names
the line), the frame range, and whether its skeleton is a humanoid the animator can retarget
without a hand-written config (:mod:`animator.auto_retarget`; an error lists what is missing). A
bad clip answers 422 ``invalid_motion`` naming the field and the line. The checked file goes to the
pod's scratch folder, cut to the chosen frames, where the render processes read it (big inputs
travel as files) and derive its motion and retarget configs; it is removed when the request ends.
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .errors import BadRequest, InvalidMotion, TooLarge

#: The name an uploaded clip's animation has in the answer's ``animations``.
UPLOAD_NAME = "upload"


@dataclass(frozen=True)
class UploadedMotion:
    """A checked client clip, shaped like a library :class:`app.motions.Motion` for the pipeline.

    ``motion_cfg`` is the .bvh file itself, already cut to the chosen frames (the render process
    derives both configs from it); ``retarget_cfg`` is None (derived). ``sha256`` identifies the
    cut clip (render caches key on it).
    """

    name: str
    motion_cfg: Path
    frames: int
    joints: int
    frame_time_s: float
    family: str
    sha256: str
    retarget_cfg: None = None

    def remove(self) -> None:
        try:
            os.unlink(self.motion_cfg)
        except FileNotFoundError:
            pass


def read_bvh_upload(files: Mapping[str, Any], form: Mapping[str, Any], settings: Any, folder: Path,
                    request_id: str) -> UploadedMotion | None:
    """The request's ``bvh`` clip, checked and written to ``folder``; None when there is none.

    Raises:
        TooLarge: the file is over DOODLEPOD_BVH_MAX_MB.
        BadRequest: ``start_frame`` / ``end_frame`` are not integers, or are sent without a clip.
        InvalidMotion: the clip cannot be used (the message names the field and the line).
    """
    from animator.auto_retarget import derive_motion_config, find_body
    from animator.bvh import parse_bvh
    from animator.errors import BVHError

    part = files.get("bvh")
    start, end = _int_field(form, "start_frame"), _int_field(form, "end_frame")
    text_field = form.get("bvh") if part is None else None
    if part is None and not text_field:
        if start is not None or end is not None:
            raise BadRequest("'start_frame' and 'end_frame' select frames of an uploaded 'bvh' clip; none was sent")
        return None
    limit = int(settings.bvh_max_mb * 2**20)
    data = part.stream.read(limit + 1) if part is not None else str(text_field).encode()
    if len(data) > limit:
        raise TooLarge(f"'bvh' is over the limit of {settings.bvh_max_mb:g} MiB (DOODLEPOD_BVH_MAX_MB)")
    if not data.strip():
        raise InvalidMotion("field 'bvh': the file is empty")
    if b"\0" in data:
        raise InvalidMotion("field 'bvh': not a text file (a BVH clip starts with HIERARCHY)")
    name = os.path.basename(getattr(part, "filename", None) or "") or "bvh"
    try:
        bvh = parse_bvh(data.decode("utf-8", errors="replace"), None, max_joints=settings.bvh_max_joints,
                        max_frames=settings.bvh_max_frames)
    except BVHError as exc:
        where = f", {exc.field}" if exc.field else ""
        raise InvalidMotion(f"field 'bvh' ({name}){where}: {exc.message}") from None

    n = bvh.n_frames
    first = 0 if start is None else start
    if not 0 <= first < n:
        raise InvalidMotion(f"field 'start_frame': {first} is outside the clip's frames 0..{n - 1}")
    if end is not None and not first < end <= n:
        raise InvalidMotion(f"field 'end_frame': {end} must be after start_frame ({first}) and at most the "
                            f"clip's {n} frames (it is exclusive)")
    seconds = ((end if end is not None else n) - first) * bvh.frame_time
    if seconds > settings.bvh_max_seconds:
        raise InvalidMotion(f"field 'bvh' ({name}): the selected frames last {seconds:.1f} s; at most "
                            f"{settings.bvh_max_seconds:g} s are accepted (DOODLEPOD_BVH_MAX_SECONDS): "
                            "pick a range with start_frame / end_frame")
    try:
        body = find_body(bvh)
        derive_motion_config(bvh, name, first, end, body=body)
    except BVHError as exc:
        raise InvalidMotion(f"field 'bvh' ({name}): {exc.message}") from None

    clip = _cut(data.decode("utf-8", errors="replace"), first, n if end is None else end)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"upload-{request_id}.bvh"
    tmp = path.with_suffix(".part")
    tmp.write_bytes(clip)
    os.replace(tmp, path)
    frames = (n if end is None else end) - first
    return UploadedMotion(UPLOAD_NAME, path, frames, bvh.n_joints, bvh.frame_time, body.family,
                          hashlib.sha256(clip).hexdigest())


def _cut(text: str, start: int, end: int) -> bytes:
    """The clip with only frames ``start``..``end - 1`` (the text of a clip that parsed)."""
    lines = text.splitlines()
    motion = next(i for i, ln in enumerate(lines) if ln.strip().upper() == "MOTION")
    timing = next(i for i in range(motion + 1, len(lines)) if re.match(r"\s*frame\s+time\s*:", lines[i], re.I))
    rows = [ln for ln in lines[timing + 1:] if ln.strip()]
    head = [ln for ln in lines[:timing + 1] if not re.match(r"\s*frames\s*:", ln, re.I)]
    head.insert(len(head) - 1, f"Frames: {end - start}")
    return ("\n".join(head + rows[start:end]) + "\n").encode()


def _int_field(form: Mapping[str, Any], name: str) -> int | None:
    raw = form.get(name)
    if raw is None or str(raw).strip() == "":
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise BadRequest(f"'{name}' must be a whole number of BVH frames, got {str(raw)[:40]!r}") from None
    if value < 0:
        raise BadRequest(f"'{name}' must be >= 0, got {value}")
    return value
