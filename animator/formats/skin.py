"""Linear-blend skinning of the character's mesh: per-vertex joint weights and per-frame joint transforms.

The animator deforms the mesh with ARAP, the joints being the handles (:mod:`animator.arap`): that
needs our solver at play time. A glTF viewer only does linear-blend skinning (each vertex follows a
weighted mix of its joints' rigid transforms), so the export approximates ARAP by it.

Transforms: each joint's world angle per frame is the rotation that best maps its rest child
offsets onto the posed ones (2-D Procrustes: the argument of sum(conj(rest) * posed) over its
children, as complex numbers); a joint without children of non-zero length keeps its parent's
angle. Each joint's local translation is its posed offset from its parent, seen in the parent's
turned frame, so joint positions are reproduced exactly even where a bone's length changes. A
vertex bound to joint j alone moves as ``R(angle_j) (v - rest_j) + posed_j``.

Weights, in two steps:

1. *Nearest bones* (:func:`skin_weights`): each bone (parent -> child joint) is driven by its
   parent joint, whose rotation turns it (as in the retargeting, where every child of a joint
   turns with that joint's angle). A vertex takes the joints of its nearest bones, distances
   measured through the mesh (:func:`animator.mesh.bone_distances`, the distances the rasteriser
   gives texels their body part by), so an arm lying against the body is not glued to it. Joints
   whose bone is within ``blend`` pixels of the nearest share the vertex with weight
   ``1 - (d - d_min) / blend``.
2. *Fitted to ARAP* (:func:`fit_weights`): per vertex, the non-negative weights over its
   ``candidates`` nearest joints, summing to 1, whose blend of the joints' transforms comes closest
   (least squares, in pixels) to where ARAP put the vertex in up to ``poses`` frames of the clip,
   pulled towards the nearest-bone weights (``prior``) so that a vertex the frames say little about
   keeps them. On char1 + dab this halves the distance to ARAP's vertices (mean 8.4 -> 5.3 px,
   95th percentile 31 -> 17 px on a 602 px tall drawing).

Both keep the four largest weights per vertex (glTF's JOINTS_0/WEIGHTS_0), normalised.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..mesh import Mesh, bone_distances

#: Most joints that influence one vertex (glTF's JOINTS_0 / WEIGHTS_0 hold four).
INFLUENCES = 4


def joint_distances(mesh: Mesh, rest: np.ndarray, parents: Sequence[int]) -> np.ndarray:
    """(V, J) distance through the mesh from each vertex to the nearest bone each joint drives
    (inf for joints that drive none: the leaves), drawing pixels."""
    bones = [(p, c) for c, p in enumerate(parents) if p >= 0]
    dist = bone_distances(mesh, np.array([[rest[p], rest[c]] for p, c in bones]))   # (V, B)
    per_joint = np.full((len(mesh.vertices), len(rest)), np.inf)
    for b, (p, _) in enumerate(bones):
        per_joint[:, p] = np.minimum(per_joint[:, p], dist[:, b])
    return per_joint


def _top(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The :data:`INFLUENCES` largest weights per row, normalised, largest first; unused slots joint 0."""
    top = np.argsort(-w, axis=1, kind="stable")[:, :INFLUENCES]
    tw = np.take_along_axis(w, top, axis=1)
    tw /= tw.sum(axis=1, keepdims=True)
    top = np.where(tw > 0, top, 0)
    return top.astype(np.uint16), tw.astype(np.float32)


def nearest_bone_weights(per_joint: np.ndarray, parents: Sequence[int], blend: float) -> np.ndarray:
    """(V, J) weights from :func:`joint_distances` (step 1 of the module docstring), rows summing to 1."""
    d_min = per_joint.min(axis=1, keepdims=True)
    w = np.clip(1.0 - (per_joint - d_min) / blend, 0.0, 1.0)
    w[~np.isfinite(per_joint)] = 0.0
    unreached = ~np.isfinite(d_min[:, 0])       # no bone reaches the vertex's piece: the top joint
    w[unreached, list(parents).index(-1)] = 1.0
    return w / w.sum(axis=1, keepdims=True)


def skin_weights(mesh: Mesh, rest: np.ndarray, parents: Sequence[int], blend: float | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Nearest-bone joint indices (V, 4) uint16 and weights (V, 4) float32 (rows sum to 1, largest first).

    Args:
        mesh: the character's mesh (vertices in drawing pixels).
        rest: (J, 2) joint rest positions, same frame.
        parents: parent index per joint (-1 for the top joint).
        blend: the fade width in pixels (default: one mesh cell).
    """
    per_joint = joint_distances(mesh, rest, parents)
    return _top(nearest_bone_weights(per_joint, parents, float(mesh.cell if blend is None else blend)))


def fit_weights(mesh: Mesh, rest: np.ndarray, parents: Sequence[int], posed: np.ndarray, deformed: np.ndarray,
                poses: int = 32, candidates: int = 6, prior: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """Joint indices (V, 4) and weights (V, 4) fitted to ARAP (step 2 of the module docstring).

    Args:
        posed: (F, J, 2) joints per frame; deformed: (F, V, 2) ARAP's vertices per frame (drawing pixels).
        poses: at most this many frames, evenly spread over the clip, are fitted.
        candidates: joints (nearest bones first) a vertex may take weight from.
        prior: pull towards the nearest-bone weights, in pixels of fit per unit of weight.
    """
    from scipy.optimize import nnls

    per_joint = joint_distances(mesh, rest, parents)
    w0 = nearest_bone_weights(per_joint, parents, float(mesh.cell))
    F = len(posed)
    frames = np.unique(np.linspace(0, F - 1, min(F, poses)).round().astype(np.int64))
    ang = world_angles(rest, posed[frames], parents)                  # (n, J)
    c, s = np.cos(ang), np.sin(ang)
    V, J = w0.shape
    n = len(frames)
    K = min(candidates, J)
    out = np.zeros((V, J))
    order = np.argsort(np.where(np.isfinite(per_joint), per_joint, np.inf), axis=1, kind="stable")[:, :K]
    scale = 1.0 / np.sqrt(n)
    for v in range(V):
        cand = order[v]
        d = mesh.vertices[v] - rest[cand]                               # (K, 2)
        x = c[:, cand] * d[:, 0] - s[:, cand] * d[:, 1] + posed[frames][:, cand, 0]   # (n, K)
        y = s[:, cand] * d[:, 0] + c[:, cand] * d[:, 1] + posed[frames][:, cand, 1]
        A = np.vstack([x * scale, y * scale, prior * np.eye(K), 100.0 * np.ones((1, K))])
        b = np.concatenate([deformed[frames, v, 0] * scale, deformed[frames, v, 1] * scale,
                            prior * w0[v, cand], [100.0]])
        w, _ = nnls(A, b)
        if w.sum() <= 0:
            w = w0[v, cand]
        out[v, cand] = w
    return _top(out)


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


def blend(rest: np.ndarray, posed: np.ndarray, parents: Sequence[int], vertices: np.ndarray,
          joints: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(F, V, 2) vertices moved by linear-blend skinning: what a glTF viewer draws, in drawing pixels."""
    ang = world_angles(rest, posed, parents)
    out = np.zeros((len(posed), len(vertices), 2))
    for k in range(joints.shape[1]):
        j, w = joints[:, k].astype(np.int64), weights[:, k].astype(np.float64)
        d = vertices - rest[j]
        c, s = np.cos(ang[:, j]), np.sin(ang[:, j])
        moved = np.stack([c * d[:, 0] - s * d[:, 1], s * d[:, 0] + c * d[:, 1]], axis=-1) + posed[:, j]
        out += w[None, :, None] * moved
    return out
