"""Frame pruning: resample a motion clip to the frame rate an animation actually needs.

Motion capture comes at 30 to 120 frames per second; a phone GIF does not need that many, and a GIF
cannot even show most of those rates. GIF frame delays are whole hundredths of a second (cs), so a
GIF plays at true speed only at 100/n fps: 50 (2 cs), 33.3 (3 cs), 25 (4 cs), 20 (5 cs), ...

Default: **25 fps** (4 cs per frame). It is the highest GIF-exact rate that does not exceed the
usual 30 fps capture rate (so no frame is shown twice), it keeps motion smooth, and it needs 17%
fewer frames than 30 fps and 79% fewer than 120 fps clips. 50 fps is not used: browsers slow GIF
delays under 2 cs down to 10 cs, and it would duplicate frames of 30 fps clips. (AnimatedDrawings
writes 30 fps clips with 33 ms delays, which GIF stores as 3 cs: its GIFs play 11% too fast.)

Each output frame k shows the source frame nearest to time ``k * frame_time`` (the rule
AnimatedDrawings uses to pick a frame for a time). A rate at or above the clip's own keeps every
frame. ``max_frames`` caps the count by stretching the output frame time, so the duration holds.
The output duration ``len(indices) * frame_time_s`` is within 1% of the clip's (frames x frame time).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

import numpy as np

from .errors import ConfigError

#: Default output frame rate (frames per second): 4 cs per GIF frame.
DEFAULT_FPS = 25.0
#: Relative duration error above which the output frame time is adjusted to keep the duration.
_DURATION_TOLERANCE = 0.01

Fps = Union[float, int, str, None]


@dataclass(frozen=True)
class FramePlan:
    """Which source frames to show and for how long.

    Attributes:
        indices: (M,) int64 BVH frame indices (absolute, within the clip's [start, end) range).
        frame_time_s: seconds each output frame is shown.
    """

    indices: np.ndarray
    frame_time_s: float

    @property
    def duration_s(self) -> float:
        return len(self.indices) * self.frame_time_s

    @property
    def fps(self) -> float:
        return 1.0 / self.frame_time_s


def plan_frames(n_frames: int, frame_time: float, start: int = 0, fps: Fps = DEFAULT_FPS,
                max_frames: int | None = None) -> FramePlan:
    """Choose output frames for a clip of ``n_frames`` source frames starting at BVH frame ``start``.

    Args:
        n_frames: number of source frames in the clip (after the config's start/end range).
        frame_time: seconds per source frame.
        start: BVH index of the clip's first frame (returned indices are offset by it).
        fps: target frames per second; ``'native'`` (or None) keeps every source frame.
        max_frames: optional cap on the number of output frames (>= 1).
    """
    if n_frames < 1:
        raise ConfigError(None, "frames", "the clip has no frames")
    if not (frame_time > 0 and np.isfinite(frame_time)):
        raise ConfigError(None, "frame_time", f"must be positive, got {frame_time}")
    if max_frames is not None and (int(max_frames) != max_frames or max_frames < 1):
        raise ConfigError(None, "max_frames", f"must be a positive integer, got {max_frames!r}")
    duration = n_frames * frame_time
    native = fps is None or (isinstance(fps, str) and fps.strip().lower() == "native")
    if not native:
        try:
            target = float(fps)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ConfigError(None, "fps", f"must be a positive number or 'native', got {fps!r}") from None
        if not (target > 0 and np.isfinite(target)):
            raise ConfigError(None, "fps", f"must be a positive number or 'native', got {fps!r}")
        if target >= 1.0 / frame_time * (1 - 1e-9):
            native = True  # never upsample: a rate at or above the clip's keeps every frame
    if native:
        count, out_time = n_frames, frame_time
    else:
        out_time = 1.0 / target
        count = max(1, int(np.floor(duration / out_time + 0.5)))
        if abs(count * out_time - duration) > _DURATION_TOLERANCE * duration:
            out_time = duration / count  # very short clips: keep the duration rather than the rate
    if max_frames is not None and count > max_frames:
        count = int(max_frames)
        out_time = duration / count
    if count == n_frames:
        local = np.arange(n_frames, dtype=np.int64)
    else:
        local = np.floor(np.arange(count) * (out_time / frame_time) + 0.5).astype(np.int64)
        np.minimum(local, n_frames - 1, out=local)
    return FramePlan(indices=local + int(start), frame_time_s=float(out_time))


def clip_of(source: Any) -> tuple[int, float, int]:
    """(n_frames, frame_time, start) of a BVH, a MotionConfig, a Motion2D or a FramePlan-like source."""
    from .bvh import BVH, load_bvh
    from .config import MotionConfig

    if isinstance(source, BVH):
        return source.n_frames, source.frame_time, 0
    if isinstance(source, MotionConfig):
        bvh = load_bvh(source.bvh_path)
        start, end = source.frame_range(bvh.n_frames)
        return end - start, source.frame_time or bvh.frame_time, start
    frames = getattr(source, "source_frames", None)
    ft = getattr(source, "frame_time_s", None)
    if frames is not None and ft is not None:
        frames = np.asarray(frames)
        if len(frames) == 0:
            raise ConfigError(None, "motion", "the motion has no frames")
        # A native-rate Motion2D covers consecutive BVH frames.
        span = int(frames[-1] - frames[0] + 1)
        return span, float(ft) * len(frames) / span, int(frames[0])
    raise TypeError(f"expected a BVH, MotionConfig or Motion2D, got {type(source).__name__}")


def plan_for(source: Any, fps: Fps = DEFAULT_FPS, max_frames: int | None = None) -> FramePlan:
    """:func:`plan_frames` for a BVH (whole clip), a MotionConfig (its frame range) or a Motion2D."""
    n, ft, start = clip_of(source)
    return plan_frames(n, ft, start, fps=fps, max_frames=max_frames)


def frame_indices_for(source: Any, fps: Fps = DEFAULT_FPS, max_frames: int | None = None) -> np.ndarray:
    """BVH frame indices to render for ``source`` (see :func:`plan_for`; frame time: ``plan_for(...).frame_time_s``)."""
    return plan_for(source, fps=fps, max_frames=max_frames).indices


__all__ = ["DEFAULT_FPS", "FramePlan", "clip_of", "frame_indices_for", "plan_for", "plan_frames"]
