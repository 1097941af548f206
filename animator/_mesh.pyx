# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""The compiled steps of :func:`animator.mesh.build_mesh` that work inside each grid cell.

A cell is a block of ``sub x sub`` sub-cells (``sub`` <= 16). Blocks come as one
``(blocks, sub, sub)`` array, row-major inside a block (row = y, col = x, in sub-cells); nothing
crosses from one block to another.

* :func:`pieces`: the 4-connected pieces of set sub-cells in every block, numbered in scan order;
* :func:`fill_nearest`: every empty sub-cell of a block takes the piece of the nearest set sub-cell
  of the same block (Euclidean distance in sub-cells).

No input can make either read or write outside its arrays: shapes are checked before the loops.
"""
from libc.math cimport hypot
from libc.stdint cimport int64_t

import numpy as np


cdef enum:
    MAX_SUB = 16  # largest block side in sub-cells


def pieces(const unsigned char[:, :, ::1] occupied):
    """The pieces of set sub-cells inside each block.

    Args:
        occupied: (B, S, S) uint8, nonzero where a sub-cell holds a mask pixel.
    Returns:
        (labels, count): labels (B, S, S) int64, -1 on empty sub-cells, else the piece's number;
        pieces are numbered 0..count-1 in the order their first sub-cell comes in a C-order scan of
        the whole array (blocks in order, then rows, then columns): the numbering of
        ``scipy.ndimage.label`` with 4-neighbours inside a block only, less one.
    """
    cdef Py_ssize_t n_blocks = occupied.shape[0], s = occupied.shape[1]
    if occupied.shape[2] != s or not 1 <= s <= MAX_SUB:
        raise ValueError(f"blocks must be (B, S, S) with S in 1..{MAX_SUB}, got "
                         f"({occupied.shape[0]}, {occupied.shape[1]}, {occupied.shape[2]})")
    labels_arr = np.full((n_blocks, s, s), -1, np.int64)
    cdef int64_t[:, :, ::1] labels = labels_arr
    cdef int stack[MAX_SUB * MAX_SUB]
    cdef Py_ssize_t b, start, top, cell, y, x
    cdef int64_t count = 0
    with nogil:
        for b in range(n_blocks):
            for start in range(s * s):
                if occupied[b, start // s, start % s] == 0 or labels[b, start // s, start % s] >= 0:
                    continue
                # a new piece: flood it (each sub-cell is pushed once, when it is labelled)
                labels[b, start // s, start % s] = count
                stack[0] = <int>start
                top = 1
                while top:
                    top -= 1
                    cell = stack[top]
                    y = cell // s
                    x = cell % s
                    if y > 0 and occupied[b, y - 1, x] and labels[b, y - 1, x] < 0:
                        labels[b, y - 1, x] = count
                        stack[top] = <int>(cell - s)
                        top += 1
                    if y + 1 < s and occupied[b, y + 1, x] and labels[b, y + 1, x] < 0:
                        labels[b, y + 1, x] = count
                        stack[top] = <int>(cell + s)
                        top += 1
                    if x > 0 and occupied[b, y, x - 1] and labels[b, y, x - 1] < 0:
                        labels[b, y, x - 1] = count
                        stack[top] = <int>(cell - 1)
                        top += 1
                    if x + 1 < s and occupied[b, y, x + 1] and labels[b, y, x + 1] < 0:
                        labels[b, y, x + 1] = count
                        stack[top] = <int>(cell + 1)
                        top += 1
                count += 1
    return labels_arr, int(count)


def fill_nearest(const int64_t[:, :, ::1] labels):
    """``labels`` with each empty sub-cell (-1) given the label of the nearest set sub-cell of its
    block; a block with no set sub-cell stays -1.

    Args:
        labels: (B, S, S) int64, -1 on empty sub-cells.
    Returns:
        A new (B, S, S) int64 array. Distances are Euclidean between sub-cell centres. The nearest
        set sub-cell is found as ``scipy.ndimage.distance_transform_edt`` finds it (Maurer's
        separable Voronoi method: down the columns, then along the rows), and of several at the
        same distance the one it picks is the one taken here too.
    """
    cdef Py_ssize_t n_blocks = labels.shape[0], s = labels.shape[1]
    if labels.shape[2] != s or not 1 <= s <= MAX_SUB:
        raise ValueError(f"blocks must be (B, S, S) with S in 1..{MAX_SUB}, got "
                         f"({labels.shape[0]}, {labels.shape[1]}, {labels.shape[2]})")
    out_arr = np.array(labels, dtype=np.int64, copy=True)
    cdef int64_t[:, :, ::1] out = out_arr
    cdef int near_y[MAX_SUB][MAX_SUB]  # [y][x]: row of the nearest set sub-cell in column x, -1: none
    cdef Py_ssize_t b, y, x
    cdef int last, fy, fx
    with nogil:
        for b in range(n_blocks):
            # down each column: the nearest set row, ties to the upper one
            for x in range(s):
                last = -1
                for y in range(s):
                    if labels[b, y, x] >= 0:
                        last = <int>y
                    near_y[y][x] = last
                for y in range(s - 1, -1, -1):
                    if labels[b, y, x] >= 0:
                        last = <int>y
                    elif near_y[y][x] < 0 or (last >= 0 and last - y < y - near_y[y][x]):
                        near_y[y][x] = last
            # along each row: the nearest of the columns' candidates
            for y in range(s):
                for x in range(s):
                    if labels[b, y, x] >= 0:
                        continue
                    if _row_nearest(near_y[y], s, <int>y, <int>x, &fy, &fx):
                        out[b, y, x] = labels[b, fy, fx]
    return out_arr


cdef bint _row_nearest(const int *near_y, Py_ssize_t s, int y, int x, int *fy, int *fx) noexcept nogil:
    """The candidate of a row (column c's candidate is its set sub-cell at row ``near_y[c]``, -1:
    none) nearest to (y, x): the lower envelope of the candidates' distance parabolas along the row
    (dropping a candidate that is nowhere strictly nearest than its neighbours on the envelope),
    then the first envelope entry at the least distance. False when the row has no candidate."""
    cdef int g[MAX_SUB]
    cdef int l = -1, c, a, bb, cc, u, v, w, k, d1, d2
    for c in range(s):
        if near_y[c] < 0:
            continue
        w = (near_y[c] - y) * (near_y[c] - y)
        while l >= 1:
            a = g[l] - g[l - 1]
            bb = c - g[l]
            cc = a + bb
            u = (near_y[g[l - 1]] - y) * (near_y[g[l - 1]] - y)
            v = (near_y[g[l]] - y) * (near_y[g[l]] - y)
            if cc * v - bb * u - a * w - a * bb * cc <= 0:
                break
            l -= 1
        l += 1
        g[l] = c
    if l < 0:
        return False
    k = 0
    d1 = (g[0] - x) * (g[0] - x) + (near_y[g[0]] - y) * (near_y[g[0]] - y)
    while k < l:
        d2 = (g[k + 1] - x) * (g[k + 1] - x) + (near_y[g[k + 1]] - y) * (near_y[g[k + 1]] - y)
        if d1 <= d2:
            break
        d1 = d2
        k += 1
    fy[0] = near_y[g[k]]
    fx[0] = g[k]
    return True


def components(Py_ssize_t n, a, b):
    """The connected components of the undirected graph on nodes ``0..n-1`` with edges
    ``(a[i], b[i])``.

    Returns:
        (count, labels): labels (n,) int64, components numbered 0..count-1 in the order of their
        smallest node.
    Raises:
        ValueError: an edge names a node outside ``0..n-1``, or ``a`` and ``b`` differ in length.
    """
    a_arr = np.ascontiguousarray(a, np.int64).reshape(-1)
    b_arr = np.ascontiguousarray(b, np.int64).reshape(-1)
    if n < 0 or a_arr.shape[0] != b_arr.shape[0]:
        raise ValueError("a and b must hold one node each per edge, n >= 0")
    if a_arr.shape[0] and (min(a_arr.min(), b_arr.min()) < 0 or max(a_arr.max(), b_arr.max()) >= n):
        raise ValueError(f"an edge names a node outside 0..{n - 1}")
    cdef const int64_t[::1] ea = a_arr
    cdef const int64_t[::1] eb = b_arr
    parent_arr = np.arange(n, dtype=np.int64)
    labels_arr = np.empty(n, np.int64)
    cdef int64_t[::1] parent = parent_arr
    cdef int64_t[::1] labels = labels_arr
    cdef Py_ssize_t i
    cdef int64_t ra, rb, count = 0
    with nogil:
        for i in range(ea.shape[0]):
            ra = _root(parent, ea[i])
            rb = _root(parent, eb[i])
            if ra < rb:  # the smaller node is the root: a component's root is its smallest node
                parent[rb] = ra
            elif rb < ra:
                parent[ra] = rb
        for i in range(n):  # roots come before their members, so each root is labelled first
            if parent[i] == i:
                labels[i] = count
                count += 1
            else:
                labels[i] = labels[_root(parent, i)]
    return int(count), labels_arr


cdef inline int64_t _root(int64_t[::1] parent, int64_t i) noexcept nogil:
    """The root of node i, halving the path on the way."""
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


def spread_distances(double[:, ::1] dist, a, b, length):
    """Shortest distances through a graph, in place: ``dist[v, j]`` becomes the least, over every
    node u and path from u to v, of ``dist[u, j]`` (as given) plus the path's edge lengths, added
    from u onwards. Every column j is a separate problem (a bone's seeds).

    Args:
        dist: (V, B) float64 seed distances (inf where none), updated in place.
        a, b, length: (E,) the undirected edges (a[i], b[i]) and their non-negative lengths.
    """
    a_arr = np.ascontiguousarray(a, np.int64).reshape(-1)
    b_arr = np.ascontiguousarray(b, np.int64).reshape(-1)
    l_arr = np.ascontiguousarray(length, np.float64).reshape(-1)
    cdef Py_ssize_t V = dist.shape[0], B = dist.shape[1], E = a_arr.shape[0], i, j
    if b_arr.shape[0] != E or l_arr.shape[0] != E:
        raise ValueError("a, b and length must hold one value per edge")
    if E and (min(a_arr.min(), b_arr.min()) < 0 or max(a_arr.max(), b_arr.max()) >= V):
        raise ValueError(f"an edge names a node outside 0..{V - 1}")
    if E and not (l_arr >= 0).all():
        raise ValueError("edge lengths must be non-negative")
    cdef const int64_t[::1] ea = a_arr
    cdef const int64_t[::1] eb = b_arr
    cdef const double[::1] el = l_arr
    cdef int64_t u, v
    cdef double d
    cdef bint changed = True
    with nogil:
        while changed:  # sweeps over the edges, both ways, until no distance shrinks
            changed = False
            for i in range(E):
                u, v = ea[i], eb[i]
                for j in range(B):
                    d = dist[u, j] + el[i]
                    if d < dist[v, j]:
                        dist[v, j] = d
                        changed = True
                    d = dist[v, j] + el[i]
                    if d < dist[u, j]:
                        dist[u, j] = d
                        changed = True


def nearest_bone(const int[:, ::1] triangles, const double[:, ::1] vertices, const double[:, ::1] dist,
                 const double[:, ::1] points, tri):
    """For each point in its triangle: the bone nearest through the mesh and that distance.

    The distance of point p to bone j is, in single precision, the least over p's triangle's
    vertices v of ``float(dist[v, j]) + float(hypot(v - p))``; of bones at the same distance the
    first wins.

    Args:
        triangles: (T, 3) vertex indices; vertices: (V, 2) (x, y); dist: (V, B) distances from
            each vertex to each bone (:func:`spread_distances`); points: (N, 2) (x, y);
        tri: (N,) the triangle holding each point.
    Returns:
        (bone (N,) int64, distance (N,) float32).
    """
    tri_arr = np.ascontiguousarray(tri, np.int64).reshape(-1)
    cdef Py_ssize_t N = points.shape[0], V = vertices.shape[0], B = dist.shape[1], T = triangles.shape[0]
    cdef Py_ssize_t n, k, j, t
    if tri_arr.shape[0] != N or dist.shape[0] != V or triangles.shape[1] != 3 or vertices.shape[1] != 2 \
            or points.shape[1] != 2 or B < 1:
        raise ValueError("shapes do not fit: triangles (T, 3), vertices (V, 2), dist (V, B>0), points and tri (N)")
    if N and (tri_arr.min() < 0 or tri_arr.max() >= T):
        raise ValueError("a point names a triangle the mesh lacks")
    if T and (np.min(triangles) < 0 or np.max(triangles) >= V):
        raise ValueError("a triangle names a vertex the mesh lacks")
    cdef const int64_t[::1] pt_tri = tri_arr
    bone_arr = np.empty(N, np.int64)
    best_arr = np.empty(N, np.float32)
    cdef int64_t[::1] bone = bone_arr
    cdef float[::1] best = best_arr
    cdef float dpv[3]
    cdef int vs[3]
    cdef float total, cand, lowest
    cdef int64_t arg
    with nogil:
        for n in range(N):
            t = pt_tri[n]
            for k in range(3):
                vs[k] = triangles[t, k]
                dpv[k] = <float>hypot(vertices[vs[k], 0] - points[n, 0], vertices[vs[k], 1] - points[n, 1])
            arg = 0
            lowest = 0
            for j in range(B):
                total = <float>dist[vs[0], j] + dpv[0]
                for k in range(1, 3):
                    cand = <float>dist[vs[k], j] + dpv[k]
                    if cand < total:
                        total = cand
                if j == 0 or total < lowest:
                    lowest = total
                    arg = j
            bone[n] = arg
            best[n] = lowest
    return bone_arr, best_arr



def point_bounds(const double[:, :, ::1] verts, const int64_t[:, ::1] corners, const double[:, ::1] weights):
    """The box of a set of points carried by the mesh, in every frame.

    Point i is ``sum_k weights[i, k] * verts[f, corners[i, k]]``, added up in k order starting
    from the first product (as ``numpy.einsum("fnkc,nk->fnc")`` adds them, so the boxes are those
    of that expression bit for bit).

    Args:
        verts: (F, V, 2) vertex positions per frame; corners: (N, 3) vertex indices per point;
        weights: (N, 3) barycentric weights.
    Returns:
        (lo (F, 2), hi (F, 2)): per frame the least and greatest x and y of the points.
    """
    cdef Py_ssize_t F = verts.shape[0], V = verts.shape[1], N = corners.shape[0], f, i
    if verts.shape[2] != 2 or corners.shape[1] != 3 or weights.shape[0] != N or weights.shape[1] != 3 or N < 1:
        raise ValueError("shapes do not fit: verts (F, V, 2), corners and weights (N>0, 3)")
    if np.min(corners) < 0 or np.max(corners) >= V:
        raise ValueError("a point names a vertex the mesh lacks")
    lo_arr = np.empty((F, 2))
    hi_arr = np.empty((F, 2))
    cdef double[:, ::1] lo = lo_arr
    cdef double[:, ::1] hi = hi_arr
    cdef double x, y, x_lo, x_hi, y_lo, y_hi
    cdef int64_t a, b, d
    with nogil:
        for f in range(F):
            x_lo = x_hi = y_lo = y_hi = 0
            for i in range(N):
                a, b, d = corners[i, 0], corners[i, 1], corners[i, 2]
                x = verts[f, a, 0] * weights[i, 0]
                x = x + verts[f, b, 0] * weights[i, 1]
                x = x + verts[f, d, 0] * weights[i, 2]
                y = verts[f, a, 1] * weights[i, 0]
                y = y + verts[f, b, 1] * weights[i, 1]
                y = y + verts[f, d, 1] * weights[i, 2]
                if i == 0:
                    x_lo = x_hi = x
                    y_lo = y_hi = y
                    continue
                if x < x_lo:
                    x_lo = x
                if x > x_hi:
                    x_hi = x
                if y < y_lo:
                    y_lo = y
                if y > y_hi:
                    y_hi = y
            lo[f, 0], lo[f, 1], hi[f, 0], hi[f, 1] = x_lo, y_lo, x_hi, y_hi
    return lo_arr, hi_arr
