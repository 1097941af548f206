"""TorchServe handler for ``drawn_humanoid_pose_estimator``: top-down heatmap pose (mmpose 1.3.2).

Request: a PNG or JPEG image of one figure (AnimatedDrawings posts the detector's crop), as the
request body or a multipart field named ``data``. The whole image is the person box.
Answer (AnimatedDrawings' format): a JSON list with one entry,
``{"keypoints": [[x, y, score] x 17], "bbox": [0, 0, width, height], "score": float}``: keypoints in
COCO order (nose, left_eye, right_eye, left_ear, right_ear, left_shoulder, right_shoulder,
left_elbow, right_elbow, left_wrist, right_wrist, left_hip, right_hip, left_knee, right_knee,
left_ankle, right_ankle), x and y in the posted image's pixels (origin top-left, y down) clipped
to the image, ``score`` the heatmap peak of each keypoint; the entry's ``score`` is their mean.
Bad images get a 4xx JSON answer (see ``handler_base``).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

try:  # inside a model archive the shared module sits next to this file
    from handler_base import BatchImageHandler
except ImportError:  # imported as part of the repository's ``handlers`` package
    from .handler_base import BatchImageHandler

NUM_KEYPOINTS = 17


class DrawnHumanoidPoseEstimatorHandler(BatchImageHandler):
    """Batched mmpose top-down inference: every valid image (whole image as the box) in one step."""

    model_name = "drawn_humanoid_pose_estimator"

    def load_model(self, config: str, checkpoint: str, device: str) -> Any:
        import torch
        from mmcv.transforms import Compose
        from mmengine.config import Config
        from mmpose.apis import init_model
        from mmpose.utils import register_all_modules

        torch.set_grad_enabled(False)
        register_all_modules(init_default_scope=True)
        cfg = Config.fromfile(config)
        model = init_model(cfg, checkpoint, device=device)
        self.pipeline = Compose(cfg.test_dataloader.dataset.pipeline)
        return model

    def predict(self, images: Sequence[np.ndarray]) -> list[Any]:
        import torch
        from mmengine.dataset import pseudo_collate

        items = []
        for img in images:
            h, w = img.shape[:2]
            info = dict(img=img, bbox=np.array([[0, 0, w, h]], dtype=np.float32),
                        bbox_score=np.ones(1, dtype=np.float32))
            info.update(self.model.dataset_meta)
            items.append(self.pipeline(info))
        with torch.no_grad():
            samples = self.model.test_step(pseudo_collate(items))
        return [self._answer(sample, img.shape[1], img.shape[0]) for sample, img in zip(samples, images)]

    def _answer(self, sample: Any, width: int, height: int) -> list[dict[str, Any]]:
        pred = sample.pred_instances
        xy = np.asarray(pred.keypoints, dtype=np.float64).reshape(-1, NUM_KEYPOINTS, 2)[0]
        scores = np.asarray(pred.keypoint_scores, dtype=np.float64).reshape(-1, NUM_KEYPOINTS)[0]
        # GetBBoxCenterScale pads the box by 1.25, so a peak can land just outside the picture.
        xy[:, 0] = np.clip(xy[:, 0], 0, max(width - 1, 0))
        xy[:, 1] = np.clip(xy[:, 1], 0, max(height - 1, 0))
        keypoints = [[round(float(x), 2), round(float(y), 2), float(s)] for (x, y), s in zip(xy, scores)]
        return [{
            "keypoints": keypoints,
            "bbox": [0.0, 0.0, float(width), float(height)],
            "score": float(scores.mean()),
        }]
