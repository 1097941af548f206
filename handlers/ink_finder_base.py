"""Shared part of the ink finder's two TorchServe handlers (no torch, no OpenMMLab).

Where AnimatedDrawings' released weights are absent, ``scripts/build_archives.py --finder`` builds
the two archives doodlepod serves, ``drawn_humanoid_detector`` and ``drawn_humanoid_pose_estimator``,
from ``ink_finder_detector.py`` / ``ink_finder_pose_estimator.py`` instead of the learned models:
the same model names, requests and answers, so the app, the pod and the studio work unchanged. The
finder itself is ``animator.finder`` (numpy, SciPy, Pillow; see docs/finder.md); the archive
carries the ``animator`` modules it needs next to this file (TorchServe puts the archive's folder on
``sys.path``), so the handlers import nothing from a checkout.

What the handlers need of TorchServe's Python: its worker (which imports torch for its own
protocol) and numpy/SciPy/Pillow. Not mmcv, mmdet or mmpose: ``make run`` can serve
them as soon as torch and TorchServe are installed, before mmcv has compiled.

Every answer names its weights ``finder`` (header ``X-Doodlepod-Weights``), so the app can say
which finder found the drawing.
"""
from __future__ import annotations

import json
import logging
import time
from typing import Any

try:  # inside a model archive the shared module sits next to this file
    from handler_base import BatchImageHandler, limits_of
except ImportError:  # imported as part of the repository's ``handlers`` package
    from .handler_base import BatchImageHandler, limits_of

logger = logging.getLogger(__name__)

#: What every finder archive's answers name as their weights (header X-Doodlepod-Weights).
FINDER_WEIGHTS = "finder"


class InkFinderHandler(BatchImageHandler):
    """A :class:`BatchImageHandler` whose model is the ink finder: nothing to load but its modules.

    The images of a batch are read one after the other (the finder works on one photo at a time;
    TorchServe's batching still saves the round trips).
    """

    def initialize(self, context: Any) -> None:
        t0 = time.perf_counter()
        self.settings = dict((getattr(context, "model_yaml_config", None) or {}).get("handler") or {})
        self.settings.setdefault("weights", FINDER_WEIGHTS)
        self.limits = limits_of(self.settings)
        self.device = "cpu"
        self.model = self.load_finder()
        self.initialized = True
        logger.info("%s: ink finder loaded in %.2f s (handler settings %s)", self.model_name,
                    time.perf_counter() - t0, json.dumps(self.settings, sort_keys=True))

    def load_finder(self) -> Any:
        raise NotImplementedError
