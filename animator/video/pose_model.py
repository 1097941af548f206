"""The pose model: MediaPipe's BlazePose GHUM 3D (full) finds a person's 33 landmarks in each video frame.

The model file ``animator/models/pose_landmarker_full.task`` ships with the project (Apache-2.0;
provenance and checksum in ``animator/models/README.md``); nothing is downloaded at run time.
``mediapipe`` is imported on first use only (it takes seconds and loads matplotlib and OpenCV), so
``import animator`` never pays for it. Runs on the CPU, one frame after another in MediaPipe's video
mode (it tracks the person from frame to frame instead of searching every frame).

Output: a :class:`animator.video.landmarks.PoseTrack` in metres, MediaPipe's world axes (x to the
image's right, y down, z away from the camera). MediaPipe's world landmarks are centred on the hips
in every frame; the hips' movement across the picture is added back from the image landmarks,
converted to metres by the person's own size (the median ratio of the shoulders-to-hips distance in
metres to the same distance in pixels). Movement towards or away from the camera is not recovered.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from .landmarks import INDEX, N_LANDMARKS, PoseTrack

MODEL_PATH = Path(__file__).resolve().parents[1] / "models" / "pose_landmarker_full.task"

#: progress(frames done, frames expected) after each frame.
Progress = Callable[[int, int], None]


def _landmarker(model_path: Path):
    os.environ.setdefault("GLOG_minloglevel", "2")  # MediaPipe's C++ INFO lines on stderr
    from mediapipe.tasks.python import vision
    from mediapipe.tasks.python.core import base_options

    opts = vision.PoseLandmarkerOptions(base_options=base_options.BaseOptions(model_asset_path=str(model_path)),
                                        running_mode=vision.RunningMode.VIDEO, num_poses=1)
    return vision.PoseLandmarker.create_from_options(opts)


def _image(frame: np.ndarray):
    import mediapipe

    return mediapipe.Image(image_format=mediapipe.ImageFormat.SRGB, data=np.ascontiguousarray(frame))


def track_frames(frames: Iterable[np.ndarray], fps: float, expected: int = 0, progress: Progress | None = None,
                 model_path: Path = MODEL_PATH) -> tuple[PoseTrack, np.ndarray]:
    """Run the pose model over RGB frames ((H, W, 3) uint8, one size) taken ``fps`` times a second.

    Returns the track (absolute positions, see the module docstring) and the image landmarks,
    (F, 33, 2) float64 pixels (x right, y down; NaN where no person was found).
    """
    world, image, present = [], [], []
    landmarker = _landmarker(model_path)
    try:
        for k, frame in enumerate(frames):
            result = landmarker.detect_for_video(_image(frame), int(round(k * 1000.0 / fps)))
            found = bool(result.pose_world_landmarks)
            present.append(found)
            if found:
                h, w = frame.shape[:2]
                world.append([(p.x, p.y, p.z) for p in result.pose_world_landmarks[0]])
                image.append([(p.x * w, p.y * h) for p in result.pose_landmarks[0]])
            else:
                world.append(np.full((N_LANDMARKS, 3), np.nan))
                image.append(np.full((N_LANDMARKS, 2), np.nan))
            if progress is not None:
                progress(k + 1, max(expected, k + 1))
    finally:
        landmarker.close()
    n = len(present)
    world_a = np.asarray(world, dtype=np.float64).reshape(n, N_LANDMARKS, 3)
    image_a = np.asarray(image, dtype=np.float64).reshape(n, N_LANDMARKS, 2)
    present_a = np.asarray(present, dtype=bool)
    points = world_a + root_motion(world_a, image_a, present_a)[:, None, :]
    return PoseTrack(points=points, present=present_a, fps=float(fps)), image_a


def root_motion(world: np.ndarray, image: np.ndarray, present: np.ndarray) -> np.ndarray:
    """(F, 3) metres: the hips' centre's movement in the picture since the first frame with a person
    (x, y; z = 0), scaled by the person's median metres per pixel. Zero where there is nobody."""
    out = np.zeros((len(present), 3))
    if not present.any():
        return out
    lh, rh, ls, rs = (INDEX[n] for n in ("left_hip", "right_hip", "left_shoulder", "right_shoulder"))
    hips_px = (image[:, lh] + image[:, rh]) / 2
    trunk_px = np.linalg.norm((image[:, ls] + image[:, rs]) / 2 - hips_px, axis=-1)
    trunk_m = np.linalg.norm((world[:, ls] + world[:, rs]) / 2 - (world[:, lh] + world[:, rh]) / 2, axis=-1)
    ok = present & (trunk_px > 1e-6)
    if not ok.any():
        return out
    m_per_px = float(np.median(trunk_m[ok] / trunk_px[ok]))
    first = int(np.flatnonzero(present)[0])
    out[present, :2] = (hips_px[present] - hips_px[first]) * m_per_px
    return out


__all__ = ["MODEL_PATH", "Progress", "root_motion", "track_frames"]
