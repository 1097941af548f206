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
import logging
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import BadRequest, InvalidMotion, TooLarge, animator_boundary

log = logging.getLogger("doodlepod.bvh")

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
                    run: Callable[..., dict[str, Any]] | None = None) -> UploadedMotion | None:
    """The request's ``bvh`` clip, checked and written to ``folder``; None when there is none.

    The request reads the fields and writes the raw file (I/O only); parsing, checking and cutting
    (:func:`check_clip`, up to a few hundred ms for a large clip) run through ``run(fn, *args)``:
    the app passes one that runs it in a render process, so the gevent loop never does that work
    (default: in this process).

    Raises:
        TooLarge: the file is over DOODLEPOD_BVH_MAX_MB.
        BadRequest: ``start_frame`` / ``end_frame`` are not integers, or are sent without a clip.
        InvalidMotion: the clip cannot be used (the message names the field and the line).
    """
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
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"upload-{secrets.token_hex(16)}.bvh"   # never a name the client chose (X-Request-ID)
    path.write_bytes(data)
    limits = (settings.bvh_max_joints, settings.bvh_max_frames, float(settings.bvh_max_seconds))
    try:
        facts = (run or _inline)(check_clip, str(path), name, start, end, limits)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    log.info("bvh upload %s: %d frames, %d joints, %s joint names; checked in pid %d", name, facts["frames"],
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
