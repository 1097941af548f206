# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""The compiled steps of :mod:`animator.arap`: Cholesky factorisation and solves of its symmetric
positive definite *banded* system matrices, once per mesh, and the rotated rest edges' divergence,
for every frame.

A mesh's vertices are numbered cell by cell along the grid's rows, so each vertex is coupled only
to vertices a grid row or two away: the system matrices are zero outside a narrow band around the
diagonal (bandwidth ``b``, a few dozen, where n is several hundred). A banded Cholesky costs about
n b^2 / 2 multiply-adds, a dense LU 2 n^3 / 3; each right-hand side then costs 4 n b.

The factor ``L`` (A = L L^T) is stored by diagonals: ``band[i, d] = L[i, i - d]``, d = 0..b.
"""
from libc.math cimport hypot, sqrt
from libc.stdint cimport int64_t

import numpy as np


def bandwidth(const double[:, ::1] a):
    """The smallest b with ``a[i, j] == 0`` wherever i - j > b (of the lower triangle; ``a`` is
    symmetric)."""
    cdef Py_ssize_t n = a.shape[0], i, j, b = 0
    if a.shape[1] != n:
        raise ValueError(f"the matrix must be square, got ({a.shape[0]}, {a.shape[1]})")
    with nogil:
        for i in range(n):
            for j in range(i - b):  # only columns left of the band found so far
                if a[i, j] != 0:
                    b = i - j
                    break
    return int(b)


def cholesky(const double[:, ::1] a, Py_ssize_t b):
    """The banded Cholesky factor of the symmetric positive definite ``a`` (n, n), whose entries
    more than ``b`` below the diagonal are zero (its upper triangle is not read).

    Returns:
        (n, b + 1) float64 ``band``, ``band[i, d] = L[i, i - d]``.
    Raises:
        ValueError: ``a`` is not positive definite (a pivot is not positive), or not square.
    """
    cdef Py_ssize_t n = a.shape[0], i, j, k, k0
    cdef double s
    cdef bint ok = True
    if a.shape[1] != n or b < 0:
        raise ValueError(f"the matrix must be square and b >= 0, got ({a.shape[0]}, {a.shape[1]}), b={b}")
    if b > n - 1:
        b = max(n - 1, 0)
    band_arr = np.zeros((n, b + 1))
    cdef double[:, ::1] L = band_arr
    with nogil:
        for i in range(n):
            for j in range(max(0, i - b), i + 1):
                s = a[i, j]
                k0 = max(0, i - b)
                for k in range(k0, j):  # L[i, k] L[j, k], both inside their rows' bands
                    s -= L[i, i - k] * L[j, j - k]
                if j < i:
                    L[i, i - j] = s / L[j, 0]
                elif s > 0:
                    L[i, 0] = sqrt(s)
                else:
                    ok = False
                    break
            if not ok:
                break
    if not ok:
        raise ValueError("the matrix is not positive definite")
    return band_arr


def solve(const double[:, ::1] band, rhs):
    """X with A X = ``rhs`` for A = L L^T given by its banded factor (:func:`cholesky`).

    Args:
        band: (n, b + 1) factor.
        rhs: (n,) or (n, m) right-hand sides.
    Returns:
        float64 array shaped as ``rhs``.
    """
    x_arr = np.array(rhs, dtype=np.float64, order="C", copy=True)
    one = x_arr.ndim == 1
    if one:
        x_arr = x_arr[:, None]
    cdef Py_ssize_t n = band.shape[0], b = band.shape[1] - 1, i, k
    if x_arr.ndim != 2 or x_arr.shape[0] != n:
        raise ValueError(f"rhs must have {n} rows")
    cdef double[:, ::1] x = x_arr
    with nogil:
        for i in range(n):  # L Y = rhs, row by row: Y[i] = (rhs[i] - sum L[i, k] Y[k]) / L[i, i]
            for k in range(max(0, i - b), i):
                _subtract_row(x, i, k, band[i, i - k])
            _divide_row(x, i, band[i, 0])
        for i in range(n - 1, -1, -1):  # L^T X = Y: X[i] = (Y[i] - sum L[k, i] X[k]) / L[i, i]
            for k in range(i + 1, min(n, i + b + 1)):
                _subtract_row(x, i, k, band[k, k - i])
            _divide_row(x, i, band[i, 0])
    return x_arr[:, 0] if one else x_arr


cdef inline void _subtract_row(double[:, ::1] x, Py_ssize_t i, Py_ssize_t k, double f) noexcept nogil:
    """x[i] -= f x[k] (nothing when f is 0: most of a band's entries are)."""
    cdef Py_ssize_t c
    if f != 0:
        for c in range(x.shape[1]):
            x[i, c] -= f * x[k, c]


cdef inline void _divide_row(double[:, ::1] x, Py_ssize_t i, double d) noexcept nogil:
    cdef Py_ssize_t c
    for c in range(x.shape[1]):
        x[i, c] /= d


def rotated_edge_divergence(const double[:, ::1] cs, const double[:, ::1] rest_edges, const int64_t[::1] inc_edge,
                            const double[::1] inc_sign, const int64_t[::1] inc_start):
    """Step 2's right-hand side, D^T r, for F frames at once.

    Each edge's similarity (c, s) from step 1 is normalised to a rotation (a zero one is left as
    it is) and turns the edge's rest vector (ex, ey) into r = (c ex + s ey, -s ex + c ey); each
    vertex then sums the rotated edges it ends (+) and starts (-).

    Args:
        cs: (2E, F): rows 2k and 2k+1 are edge k's c and s in every frame.
        rest_edges: (E, 2) rest edge vectors.
        inc_edge, inc_sign: (2E,) the edge and sign (+1, -1) of each incidence, grouped by vertex;
        inc_start: (V,) where each vertex's incidences start (increasing, the first 0).
    Returns:
        (V, 2F) float64: x components in columns 0..F-1, y in F..2F-1. A vertex's incidences are
        added in their order, starting from the first.
    """
    cdef Py_ssize_t E = rest_edges.shape[0], F = cs.shape[1], n = inc_edge.shape[0], V = inc_start.shape[0]
    cdef Py_ssize_t k, f, i, v, stop
    if cs.shape[0] != 2 * E or rest_edges.shape[1] != 2 or inc_sign.shape[0] != n:
        raise ValueError("cs must be (2E, F), rest_edges (E, 2), inc_edge and inc_sign of one length")
    if n and (np.min(inc_edge) < 0 or np.max(inc_edge) >= E):
        raise ValueError("an incidence names an edge the mesh lacks")
    if V and (inc_start[0] != 0 or (np.diff(inc_start) <= 0).any() or inc_start[V - 1] >= n):
        raise ValueError("inc_start must rise from 0 and stay below the number of incidences")
    r_arr = np.empty((E, 2 * F))
    div_arr = np.empty((V, 2 * F))
    cdef double[:, ::1] r = r_arr
    cdef double[:, ::1] div = div_arr
    cdef double c, s, norm, ex, ey, sign
    with nogil:
        for k in range(E):
            ex, ey = rest_edges[k, 0], rest_edges[k, 1]
            for f in range(F):
                c, s = cs[2 * k, f], cs[2 * k + 1, f]
                norm = hypot(c, s)
                if norm == 0:
                    norm = 1
                c = c / norm
                s = s / norm
                r[k, f] = c * ex + s * ey
                r[k, F + f] = -s * ex + c * ey
        for v in range(V):
            i = inc_start[v]
            stop = inc_start[v + 1] if v + 1 < V else n
            sign = inc_sign[i]
            for f in range(2 * F):
                div[v, f] = sign * r[inc_edge[i], f]
            for i in range(i + 1, stop):
                sign = inc_sign[i]
                for f in range(2 * F):
                    div[v, f] += sign * r[inc_edge[i], f]
    return div_arr
