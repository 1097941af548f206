"""The ink finder as render-process steps: the app's own detector and pose model while the model
server is not there (being prepared by ``make run``, down, or its models not loaded).

The same work as the model server's finder handlers (handlers/ink_finder_*.py), with the same
answers, so :class:`app.render.pipeline.Pipeline` reads them as it reads TorchServe's:

- :func:`find_figures_in`: the work image -> AnimatedDrawings' detector answer, a list of
  ``{"bbox": [l, t, r, b], "score": s}`` best first;
- :func:`fit_crop_png`: the crop the pose model would get -> its answer, ``[{"keypoints": 17 x
  [x, y, score], "bbox": [0, 0, w, h], "score": s}]``, or ``[]`` with the finder's reason when the
  crop holds no person-like figure.

Each runs in a render process (plain picklable values in and out), so it is bounded like every other
step there: the request's render slot, the pool, the request's deadline (docs/finder.md: its cost).
"""
from __future__ import annotations

import io
import time
from typing import Any

import numpy as np
from PIL import Image

#: Most figures the in-app finder reports in one photo (the model server's finder archive: 8 too).
MAX_FIGURES = 8


def find_figures_in(rgb: np.ndarray, max_figures: int = MAX_FIGURES) -> dict[str, Any]:
    """The drawn figures of ``rgb`` (uint8 (h, w, 3), work pixels): ``{"detections": [...], "ms": t}``."""
    from animator.finder import find_figures

    t0 = time.perf_counter()
    height, width = rgb.shape[:2]
    found = []
    for figure in find_figures(np.ascontiguousarray(rgb[..., :3]), max_figures=max(1, int(max_figures))):
        l, t, r, b = (float(v) for v in figure.box)
        box = [min(max(l, 0.0), width), min(max(t, 0.0), height), min(max(r, 0.0), width), min(max(b, 0.0), height)]
        found.append({"bbox": [round(v, 2) for v in box], "score": round(float(figure.score), 5)})
    found.sort(key=lambda d: -d["score"])
    return {"detections": found, "ms": (time.perf_counter() - t0) * 1e3}


def fit_crop_png(crop_png: bytes) -> dict[str, Any]:
    """Mask the figure of a crop (PNG, as the pose model gets it) and fit the skeleton to the mask:
    ``{"people": [...] (the pose model's answer), "reason": str | None, "ms": t}``."""
    from animator.finder import fit_skeleton
    from animator.segment import segment_drawing

    t0 = time.perf_counter()
    with Image.open(io.BytesIO(crop_png)) as im:
        rgb = np.asarray(im.convert("RGB"))
    height, width = rgb.shape[:2]
    mask = segment_drawing(rgb)
    if not mask.any():
        return {"people": [], "reason": "nothing separates from the paper in the box",
                "ms": (time.perf_counter() - t0) * 1e3}
    fit = fit_skeleton(mask)
    reason = getattr(fit, "reason", None)
    if reason:
        return {"people": [], "reason": str(reason), "ms": (time.perf_counter() - t0) * 1e3}
    coco = np.asarray(fit.coco17(), dtype=np.float64).reshape(17, 3)
    coco[:, 0] = np.clip(coco[:, 0], 0, max(width - 1, 0))
    coco[:, 1] = np.clip(coco[:, 1], 0, max(height - 1, 0))
    people = [{"keypoints": [[round(float(x), 2), round(float(y), 2), round(float(s), 4)] for x, y, s in coco],
               "bbox": [0.0, 0.0, float(width), float(height)], "score": round(float(fit.score), 4)}]
    return {"people": people, "reason": None, "ms": (time.perf_counter() - t0) * 1e3}
