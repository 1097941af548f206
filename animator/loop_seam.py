"""How well a clip loops: the pose jump between its last and first frame, and the cut that makes it least.

A GIF plays its frames round and round, so after the last frame the first one comes. Where the two
poses differ, the character visibly jumps. Measured on a posed character (a
:class:`animator.retarget.Motion2D`, drawing pixels): per frame, every joint's position relative
to the character's root joint (so a clip that travels, a walk, is judged on its pose, not on where
it got to), then the mean over joints of the distance between the two frames' relative positions,
in % of the character's height (the rows its drawing's mask covers, pixels).

A character moving normally changes its pose between two frames too: :func:`step_pct` gives the
median frame-to-frame change, so a loop gap near it means the jump back is as smooth as any
other step.
"""
from __future__ import annotations

import numpy as np


def pose_frames(positions: np.ndarray, root: int) -> np.ndarray:
    """(F, J, 2) joint positions relative to joint ``root`` in each frame (the clip's travel removed)."""
    p = np.asarray(positions, dtype=np.float64)
    return p - p[:, root:root + 1]


def pose_distance_pct(a: np.ndarray, b: np.ndarray, height_px: float) -> np.ndarray:
    """Mean joint distance between root-relative poses ``a`` and ``b`` (..., J, 2), in % of ``height_px``."""
    return np.linalg.norm(np.asarray(a) - np.asarray(b), axis=-1).mean(axis=-1) / float(height_px) * 100.0


def loop_gap_pct(positions: np.ndarray, root: int, height_px: float) -> float:
    """The pose jump from the last frame back to the first, in % of the character's height."""
    poses = pose_frames(positions, root)
    return float(pose_distance_pct(poses[-1], poses[0], height_px))


def step_pct(positions: np.ndarray, root: int, height_px: float) -> float:
    """The median pose change between consecutive frames, in % of the character's height."""
    poses = pose_frames(positions, root)
    if len(poses) < 2:
        return 0.0
    return float(np.median(pose_distance_pct(poses[1:], poses[:-1], height_px)))


def best_loop(positions: np.ndarray, root: int, height_px: float, min_frames: int) -> tuple[int, int, float]:
    """(first, last, gap): the frames (inclusive, indices into ``positions``) of the cut of at least
    ``min_frames`` frames whose last pose is closest to its first, and that gap in % of the height.
    Among cuts within 0.1 % of the best gap, the longest wins (more of the clip is kept)."""
    poses = pose_frames(positions, root)
    n = len(poses)
    if not 2 <= min_frames <= n:
        raise ValueError(f"min_frames must be 2..{n}, got {min_frames}")
    gaps = pose_distance_pct(poses[:, None], poses[None, :], height_px)  # gaps[first, last]
    first, last = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    ok = last - first + 1 >= min_frames
    best = gaps[ok].min()
    near = ok & (gaps <= best + 0.1)
    length = np.where(near, last - first, -1)
    f, e = np.unravel_index(int(np.argmax(length)), length.shape)
    return int(f), int(e), float(gaps[f, e])


def character_height_px(character) -> float:
    """A character's height: the rows its drawing's mask covers, drawing pixels."""
    rows = np.flatnonzero(np.asarray(character.mask).any(axis=1))
    return float(rows[-1] - rows[0] + 1)
