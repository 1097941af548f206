"""Per-frame durations in whole units (GIF centiseconds, milliseconds elsewhere) that add up to the
clip's duration: frame i lasts round(u * t_(i+1)) - round(u * t_i), t_i = i * frame_time_s, so each is
within one unit of the exact time and the total is exact to the nearest unit."""
from __future__ import annotations

import numpy as np

from ..errors import RenderError


def _whole_units(n_frames: int, frame_time_s: float, per_second: float) -> list[int]:
    if n_frames < 1:
        raise RenderError("cannot encode an animation without frames")
    edges = np.floor(np.arange(n_frames + 1) * (per_second * frame_time_s) + 0.5).astype(np.int64)
    return [int(d) for d in np.diff(edges)]


def gif_delays(n_frames: int, frame_time_s: float) -> list[int]:
    """Per-frame GIF delays in centiseconds that add up to ``n_frames * frame_time_s``."""
    return _whole_units(n_frames, frame_time_s, 100.0)


def durations_ms(n_frames: int, frame_time_s: float) -> list[int]:
    """Per-frame durations in whole milliseconds that add up to ``n_frames * frame_time_s`` (to the
    nearest ms)."""
    return _whole_units(n_frames, frame_time_s, 1000.0)
