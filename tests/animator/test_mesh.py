"""Mesh over a character mask: coverage, pieces kept apart, robustness (fixtures: AnimatedDrawings characters)."""

import numpy as np
import pytest

from animator import CharacterError, load_character
from animator.mesh import bone_distances, build_mesh
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
