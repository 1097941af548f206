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
    from animator.finder.answers import detector_answer

    t0 = time.perf_counter()
    found = detector_answer(rgb, max_figures)
    return {"detections": found, "ms": (time.perf_counter() - t0) * 1e3}


def fit_crop_png(crop_png: bytes) -> dict[str, Any]:
    """Mask the figure of a crop (PNG, as the pose model gets it) and fit the skeleton to the mask:
    ``{"people": [...] (the pose model's answer), "reason": str | None, "ms": t}``."""
    from animator.finder.answers import pose_answer

    t0 = time.perf_counter()
    with Image.open(io.BytesIO(crop_png)) as im:
        rgb = np.asarray(im.convert("RGB"))
    people, reason = pose_answer(rgb)
    return {"people": people, "reason": reason, "ms": (time.perf_counter() - t0) * 1e3}
