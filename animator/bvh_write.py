"""Writing BVH text: a skeleton (names, parents, offsets) and per-joint local rotations -> a clip.

The inverse of :mod:`animator.bvh` for the clips this library makes: every joint but the root has
the rotation channels ``Zrotation Xrotation Yrotation`` (``R = Rz @ Rx @ Ry``, degrees); the root
has ``Xposition Yposition Zposition`` first. End sites are written as ``End Site`` blocks.
"""
from __future__ import annotations

import numpy as np

#: Rotation channel order written for every joint (``R = Rz @ Rx @ Ry``).
ORDER = "ZXY"


def matrix_to_euler_zxy(m: np.ndarray) -> np.ndarray:
    """Angles (..., 3) in degrees ``(z, x, y)`` with ``m = Rz(z) @ Rx(x) @ Ry(y)`` for (..., 3, 3) rotations.

    ``x`` is in [-90, 90]; at ``x = +-90`` (gimbal lock) ``y`` is set to 0 and ``z`` takes the rest.
    """
    m = np.asarray(m, dtype=np.float64)
    sx = np.clip(m[..., 2, 1], -1.0, 1.0)
    x = np.arcsin(sx)
    cx = np.sqrt(np.maximum(0.0, 1.0 - sx * sx))
    locked = cx < 1e-6
    z = np.where(locked, np.arctan2(m[..., 1, 0], m[..., 0, 0]), np.arctan2(-m[..., 0, 1], m[..., 1, 1]))
    y = np.where(locked, 0.0, np.arctan2(-m[..., 2, 0], m[..., 2, 2]))
    return np.degrees(np.stack([z, x, y], axis=-1))


def bvh_text(names: list[str], parents: list[int], offsets: np.ndarray, end_site: list[bool],
             root_positions: np.ndarray, local_rotations: np.ndarray, frame_time_s: float) -> str:
    """BVH text of a clip.

    Args:
        names: J joint names in depth-first order (parents before children; index 0 the root).
        parents: J parent indices (-1 for the root).
        offsets: (J, 3) rest offsets from the parent, file units.
        end_site: J flags; end sites get no channels (their name is not written).
        root_positions: (F, 3) root translation per frame, file units.
        local_rotations: (F, J, 3, 3) local rotation of each joint (end sites ignored).
        frame_time_s: seconds per frame.
    """
    n = len(names)
    children: list[list[int]] = [[] for _ in range(n)]
    for j in range(1, n):
        if not (0 <= parents[j] < j):
            raise ValueError(f"joint {names[j]!r}: parents must come before their children")
        children[parents[j]].append(j)
    order: list[int] = []
    todo = [0]
    while todo:
        j = todo.pop()
        order.append(j)
        todo.extend(reversed(children[j]))
    if order != list(range(n)):
        raise ValueError("joints must be listed in depth-first order (the order of the MOTION columns)")
    lines = ["HIERARCHY"]

    def block(j: int, depth: int) -> None:
        pad = "\t" * depth
        if end_site[j]:
            lines.append(f"{pad}End Site")
        else:
            lines.append(f"{pad}{'ROOT' if j == 0 else 'JOINT'} {names[j]}")
        lines.append(pad + "{")
        lines.append(f"{pad}\tOFFSET {' '.join(f'{v:.5f}' for v in offsets[j])}")
        if not end_site[j]:
            pos = "Xposition Yposition Zposition " if j == 0 else ""
            lines.append(f"{pad}\tCHANNELS {6 if j == 0 else 3} {pos}Zrotation Xrotation Yrotation")
        for c in children[j]:
            block(c, depth + 1)
        lines.append(pad + "}")

    block(0, 0)
    rotated = [j for j in range(n) if not end_site[j]]
    angles = matrix_to_euler_zxy(local_rotations[:, rotated])  # (F, R, 3)
    angles = np.degrees(np.unwrap(np.radians(angles), axis=0))  # no 360-degree jumps between frames
    table = np.concatenate([root_positions, angles.reshape(len(angles), -1)], axis=1)
    lines += ["MOTION", f"Frames: {len(table)}", f"Frame Time: {frame_time_s:.7f}"]
    lines += [" ".join(f"{v:.4f}" for v in row) for row in table]
    return "\n".join(lines) + "\n"


__all__ = ["ORDER", "bvh_text", "matrix_to_euler_zxy"]
