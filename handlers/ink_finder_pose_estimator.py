"""TorchServe handler ``drawn_humanoid_pose_estimator`` served by the ink finder (no trained weights).

Request and answer as ``drawn_humanoid_pose_estimator.py``: the app posts the crop of one figure
(the detector's box, or a box a person drew); the whole image is the figure's box. The handler masks
the figure in it (``animator.segment.segment_drawing``, the mask the app itself cuts the character
with) and fits AnimatedDrawings' skeleton to the mask (``animator.finder.fit_skeleton``). Answer: a
JSON list with one entry, ``{"keypoints": [[x, y, score] x 17], "bbox": [0, 0, width, height],
"score": float}``, keypoints in COCO order in the crop's pixels (``animator.skeleton.skeleton_from_coco``
maps them back to the 16 joints), the scores the fit's confidence per joint.

An empty list when there is no figure to fit: nothing separates from the paper, or the shape is not
person-like (no two legs, no arms: the fit's ``reason``, logged) -- the finder does not invent joints;
the app answers 422 ``no_skeleton`` and the studio offers placing them by hand.
"""
from __future__ import annotations

import logging
from typing import Any, Sequence

import numpy as np

try:  # inside a model archive the shared module sits next to this file
    from ink_finder_base import InkFinderHandler
except ImportError:  # imported as part of the repository's ``handlers`` package
    from .ink_finder_base import InkFinderHandler

logger = logging.getLogger(__name__)

NUM_KEYPOINTS = 17


class InkFinderPoseHandler(InkFinderHandler):
    """Mask and skeleton fit of each crop of a batch."""

    model_name = "drawn_humanoid_pose_estimator"

    def load_finder(self) -> Any:
        from animator.finder import fit_skeleton
        from animator.segment import segment_drawing

        self.segment = segment_drawing
        return fit_skeleton

    def predict(self, images: Sequence[np.ndarray]) -> list[Any]:
        return [self._answer(img) for img in images]

    def _answer(self, bgr: np.ndarray) -> list[dict[str, Any]]:
        height, width = bgr.shape[:2]
        mask = self.segment(np.ascontiguousarray(bgr[:, :, ::-1]))
        if not mask.any():
            logger.info("%s: nothing separates from the paper in a %dx%d crop", self.model_name, width, height)
            return []
        fit = self.model(mask)
        reason = getattr(fit, "reason", None)
        if reason:
            logger.info("%s: no skeleton fitted (%s)", self.model_name, reason)
            return []
        coco = np.asarray(fit.coco17(), dtype=np.float64).reshape(NUM_KEYPOINTS, 3)
        coco[:, 0] = np.clip(coco[:, 0], 0, max(width - 1, 0))
        coco[:, 1] = np.clip(coco[:, 1], 0, max(height - 1, 0))
        keypoints = [[round(float(x), 2), round(float(y), 2), round(float(s), 4)] for x, y, s in coco]
        return [{"keypoints": keypoints, "bbox": [0.0, 0.0, float(width), float(height)],
                 "score": round(float(fit.score), 4)}]
