"""The compiled steps of the mesh, the ARAP solver, the sprite and the GIF encoder (animator/_mesh.pyx,
_arap.pyx, _raster.pyx, _frame_scan.pyx) give what the libraries they replace give: scipy.ndimage's
labels and nearest features, numpy's dense solve, numpy's boxes, sums and medians. scipy is imported here only, as the reference."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from animator import _arap, _frame_scan, _mesh, _raster

SUB = 8


def _random_blocks(rng: np.random.Generator) -> np.ndarray:
    rows, cols = rng.integers(1, 7, 2)
    return rng.random((rows * cols, SUB, SUB)) < rng.uniform(0.05, 0.9)


@pytest.mark.parametrize("seed", range(4))
def test_pieces_are_scipys_labels_inside_each_block(seed):
    """4-connected pieces inside a block, numbered in scan order: ndimage.label with a structure
    that links no two blocks."""
    rng = np.random.default_rng(seed)
    within_a_block = np.zeros((3, 3, 3), bool)
    within_a_block[1] = ndimage.generate_binary_structure(2, 1)
    for _ in range(60):
        blocks = _random_blocks(rng)
        expected, count = ndimage.label(blocks, structure=within_a_block)
        labels, n = _mesh.pieces(blocks.view(np.uint8))
        assert n == count
        np.testing.assert_array_equal(labels, expected.astype(np.int64) - 1)


@pytest.mark.parametrize("seed", range(4))
def test_fill_nearest_takes_the_feature_scipys_edt_takes(seed):
    """The nearest set sub-cell of the same block, ties broken as distance_transform_edt breaks
    them (the blocks far apart along their own axis, so none reaches into another)."""
    rng = np.random.default_rng(100 + seed)
    for _ in range(60):
        labels, _ = _mesh.pieces(_random_blocks(rng).view(np.uint8))
        b, y, x = ndimage.distance_transform_edt(labels < 0, sampling=(4.0 * SUB, 1.0, 1.0),
                                                 return_distances=False, return_indices=True)
        expected = labels[b, y, x]
        expected[~(labels >= 0).any(axis=(1, 2))] = -1
        np.testing.assert_array_equal(_mesh.fill_nearest(labels), expected)


@pytest.mark.parametrize("seed", range(3))
def test_point_bounds_are_the_boxes_of_numpys_weighted_sums(seed):
    """Bit for bit: the boxes decide the character's scale, so a last-bit difference would move
    every frame."""
    rng = np.random.default_rng(seed)
    frames, vertices, points = rng.integers(1, 40), rng.integers(3, 300), rng.integers(1, 500)
    verts = rng.normal(scale=300.0, size=(frames, vertices, 2))
    corners = rng.integers(0, vertices, (points, 3))
    weights = rng.dirichlet(np.ones(3), points)
    pts = np.einsum("fnkc,nk->fnc", verts[:, corners, :], weights)
    lo, hi = _mesh.point_bounds(verts, corners, weights)
    np.testing.assert_array_equal(lo, pts.min(axis=1))
    np.testing.assert_array_equal(hi, pts.max(axis=1))


def test_mesh_kernels_refuse_shapes_they_cannot_hold():
    with pytest.raises(ValueError):
        _mesh.pieces(np.zeros((2, 8, 7), np.uint8))
    with pytest.raises(ValueError):
        _mesh.fill_nearest(np.zeros((1, 17, 17), np.int64))
    with pytest.raises(ValueError, match="outside"):
        _mesh.components(3, [0, 1], [1, 3])
    with pytest.raises(ValueError, match="lacks"):
        _mesh.point_bounds(np.zeros((2, 3, 2)), np.array([[0, 1, 3]]), np.ones((1, 3)))
    with pytest.raises(ValueError, match="shapes"):
        _mesh.point_bounds(np.zeros((2, 3, 2)), np.zeros((0, 3), np.int64), np.ones((0, 3)))


def _spd_banded(rng: np.random.Generator, n: int, b: int) -> np.ndarray:
    """A random symmetric positive definite matrix with bandwidth b."""
    a = rng.normal(size=(n, n))
    a[np.abs(np.subtract.outer(np.arange(n), np.arange(n))) > b] = 0
    a = (a + a.T) / 2
    return a + np.diag(np.abs(a).sum(axis=1) + 1.0)  # diagonally dominant: positive definite


@pytest.mark.parametrize("n,b", [(1, 0), (7, 2), (60, 5), (200, 31), (40, 39)])
def test_banded_cholesky_solves_as_numpy(n, b):
    rng = np.random.default_rng(n + b)
    a = _spd_banded(rng, n, b)
    assert _arap.bandwidth(a) == min(b, n - 1)
    rhs = rng.normal(size=(n, 3))
    factor = _arap.cholesky(a, _arap.bandwidth(a))
    np.testing.assert_allclose(_arap.solve(factor, rhs), np.linalg.solve(a, rhs), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_arap.solve(factor, rhs[:, 0]), np.linalg.solve(a, rhs[:, 0]), rtol=1e-10,
                               atol=1e-12)


def test_banded_cholesky_refuses_a_matrix_that_is_not_positive_definite():
    with pytest.raises(ValueError, match="positive definite"):
        _arap.cholesky(np.array([[1.0, 2.0], [2.0, 1.0]]), 1)


def _box(mask: np.ndarray):
    ys, xs = np.nonzero(mask)
    return None if not len(ys) else (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)


def test_frame_scans_give_numpys_boxes():
    rng = np.random.default_rng(5)
    for _ in range(400):
        h, w = (int(v) for v in rng.integers(1, 40, 2))
        shown = (rng.random((h, w)) < rng.uniform(0, 0.3)) * rng.integers(1, 4, (h, w))
        shown = shown.astype(np.uint8)
        following = rng.integers(0, 2, (h, w)).astype(np.uint8)
        assert _frame_scan.box_not(shown, 0) == _box(shown != 0)
        assert _frame_scan.box_vanishing(shown, following, 0) == _box((shown != 0) & (following == 0))
        assert _frame_scan.any_vanishing(shown, following, 0) == bool(((shown != 0) & (following == 0)).any())
        cut = shown[h // 3:, w // 4:]  # a box cut out of a frame: rows contiguous, the array not
        assert _frame_scan.box_not(cut, 0) == _box(cut != 0)


def test_frame_scans_refuse_columns_that_are_not_contiguous():
    frame = np.zeros((8, 8), np.uint8)
    with pytest.raises(ValueError, match="contiguous"):
        _frame_scan.box_not(frame[:, ::2], 0)


def test_rotated_edge_divergence_is_the_numpy_gather_and_segment_sum():
    """ARAP step 2's right-hand side: (c, s) normalised (zero left alone), rest edges rotated, then
    summed per vertex: what numpy's gather and reduceat give, to rounding (numpy adds a segment's
    rows in an order of its own, and its SIMD hypot misses C's by an ulp now and then)."""
    from animator.arap import _incidence

    rng = np.random.default_rng(9)
    V, E, F = 30, 70, 11
    edges = np.sort(rng.choice(V, size=(E, 2), replace=True), axis=1)
    edges = edges[edges[:, 0] != edges[:, 1]]
    edges = np.unique(np.vstack([edges, np.stack([np.arange(V - 1), np.arange(1, V)], 1)]), axis=0)
    E = len(edges)
    rest = rng.normal(size=(E, 2)) * 10
    cs = rng.normal(size=(2 * E, F))
    cs[:, 0] = 0.0  # a zero similarity is left as it is
    inc_edge, inc_sign, inc_start = _incidence(edges, V)

    c, s = cs.reshape(E, 2, F)[:, 0].copy(), cs.reshape(E, 2, F)[:, 1].copy()
    norm = np.hypot(c, s)
    norm[norm == 0] = 1.0
    c /= norm
    s /= norm
    ex, ey = rest[:, 0:1], rest[:, 1:2]
    r = np.concatenate([c * ex + s * ey, -s * ex + c * ey], axis=1)
    expected = np.add.reduceat(r[inc_edge] * inc_sign[:, None], inc_start, axis=0)
    got = _arap.rotated_edge_divergence(cs, rest, inc_edge, inc_sign, inc_start)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())


@pytest.mark.parametrize("seed", range(4))
def test_fill_outside_gives_numpys_median_colour(seed):
    """Odd and even counts of inside pixels (an even count's median is the mean of two, rounded
    down), and an image with none inside (left as it is)."""
    rng = np.random.default_rng(seed)
    rgba = rng.integers(0, 256, (rng.integers(1, 60), rng.integers(1, 60), 4), dtype=np.uint8)
    if seed == 3:
        rgba[..., 3] = 0
    inside = rgba[..., 3] >= 128
    expected = np.array(rgba[..., :3])
    if inside.any():
        expected[~inside] = np.median(expected[inside], axis=0).astype(np.uint8)
    np.testing.assert_array_equal(_raster.fill_outside(rgba, 128), expected)

