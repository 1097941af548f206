"""TorchServe handler for ``drawn_humanoid_detector``: Mask R-CNN (mmdet 3.3.0) finds drawn figures.

Request: a PNG or JPEG image, as the request body or a multipart field named ``data``.
Answer (AnimatedDrawings' format): a JSON list, best score first, of
``{"bbox": [left, top, right, bottom], "score": float in [0, 1], "category": str}`` with the box in
the posted image's pixels (origin top-left, y down), clipped to the image. Detections below the
archive's ``score_threshold`` are dropped, at most ``max_detections`` are returned; an empty list
means no drawn figure was found. Bad images get a 4xx JSON answer (see ``handler_base``).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

try:  # inside a model archive the shared module sits next to this file
    from handler_base import BatchImageHandler, clip_box
except ImportError:  # imported as part of the repository's ``handlers`` package
    from .handler_base import BatchImageHandler, clip_box


class DrawnHumanoidDetectorHandler(BatchImageHandler):
    """Batched mmdet inference: one ``test_step`` over every valid image TorchServe batched."""

    model_name = "drawn_humanoid_detector"

    def load_model(self, config: str, checkpoint: str, device: str) -> Any:
        import torch
        from mmcv.transforms import Compose
        from mmdet.apis import init_detector
        from mmdet.utils import register_all_modules
        from mmengine.config import Config

        torch.set_grad_enabled(False)
        register_all_modules(init_default_scope=True)
        cfg = Config.fromfile(config)
        model = init_detector(cfg, checkpoint, palette="random", device=device)
        pipeline = [dict(step) for step in cfg.test_dataloader.dataset.pipeline]
        pipeline[0] = dict(type="mmdet.LoadImageFromNDArray")  # we hand it decoded arrays
        self.pipeline = Compose(pipeline)
        self.classes = tuple(model.dataset_meta.get("classes") or ("drawn_humanoid",))
        self.score_threshold = float(self.settings.get("score_threshold", 0.5))
        self.max_detections = int(self.settings.get("max_detections", 10))
        return model

    def predict(self, images: Sequence[np.ndarray]) -> list[Any]:
        import torch
        from mmengine.dataset import pseudo_collate

        batch = pseudo_collate([self.pipeline(dict(img=img, img_id=i)) for i, img in enumerate(images)])
        with torch.no_grad():
            samples = self.model.test_step(batch)
        return [self._answer(sample, img.shape[1], img.shape[0]) for sample, img in zip(samples, images)]

    def _answer(self, sample: Any, width: int, height: int) -> list[dict[str, Any]]:
        pred = sample.pred_instances
        boxes = pred.bboxes.detach().cpu().numpy().reshape(-1, 4)
        scores = pred.scores.detach().cpu().numpy().reshape(-1)
        labels = pred.labels.detach().cpu().numpy().reshape(-1)
        order = np.argsort(-scores, kind="stable")
        out = []
        for k in order:
            score = float(scores[k])
            if score < self.score_threshold or len(out) >= self.max_detections:
                break
            label = int(labels[k])
            out.append({
                "bbox": [round(v, 2) for v in clip_box(boxes[k], width, height)],
                "score": round(score, 5),
                "category": self.classes[label] if 0 <= label < len(self.classes) else str(label),
            })
        return out
