# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""Compiled Cholesky factorisation and solves of symmetric positive definite *banded* matrices, for
the ARAP systems of :mod:`animator.arap`.

A mesh's vertices are numbered cell by cell along the grid's rows, so each vertex is coupled only
to vertices a grid row or two away: the system matrices are zero outside a narrow band around the
diagonal (bandwidth ``b``, a few dozen, where n is several hundred). A banded Cholesky costs about
n b^2 / 2 multiply-adds, a dense LU 2 n^3 / 3; each right-hand side then costs 4 n b.

The factor ``L`` (A = L L^T) is stored by diagonals: ``band[i, d] = L[i, i - d]``, d = 0..b.
"""
from libc.math cimport sqrt

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
    cdef Py_ssize_t n = band.shape[0], b = band.shape[1] - 1, m, i, k, c
    if x_arr.ndim != 2 or x_arr.shape[0] != n:
        raise ValueError(f"rhs must have {n} rows")
    m = x_arr.shape[1]
    cdef double[:, ::1] x = x_arr
    cdef double f, d
    with nogil:
        for i in range(n):  # L Y = rhs, row by row: Y[i] = (rhs[i] - sum L[i, k] Y[k]) / L[i, i]
            for k in range(max(0, i - b), i):
                f = band[i, i - k]
                if f != 0:
                    for c in range(m):
                        x[i, c] -= f * x[k, c]
            d = band[i, 0]
            for c in range(m):
                x[i, c] /= d
        for i in range(n - 1, -1, -1):  # L^T X = Y: X[i] = (Y[i] - sum L[k, i] X[k]) / L[i, i]
            for k in range(i + 1, min(n, i + b + 1)):
                f = band[k, k - i]
                if f != 0:
                    for c in range(m):
                        x[i, c] -= f * x[k, c]
            d = band[i, 0]
            for c in range(m):
                x[i, c] /= d
    return x_arr[:, 0] if one else x_arr
