"""Linear-blend skinning of the character's mesh: per-vertex joint weights and per-frame joint transforms.

The animator deforms the mesh with ARAP, the joints being the handles (:mod:`animator.arap`): that
needs our solver at play time. A glTF viewer only does linear-blend skinning (each vertex follows a
weighted mix of its joints' rigid transforms), so the export approximates ARAP by it:

Weights: each bone (parent -> child joint) is driven by its parent joint, whose rotation turns it
(as in the retargeting, where every child of a joint turns with that joint's angle). A vertex takes
the joints of its nearest bones, distances measured through the mesh
(:func:`animator.mesh.bone_distances`, the distances the rasteriser uses to give texels their body
part), so an arm lying against the body is not glued to it. Joints whose bone is within ``blend``
pixels of the nearest one share the vertex with weight ``1 - (d - d_min) / blend``, the four
largest kept and normalised: a vertex midway between two bones takes half of each, and the weights
fade smoothly over one mesh cell around each elbow and knee, where ARAP bends the mesh smoothly too.

Transforms: each joint's world angle per frame is the rotation that best maps its rest child
offsets onto the posed ones (2-D Procrustes: the argument of sum(conj(rest) * posed) over its
children, as complex numbers); a joint without children of non-zero length keeps its parent's
angle. Each joint's local translation is its posed offset from its parent, seen in the parent's
turned frame, so joint positions are reproduced exactly even where a bone's length changes.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..mesh import Mesh, bone_distances

#: Most joints that influence one vertex (glTF's JOINTS_0 / WEIGHTS_0 hold four).
INFLUENCES = 4


def skin_weights(mesh: Mesh, rest: np.ndarray, parents: Sequence[int], blend: float | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Joint indices (V, 4) uint16 and weights (V, 4) float32 (rows sum to 1, largest first).

    Args:
        mesh: the character's mesh (vertices in drawing pixels).
        rest: (J, 2) joint rest positions, same frame.
        parents: parent index per joint (-1 for the top joint).
        blend: the fade width in pixels (default: one mesh cell).
    """
    bones = [(p, c) for c, p in enumerate(parents) if p >= 0]
    dist = bone_distances(mesh, np.array([[rest[p], rest[c]] for p, c in bones]))   # (V, B)
    J = len(rest)
    per_joint = np.full((len(mesh.vertices), J), np.inf)
    for b, (p, _) in enumerate(bones):
        per_joint[:, p] = np.minimum(per_joint[:, p], dist[:, b])
    blend = float(mesh.cell if blend is None else blend)
    d_min = per_joint.min(axis=1, keepdims=True)
    w = np.clip(1.0 - (per_joint - d_min) / blend, 0.0, 1.0)
    w[~np.isfinite(per_joint)] = 0.0
    unreached = ~np.isfinite(d_min[:, 0])       # no bone reaches the vertex's piece: the top joint
    w[unreached, parents.index(-1)] = 1.0
    top = np.argsort(-w, axis=1, kind="stable")[:, :INFLUENCES]
    tw = np.take_along_axis(w, top, axis=1)
    tw /= tw.sum(axis=1, keepdims=True)
    top = np.where(tw > 0, top, 0)            # unused slots: joint 0, weight 0
    return top.astype(np.uint16), tw.astype(np.float32)


def world_angles(rest: np.ndarray, posed: np.ndarray, parents: Sequence[int]) -> np.ndarray:
    """(F, J) world rotation angle of each joint per frame, radians, counter-clockwise in the frame
    of ``rest`` and ``posed`` ((J, 2) and (F, J, 2); parents before children, as ``parents`` is)."""
    F, J = posed.shape[:2]
    rz = rest[:, 0] + 1j * rest[:, 1]
    pz = posed[..., 0] + 1j * posed[..., 1]
    fit = np.zeros((F, J), np.complex128)
    for c, p in enumerate(parents):
        if p >= 0 and abs(rz[c] - rz[p]) > 1e-9:
            fit[:, p] += np.conj(rz[c] - rz[p]) * (pz[:, c] - pz[:, p])
    angles = np.zeros((F, J))
    for j, p in enumerate(parents):
        has = np.abs(fit[:, j]) > 1e-12
        inherited = angles[:, p] if p >= 0 else 0.0
        angles[:, j] = np.where(has, np.angle(fit[:, j]), inherited)
    return angles


def local_transforms(rest: np.ndarray, posed: np.ndarray, parents: Sequence[int]
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Per frame and joint, the local translation (F, J, 2) and local angle (F, J) relative to the
    parent (the top joint: relative to the origin), such that composing them down the tree puts
    every joint at ``posed``."""
    ang = world_angles(rest, posed, parents)
    trans = np.empty_like(posed, dtype=np.float64)
    local = np.empty_like(ang)
    for j, p in enumerate(parents):
        if p < 0:
            trans[:, j] = posed[:, j]
            local[:, j] = ang[:, j]
            continue
        d = posed[:, j] - posed[:, p]
        c, s = np.cos(-ang[:, p]), np.sin(-ang[:, p])
        trans[:, j, 0] = c * d[:, 0] - s * d[:, 1]
        trans[:, j, 1] = s * d[:, 0] + c * d[:, 1]
        local[:, j] = ang[:, j] - ang[:, p]
    return trans, local
