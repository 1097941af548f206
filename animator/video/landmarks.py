"""A person's 3D pose track from a video: BlazePose's 33 landmarks per frame, gaps bridged, smoothed.

Pure numpy; the pose model that produces the track lives in :mod:`animator.video.pose_model`.

Coordinate frame of a :class:`PoseTrack` (MediaPipe's world-landmark axes): metres, x to the
image's right, y down the image, z away from the camera; absolute positions (the model stage adds
the hips' movement across the picture to MediaPipe's hip-centred world landmarks). "Left" and
"right" are the person's own sides, as in BlazePose.

Smoothing is a centred Gaussian window over time (zero lag: the whole video is known before the
clip is written), sigma :data:`SMOOTH_SIGMA_S` seconds, applied to every coordinate of every
landmark; near the ends the window is renormalised over the frames that exist.

Frames with no person: leading and trailing ones are trimmed; an inner gap of at most
:data:`MAX_GAP_S` seconds is filled by linear interpolation of each landmark; around a longer gap
the clip keeps the longest run of frames whose gaps are all short. No person in any frame, or fewer
than :data:`MIN_FRAMES`, raises :class:`animator.errors.NoPersonError`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import NoPersonError

#: BlazePose's 33 landmark names, in the model's output order.
NAMES = (
    "nose", "left_eye_inner", "left_eye", "left_eye_outer", "right_eye_inner", "right_eye", "right_eye_outer",
    "left_ear", "right_ear", "mouth_left", "mouth_right", "left_shoulder", "right_shoulder", "left_elbow",
    "right_elbow", "left_wrist", "right_wrist", "left_pinky", "right_pinky", "left_index", "right_index",
    "left_thumb", "right_thumb", "left_hip", "right_hip", "left_knee", "right_knee", "left_ankle", "right_ankle",
    "left_heel", "right_heel", "left_foot_index", "right_foot_index",
)
INDEX = {n: i for i, n in enumerate(NAMES)}
N_LANDMARKS = len(NAMES)

#: Gaussian smoothing window, standard deviation in seconds (1.5 frames at 30 fps).
SMOOTH_SIGMA_S = 0.05
#: Longest inner run of frames without a person that is bridged by interpolation, seconds.
MAX_GAP_S = 0.5
#: Fewest frames with a person a clip needs.
MIN_FRAMES = 2
#: Shortest usable stretch of video a clip is made of, seconds: a person followed in a few scattered
#: frames made a 0.1 s "motion" of a video seconds long, without a word.
MIN_SECONDS = 0.5


@dataclass(frozen=True)
class PoseTrack:
    """One person's landmarks over a video.

    Attributes:
        points: (F, 33, 3) float64 positions in metres (see the module docstring for the axes);
            rows where ``present`` is False are ignored (may be NaN).
        present: (F,) bool, whether the model found a person in that frame.
        fps: frames per second of the track.
    """

    points: np.ndarray
    present: np.ndarray
    fps: float

    def __post_init__(self) -> None:
        if self.points.ndim != 3 or self.points.shape[1:] != (N_LANDMARKS, 3):
            raise ValueError(f"points must be (F, {N_LANDMARKS}, 3), got {self.points.shape}")
        if self.present.shape != self.points.shape[:1]:
            raise ValueError(f"present must be ({self.points.shape[0]},), got {self.present.shape}")
        if not (self.fps > 0 and np.isfinite(self.fps)):
            raise ValueError(f"fps must be a positive number, got {self.fps}")

    @property
    def n_frames(self) -> int:
        return int(self.points.shape[0])


def usable_span(present: np.ndarray, max_gap: int) -> tuple[int, int]:
    """``(start, end)`` (end exclusive) of the longest run of frames that starts and ends with a
    person and has no gap longer than ``max_gap`` frames inside; raises NoPersonError if none."""
    idx = np.flatnonzero(present)
    if len(idx) == 0:
        raise NoPersonError("no person was found in any frame of the video")
    breaks = np.flatnonzero(np.diff(idx) - 1 > max_gap)
    starts = np.concatenate([[0], breaks + 1])
    ends = np.concatenate([breaks, [len(idx) - 1]])
    best = int(np.argmax(idx[ends] - idx[starts]))
    start, end = int(idx[starts[best]]), int(idx[ends[best]]) + 1
    if int(present[start:end].sum()) < MIN_FRAMES:
        raise NoPersonError(f"a person was found in only {int(present.sum())} frame(s) of the video; "
                            f"a motion needs at least {MIN_FRAMES}")
    return start, end


def bridge_gaps(points: np.ndarray, present: np.ndarray) -> np.ndarray:
    """(F, K, 3) ``points`` with the rows where ``present`` is False linearly interpolated between
    the nearest present frames (held constant beyond the first and last)."""
    idx = np.flatnonzero(present)
    if len(idx) == len(present):
        return points.astype(np.float64, copy=True)
    t = np.arange(len(present))
    flat = points[idx].reshape(len(idx), -1)
    out = np.empty((len(present), flat.shape[1]))
    for c in range(flat.shape[1]):
        out[:, c] = np.interp(t, idx, flat[:, c])
    return out.reshape((len(present),) + points.shape[1:])


def smooth(points: np.ndarray, sigma_frames: float) -> np.ndarray:
    """Centred Gaussian smoothing of (F, ...) ``points`` along axis 0 (sigma in frames; <= 0: none).

    The window is cut at 3 sigma and renormalised near the ends, so a still pose stays exactly still.
    """
    if sigma_frames <= 0 or len(points) < 2:
        return points.astype(np.float64, copy=True)
    n = len(points)
    half = max(1, int(np.ceil(3 * sigma_frames)))
    k = np.exp(-0.5 * (np.arange(-half, half + 1) / sigma_frames) ** 2)
    flat = points.reshape(n, -1).astype(np.float64)
    # the full convolution's centred n values: a window longer than the track (a video of a few
    # frames) is cut by the track's ends like any other, where mode="same" would answer the longer length
    weight = np.convolve(np.ones(n), k, mode="full")[half:half + n]
    out = np.empty_like(flat)
    for c in range(flat.shape[1]):
        out[:, c] = np.convolve(flat[:, c], k, mode="full")[half:half + n] / weight
    return out.reshape(points.shape)


def clean_track(track: PoseTrack, sigma_s: float = SMOOTH_SIGMA_S,
                max_gap_s: float = MAX_GAP_S) -> tuple[PoseTrack, int]:
    """The track trimmed to its usable span, gaps bridged, and smoothed (every frame present), and
    the index in ``track`` of its first frame.

    Raises:
        NoPersonError: no person in any frame (or in fewer than :data:`MIN_FRAMES`), or followed for less
            than :data:`MIN_SECONDS` in a row.
    """
    present = np.asarray(track.present, dtype=bool)
    start, end = usable_span(present, max(0, int(round(max_gap_s * track.fps))))
    if (end - start) / track.fps < MIN_SECONDS and end - start < len(present):   # lost for most of the video
        raise NoPersonError(f"the person was followed in only {int(present.sum())} of {len(present)} frames, "
                            f"{(end - start) / track.fps:.2f} s of the {len(present) / track.fps:.1f} s read; a motion "
                            f"needs at least {MIN_SECONDS:g} s of them in a row: film the whole body, in good light, "
                            "filling most of the frame")
    pts = bridge_gaps(track.points[start:end], present[start:end])
    pts = smooth(pts, sigma_s * track.fps)
    return PoseTrack(points=pts, present=np.ones(end - start, dtype=bool), fps=track.fps), start


__all__ = ["INDEX", "MAX_GAP_S", "MIN_FRAMES", "MIN_SECONDS", "NAMES", "N_LANDMARKS", "PoseTrack", "SMOOTH_SIGMA_S",
           "bridge_gaps", "clean_track", "smooth", "usable_span"]
