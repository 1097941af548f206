"""What an async job will store, priced from its work order before it is queued (issue 41 S6: ten
jobs queued by a client with an empty storage share stored 199 MiB against its 40 MiB share, because
the share counted only what was stored already).

The price is checked against the pod's storage budget and reserved against the client's storage
share when the job is admitted (:func:`app.http.jobs.submit`); Redis holds it beside the job
(``storage:reserved``, app/jobs/queue.py) and the pod's budget counts it until the job ends. Whoever
ends the job (its worker, or the worker that finds its attempts used up) takes the reservation out
atomically with the end and gives it back to the client, while what each attempt stored is charged
as it is stored (:meth:`app.worker.Worker._run`): the real bytes replace the price. A queued video is
not in the price: the upload charges it to the client as stored, and its job's end gives it back.

The price is an upper estimate: a render stores its photo's files once and each animation at most
:data:`BYTES_PER_PIXEL_FRAME` per pixel and frame.
"""
from __future__ import annotations

from typing import Any

from ..orders import AnimateOrder, CharacterOrder, SceneOrder, VideoOrder, WorkOrder

#: Bytes an animation takes per pixel of one frame, at most (GIF/WebP/MP4 of drawings compress far below).
BYTES_PER_PIXEL_FRAME = 0.1
#: Frames priced when neither the order nor DOODLEPOD_RENDER_MAX_FRAMES caps them (the longest library clips).
DEFAULT_FRAMES = 150
#: What one character's files take beside its photo (texture, mask, overlay, its document), at most
#: twice the photo.
PHOTO_FILES = 2
#: A motion made from a video: its BVH clip and preview.
VIDEO_MOTION_BYTES = 256 * 1024


def frames_of(order: WorkOrder, settings: Any) -> int:
    return int(getattr(order, "max_frames", None) or settings.render_max_frames or DEFAULT_FRAMES)


def cpu_cost(order: WorkOrder, settings: Any) -> float:
    """The render CPU time a job of ``order`` asks for, as an estimate in megapixel-frames (each motion's
    frames x its canvas pixels; a render's CPU time grows with them): the render worker's turns charge each
    client this much per job (app/jobs/lua/turn.lua), so a client of large renders is served fewer of them
    than a client of small ones is. A video is read on threads of its own: 0."""
    if isinstance(order, VideoOrder):
        return 0.0
    size = int(getattr(order, "size", None) or settings.render_size)
    motions = len(order.motions) if isinstance(order, (AnimateOrder, CharacterOrder)) else 1
    return round(motions * frames_of(order, settings) * size * size / 1e6, 3)


def animation_bytes(size: int, frames: int) -> int:
    return int(size * size * frames * BYTES_PER_PIXEL_FRAME) + 64 * 1024


def stored_bytes(order: WorkOrder, input_bytes: int, settings: Any) -> int:
    """The most bytes the job of ``order`` will store (``input_bytes``: its uploaded photo's size)."""
    if isinstance(order, VideoOrder):
        return VIDEO_MOTION_BYTES
    size = int(getattr(order, "size", None) or settings.render_size)
    frames = frames_of(order, settings)
    if isinstance(order, SceneOrder):
        return animation_bytes(size, frames)
    motions = len(order.motions) if isinstance(order, (AnimateOrder, CharacterOrder)) else 1
    photo = PHOTO_FILES * input_bytes if isinstance(order, AnimateOrder) else 0
    return photo + motions * animation_bytes(size, frames)
