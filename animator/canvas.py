"""Where the character goes on the output canvas: one scale for the whole clip, a view per frame.

The character keeps a steady size: a single scale (canvas pixels per drawing pixel) for the whole
clip. Along each axis the view either stays put, with the whole clip's motion in view (a jump, a
sway, a step: the character moves on the canvas), or, when fitting the whole motion would shrink the
character below ``follow_below`` (70%) of the size at which its largest pose just fits (a character
walking away), follows the root joint, shifted as little as needed to keep every pose inside the
canvas. The character is never shrunk per frame.

Coordinates: canvas pixels, origin top-left, x right, y down; a drawing point ``p`` (texture pixels,
y down) of frame ``f`` lands at ``scale * p + offsets[f]``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import RenderError


@dataclass
class Placement:
    """Scale and per-frame offset from drawing pixels to canvas pixels.

    Attributes:
        scale: canvas pixels per drawing pixel (same for x and y, same for every frame).
        offsets: (F, 2) float64 canvas offset per frame: canvas = scale * drawing + offsets[f].
        width, height: canvas size in pixels.
        margin: the free border kept around the character, in canvas pixels.
    """

    scale: float
    offsets: np.ndarray
    width: int
    height: int
    margin: float

    def to_canvas(self, points: np.ndarray) -> np.ndarray:
        """Map (F, N, 2) drawing-pixel points of each frame to canvas pixels."""
        return self.scale * np.asarray(points) + self.offsets[:, None, :]


def default_margin(width: int, height: int) -> float:
    """Free border around the character: 4% of the shorter side, at least 2 pixels."""
    return max(2.0, 0.04 * min(width, height))


def place(bounds: np.ndarray, root: np.ndarray, width: int, height: int, margin: float | None = None,
          max_scale: float | None = None, follow_below: float = 0.7) -> Placement:
    """Choose the clip's scale and each frame's view.

    Args:
        bounds: (F, 4) per-frame character bounding box in drawing pixels: xmin, ymin, xmax, ymax.
        root: (F, 2) root joint per frame in drawing pixels (the view follows it when it must move).
        width, height: canvas size in pixels.
        margin: free border in canvas pixels (default :func:`default_margin`).
        max_scale: upper bound on the scale (e.g. to avoid enlarging a small drawing too much).
        follow_below: follow the root along an axis when showing the clip's whole motion along it
            would need a scale below this fraction of the largest pose's fitting scale.
    Raises:
        RenderError: the canvas is too small to hold the character with the margin.
    """
    b = np.asarray(bounds, dtype=np.float64)
    root = np.asarray(root, dtype=np.float64)
    if b.ndim != 2 or b.shape[1] != 4 or len(b) == 0 or not np.isfinite(b).all():
        raise RenderError("character bounds must be a finite (F, 4) array")
    m = default_margin(width, height) if margin is None else float(margin)
    room = np.array([width - 2 * m, height - 2 * m])
    if (room < 4).any():
        raise RenderError(f"canvas {width}x{height} is too small for a {m:g}-pixel margin")
    size = np.maximum(b[:, 2:] - b[:, :2], 1e-6)         # (F, 2) per-frame extent
    pose_scale = float(np.min(room / size.max(axis=0)))   # the largest pose just fits
    clip = np.maximum(b[:, 2:].max(axis=0) - b[:, :2].min(axis=0), 1e-6)
    clip_scale = room / clip                              # per axis: the whole motion fits
    follow = clip_scale < follow_below * pose_scale
    scale = min([pose_scale] + [float(clip_scale[a]) for a in range(2) if not follow[a]])
    if max_scale is not None:
        scale = min(scale, float(max_scale))
    canvas = np.array([width, height], dtype=np.float64)
    offsets = np.empty((len(b), 2))
    for ax in range(2):
        lo, hi = b[:, ax], b[:, ax + 2]
        if not follow[ax]:
            # the whole clip fits: a fixed view, clip centred
            offsets[:, ax] = canvas[ax] / 2 - scale * (hi.max() + lo.min()) / 2
        else:
            # follow the root, kept where it sits on average relative to the pose's box centre
            centre_minus_root = np.mean((lo + hi) / 2 - root[:, ax])
            want = canvas[ax] / 2 - scale * (root[:, ax] + centre_minus_root)
            lo_off = m - scale * lo            # keep xmin >= m
            hi_off = canvas[ax] - m - scale * hi  # keep xmax <= W - m
            offsets[:, ax] = np.clip(want, lo_off, hi_off)
    return Placement(scale, offsets, int(width), int(height), m)
