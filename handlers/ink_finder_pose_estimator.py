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


class InkFinderPoseHandler(InkFinderHandler):
    """Mask and skeleton fit of each crop of a batch (``animator.finder.answers``)."""

    model_name = "drawn_humanoid_pose_estimator"

    def load_finder(self) -> Any:
        from animator.finder.answers import pose_answer

        return pose_answer

    def predict(self, images: Sequence[np.ndarray]) -> list[Any]:
        out = []
        for bgr in images:
            people, reason = self.model(np.ascontiguousarray(bgr[:, :, ::-1]))
            if reason:
                logger.info("%s: no skeleton in a %dx%d crop: %s", self.model_name, bgr.shape[1], bgr.shape[0],
                            reason)
            out.append(people)
        return out
