"""Mesh over a character mask: coverage, pieces kept apart, robustness (fixtures: AnimatedDrawings characters)."""

import numpy as np
import pytest

from animator import CharacterError, load_character
from animator.mesh import SUB, bone_distances, build_mesh, graph_components
from tests.conftest import CHARACTERS


def _pixel_centres(mask):
    ys, xs = np.nonzero(mask)
    return np.stack([xs + 0.5, ys + 0.5], 1)


@pytest.mark.parametrize("name", ["char1", "char2", "char3", "char4"])
def test_every_character_pixel_lies_in_a_triangle(name):
    ch = load_character(CHARACTERS / name)
    joints = np.array([j.loc for j in ch.skeleton])
    mesh = build_mesh(ch.mask, keep_points=joints)
    pts = _pixel_centres(ch.mask)
    tri, bary = mesh.locate(pts)
    assert (tri >= 0).all()
    assert mesh.dropped_pixels == 0
    assert bary.min() >= -1e-9 and bary.max() <= 1 + 1e-9
    np.testing.assert_allclose(bary.sum(1), 1.0)
    # barycentric weights reproduce the point from the triangle's vertices
    rebuilt = np.einsum("nk,nkc->nc", bary, mesh.vertices[mesh.triangles[tri]])
    np.testing.assert_allclose(rebuilt, pts, atol=1e-9)
    # no degenerate triangles, every vertex used, a modest size for ARAP
    v = mesh.vertices[mesh.triangles]
    a, b = v[:, 1] - v[:, 0], v[:, 2] - v[:, 0]
    area = np.abs(a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0])
    assert area.min() > 0
    assert np.array_equal(np.unique(mesh.triangles), np.arange(len(mesh.vertices)))
    assert 100 < len(mesh.vertices) < 1500
    # every joint sits on the mesh
    assert (mesh.locate(joints)[0] >= 0).all()


def _u_shape(gap: int) -> np.ndarray:
    """Two 20-px bars joined at the bottom, `gap` px apart: an arm beside the body."""
    m = np.zeros((200, 120), bool)
    m[10:190, 20:40] = True
    m[10:190, 40 + gap:60 + gap] = True
    m[170:190, 20:60 + gap] = True
    return m


@pytest.mark.parametrize("gap", [3, 8])
def test_close_limbs_are_not_glued_together(gap):
    # (gaps narrower than a sub-cell, cell/8 = 2 px here, count as touching)
    mask = _u_shape(gap)
    mesh = build_mesh(mask, cell=16)
    # points on either side of the gap, near the top (far from where the bars join)
    left = np.array([[39.5, y] for y in range(15, 120, 3)])
    right = np.array([[40.5 + gap, y] for y in range(15, 120, 3)])
    tl, _ = mesh.locate(left)
    tr, _ = mesh.locate(right)
    assert (tl >= 0).all() and (tr >= 0).all()
    vl = set(mesh.triangles[tl].ravel())
    vr = set(mesh.triangles[tr].ravel())
    assert not vl & vr, "the two bars share mesh vertices across the gap"
    # through the mesh the bars are far apart: the path goes round the bottom
    d = bone_distances(mesh, np.array([[[30.0, 20.0], [30.0, 100.0]]]))[:, 0]
    assert d[list(vr)].min() > 100


def test_thin_limb_and_hole_are_covered():
    m = np.zeros((160, 160), bool)
    m[40:120, 40:120] = True
    m[70:90, 70:90] = False          # a hole
    for i in range(60):              # a 2-px diagonal stick-arm
        m[40 - i // 2 - 1:40 - i // 2 + 1, 120 + i // 2:122 + i // 2] = True
    mesh = build_mesh(m, cell=16)
    tri, _ = mesh.locate(_pixel_centres(m))
    assert (tri >= 0).all()


def test_disconnected_piece_without_joint_is_dropped():
    m = np.zeros((100, 200), bool)
    m[10:90, 10:90] = True
    m[40:60, 150:170] = True  # a floating blob
    mesh = build_mesh(m, cell=16, keep_points=np.array([[50.0, 50.0]]))
    assert mesh.dropped_pixels == 400
    assert (mesh.locate(np.array([[160.0, 50.0]]))[0] < 0).all()
    kept = build_mesh(m, cell=16, keep_points=np.array([[50.0, 50.0], [160.0, 50.0]]))
    assert kept.dropped_pixels == 0
    assert (kept.locate(np.array([[160.0, 50.0]]))[0] >= 0).all()


def test_empty_mask_fails_clearly():
    with pytest.raises(CharacterError, match="empty"):
        build_mesh(np.zeros((10, 10), bool))


def test_largest_piece_without_joints_gives_way_to_the_jointed_one():
    m = np.zeros((100, 300), bool)
    m[10:90, 10:90] = True        # big, no joint
    m[40:70, 200:230] = True      # small, holds the joint
    mesh = build_mesh(m, cell=16, keep_points=np.array([[215.0, 55.0]]))
    assert mesh.dropped_pixels == 80 * 80
    assert (mesh.locate(np.array([[215.0, 55.0]]))[0] >= 0).all()


def _components_by_search(n, edges):
    """Connected components by breadth-first search, numbered in the order of their smallest node."""
    nbrs = [[] for _ in range(n)]
    for a, b in edges:
        nbrs[a].append(b)
        nbrs[b].append(a)
    label = [-1] * n
    count = 0
    for start in range(n):
        if label[start] < 0:
            label[start], todo = count, [start]
            while todo:
                for m in nbrs[todo.pop()]:
                    if label[m] < 0:
                        label[m] = count
                        todo.append(m)
            count += 1
    return count, label


@pytest.mark.parametrize("seed", range(6))
def test_graph_components_match_a_search(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    edges = rng.integers(0, n, size=(int(rng.integers(0, 2 * n)), 2))
    count, labels = graph_components(n, edges[:, 0], edges[:, 1])
    assert (count, labels.tolist()) == _components_by_search(n, edges.tolist())


@pytest.mark.parametrize("case", ["char1", "char3", "noise"])
def test_empty_sub_cells_belong_to_the_nearest_piece_of_their_cell(case):
    """Each sub-cell without mask pixels is owned by the piece of a Euclidean-nearest sub-cell with mask
    pixels in the same cell (points just off the mask find their piece); cells with none own nothing."""
    if case == "noise":
        mask = np.random.default_rng(3).random((90, 120)) < 0.3
    else:
        mask = load_character(CHARACTERS / case).mask
    mesh = build_mesh(mask)
    ys, xs = np.nonzero(mask)
    x0, y0 = mesh.origin
    occupied = np.zeros(mesh.labels.shape, bool)
    occupied[((ys - y0) / mesh.sub).astype(int), ((xs - x0) / mesh.sub).astype(int)] = True
    kept = mesh.labels >= 0
    checked = 0
    for r0 in range(0, occupied.shape[0], SUB):
        for c0 in range(0, occupied.shape[1], SUB):
            block = (slice(r0, r0 + SUB), slice(c0, c0 + SUB))
            occ, lab = occupied[block], mesh.labels[block]
            if not (occ & kept[block]).any():
                continue
            sy, sx = np.nonzero(occ)
            for y, x in zip(*np.nonzero(~occ)):
                d2 = (sy - y) ** 2 + (sx - x) ** 2
                nearest = d2 == d2.min()
                assert lab[y, x] in set(lab[sy[nearest], sx[nearest]].tolist()), (r0 + y, c0 + x)
                checked += 1
    assert checked > 50
