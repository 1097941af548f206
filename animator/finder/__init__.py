"""Read a photo of a drawing without trained weights: the drawn figures' boxes, and AnimatedDrawings'
16 joints fitted to a figure's mask. numpy, scipy and Pillow only; deterministic. The method is
written down in docs/finder.md.

    from animator.finder import find_figures, fit_skeleton, find_characters
    figures = find_figures(rgb)                    # [Figure(box=(l, t, r, b), score), ...] best first
    fit = fit_skeleton(mask, origin=figures[0].box[:2])
    fit.joints["left_hand"], fit.confidence["left_hand"], fit.score, fit.reason
    fit.coco17()                                   # (17, 3) for animator.skeleton.skeleton_from_coco
"""
from __future__ import annotations

from .boxes import Figure, find_figures
from .fit import Fit, fit_skeleton

__all__ = ["Figure", "Fit", "find_characters", "find_figures", "fit_skeleton"]


def find_characters(rgb, max_figures: int = 8) -> list:
    """``[(Figure, mask, Fit), ...]`` best first: each figure's box, its mask (bool, the box's grid,
    :func:`animator.segment.segment_drawing` of the crop) and the skeleton fitted to that mask (in
    photo pixels)."""
    import numpy as np

    from ..segment import segment_drawing

    img = np.asarray(rgb)
    out = []
    for fig in find_figures(img, max_figures=max_figures):
        left, top, right, bottom = fig.box
        mask = segment_drawing(img[top:bottom, left:right])
        out.append((fig, mask, fit_skeleton(mask, origin=(left, top))))
    return out
