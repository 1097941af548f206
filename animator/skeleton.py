"""The 16-joint AnimatedDrawings skeleton from pose keypoints or from joints a client sends.

Coordinates everywhere here are pixels, x right, y down; the caller decides which image's pixels
(the pose model answers in the crop it was given; clients send the uploaded image's pixels).

The mapping from the 17 COCO keypoints follows AnimatedDrawings' ``image_to_annotations``: root and
hip sit at the midpoint of the two hips, the torso joint at the midpoint of the shoulders, the neck
joint on the nose, and each limb joint on its keypoint. COCO's "left"/"right" are the drawn figure's
own sides, as are the skeleton's.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .character import SKELETON_JOINTS, Joint, skeleton_from_config
from .errors import CharacterError

#: COCO keypoint order of 17-keypoint pose models (mmpose, AnimatedDrawings' pose estimator).
COCO_KEYPOINTS: tuple[str, ...] = (
    "nose", "left_eye", "right_eye", "left_ear", "right_ear",
    "left_shoulder", "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist",
    "left_hip", "right_hip", "left_knee", "right_knee", "left_ankle", "right_ankle",
)

#: Parent of each skeleton joint (None for the root), in the order of :data:`SKELETON_JOINTS`.
SKELETON_PARENTS: dict[str, str | None] = {
    "root": None, "hip": "root", "torso": "hip", "neck": "torso",
    "right_shoulder": "torso", "right_elbow": "right_shoulder", "right_hand": "right_elbow",
    "left_shoulder": "torso", "left_elbow": "left_shoulder", "left_hand": "left_elbow",
    "right_hip": "root", "right_knee": "right_hip", "right_foot": "right_knee",
    "left_hip": "root", "left_knee": "left_hip", "left_foot": "left_knee",
}

_K = {name: i for i, name in enumerate(COCO_KEYPOINTS)}
#: Skeleton joint -> the COCO keypoints averaged to place it.
_FROM_COCO: dict[str, tuple[str, ...]] = {
    "root": ("left_hip", "right_hip"), "hip": ("left_hip", "right_hip"),
    "torso": ("left_shoulder", "right_shoulder"), "neck": ("nose",),
    "right_shoulder": ("right_shoulder",), "right_elbow": ("right_elbow",), "right_hand": ("right_wrist",),
    "left_shoulder": ("left_shoulder",), "left_elbow": ("left_elbow",), "left_hand": ("left_wrist",),
    "right_hip": ("right_hip",), "right_knee": ("right_knee",), "right_foot": ("right_ankle",),
    "left_hip": ("left_hip",), "left_knee": ("left_knee",), "left_foot": ("left_ankle",),
}


def skeleton_from_coco(keypoints: Any, offset: tuple[float, float] = (0.0, 0.0),
                       scale: float = 1.0) -> list[Joint]:
    """Build the skeleton from 17 COCO keypoints.

    Args:
        keypoints: array-like (17, 2) or (17, 3) (x, y[, score]) in pixels of some image.
        offset, scale: each joint is placed at ``(keypoint + offset) * scale``, e.g. the crop's
            top-left corner to go from crop pixels to image pixels.

    Returns:
        16 joints in :data:`SKELETON_JOINTS` order, locations rounded to whole pixels like
        AnimatedDrawings' ``char_cfg.yaml``.
    """
    kp = np.asarray(keypoints, dtype=np.float64)
    if kp.ndim != 2 or kp.shape[0] != 17 or kp.shape[1] < 2:
        raise CharacterError(None, "keypoints", f"expected 17 keypoints of (x, y[, score]), got shape {kp.shape}")
    xy = kp[:, :2]
    if not np.isfinite(xy).all():
        raise CharacterError(None, "keypoints", "keypoints contain NaN or infinite coordinates")
    joints = []
    for name in SKELETON_JOINTS:
        loc = (xy[[_K[k] for k in _FROM_COCO[name]]].mean(axis=0) + np.asarray(offset)) * scale
        joints.append(Joint(name, (float(np.round(loc[0])), float(np.round(loc[1]))), SKELETON_PARENTS[name]))
    return joints


def skeleton_from_client(spec: Any) -> list[Joint]:
    """Parse joints a client sends, in either of two forms (pixels of the uploaded image, y down):

    * a mapping of the 16 joint names to ``[x, y]``: ``{"root": [264, 397], "hip": [264, 397], ...}``;
    * a ``char_cfg.yaml``-style list: ``[{"name": "root", "loc": [264, 397], "parent": null}, ...]``
      (the ``skeleton`` list itself, or a mapping holding it under ``"skeleton"``).

    Raises :class:`CharacterError` naming what is wrong.
    """
    if isinstance(spec, Mapping) and "skeleton" in spec:
        spec = spec["skeleton"]
    if isinstance(spec, Mapping):
        missing = [n for n in SKELETON_JOINTS if n not in spec]
        extra = sorted(set(spec) - set(SKELETON_JOINTS))
        if missing or extra:
            raise CharacterError(None, "joints", "expected the 16 joints " + ", ".join(SKELETON_JOINTS)
                                 + (f"; missing: {', '.join(missing)}" if missing else "")
                                 + (f"; unknown: {', '.join(extra)}" if extra else ""))
        joints = [Joint(n, _xy(spec[n], n), SKELETON_PARENTS[n]) for n in SKELETON_JOINTS]
    elif isinstance(spec, Sequence) and not isinstance(spec, (str, bytes)):
        joints = skeleton_from_config(spec)
        joints = [Joint(j.name, _xy(j.loc, j.name), j.parent) for j in joints]
        names = [j.name for j in joints]
        missing = [n for n in SKELETON_JOINTS if n not in names]
        if missing:
            raise CharacterError(None, "joints", f"missing joints: {', '.join(missing)}")
    else:
        raise CharacterError(None, "joints", "expected a mapping of joint name -> [x, y] or a skeleton list")
    return joints


def transform_skeleton(joints: Sequence[Joint], offset: tuple[float, float] = (0.0, 0.0),
                       scale: float = 1.0) -> list[Joint]:
    """Joints moved to ``(loc + offset) * scale`` (e.g. from one image's pixels to a crop's)."""
    ox, oy = offset
    return [Joint(j.name, ((j.loc[0] + ox) * scale, (j.loc[1] + oy) * scale), j.parent) for j in joints]


def _xy(value: Any, name: str) -> tuple[float, float]:
    """``[x, y]``: a list or tuple of two JSON numbers (not strings, not booleans: ``"12"`` would
    otherwise read as the two characters 1 and 2, ``true`` as 1)."""
    try:
        if not (isinstance(value, (list, tuple)) and len(value) == 2
                and all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
                        for v in value)):
            raise TypeError
        x, y = (float(v) for v in value)
    except (TypeError, ValueError, OverflowError):
        text = repr(value)
        raise CharacterError(None, f"joints.{name}", "expected [x, y] numbers, got "
                             + (text if len(text) <= 80 else text[:80] + "...")) from None
    if not (np.isfinite(x) and np.isfinite(y)):
        raise CharacterError(None, f"joints.{name}", "coordinates must be finite numbers")
    return x, y
