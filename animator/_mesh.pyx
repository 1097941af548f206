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
