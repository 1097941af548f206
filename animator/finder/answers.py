"""The finder's results in the form AnimatedDrawings' two models answer, for whoever serves them in
their place: the model server's finder handlers (handlers/ink_finder_*.py) and the app's own
fallback (app/render/finder_steps.py) both answer with these, so the same code answers either way.

- :func:`detector_answer`: a photo -> ``[{"bbox": [l, t, r, b], "score": s, "category":
  "drawn_humanoid"}, ...]`` best first, boxes clipped to the photo (the detector's answer);
- :func:`pose_answer`: the crop of one figure -> ``([{"keypoints": 17 x [x, y, score], "bbox":
  [0, 0, w, h], "score": mean of the keypoints' scores}], None)`` in COCO order (the pose model's
  answer), or ``([], reason)`` when nothing separates from the paper or the shape is not person-like.

Pixels: the image's own, x right, y down.
"""
from __future__ import annotations

from typing import Any

import numpy as np

#: COCO keypoints the pose model answers (nose ... right_ankle).
NUM_KEYPOINTS = 17


def detector_answer(rgb: np.ndarray, max_figures: int = 8, min_score: float = 0.0) -> list[dict[str, Any]]:
    """The drawn figures of ``rgb`` (uint8 (h, w, 3)) as the detector answers them."""
    from . import find_figures

    img = np.ascontiguousarray(np.asarray(rgb)[..., :3])
    height, width = img.shape[:2]
    out = []
    for figure in find_figures(img, max_figures=max(1, int(max_figures))):
        score = float(figure.score)
        if score < min_score:
            continue
        l, t, r, b = (float(v) for v in figure.box)
        box = [min(max(l, 0.0), width), min(max(t, 0.0), height), min(max(r, 0.0), width), min(max(b, 0.0), height)]
        out.append({"bbox": [round(v, 2) for v in box], "score": round(score, 5), "category": "drawn_humanoid"})
    out.sort(key=lambda d: -d["score"])
    return out[: max(1, int(max_figures))]


def pose_answer(rgb: np.ndarray) -> tuple[list[dict[str, Any]], str | None]:
    """Mask the figure of a crop (``animator.segment.segment_drawing``) and fit the skeleton to the
    mask: the pose model's answer and None, or ``[]`` and the reason there is no skeleton."""
    from ..segment import segment_drawing
    from . import fit_skeleton

    img = np.ascontiguousarray(np.asarray(rgb)[..., :3])
    height, width = img.shape[:2]
    mask = segment_drawing(img)
    if not mask.any():
        return [], "nothing separates from the paper in the box"
    fit = fit_skeleton(mask)
    if fit.reason:
        return [], str(fit.reason)
    coco = np.asarray(fit.coco17(), dtype=np.float64).reshape(NUM_KEYPOINTS, 3)
    coco[:, 0] = np.clip(coco[:, 0], 0, max(width - 1, 0))
    coco[:, 1] = np.clip(coco[:, 1], 0, max(height - 1, 0))
    keypoints = [[round(float(x), 2), round(float(y), 2), round(float(s), 4)] for x, y, s in coco]
    return [{"keypoints": keypoints, "bbox": [0.0, 0.0, float(width), float(height)],
             "score": float(np.mean([k[2] for k in keypoints]))}], None
