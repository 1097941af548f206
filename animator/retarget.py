"""Retargeting: pose a drawn character's 2D skeleton from a 3D BVH clip, as AnimatedDrawings does.

The maths re-derives AnimatedDrawings' ``Retargeter`` and ``AnimatedDrawingRig`` (MIT) in vectorised
numpy, over all frames at once:

BVH side (3D, y up, "world" units = BVH units x motion ``scale``):

1. Forward kinematics of the clip's frame range (position channels below the root ignored, as
   AnimatedDrawings does), then the up-axis fix (``+z`` up: ``Ry(-90) @ Rx(-90)``).
2. Forward vector per frame: the mean of the normalised ``forward_perp_joint_vectors`` differences,
   crossed with +y (``fwd = (a_z, 0, -a_x)``), normalised. The skeleton is turned about y so the
   first frame's forward vector is +x, and scaled.
3. Canonical pose per frame: joint positions minus the root, turned about y so that frame's forward
   vector is +x.
4. A projection plane per ``bvh_projection_bodypart_groups`` entry: ``frontal`` = the y-z plane
   (normal x), ``sagittal`` = the x-y plane (normal z), ``pca`` = whichever of the two has its normal
   closer to the group's point cloud's least-variance axis (over all frames of the range).
5. The angle of each mapped BVH bone (proximal -> distal joint), projected onto the distal joint's
   plane (frontal: 2D vector ``(-z, y)``; sagittal: ``(x, y)``), in degrees counter-clockwise from +y.
6. Depth of each projected joint: its canonical x (frontal) or z (sagittal) coordinate.

Character side (2D, drawing pixels; computed y-up then flipped to y-down at the end):

7. Each joint's rest angle is its bone's angle (counter-clockwise from up) in the drawing. Joints
   are visited depth-first from ``root`` (children in skeleton order); for a mapped joint ``j`` with
   parent ``p``: ``theta_j = bvh_angle_j - rest_angle_j`` and ``p`` gets the local rotation
   ``theta_j - theta_p`` if ``p`` is mapped too, else ``theta_j`` (the last mapped child of ``p``
   wins). Bones keep the drawing's lengths: ``pos_c = pos_p + R(world_angle_p) @ rest_offset_c``.
   Note: a bone under an unmapped joint turns with its ancestors (e.g. the arms follow the torso
   -> neck angle because the shoulders are unmapped), exactly like AnimatedDrawings.
8. Root motion: per frame, the BVH root's step projected on the offset group's plane axis
   (sagittal: the forward vector; otherwise AnimatedDrawings' ``(-fwd_z, fwd_y, -fwd_x)``) and its
   vertical step, accumulated from 0 at the first frame and scaled by (character limb length in
   pixels) / (BVH limb length) from ``char_bvh_root_offset`` (BVH lengths at the range's last
   frame, as AnimatedDrawings measures them). The motion ``scale`` cancels out.
9. Draw order per frame: body-part groups sorted by the mean depth of their depth drivers,
   smallest (farthest back) first, ties in config order; a group whose depth is <= 0 draws its
   joints in reverse order (``part_reversed``).

Frame of reference of the result: **the drawing's own pixels**, origin at the texture's top-left,
x right, y down. At the first frame of the clip the root is where the drawing has it; later frames
move it by the scaled root motion. AnimatedDrawings instead works in its rig frame: x right, y up,
1 unit = D = max(width, height) pixels, root placed at ``char_starting_location``. Its joint
``(X, Y)`` relates to ours by ``x = root_x + D * (X - sx)`` and ``y = root_y - D * (Y - sy)``,
with ``(root_x, root_y)`` the drawing's root joint and ``(sx, sy)`` the first two components of
``char_starting_location`` (see :func:`to_animated_drawings_frame`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .bvh import BVH, axis_rotation, load_bvh
from .character import Character
from .config import MotionConfig, RetargetConfig, check_against_bvh, check_against_character
from .errors import ConfigError

#: AnimatedDrawings' vector-normalisation floor (its ``utils.TOLERANCE``), in world units.
_TOLERANCE = 1e-5


@dataclass
class Motion2D:
    """A character skeleton posed per output frame.

    Attributes:
        joint_names: J character joint names, in the character's skeleton order.
        positions: (F, J, 2) float64 joint positions in the drawing's own pixel coordinates
            (origin at the texture's top-left, x right, y down, before any canvas placement).
        part_order: (F, P) int, per frame the indices of the character body-part groups
            (``retarget_cfg.char_bodypart_groups``) in back-to-front draw order.
        part_joints: P lists of character joint names, one per body-part group (config order).
        frame_time_s: seconds each output frame is shown.
        source_frames: (F,) int, the BVH frame index each output frame was posed from.
        part_reversed: (F, P) bool, indexed by group (not draw position): True where the group's
            depth is <= 0, where AnimatedDrawings draws that group's joints in reverse list order.
        part_depths: (F, P) float, the mean depth of each group's drivers (world units, + = front).
    """

    joint_names: list[str]
    positions: np.ndarray
    part_order: np.ndarray
    part_joints: list[list[str]]
    frame_time_s: float
    source_frames: np.ndarray
    part_reversed: np.ndarray | None = None
    part_depths: np.ndarray | None = field(default=None, repr=False)

    @property
    def n_frames(self) -> int:
        return int(self.positions.shape[0])

    @property
    def duration_s(self) -> float:
        return self.n_frames * self.frame_time_s

    def joint(self, name: str) -> np.ndarray:
        """(F, 2) positions of one joint."""
        return self.positions[:, self.joint_names.index(name)]

    def select(self, frames: Sequence[int] | np.ndarray, frame_time_s: float | None = None) -> "Motion2D":
        """A new Motion2D with the given output frames (indices into this one)."""
        k = np.asarray(frames, dtype=np.int64)
        return Motion2D(
            joint_names=list(self.joint_names), positions=self.positions[k], part_order=self.part_order[k],
            part_joints=[list(p) for p in self.part_joints],
            frame_time_s=self.frame_time_s if frame_time_s is None else float(frame_time_s),
            source_frames=self.source_frames[k],
            part_reversed=None if self.part_reversed is None else self.part_reversed[k],
            part_depths=None if self.part_depths is None else self.part_depths[k],
        )

    def to_json(self, decimals: int | None = 3) -> dict[str, Any]:
        """``{"joints": [names], "frames": [[[x, y], ...], ...]}`` in drawing pixels, y down (for ``--dump-joints``).

        Also carries ``frame_time_s`` and ``source_frames`` (BVH frame per output frame).
        """
        pos = self.positions if decimals is None else np.round(self.positions, decimals)
        return {
            "joints": list(self.joint_names),
            "frames": pos.tolist(),
            "frame_time_s": self.frame_time_s,
            "source_frames": [int(i) for i in self.source_frames],
        }


@dataclass
class _BVHMotion:
    """Per-frame quantities of the BVH side over the config's whole frame range (see module doc)."""

    bvh: BVH
    start: int
    canonical: np.ndarray        # (F, J, 3) root-relative, facing +x, world units (NaN for unused joints)
    root: np.ndarray             # (F, 3) root path, world units (after up fix, first-frame turn, scale)
    fwd: np.ndarray              # (F, 3) forward vectors, world frame
    world_last: np.ndarray       # (J, 3) world positions at the range's last frame
    planes: dict[str, str]       # group name -> 'x' (frontal normal) or 'z' (sagittal normal)
    joint_plane: dict[str, str]  # BVH joint name -> plane of its (last) projection group


def retarget(character: Character, motion_cfg: MotionConfig, retarget_cfg: RetargetConfig,
             frame_indices: Sequence[int] | np.ndarray | None = None, *,
             frame_time_s: float | None = None) -> Motion2D:
    """Pose ``character`` from the motion clip, the way AnimatedDrawings' retargeter does.

    Args:
        character: the rigged drawing (skeleton in texture pixels, y down).
        motion_cfg: motion config (BVH clip, frame range, up axis, forward vectors, scale).
        retarget_cfg: retarget config (projection groups, mapping, draw groups, root offset, checks).
        frame_indices: BVH frame indices to output (absolute, within the config's frame range), e.g.
            from :func:`animator.frame_rate.frame_indices_for`, or a :class:`animator.frame_rate.FramePlan`
            (its frame time is then used). None: every frame of the range, so output frame i is
            BVH frame ``start_frame_idx + i``.
        frame_time_s: seconds per output frame. Default: the clip's frame time with all frames;
            with ``frame_indices``, the plan's frame time, else the clip's duration divided by the
            number of output frames.

    Returns:
        A :class:`Motion2D` in the drawing's pixel coordinates (see the module docstring).

    Raises:
        ConfigError / BVHError: a config names a joint the BVH or character lacks, an empty frame
        range, zero-length root-offset limbs, or frame indices outside the range.
    """
    bvh = load_bvh(motion_cfg.bvh_path)
    names = [j.name for j in character.skeleton]
    parent_of = {j.name: j.parent for j in character.skeleton}
    check_against_bvh(motion_cfg, retarget_cfg, bvh.has_joint)
    check_against_character(retarget_cfg, names, parent_of)
    start, end = motion_cfg.frame_range(bvh.n_frames)
    clip_frame_time = motion_cfg.frame_time or bvh.frame_time
    n_all = end - start

    plan_time = getattr(frame_indices, "frame_time_s", None)
    if plan_time is not None:  # a FramePlan
        frame_indices = frame_indices.indices  # type: ignore[union-attr]
        frame_time_s = plan_time if frame_time_s is None else frame_time_s
    if frame_indices is None:
        local = np.arange(n_all, dtype=np.int64)
        out_time = clip_frame_time if frame_time_s is None else float(frame_time_s)
    else:
        idx = np.asarray(frame_indices)
        if idx.ndim != 1 or len(idx) == 0 or not np.issubdtype(idx.dtype, np.integer):
            raise ConfigError(None, "frame_indices", "must be a non-empty 1-D array of integer BVH frame indices")
        local = idx.astype(np.int64) - start
        if local.min() < 0 or local.max() >= n_all:
            raise ConfigError(motion_cfg.path, "frame_indices", f"BVH frames must lie in the clip's range [{start}, "
                                                                f"{end}), got {int(idx.min())}..{int(idx.max())}")
        out_time = float(frame_time_s) if frame_time_s is not None else n_all * clip_frame_time / len(local)

    motion = _bvh_motion(bvh, motion_cfg, retarget_cfg, start, end)
    positions, depths = _pose_character(character, motion, retarget_cfg)

    order = np.argsort(depths, axis=1, kind="stable")
    return Motion2D(
        joint_names=names,
        positions=positions[local],
        part_order=order[local],
        part_joints=[list(g.char_joints) for g in retarget_cfg.char_bodypart_groups],
        frame_time_s=out_time,
        source_frames=local + start,
        part_reversed=(depths <= 0)[local],
        part_depths=depths[local],
    )


def _named_joints(motion_cfg: MotionConfig, retarget_cfg: RetargetConfig) -> set[str]:
    out = {motion_cfg.groundplane_joint}
    out.update(n for pair in motion_cfg.forward_perp_joint_vectors for n in pair)
    for g in retarget_cfg.bvh_projection_bodypart_groups:
        out.update(g.bvh_joint_names)
    for g in retarget_cfg.char_bodypart_groups:
        out.update(g.bvh_depth_drivers)
    for chain in retarget_cfg.char_bvh_root_offset.bvh_joints:
        out.update(chain)
    for _, pair in retarget_cfg.char_joint_bvh_joints_mapping:
        out.update(pair)
    return out


def up_rotation(up: str) -> np.ndarray:
    """3x3 rotation taking the BVH's up axis to +y (AnimatedDrawings: ``Ry(-90) @ Rx(-90)`` for +z)."""
    if up == "+z":
        return axis_rotation(np.radians(-90.0), "Y") @ axis_rotation(np.radians(-90.0), "X")
    return np.eye(3)


def forward_vectors(world: np.ndarray, pairs: Sequence[tuple[int, int]], scale: float = 1.0) -> np.ndarray:
    """(F, 3) unit forward vectors in the x-z plane from joint pairs (F, J, 3 positions, y up).

    Mean of the pairs' normalised differences ``a``, then ``(a_z, 0, -a_x)`` normalised: the
    counter-clockwise perpendicular about +y, as AnimatedDrawings computes it (lengths floored at
    its 1e-5 tolerance in world units, ``scale`` converting positions to world units).
    """
    vecs = []
    for a, b in pairs:
        v = (world[:, b] - world[:, a]) * scale
        n = np.linalg.norm(v, axis=-1)
        vecs.append(v / np.maximum(n, _TOLERANCE)[:, None])
    avg = np.mean(vecs, axis=0)
    fwd = np.stack([avg[:, 2], np.zeros(len(avg)), -avg[:, 0]], axis=-1)
    n = np.linalg.norm(fwd, axis=-1)
    return fwd / np.maximum(n, _TOLERANCE)[:, None]


def yaw_matrices(fwd: np.ndarray) -> np.ndarray:
    """(F, 3, 3) rotations about +y taking each forward vector (x-z plane) to +x."""
    angle = np.arctan2(fwd[:, 2], fwd[:, 0])
    return axis_rotation(angle, "Y")


def _bvh_motion(bvh: BVH, motion_cfg: MotionConfig, retarget_cfg: RetargetConfig, start: int, end: int) -> _BVHMotion:
    named = sorted({bvh.index(n) for n in _named_joints(motion_cfg, retarget_cfg)} | {0})
    raw = bvh.world_positions(slice(start, end), nonroot_translations=False, joints=named)
    s = motion_cfg.scale
    world = raw @ up_rotation(motion_cfg.up).T  # (F, J, 3), y up, file units
    pairs = [(bvh.index(a), bvh.index(b)) for a, b in motion_cfg.forward_perp_joint_vectors]
    fwd = forward_vectors(world, pairs, s)
    # Turn the whole clip about y so the first frame faces +x (AnimatedDrawings' rotation_offset), scale it.
    turn = yaw_matrices(fwd[:1])[0]
    world = (world @ turn.T) * s
    fwd = fwd @ turn.T
    root = world[:, 0].copy()
    rel = world - root[:, None, :]
    canonical = np.einsum("fab,fjb->fja", yaw_matrices(fwd), rel)

    planes: dict[str, str] = {}
    joint_plane: dict[str, str] = {}
    for g in retarget_cfg.bvh_projection_bodypart_groups:
        if g.method == "frontal":
            plane = "x"
        elif g.method == "sagittal":
            plane = "z"
        else:
            plane = _pca_plane(canonical[:, [bvh.index(n) for n in g.bvh_joint_names]])
        planes[g.name] = plane
        for n in g.bvh_joint_names:
            joint_plane[n] = plane
    return _BVHMotion(bvh=bvh, start=start, canonical=canonical, root=root, fwd=fwd, world_last=world[-1],
                      planes=planes, joint_plane=joint_plane)


def _pca_plane(points: np.ndarray) -> str:
    """'x' or 'z': the axis closer to the least-variance principal axis of (F, K, 3) points."""
    pts = points.reshape(-1, 3)
    pts = pts - pts.mean(axis=0)
    _, _, vt = np.linalg.svd(pts, full_matrices=False)
    pc3 = vt[2]
    return "x" if abs(pc3[0]) > abs(pc3[2]) else "z"


def bone_angles(canonical: np.ndarray, prox: int, dist: int, plane: str) -> np.ndarray:
    """(F,) angle in degrees [0, 360), counter-clockwise from +y, of a BVH bone projected on its plane."""
    bone = canonical[:, dist] - canonical[:, prox]
    if plane == "x":
        u, v = -bone[:, 2], bone[:, 1]
    else:
        u, v = bone[:, 0], bone[:, 1]
    return np.degrees(np.arctan2(v, u) - np.pi / 2) % 360.0


def _depth(canonical: np.ndarray, joint: int, plane: str) -> np.ndarray:
    return canonical[:, joint, 0] if plane == "x" else canonical[:, joint, 2]


def runtime_check_failures(retarget_cfg: RetargetConfig, rest_up: dict[str, np.ndarray]) -> list[str]:
    """Character joints whose mapping the ``char_runtime_checks`` drop for this drawing.

    ``('above', target, j1, j2)`` fails when ``target`` lies below the line from ``j1`` to ``j2``
    (``rest_up``: rest positions, y up), e.g. a tadpole drawing's neck below its shoulders.
    """
    failed = []
    for check in retarget_cfg.char_runtime_checks:
        _, target, j1, j2 = check
        test = rest_up[j2] - rest_up[j1]
        tv = rest_up[target] - rest_up[j1]
        angle = np.arctan2(test[1], test[0])
        if np.sin(-angle) * tv[0] + np.cos(-angle) * tv[1] < 0:
            failed.append(target)
    return failed


def _pose_character(character: Character, motion: _BVHMotion,
                    retarget_cfg: RetargetConfig) -> tuple[np.ndarray, np.ndarray]:
    """(F, J, 2) positions in drawing pixels (y down) and (F, P) group depths, for every frame of the range.

    Joints whose mapping fails the runtime checks (:func:`runtime_check_failures`) are dropped from
    ``retarget_cfg.mapping`` (step 7 then treats them as unmapped)."""
    rig = _DrawnRig.of(character)
    mapping = retarget_cfg.mapping
    for name in runtime_check_failures(retarget_cfg, dict(zip(rig.names, rig.rest))):
        mapping.pop(name, None)
    local = _local_rotations(rig, motion, mapping)
    root_xy = _root_path(rig, motion, retarget_cfg)
    pos = _chain_joints(rig, local, root_xy)
    pos[..., 1] *= -1.0  # back to y down
    return pos, _group_depths(motion, retarget_cfg)


@dataclass
class _DrawnRig:
    """The drawing's skeleton as arrays, in pixels with y up (steps 7-8 of the module docstring)."""

    names: list[str]
    index: dict[str, int]
    parent: list[int]  # parent joint index, -1 for none
    rest: np.ndarray  # (J, 2) rest positions, drawing pixels, y up
    dfs: list[int]  # joints under 'root', depth first, children in skeleton order

    @classmethod
    def of(cls, character: Character) -> "_DrawnRig":
        skel = character.skeleton
        names = [j.name for j in skel]
        index = {n: i for i, n in enumerate(names)}
        parent = [index[j.parent] if j.parent is not None else -1 for j in skel]
        rest = np.array([[j.loc[0], -j.loc[1]] for j in skel], dtype=np.float64)  # y up
        children: list[list[int]] = [[] for _ in skel]
        for i, p in enumerate(parent):
            if p >= 0:
                children[p].append(i)
        dfs: list[int] = []
        stack = [index.get("root", 0)]
        while stack:
            j = stack.pop()
            dfs.append(j)
            stack.extend(reversed(children[j]))
        return cls(names, index, parent, rest, dfs)


def _local_rotations(rig: _DrawnRig, motion: _BVHMotion, mapping: dict[str, Any]) -> np.ndarray:
    """(F, J) local rotation (radians) of each joint (step 7); AnimatedDrawings sets it on the parent of a
    mapped joint."""
    local = np.zeros((motion.canonical.shape[0], len(rig.names)))
    current: dict[int, np.ndarray] = {}
    for j in rig.dfs:
        name = rig.names[j]
        if name not in mapping:
            continue
        prox, dist = mapping[name]
        plane = motion.joint_plane[dist]
        angle = bone_angles(motion.canonical, _bvh_index(motion, prox), _bvh_index(motion, dist), plane)
        off = rig.rest[j] - rig.rest[rig.parent[j]]
        rest_angle = np.degrees(np.arctan2(off[1], off[0]) - np.pi / 2) % 360.0
        theta = np.radians(angle - rest_angle)
        current[j] = theta
        p = rig.parent[j]
        local[:, p] = theta - current[p] if p in current else theta
    return local


def _root_path(rig: _DrawnRig, motion: _BVHMotion, retarget_cfg: RetargetConfig) -> np.ndarray:
    """(F, 2) root displacement from the first frame in drawing pixels (y up), scaled from BVH world units
    by the limb-length ratio (step 8)."""
    ro = retarget_cfg.char_bvh_root_offset
    rest, index = rig.rest, rig.index
    char_len = sum(float(np.linalg.norm(rest[index[c[k + 1]]] - rest[index[c[k]]]))
                   for c in ro.char_joints for k in range(len(c) - 1))
    world = motion.world_last
    bvh_len = sum(float(np.linalg.norm(world[_bvh_index(motion, c[k + 1])] - world[_bvh_index(motion, c[k])]))
                  for c in ro.bvh_joints for k in range(len(c) - 1))
    if not bvh_len > 0:
        raise ConfigError(retarget_cfg.path, "char_bvh_root_offset.bvh_joints", "the BVH limb chains have zero length, "
                                                                                "so root motion cannot be scaled")
    k_px = char_len / bvh_len
    plane = motion.planes[ro.bvh_projection_bodypart_group_for_offset]
    fwd = motion.fwd
    axis = fwd if plane == "z" else fwd[:, ::-1] * np.array([-1.0, 1.0, -1.0])
    delta = np.diff(motion.root, axis=0)
    step_x = np.einsum("fa,fa->f", axis[1:], delta)
    root_xy = np.zeros((motion.canonical.shape[0], 2))
    root_xy[1:, 0] = np.cumsum(step_x) * k_px
    root_xy[1:, 1] = np.cumsum(delta[:, 1]) * k_px
    return root_xy


def _chain_joints(rig: _DrawnRig, local: np.ndarray, root_xy: np.ndarray) -> np.ndarray:
    """(F, J, 2) joint positions, drawing pixels, y up: bones keep the drawing's lengths and turn by the
    accumulated local rotations; joints not under 'root' (AnimatedDrawings ignores them) move with the root."""
    n, n_joints = local.shape
    world_angle = np.zeros((n, n_joints))
    pos = np.empty((n, n_joints, 2))
    posed = np.zeros(n_joints, dtype=bool)
    rest = rig.rest
    for j in rig.dfs:
        p = rig.parent[j]
        if p < 0:
            pos[:, j] = rest[j] + root_xy
            world_angle[:, j] = local[:, j]
        else:
            off = rest[j] - rest[p]
            a = world_angle[:, p]
            c, s_ = np.cos(a), np.sin(a)
            pos[:, j, 0] = pos[:, p, 0] + c * off[0] - s_ * off[1]
            pos[:, j, 1] = pos[:, p, 1] + s_ * off[0] + c * off[1]
            world_angle[:, j] = a + local[:, j]
        posed[j] = True
    for j in np.flatnonzero(~posed):
        pos[:, j] = rest[j] + root_xy
    return pos


def _group_depths(motion: _BVHMotion, retarget_cfg: RetargetConfig) -> np.ndarray:
    """(F, P) depth of each body-part group: the mean depth of its BVH depth drivers (step 9)."""
    depths = np.empty((motion.canonical.shape[0], len(retarget_cfg.char_bodypart_groups)))
    for g_i, g in enumerate(retarget_cfg.char_bodypart_groups):
        depths[:, g_i] = np.mean([_depth(motion.canonical, _bvh_index(motion, d), motion.joint_plane[d])
                                  for d in g.bvh_depth_drivers], axis=0)
    return depths


def _bvh_index(motion: _BVHMotion, name: str) -> int:
    return motion.bvh.index(name)


def to_animated_drawings_frame(motion: Motion2D, character: Character, retarget_cfg: RetargetConfig) -> np.ndarray:
    """Convert positions to AnimatedDrawings' rig frame: (F, J, 2), y up, units of max(width, height) px,
    root placed at ``char_starting_location`` at the first frame of the clip."""
    d = float(max(character.size))
    root_joint = next((j for j in character.skeleton if j.name == "root"), character.skeleton[0])
    root = np.asarray(root_joint.loc, dtype=np.float64)
    sx, sy = retarget_cfg.char_starting_location[:2]
    out = np.empty_like(motion.positions)
    out[..., 0] = (motion.positions[..., 0] - root[0]) / d + sx
    out[..., 1] = (root[1] - motion.positions[..., 1]) / d + sy
    return out


__all__ = ["Motion2D", "bone_angles", "forward_vectors", "retarget", "runtime_check_failures",
           "to_animated_drawings_frame", "up_rotation", "yaw_matrices"]
