"""As-rigid-as-possible mesh deformation driven by handles (the skeleton's joints).

Igarashi, Moscovich & Hughes 2005, in the two-step form of Igarashi & Igarashi 2009
("Implementing As-Rigid-As-Possible Shape Manipulation and Surface Flattening"):

1. *Similarity step*: find vertices v' that keep every edge, seen from its neighbourhood (the edge's
   two end vertices and the third vertices of its one or two triangles), as close as possible to a
   rotated and uniformly scaled copy of its rest shape, with the handles pinned (soft constraints of
   weight ``w``). Everything is linear in v', so v' = K1 @ handles.
2. *Scale adjustment*: take each edge's rotation from step 1 (dropping its scale), rotate the rest
   edge by it and find vertices whose edges match these rotated rest edges, handles pinned again.
   Linear in the rotated edges and the handles, separately for x and y.

Both steps have system matrices that depend only on the rest mesh and where the handles sit in it,
so :class:`ARAP` factorises them once (dense operators) and :meth:`ARAP.solve` deforms *all*
frames at once with matrix products: no per-frame linear solve.

Coordinates: whatever the mesh uses (here texture pixels, y down); handles use the same frame.
"""
from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import _arap
from .errors import CharacterError, RenderError
from .mesh import Mesh, graph_components

log = logging.getLogger("animator")


class ARAP:
    """Precomputed two-step ARAP solver for one mesh and one set of handles.

    Args:
        mesh: the rest mesh.
        handles: (H, 2) rest positions of the handles (e.g. joints), same frame as the mesh.
        weight: handle weight (large: handles are met almost exactly).
        snap: a handle off the mesh is attached to the nearest mesh point within this many pixels
            (default: one cell); farther handles are ignored (logged).
        threads: 2 or more: the two steps' operators are made at once, the second in another
            thread (the operators are the same).
    Attributes:
        used: (H,) bool, which handles drive the mesh.
    """

    def __init__(self, mesh: Mesh, handles: np.ndarray, weight: float = 1000.0, snap: float | None = None,
                 threads: int = 1) -> None:
        verts = np.asarray(mesh.vertices, dtype=np.float64)
        tris = np.asarray(mesh.triangles, dtype=np.int64)
        handles = np.asarray(handles, dtype=np.float64).reshape(-1, 2)
        V = len(verts)
        self.n_vertices = V
        self.rest = verts
        self.used, B, hv, hb = _bind_handles(mesh, handles, snap)
        edges, nbr = _edges_with_neighbours(tris, V)
        _check_every_piece_has_a_handle(V, edges, hv[hb > 0])
        self.edges = edges
        self.n_edges = len(edges)
        self.rest_edges = verts[edges[:, 1]] - verts[edges[:, 0]]  # (E, 2)
        lap = _graph_laplacian(V, edges[:, 0], edges[:, 1])
        w2 = weight * weight
        # both factorise a banded matrix in compiled code that releases Python's lock: with
        # threads, the scale operators are made in a second thread meanwhile
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="arap") as side:
            scale = side.submit(_scale_operators, lap, B, w2) if threads > 1 else None
            self._cs = _similarity_operator(verts, edges, nbr, B, lap, w2)
            self._N, self._P2 = scale.result() if scale is not None else _scale_operators(lap, B, w2)
        self._inc_edge, self._inc_sign, self._inc_start = _incidence(edges, V)
        self._handle_index = np.flatnonzero(self.used)

    def solve(self, handles: np.ndarray) -> np.ndarray:
        """Deform the mesh for a batch of frames.

        Args:
            handles: (F, H, 2) or (H, 2) handle positions per frame (all H handles given at
                construction, in the same order; the ignored ones are skipped).
        Returns:
            (F, V, 2) (or (V, 2)) float64 vertex positions.
        """
        h = np.asarray(handles, dtype=np.float64)
        single = h.ndim == 2
        if single:
            h = h[None]
        F = h.shape[0]
        hu = h[:, self._handle_index, :]                      # (F, H', 2)
        P = hu.reshape(F, -1).T                               # (2H', F) stacked x0, y0, x1, ...
        cs = self._cs @ P                                     # (2E, F): each edge's (c, s) per frame
        div = _arap.rotated_edge_divergence(cs, self.rest_edges, self._inc_edge, self._inc_sign,
                                            self._inc_start)  # D^T (rotated rest edges), (V, 2F)
        hx = hu[..., 0].T                                     # (H', F)
        hy = hu[..., 1].T
        out = self._N @ div + self._P2 @ np.concatenate([hx, hy], axis=1)  # (V, 2F)
        res = np.stack([out[:, :F].T, out[:, F:].T], axis=-1)  # (F, V, 2)
        return res[0] if single else res



def _bind_handles(mesh: Mesh, handles: np.ndarray, snap: float | None):
    """Attach each handle to its mesh triangle: (used (H,) bool, B (H', V) with handle = B @ vertices,
    the used handles' triangle vertices (H', 3) and barycentric weights (H', 3))."""
    tris = np.asarray(mesh.triangles, dtype=np.int64)
    tri, bary = mesh.nearest_copy(handles, mesh.cell if snap is None else snap)
    used = tri >= 0
    if not used.any():
        # the joints are input (a config, a client): theirs to fix
        raise CharacterError(None, "skeleton", "no skeleton joint lies on the character's mesh: cannot deform it")
    if not used.all():
        log.warning("arap: %d handle(s) off the mesh are ignored", int((~used).sum()))
    hv = tris[tri[used]]
    hb = bary[used]
    B = np.zeros((len(hv), len(mesh.vertices)))
    np.add.at(B, (np.repeat(np.arange(len(hv)), 3), hv.ravel()), hb.ravel())
    return used, B, hv, hb


def _edges_with_neighbours(tris: np.ndarray, V: int) -> tuple[np.ndarray, np.ndarray]:
    """Unique edges (E, 2), i < j, and up to two opposite vertices per edge (E, 2), -1 on the boundary.

    A non-manifold edge (three or more triangles) keeps two of its neighbours; fine for ARAP.
    """
    e_all = np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]])
    opp_all = np.concatenate([tris[:, 2], tris[:, 0], tris[:, 1]])
    e_sorted = np.sort(e_all, axis=1)
    key = e_sorted[:, 0] * V + e_sorted[:, 1]
    order = np.argsort(key, kind="stable")
    key_s = key[order]
    first = np.r_[True, key_s[1:] != key_s[:-1]]
    edge_id_sorted = np.cumsum(first) - 1
    E = int(edge_id_sorted[-1]) + 1
    edges = e_sorted[order][first]
    nbr = np.full((E, 2), -1, np.int64)
    slot = np.zeros(len(order), np.int64)
    slot[1:] = np.where(first[1:], 0, 1)  # second occurrence of an edge goes to slot 1
    nbr[edge_id_sorted, np.minimum(slot, 1)] = opp_all[order]
    return edges, nbr


def _check_every_piece_has_a_handle(V: int, edges: np.ndarray, handle_vertices: np.ndarray) -> None:
    """Every connected piece of the mesh needs a handle, or nothing fixes where it goes."""
    count, piece = graph_components(V, edges[:, 0], edges[:, 1])
    loose = set(range(count)) - set(piece[handle_vertices].tolist())
    if loose:
        raise RenderError(f"{len(loose)} piece(s) of the character's mesh hold no skeleton joint: "
                          "build the mesh with the joints as keep_points")


def _similarity_operator(verts: np.ndarray, edges: np.ndarray, nbr: np.ndarray, B: np.ndarray,
                         lap: np.ndarray, w2: float) -> np.ndarray:
    """Step 1: the (2E, 2H') operator giving each edge's similarity (c, s) from the stacked handles."""
    V, E, Hn = len(verts), len(edges), len(B)
    i, j = edges[:, 0], edges[:, 1]
    ev = verts[j] - verts[i]
    # neighbourhood vertices [i, j, l, r]; r (and l) may be missing -> use i with zero weight
    nb = np.stack([i, j, np.where(nbr[:, 0] >= 0, nbr[:, 0], i), np.where(nbr[:, 1] >= 0, nbr[:, 1], i)], 1)
    present = np.stack([np.ones(E, bool), np.ones(E, bool), nbr[:, 0] >= 0, nbr[:, 1] >= 0], 1)
    rel = verts[nb[:, 1:]] - verts[i][:, None, :]       # (E, 3, 2)
    rel = rel * present[:, 1:, None]
    # G rows per neighbour n: [x, y] and [y, -x]; (c, s) = pinv(G) @ (v'_n - v'_i stacked)
    G = np.zeros((E, 6, 2))
    G[:, 0::2, 0] = rel[..., 0]
    G[:, 0::2, 1] = rel[..., 1]
    G[:, 1::2, 0] = rel[..., 1]
    G[:, 1::2, 1] = -rel[..., 0]
    GtG = np.einsum("eki,ekj->eij", G, G)
    Gpinv = np.linalg.solve(GtG, np.transpose(G, (0, 2, 1)))  # (E, 2, 6)
    # difference operator from the 8 neighbourhood coords to the 6 relative coords
    D = np.zeros((6, 8))
    for n in range(3):
        D[2 * n, 0] = D[2 * n + 1, 1] = -1.0
        D[2 * n, 2 * (n + 1)] = D[2 * n + 1, 2 * (n + 1) + 1] = 1.0
    g = Gpinv @ D                                        # (E, 2, 8): (c, s) from neighbourhood coords
    Ek = np.zeros((E, 2, 2))
    Ek[:, 0, 0], Ek[:, 0, 1] = ev[:, 0], ev[:, 1]
    Ek[:, 1, 0], Ek[:, 1, 1] = ev[:, 1], -ev[:, 0]
    Hk = -Ek @ g                                         # residual rows: (v'_j - v'_i) - E_k (c, s)
    Hk[:, 0, 0] -= 1.0
    Hk[:, 1, 1] -= 1.0
    Hk[:, 0, 2] += 1.0
    Hk[:, 1, 3] += 1.0
    cols = np.empty((E, 8), np.int64)
    cols[:, 0::2] = 2 * nb
    cols[:, 1::2] = 2 * nb + 1
    A1 = np.zeros((2 * V, 2 * V))
    # a whisper of edge-length energy removes the free rotation/scale of a cell hanging on
    # a single vertex (a pinch); its effect elsewhere is far below a pixel
    A1[0::2, 0::2] += 1e-8 * lap
    A1[1::2, 1::2] += 1e-8 * lap
    HtH = np.einsum("eki,ekj->eij", Hk, Hk)              # (E, 8, 8)
    np.add.at(A1, (np.broadcast_to(cols[:, :, None], HtH.shape), np.broadcast_to(cols[:, None, :], HtH.shape)), HtH)
    BtB = B.T @ B
    A1[0::2, 0::2] += w2 * BtB
    A1[1::2, 1::2] += w2 * BtB
    rhs1 = np.zeros((2 * V, 2 * Hn))                     # maps stacked handles (x0, y0, x1, ...) to A1^T b1
    rhs1[0::2, 0::2] = w2 * B.T
    rhs1[1::2, 1::2] = w2 * B.T
    K1 = _solve_spd(A1, rhs1)                            # (2V, 2H'): step-1 vertices from handles
    # per-edge (c, s) from handles: gather the 8 neighbourhood rows of K1
    return np.einsum("ekn,enh->ekh", g, K1[cols]).reshape(2 * E, 2 * Hn)  # rows (c0, s0, c1, s1, ...)


def _scale_operators(lap: np.ndarray, B: np.ndarray, w2: float) -> tuple[np.ndarray, np.ndarray]:
    """Step 2: vertices = N @ (D^T rotated edges) + P2 @ handles, with N (V, V) and P2 (V, H')."""
    Ninv = _solve_spd(lap + w2 * (B.T @ B), np.eye(lap.shape[0]))
    return Ninv, w2 * (Ninv @ B.T)


def _incidence(edges: np.ndarray, V: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """D^T as a gather + segment sum: vertex j gets +e_k, vertex i gets -e_k.

    Returns (edge per entry (n,) int64, sign per entry (n,) float64, start of each vertex's entries (V,) int64)."""
    E = len(edges)
    i, j = edges[:, 0], edges[:, 1]
    inc_v = np.concatenate([j, i])
    order = np.argsort(inc_v, kind="stable")
    inc_edge = np.concatenate([np.arange(E), np.arange(E)])[order].astype(np.int64)
    inc_sign = np.concatenate([np.ones(E), -np.ones(E)])[order]
    inc_start = np.flatnonzero(np.r_[True, np.diff(inc_v[order]) != 0]).astype(np.int64)
    if len(inc_start) != V:
        raise RenderError("mesh has a vertex in no triangle")
    return inc_edge, inc_sign, inc_start


def _graph_laplacian(n: int, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Dense graph Laplacian of the undirected edges (i, j) over n vertices."""
    L = np.zeros((n, n))
    np.add.at(L, (i, j), -1.0)
    np.add.at(L, (j, i), -1.0)
    L[np.diag_indices(n)] = -L.sum(axis=1)
    return L


def _solve_spd(A: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Solve A X = rhs for a symmetric positive definite A (a mesh's: banded, see :mod:`animator._arap`);
    a tiny ridge keeps it regular."""
    A = np.ascontiguousarray(A, np.float64)
    try:
        return _arap.solve(_arap.cholesky(A, _arap.bandwidth(A)), rhs)
    except ValueError as exc:  # not positive definite after rounding: LU does not need it
        log.info("arap: %s; solving by LU instead", exc)
    try:
        return np.linalg.solve(A, rhs)
    except np.linalg.LinAlgError as exc:  # pragma: no cover - guarded by the ridge
        raise RenderError(f"ARAP system is singular: {exc}") from exc
