"""TorchServe handler ``drawn_humanoid_detector`` served by the ink finder (no trained weights).

Request and answer as ``drawn_humanoid_detector.py`` (AnimatedDrawings' format): a PNG or JPEG
image; a JSON list, best score first, of ``{"bbox": [left, top, right, bottom], "score": float in
[0, 1], "category": "drawn_humanoid"}`` in the posted image's pixels, clipped to it. The boxes are
``animator.finder.find_figures``'s: the drawn figures the ink on the paper makes (docs/finder.md);
below the archive's ``score_threshold`` they are dropped, at most ``max_detections`` are returned.
An empty list: no figure found. Bad images get a 4xx JSON answer (see ``handler_base``).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

try:  # inside a model archive the shared module sits next to this file
    from ink_finder_base import InkFinderHandler
except ImportError:  # imported as part of the repository's ``handlers`` package
    from .ink_finder_base import InkFinderHandler


class InkFinderDetectorHandler(InkFinderHandler):
    """The boxes of the drawn figures in each photo of a batch (``animator.finder.answers``)."""

    model_name = "drawn_humanoid_detector"

    def load_finder(self) -> Any:
        from animator.finder.answers import detector_answer

        self.score_threshold = float(self.settings.get("score_threshold", 0.0))
        self.max_detections = max(1, int(self.settings.get("max_detections", 8)))
        return detector_answer

    def predict(self, images: Sequence[np.ndarray]) -> list[Any]:
        return [self.model(np.ascontiguousarray(bgr[:, :, ::-1]), self.max_detections, self.score_threshold)
                for bgr in images]
