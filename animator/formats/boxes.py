"""Boxes of pixels: (x0, y0, x1, y1) with exclusive ends, or None for no pixel."""
from __future__ import annotations

import numpy as np

from .._frame_scan import box_not


def bbox(m: np.ndarray, value: int = 0) -> tuple[int, int, int, int] | None:
    """(x0, y0, x1, y1) exclusive bounds of the pixels of ``m`` that are not ``value`` (of a boolean
    mask: its True pixels), or None."""
    return box_not(rows(m), value)


def rows(a: np.ndarray) -> np.ndarray:
    """``a`` as uint8 with contiguous rows, as the compiled scans take it (a copy only if needed)."""
    a = a.view(np.uint8) if a.dtype == np.bool_ else a
    return a if a.dtype == np.uint8 and a.ndim == 2 and a.strides[1] == 1 else np.ascontiguousarray(a, np.uint8)


def union(a: tuple[int, int, int, int] | None, b: tuple[int, int, int, int] | None):
    if a is None:
        return b
    if b is None:
        return a
    return min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3])
