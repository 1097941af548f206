"""A person's pose track (BlazePose's 33 landmarks per frame) -> a BVH clip on a fixed humanoid skeleton.

Skeleton: 23 joints and 5 end sites, named as FAIR / Mixamo clips name them so :mod:`animator.auto_retarget`
recognises it (``Hips`` root; ``Spine`` -> ``Chest`` -> ``Neck`` -> ``Head``; per side a collar
``LeftShoulder`` -> ``LeftArm`` -> ``LeftForeArm`` -> ``LeftHand`` -> ``LeftHandEnd``, and
``LeftUpLeg`` -> ``LeftLeg`` -> ``LeftFoot`` -> ``LeftToeBase``; an end site at the nose).
``LeftHandEnd`` and ``LeftToeBase`` are real joints (at the fingers and toes) because the
retargeter's projection planes are chosen from every joint of a limb, ends included. The topology
is fixed; each bone's length is the median over the clip of the person's own landmark distance
(left and right averaged), so the root motion the retargeter scales by the legs' length is in the
person's own proportions.
Rest pose: a T-pose, y up, facing +z, the person's left at +x. Units: centimetres.

Per frame (all frames at once, vectorised):

* ``Hips``: a full rotation from the hip line (x: right hip -> left hip) and the trunk's up
  direction (hips -> shoulders centre), so the pelvis turns with the hips (pelvis twist); its
  position is the hips' centre (root motion).
* ``Chest``: likewise from the shoulder line (chest twist); ``Spine`` (zero-length, at the hips)
  swings the chest onto the shoulders' centre.
* Every other bone: a swing, the smallest rotation taking the bone's direction as its parent
  carries it onto the observed direction to the next landmark; twist about a limb is inherited.

Landmarks used: shoulders, elbows, wrists, index and pinky (hand end), hips, knees, ankles, foot
index (toes), ears (head centre) and nose (head end). Coordinate frames: :mod:`animator.video.landmarks`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..bvh import quaternion_to_matrix
from ..bvh_write import bvh_text
from .landmarks import INDEX, MAX_GAP_S, SMOOTH_SIGMA_S, PoseTrack, clean_track

#: Metres (MediaPipe axes: x right, y down, z away from the camera) -> BVH centimetres, y up, z towards it.
_TO_BVH = np.array([100.0, -100.0, -100.0])

_X, _Y, _Z = np.eye(3)


@dataclass(frozen=True)
class _Bone:
    name: str
    parent: str | None
    rest_dir: np.ndarray  # unit direction of the offset from the parent (zero for a zero-length joint)
    length: str | None    # key in the lengths table, None for a zero offset
    end_site: bool = False


def _skeleton() -> list[_Bone]:
    """The fixed skeleton, depth-first (the order of the BVH's MOTION columns)."""
    z0 = np.zeros(3)
    bones = [_Bone("Hips", None, z0, None), _Bone("Spine", "Hips", z0, None),
             _Bone("Chest", "Spine", _Y, "torso"), _Bone("Neck", "Chest", z0, None),
             _Bone("Head", "Neck", _Y, "neck"), _Bone("HeadEnd", "Head", _Z, "nose", end_site=True)]
    for side, sign in (("Left", 1.0), ("Right", -1.0)):
        bones += [_Bone(f"{side}Shoulder", "Chest", z0, None),
                  _Bone(f"{side}Arm", f"{side}Shoulder", sign * _X, "collar"),
                  _Bone(f"{side}ForeArm", f"{side}Arm", sign * _X, "upper_arm"),
                  _Bone(f"{side}Hand", f"{side}ForeArm", sign * _X, "forearm"),
                  _Bone(f"{side}HandEnd", f"{side}Hand", sign * _X, "hand"),
                  _Bone(f"{side}HandEnd_EndSite", f"{side}HandEnd", z0, None, end_site=True)]
    for side, sign in (("Left", 1.0), ("Right", -1.0)):
        bones += [_Bone(f"{side}UpLeg", "Hips", sign * _X, "pelvis"),
                  _Bone(f"{side}Leg", f"{side}UpLeg", -_Y, "thigh"),
                  _Bone(f"{side}Foot", f"{side}Leg", -_Y, "shin"),
                  _Bone(f"{side}ToeBase", f"{side}Foot", _Z, "foot"),
                  _Bone(f"{side}ToeBaseEnd", f"{side}ToeBase", z0, None, end_site=True)]
    return bones


SKELETON = tuple(_skeleton())
JOINT_NAMES = tuple(b.name for b in SKELETON)


@dataclass(frozen=True)
class VideoClip:
    """A BVH clip made from a pose track.

    Attributes:
        text: the BVH file's text (centimetres, y up).
        first_frame: index in the track of the clip's first frame (leading frames without a person
            are trimmed).
        n_frames: frames in the clip.
        fps: frames per second.
        bridged: frames inside the clip where no person was found (filled by interpolation).
        window: the part of the video it was made from (:class:`animator.video.decode.Window`), when known.
    """

    text: str
    first_frame: int
    n_frames: int
    fps: float
    bridged: int
    window: object = None



def _unit(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.maximum(n, 1e-9)


def swing(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(..., 3, 3) smallest rotations taking directions ``a`` onto ``b`` (..., 3; any lengths).

    Opposite directions turn half a circle about an axis perpendicular to ``a``.
    """
    a, b = _unit(a), _unit(b)
    w = 1.0 + np.sum(a * b, axis=-1)
    v = np.cross(a, b)
    flip = w < 1e-8
    if np.any(flip):
        other = np.where(np.abs(a[..., :1]) < 0.9, _X, _Y)
        axis = _unit(np.cross(a, other))
        v = np.where(flip[..., None], axis, v)
        w = np.where(flip, 0.0, w)
    q = np.concatenate([w[..., None], v], axis=-1)
    return quaternion_to_matrix(_unit(q))


def body_frame(x: np.ndarray, up: np.ndarray) -> np.ndarray:
    """(..., 3, 3) rotations whose x axis is along ``x`` and y axis the part of ``up`` perpendicular to it."""
    ex = _unit(x)
    ez = _unit(np.cross(ex, up))
    ey = np.cross(ez, ex)
    return np.stack([ex, ey, ez], axis=-1)


def _points(track_cm: np.ndarray) -> dict[str, np.ndarray]:
    """Named (F, 3) points of the skeleton's joints and bone ends from (F, 33, 3) landmarks (cm, y up)."""
    lm = {n: track_cm[:, i] for n, i in INDEX.items()}
    p = {"Hips": (lm["left_hip"] + lm["right_hip"]) / 2, "Chest": (lm["left_shoulder"] + lm["right_shoulder"]) / 2}
    p["Spine"] = p["Hips"]
    p["Neck"] = p["Chest"]
    p["Head"] = (lm["left_ear"] + lm["right_ear"]) / 2
    p["HeadEnd"] = lm["nose"]
    for side in ("Left", "Right"):
        s = side.lower()
        p[f"{side}Shoulder"] = p["Chest"]
        p[f"{side}Arm"] = lm[f"{s}_shoulder"]
        p[f"{side}ForeArm"] = lm[f"{s}_elbow"]
        p[f"{side}Hand"] = lm[f"{s}_wrist"]
        p[f"{side}HandEnd"] = (lm[f"{s}_index"] + lm[f"{s}_pinky"]) / 2
        p[f"{side}UpLeg"] = lm[f"{s}_hip"]
        p[f"{side}Leg"] = lm[f"{s}_knee"]
        p[f"{side}Foot"] = lm[f"{s}_ankle"]
        p[f"{side}ToeBase"] = lm[f"{s}_foot_index"]
    return p


def _lengths(p: dict[str, np.ndarray]) -> dict[str, float]:
    """Each bone's length (cm): the median over frames of its landmark distance, left and right averaged."""
    def med(a: str, b: str) -> float:
        return float(np.median(np.linalg.norm(p[b] - p[a], axis=-1)))

    out = {"torso": med("Hips", "Chest"), "neck": med("Chest", "Head"), "nose": med("Head", "HeadEnd")}
    for key, (a, b) in {"collar": ("Shoulder", "Arm"), "upper_arm": ("Arm", "ForeArm"), "forearm": ("ForeArm", "Hand"),
                        "hand": ("Hand", "HandEnd"), "pelvis": ("UpLeg", "UpLeg"), "thigh": ("UpLeg", "Leg"),
                        "shin": ("Leg", "Foot"), "foot": ("Foot", "ToeBase")}.items():
        if key == "pelvis":
            out[key] = med("LeftUpLeg", "RightUpLeg") / 2
        else:
            out[key] = (med(f"Left{a}", f"Left{b}") + med(f"Right{a}", f"Right{b}")) / 2
    return out


def solve_rotations(p: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """World and local rotations (name -> (F, 3, 3)) of every non-end joint from the named points."""
    world: dict[str, np.ndarray] = {}
    up = p["Chest"] - p["Hips"]
    first_child = {}
    for b in SKELETON:
        if b.parent is not None and b.parent not in first_child:
            first_child[b.parent] = b
    for b in SKELETON:
        if b.end_site:
            continue
        if b.name == "Hips":
            world[b.name] = body_frame(p["LeftUpLeg"] - p["RightUpLeg"], up)
        elif b.name == "Chest":
            world[b.name] = body_frame(p["LeftArm"] - p["RightArm"], up)
        elif b.name not in first_child or first_child[b.name].end_site:
            world[b.name] = world[b.parent]  # the last joint of a chain: no landmark beyond it
        else:
            child = first_child[b.name]
            parent_w = world[b.parent]
            carried = parent_w @ child.rest_dir
            world[b.name] = swing(carried, p[child.name] - p[b.name]) @ parent_w
    local = {}
    for b in SKELETON:
        if b.end_site:
            continue
        local[b.name] = world[b.name] if b.parent is None else np.swapaxes(world[b.parent], -1, -2) @ world[b.name]
    return world, local


def track_to_bvh(track: PoseTrack, smooth_sigma_s: float = SMOOTH_SIGMA_S, max_gap_s: float = MAX_GAP_S) -> VideoClip:
    """The BVH clip of a person's pose track (see the module docstring).

    Frames without a person are trimmed at the ends and bridged inside (:func:`animator.video.landmarks.clean_track`).

    Raises:
        NoPersonError: no person in the track (or too few frames with one).
    """
    present = np.asarray(track.present, dtype=bool)
    clean, start = clean_track(track, smooth_sigma_s, max_gap_s)
    p = _points(clean.points * _TO_BVH)
    lengths = _lengths(p)
    _, local = solve_rotations(p)
    names = list(JOINT_NAMES)
    parents = [-1 if b.parent is None else names.index(b.parent) for b in SKELETON]
    offsets = np.array([b.rest_dir * (lengths[b.length] if b.length else 0.0) for b in SKELETON])
    n = clean.n_frames
    rots = np.tile(np.eye(3), (n, len(names), 1, 1))
    for j, b in enumerate(SKELETON):
        if not b.end_site:
            rots[:, j] = local[b.name]
    text = bvh_text(names, parents, offsets, [b.end_site for b in SKELETON], p["Hips"], rots, 1.0 / track.fps)
    return VideoClip(text=text, first_frame=start, n_frames=n, fps=track.fps,
                     bridged=int((~present[start:start + n]).sum()))


__all__ = ["JOINT_NAMES", "SKELETON", "VideoClip", "body_frame", "solve_rotations", "swing", "track_to_bvh"]
