"""The render clock: milliseconds per stage of a render (:class:`Clock`), the time spent drawing
frames as they stream by (:class:`TimedFrames`), and the frames made so far, told to a progress
callback (:class:`FrameCount`). Used by :func:`animator.render` and :func:`animator.render_scene`.
"""
from __future__ import annotations

import time
from typing import Callable, Iterator, Optional

import numpy as np

#: ``progress(frames_done, frames_total)``: see :func:`animator.render`.
Progress = Optional[Callable[[int, int], None]]


class Clock:
    """Milliseconds per stage of one render, and its total since the clock was made."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}
        self._t0 = self._t = time.perf_counter()

    def lap(self, stage: str) -> float:
        now = time.perf_counter()
        ms = (now - self._t) * 1e3
        self.ms[stage] = self.ms.get(stage, 0.0) + ms
        self._t = now
        return ms

    def frames_lap(self, raster_ms: float) -> None:
        """Close the lap that drew and encoded the frames: ``raster_ms`` of it went to drawing
        ("rasterize"), the rest to encoding ("encode")."""
        both = self.lap("encode")
        self.ms["rasterize"] = raster_ms
        self.ms["encode"] = both - raster_ms

    def timings(self) -> dict[str, float]:
        """A copy of every stage's ms, with "total" since the clock was made."""
        self.ms["total"] = (time.perf_counter() - self._t0) * 1e3
        return dict(self.ms)


class TimedFrames:
    """Wraps a frame iterator and adds up the milliseconds spent producing frames; ``made(1)`` is
    called after each frame."""

    def __init__(self, frames: Iterator[np.ndarray], made: Callable[[int], None] | None = None) -> None:
        self._frames = frames
        self._made = made
        self.ms = 0.0

    def __iter__(self) -> "TimedFrames":
        return self

    def __next__(self) -> np.ndarray:
        t = time.perf_counter()
        try:
            frame = next(self._frames)
        finally:
            self.ms += (time.perf_counter() - t) * 1e3
        if self._made is not None:
            self._made(1)
        return frame


class FrameCount:
    """Frames made so far, told to a :data:`Progress` callback (none: counts quietly)."""

    def __init__(self, progress: Progress, total: int) -> None:
        self.progress = progress
        self.total = int(total)
        self.done = 0
        self._tell()

    def add(self, frames: int) -> None:
        self.done = min(self.total, self.done + int(frames))
        self._tell()

    def restart(self) -> None:
        """Back to 0: the frames are made again in this process (the split over processes failed)."""
        if self.done:
            self.done = 0
            self._tell()

    def finish(self) -> None:
        if self.done != self.total:
            self.done = self.total
            self._tell()

    def _tell(self) -> None:
        if self.progress is not None:
            self.progress(self.done, self.total)
