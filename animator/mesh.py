"""A triangle mesh over a character mask, built once per character.

The mesh is a grid of square cells (each split into two triangles) laid over the mask, with one
twist that makes it robust: a cell that holds several separate pieces of the mask (an arm passing
close to the body, the two sides of a hole, two legs) gets one *copy* per piece, and neighbouring
copies share corner vertices only where their pieces touch across the cell border ("virtual node"
meshing). So limbs that run close together, or a hole, are never glued together by the mesh, thin
limbs still get cells, and every character pixel lies inside the triangles of its own piece, so
each texture pixel belongs to some triangle by construction. Pieces are told apart on a grid of
sub-cells (``SUB`` per cell side, about 3 px on a 600 px drawing): gaps narrower than a sub-cell
count as touching.

Coordinates: vertices are (x, y) in the drawing's own pixel frame (texture pixels, origin at the
top-left corner, x right, y down). A pixel (col, row) covers [col, col+1) x [row, row+1); its
centre is (col + 0.5, row + 0.5).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from . import _mesh
from .errors import CharacterError

log = logging.getLogger("animator")

#: Sub-cells per cell side used to find the separate pieces of the mask inside each cell.
SUB = 8


@dataclass
class Mesh:
    """A triangle mesh over a character mask.

    Attributes:
        vertices: (V, 2) float64, (x, y) texture pixels, y down.
        triangles: (T, 3) int32 vertex indices; triangles 2c and 2c+1 make up cell copy c.
        cell: cell side in texture pixels.
        origin: (x, y) texture pixel of the grid's top-left corner.
        copy_cell: (C, 2) int32 (row, col) of the grid cell of each cell copy.
        labels: (rows*SUB, cols*SUB) int32, the cell copy that owns each sub-cell (-1: none).
            Sub-cells with no mask pixel take the copy of the nearest masked sub-cell of the same
            cell, so points just off the mask still find their piece.
        dropped_pixels: mask pixels left out because their piece is disconnected from the pinned body.
    """

    vertices: np.ndarray
    triangles: np.ndarray
    cell: int
    origin: tuple[int, int]
    copy_cell: np.ndarray
    labels: np.ndarray
    dropped_pixels: int = 0

    @property
    def sub(self) -> float:
        """Side of a sub-cell in texture pixels."""
        return self.cell / SUB

    def locate(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Find the triangle and barycentric coordinates of each point.

        Args:
            points: (N, 2) float (x, y) texture pixels.
        Returns:
            (tri, bary): tri (N,) int32 triangle index, -1 where the point is in no piece of the
            mesh; bary (N, 3) float64 weights of the triangle's three vertices (sum to 1).
        """
        pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
        ox, oy = self.origin
        gx = (pts[:, 0] - ox) / self.cell
        gy = (pts[:, 1] - oy) / self.cell
        rows, cols = self.labels.shape
        sx = np.floor(gx * SUB).astype(np.int64)
        sy = np.floor(gy * SUB).astype(np.int64)
        inside = (sx >= 0) & (sy >= 0) & (sx < cols) & (sy < rows)
        copy = np.full(len(pts), -1, np.int64)
        copy[inside] = self.labels[sy[inside], sx[inside]]
        ok = copy >= 0
        # local coordinates in the cell, 0..1
        u = gx - self.copy_cell[np.maximum(copy, 0), 1]
        v = gy - self.copy_cell[np.maximum(copy, 0), 0]
        upper = u >= v  # triangle (TL, TR, BR) above the TL-BR diagonal, else (TL, BR, BL)
        tri = np.where(ok, 2 * copy + (~upper), -1).astype(np.int32)
        bary = np.empty((len(pts), 3))
        bary[:, 0] = np.where(upper, 1.0 - u, 1.0 - v)
        bary[:, 1] = np.where(upper, u - v, u)
        bary[:, 2] = np.where(upper, v, v - u)
        return tri, bary

    def nearest_copy(self, points: np.ndarray, max_dist: float) -> tuple[np.ndarray, np.ndarray]:
        """Like :meth:`locate` but snaps points that are off the mesh to the nearest owned sub-cell
        within ``max_dist`` texture pixels (weights clamped into the triangle); -1 beyond that."""
        pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
        tri, bary = self.locate(pts)
        miss = np.flatnonzero(tri < 0)
        if len(miss):
            sy, sx = np.nonzero(self.labels >= 0)
            centres = np.stack([(sx + 0.5) * self.sub + self.origin[0], (sy + 0.5) * self.sub + self.origin[1]], 1)
            for i in miss:
                d = np.hypot(*(centres - pts[i]).T)
                k = int(np.argmin(d))
                if d[k] <= max_dist:
                    t, b = self.locate(centres[k:k + 1])
                    tri[i], bary[i] = t[0], b[0]
        return tri, bary


def build_mesh(mask: np.ndarray, cell: int | None = None, keep_points: np.ndarray | None = None,
               target_cells: int = 300) -> Mesh:
    """Build a mesh over ``mask``.

    Args:
        mask: (H, W) bool, True on the character.
        cell: cell side in texture pixels (a multiple of 8 is best, at least :data:`SUB`, so that a
            sub-cell is at least a pixel); default: chosen so that the mask is covered by about
            ``target_cells`` cells (more cells: smoother bends, slower ARAP), fewer on a small mask.
        keep_points: (K, 2) (x, y) texture pixels, e.g. the skeleton joints. Mesh pieces that
            hold none of these points are dropped: nothing could move them (without points, or when
            none lies on the mask, only the largest piece is kept).
    Raises:
        CharacterError: the mask is empty.
    """
    mask = np.asarray(mask, dtype=bool)
    if mask.ndim != 2 or not mask.any():
        raise CharacterError(None, "mask", "mask is empty: no character pixels")
    ys, xs = np.nonzero(mask)
    if cell is None:
        cell = int(np.clip(round(np.sqrt(len(xs) / target_cells) / 2) * 2, SUB, 256))
    # A sub-cell under one pixel would leave gaps between the pixels it samples and split the mask
    # into per-pixel pieces: a small character gets fewer cells instead.
    cell = max(int(cell), SUB)
    x0, y0 = int(xs.min()), int(ys.min())
    ncols = (int(xs.max()) - x0) // cell + 1
    nrows = (int(ys.max()) - y0) // cell + 1

    # Sub-cell occupancy: a sub-cell is set when any mask pixel falls in it.
    sub = cell / SUB
    occ = np.zeros((nrows * SUB, ncols * SUB), bool)
    occ[((ys - y0) / sub).astype(np.int64), ((xs - x0) / sub).astype(np.int64)] = True
    blocks = occ.reshape(nrows, SUB, ncols, SUB).transpose(0, 2, 1, 3)  # (rows, cols, SUB, SUB)

    # Copies: the 4-connected pieces of set sub-cells inside each block, numbered in scan order.
    pieces, ncopy = _mesh.pieces(np.ascontiguousarray(blocks).reshape(-1, SUB, SUB).view(np.uint8))
    copy_id = pieces.reshape(blocks.shape)  # -1: empty sub-cell
    block = np.broadcast_to(np.arange(nrows * ncols).reshape(nrows, ncols, 1, 1), blocks.shape)
    block_of = np.empty(ncopy, np.int64)
    block_of[copy_id[blocks]] = block[blocks]
    copy_cell = np.stack([block_of // ncols, block_of % ncols], 1).astype(np.int32)

    # Corner slots of each copy: 0 TL, 1 TR, 2 BR, 3 BL; slots that touching copies share are one vertex.
    shared = [(4 * a + ca, 4 * b + cb) for a, b, ca, cb in _contact_pairs(copy_id)]
    n_vertices, vid = graph_components(4 * ncopy, np.concatenate([a for a, _ in shared]),
                                       np.concatenate([b for _, b in shared]))
    slot_pos = np.empty((4 * ncopy, 2))
    cx = copy_cell[:, 1].astype(np.float64)
    cy = copy_cell[:, 0].astype(np.float64)
    for corner, (dx, dy) in enumerate(((0, 0), (1, 0), (1, 1), (0, 1))):
        slot_pos[corner::4, 0] = x0 + (cx + dx) * cell
        slot_pos[corner::4, 1] = y0 + (cy + dy) * cell
    vertices = np.zeros((n_vertices, 2))
    vertices[vid] = slot_pos
    corners = vid.reshape(ncopy, 4)
    triangles = np.empty((2 * ncopy, 3), np.int32)
    triangles[0::2] = corners[:, [0, 1, 2]]
    triangles[1::2] = corners[:, [0, 2, 3]]

    labels = _fill_labels(copy_id).transpose(0, 2, 1, 3).reshape(nrows * SUB, ncols * SUB).astype(np.int32)
    mesh = Mesh(vertices, triangles, cell, (x0, y0), copy_cell, labels)
    return _drop_unpinned(mesh, mask, keep_points)


def graph_components(n: int, a: np.ndarray, b: np.ndarray) -> tuple[int, np.ndarray]:
    """(count, label of each node) of the connected components of the undirected graph on nodes
    ``0..n-1`` with edges ``(a[i], b[i])``; components are numbered in the order of their smallest node
    (the labels of ``scipy.sparse.csgraph.connected_components``, whose import a render would pay for).
    A union-find in the compiled module :mod:`animator._mesh`."""
    return _mesh.components(n, a, b)


def unique_pairs(pairs: np.ndarray) -> np.ndarray:
    """Sorted distinct rows of an (n, 2) array of non-negative integers, as ``np.unique(axis=0)``, which
    is an order of magnitude slower on a mesh's edges (it sorts a structured view of the rows): each row
    is packed into one integer first."""
    pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
    if not len(pairs):
        return pairs
    base = int(pairs[:, 1].max()) + 1
    key = np.sort(pairs[:, 0] * base + pairs[:, 1])
    key = key[np.r_[True, key[1:] != key[:-1]]]  # np.unique's result, without its first call's import of numpy.ma
    return np.stack([key // base, key % base], 1)


def _contact_pairs(copy_id: np.ndarray):
    """Yield (copies a, copies b, corner of a, corner of b) to merge, for each kind of contact.

    Two copies in horizontally (vertically) adjacent cells touch when a set sub-cell of one is
    4-adjacent to a set sub-cell of the other across the shared cell edge; they then share both
    vertices of that edge.
    """
    # horizontal neighbours: right column of (r, c) vs left column of (r, c+1)
    a = copy_id[:, :-1, :, -1]
    b = copy_id[:, 1:, :, 0]
    m = (a >= 0) & (b >= 0)
    ab = unique_pairs(np.stack([a[m], b[m]], 1))
    yield ab[:, 0], ab[:, 1], 1, 0  # TR(a) ~ TL(b)
    yield ab[:, 0], ab[:, 1], 2, 3  # BR(a) ~ BL(b)
    # vertical neighbours: bottom row of (r, c) vs top row of (r+1, c)
    a = copy_id[:-1, :, -1, :]
    b = copy_id[1:, :, 0, :]
    m = (a >= 0) & (b >= 0)
    ab = unique_pairs(np.stack([a[m], b[m]], 1))
    yield ab[:, 0], ab[:, 1], 3, 0  # BL(a) ~ TL(b)
    yield ab[:, 0], ab[:, 1], 2, 1  # BR(a) ~ TR(b)


def _fill_labels(copy_id: np.ndarray) -> np.ndarray:
    """Give each empty sub-cell of a block the copy id of the nearest (Euclidean, in sub-cells) set
    sub-cell of the same block; blocks with none stay -1. ``copy_id``: (rows, cols, SUB, SUB)."""
    rows, cols = copy_id.shape[:2]
    return _mesh.fill_nearest(np.ascontiguousarray(copy_id).reshape(rows * cols, SUB, SUB)).reshape(copy_id.shape)


def _drop_unpinned(mesh: Mesh, mask: np.ndarray, keep_points: np.ndarray | None) -> Mesh:
    """Keep only mesh pieces (connected through shared vertices) that hold a keep point (else the
    largest piece); renumber vertices and copies."""
    V = len(mesh.vertices)
    t = mesh.triangles
    _, piece = graph_components(V, np.concatenate([t[:, 0], t[:, 0]]), np.concatenate([t[:, 1], t[:, 2]]))
    copy_piece = piece[t[0::2, 0]]
    sizes = np.bincount(copy_piece)  # copies per piece (every piece has a vertex, so a triangle, so a copy)
    if len(sizes) == 1:
        return mesh
    keep: set[int] = set()
    if keep_points is not None and len(keep_points):
        tri, _ = mesh.locate(np.asarray(keep_points, dtype=np.float64))
        keep = {int(copy_piece[i // 2]) for i in tri if i >= 0}
    if not keep:  # no point on the mesh (or none given): the largest piece, as AnimatedDrawings does
        keep = {int(np.argmax(sizes))}
    keep_copy = np.isin(copy_piece, list(keep))
    if keep_copy.all():
        return mesh
    # count the mask pixels we drop, then renumber
    ys, xs = np.nonzero(mask)
    tri, _ = mesh.locate(np.stack([xs + 0.5, ys + 0.5], 1))
    dropped = int(np.count_nonzero((tri >= 0) & ~keep_copy[np.maximum(tri, 0) // 2]))
    new_copy = np.full(len(keep_copy), -1, np.int64)
    new_copy[keep_copy] = np.arange(int(keep_copy.sum()))
    tris = mesh.triangles.reshape(-1, 2, 3)[keep_copy].reshape(-1, 3)
    used = np.unique(tris)
    new_v = np.full(V, -1, np.int64)
    new_v[used] = np.arange(len(used))
    labels = np.where(mesh.labels >= 0, new_copy[np.maximum(mesh.labels, 0)], -1).astype(np.int32)
    log.warning("mesh: %d mask pixel(s) in %d piece(s) not connected to the skeleton are left out",
                dropped, len(sizes) - len(keep))
    return Mesh(mesh.vertices[used], new_v[tris].astype(np.int32), mesh.cell, mesh.origin,
                mesh.copy_cell[keep_copy], labels, dropped)


def bone_distances(mesh: Mesh, bones: np.ndarray) -> np.ndarray:
    """Distance from each mesh vertex to each bone, measured through the mesh (not across gaps).

    A bone is a segment between two joints. Its sample points seed the vertices of the triangles
    they fall in (straight-line distance); distances then spread along mesh edges (shortest paths),
    so an arm lying close to the body is still far from the body's bones. This plays the part of
    AnimatedDrawings' breadth-first search over mask pixels, on the mesh graph instead.

    Args:
        mesh: the mesh.
        bones: (B, 2, 2) segments (start (x, y), end (x, y)) in texture pixels.
    Returns:
        (V, B) float64 distances in texture pixels (inf for a bone that touches no triangle).
    """
    bones = np.asarray(bones, dtype=np.float64).reshape(-1, 2, 2)
    V, B = len(mesh.vertices), len(bones)
    dist = np.full((V, B), np.inf)
    step = max(mesh.sub, 0.5)
    rows, cols = mesh.labels.shape
    lo = np.asarray(mesh.origin, dtype=np.float64)
    hi = lo + np.array([cols, rows]) * mesh.sub
    for b, (p, q) in enumerate(bones):
        # samples every `step` pixels along the bone, generated only where the bone crosses the
        # mesh's box: the work is bounded by the mesh's size, not by how long the bone is
        n = int(np.ceil(np.hypot(*(q - p)) / step)) + 1
        t0, t1 = _clip_segment(p, q, lo, hi)
        k0, k1 = 1, 0  # no samples
        if t0 <= t1:  # one sample of slack on each side against rounding (samples off the mesh are ignored)
            k0, k1 = max(0, int(np.ceil(t0 * (n - 1))) - 1), min(n - 1, int(np.floor(t1 * (n - 1))) + 1)
        t = np.zeros(k1 - k0 + 1)  # np.linspace(0, 1, n)[k0:k1 + 1], bit for bit
        if n > 1:
            t = np.arange(k0, k1 + 1) * (1.0 / (n - 1))
            t[np.arange(k0, k1 + 1) == n - 1] = 1.0
        pts = p + t[:, None] * (q - p)
        tri, _ = mesh.locate(pts)
        ok = tri >= 0
        if not ok.any():  # a bone off the drawing: seed the vertex nearest to its middle
            mid = (p + q) / 2
            dist[np.argmin(np.hypot(*(mesh.vertices - mid).T)), b] = np.hypot(*(mesh.vertices - mid).T).min()
            continue
        vs = mesh.triangles[tri[ok]]                            # (n', 3)
        d = np.hypot(*(mesh.vertices[vs] - pts[ok][:, None, :]).transpose(2, 0, 1))
        np.minimum.at(dist[:, b], vs.ravel(), d.ravel())
    t = mesh.triangles
    e = unique_pairs(np.sort(np.concatenate([t[:, [0, 1]], t[:, [1, 2]], t[:, [2, 0]]]), axis=1))
    length = np.hypot(*(mesh.vertices[e[:, 0]] - mesh.vertices[e[:, 1]]).T)
    _mesh.spread_distances(dist, e[:, 0], e[:, 1], length)  # shortest paths along the mesh's edges
    return dist


def _clip_segment(p: np.ndarray, q: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[float, float]:
    """The parameter range [t0, t1] of the segment p + t (q - p), 0 <= t <= 1, inside the box
    [lo, hi] (Liang-Barsky); t0 > t1 when the segment misses the box."""
    t0, t1 = 0.0, 1.0
    d = q - p
    for axis in range(2):
        if d[axis] == 0.0:
            if not lo[axis] <= p[axis] <= hi[axis]:
                return 1.0, 0.0
            continue
        a, c = (lo[axis] - p[axis]) / d[axis], (hi[axis] - p[axis]) / d[axis]
        t0, t1 = max(t0, min(a, c)), min(t1, max(a, c))
    return t0, t1


def nearest_bone(mesh: Mesh, dist: np.ndarray, points: np.ndarray, tri: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For points located in triangles ``tri``: the closest bone through the mesh and its distance.

    The distance of point p to bone b is min over p's triangle's vertices v of dist[v, b] + |p - v|,
    in single precision. Returns (bone index (N,) int64, distance (N,) float32).
    """
    return _mesh.nearest_bone(np.ascontiguousarray(mesh.triangles, np.int32),
                              np.ascontiguousarray(mesh.vertices, np.float64),
                              np.ascontiguousarray(dist, np.float64), np.ascontiguousarray(points, np.float64), tri)


def point_bounds(verts: np.ndarray, corners: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The box, in every frame, of points bound to the mesh (each a weighted sum of its triangle's
    corners, e.g. :meth:`Mesh.locate`'s barycentric weights).

    Args:
        verts: (F, V, 2) deformed vertex positions per frame; corners: (N, 3) vertex indices;
            weights: (N, 3) weights of the corners, N > 0.
    Returns:
        (lo (F, 2), hi (F, 2)): per frame the least and greatest (x, y) of the points, in the
        vertices' frame.
    """
    return _mesh.point_bounds(np.ascontiguousarray(verts, np.float64), np.ascontiguousarray(corners, np.int64),
                              np.ascontiguousarray(weights, np.float64))

