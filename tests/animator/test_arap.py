"""ARAP deformation (Igarashi 2005, two-step) driven by joints, on char1's mesh."""

import numpy as np
import pytest

from animator import CharacterError, RenderError, load_character
from animator.arap import ARAP
from animator.mesh import build_mesh
from tests.conftest import CHAR1


@pytest.fixture(scope="module")
def rig():
    ch = load_character(CHAR1)
    names = [j.name for j in ch.skeleton]
    joints = np.array([j.loc for j in ch.skeleton], dtype=np.float64)
    mesh = build_mesh(ch.mask, keep_points=joints)
    return ch, names, joints, mesh, ARAP(mesh, joints)


def test_handles_at_rest_give_the_rest_mesh(rig):
    _, _, joints, mesh, arap = rig
    assert arap.used.all()
    np.testing.assert_allclose(arap.solve(joints), mesh.vertices, atol=1e-3)


def test_rigid_motion_of_all_handles_moves_the_mesh_rigidly(rig):
    _, _, joints, mesh, arap = rig
    a = np.radians(30)
    R = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    moved = joints @ R.T + [40.0, -25.0]
    np.testing.assert_allclose(arap.solve(moved), mesh.vertices @ R.T + [40.0, -25.0], atol=1e-2)


def _turn(points, centre, degrees):
    a = np.radians(degrees)
    R = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    return (points - centre) @ R.T + centre


def test_moving_one_limb_bends_only_that_limb(rig):
    ch, names, joints, mesh, arap = rig
    moved = joints.copy()
    sh = joints[names.index("left_shoulder")]
    arm = [names.index("left_elbow"), names.index("left_hand")]
    moved[arm] = _turn(joints[arm], sh, -70)   # raise the left arm (y down: negative = up)
    v = arap.solve(moved)
    shift = np.hypot(*(v - mesh.vertices).T)
    # the hand end of the arm follows the hand joint
    near_hand = np.hypot(*(mesh.vertices - joints[names.index("left_hand")]).T) < 25
    hand_move = np.hypot(*(moved[arm[1]] - joints[arm[1]]))
    assert hand_move > 120
    assert np.median(shift[near_hand]) > 0.7 * hand_move
    # the rest of the body stays put: head, the other arm, both feet
    for far in ("neck", "right_hand", "right_foot", "left_foot", "right_elbow"):
        near = np.hypot(*(mesh.vertices - joints[names.index(far)]).T) < 30
        assert near.any()
        assert shift[near].max() < 2.5, far  # the hand moved by ~140 px
    # the arm keeps its length: the ARAP mesh does not stretch it
    def arm_len(verts):
        tri, bary = mesh.locate(joints[arm])
        p = np.einsum("nk,nkc->nc", bary, verts[mesh.triangles[tri]])
        return np.hypot(*(p[1] - sh)), p
    length_rest, _ = arm_len(mesh.vertices)
    length_now, p = arm_len(v)
    assert abs(length_now - length_rest) < 0.05 * length_rest
    np.testing.assert_allclose(p, moved[arm], atol=1.0)


def test_frames_solved_in_a_batch_match_one_by_one(rig):
    _, names, joints, _, arap = rig
    sh = joints[names.index("right_shoulder")]
    arm = [names.index("right_elbow"), names.index("right_hand")]
    frames = []
    for deg in (0, 20, 45, 90, 135):
        f = joints.copy()
        f[arm] = _turn(joints[arm], sh, deg)
        frames.append(f)
    batch = arap.solve(np.array(frames))
    assert batch.shape == (5, arap.n_vertices, 2)
    for k, f in enumerate(frames):
        np.testing.assert_allclose(batch[k], arap.solve(f), atol=1e-9)


def test_operators_made_in_two_threads_are_the_same(rig):
    _, names, joints, mesh, arap = rig
    two = ARAP(mesh, joints, threads=2)
    frame = joints.copy()
    frame[names.index("right_hand")] += (40.0, -25.0)
    np.testing.assert_array_equal(two.solve(frame), arap.solve(frame))


def test_handle_off_the_mesh_is_snapped_or_ignored(rig):
    _, _, joints, mesh, _ = rig
    off = np.vstack([joints, [[joints[:, 0].max() + 3 * mesh.cell, 5.0]]])
    arap = ARAP(mesh, off)
    assert arap.used[:-1].all() and not arap.used[-1]
    np.testing.assert_allclose(arap.solve(off), mesh.vertices, atol=1e-3)
    with pytest.raises(CharacterError, match="no skeleton joint lies"):
        ARAP(mesh, np.array([[-1000.0, -1000.0]]))


def test_mesh_piece_without_handle_fails_clearly():
    m = np.zeros((100, 300), bool)
    m[10:90, 10:90] = True
    m[40:70, 200:230] = True
    mesh = build_mesh(m, cell=16)  # no keep points: only the largest piece, no handle on it
    with pytest.raises(CharacterError, match="no skeleton joint lies"):  # the joints are the input's fault
        ARAP(mesh, np.array([[215.0, 55.0], [216.0, 60.0]]))
    both = build_mesh(m, cell=16, keep_points=np.array([[50.0, 50.0], [215.0, 55.0]]))
    with pytest.raises(RenderError, match="hold no skeleton joint"):
        ARAP(both, np.array([[50.0, 50.0], [60.0, 50.0]]))  # the small piece has no handle


def _naive_arap(verts, tris, handles_rest, handles_new, w=1000.0):
    """Igarashi & Igarashi (2009) written out plainly: build both least-squares systems with loops
    for one frame and solve them with lstsq (the batched operators must give the same answer)."""
    V = len(verts)
    nbrs = [set() for _ in range(V)]
    edges = set()
    for a, b, c in tris:
        for p, q in ((a, b), (b, c), (c, a)):
            nbrs[p].add(q)
            nbrs[q].add(p)
            edges.add((min(p, q), max(p, q)))
    edges = sorted(edges)
    # handles as barycentric combinations of their triangle's vertices
    hb = []
    for h in handles_rest:
        for t in tris:
            A = np.array([verts[t[1]] - verts[t[0]], verts[t[2]] - verts[t[0]]]).T
            l1, l2 = np.linalg.solve(A, h - verts[t[0]])
            if l1 >= -1e-9 and l2 >= -1e-9 and l1 + l2 <= 1 + 1e-9:
                hb.append((t, (1 - l1 - l2, l1, l2)))
                break
    rows, rhs, Gs = [], [], []
    for i, j in edges:
        ring = [i, j] + sorted(nbrs[i] & nbrs[j])
        G = []
        for n in ring[1:]:
            dx, dy = verts[n] - verts[i]
            G += [[dx, dy], [dy, -dx]]
        G = np.array(G)
        Gp = np.linalg.inv(G.T @ G) @ G.T                  # (c, s) = Gp @ stacked (v'_n - v'_i)
        g = np.zeros((2, 2 * V))
        for m, n in enumerate(ring[1:]):
            g[:, 2 * n:2 * n + 2] += Gp[:, 2 * m:2 * m + 2]
            g[:, 2 * i:2 * i + 2] -= Gp[:, 2 * m:2 * m + 2]
        ex, ey = verts[j] - verts[i]
        E = np.array([[ex, ey], [ey, -ex]])
        r = -E @ g
        r[:, 2 * j:2 * j + 2] += np.eye(2)
        r[:, 2 * i:2 * i + 2] -= np.eye(2)
        rows.append(r)
        rhs.append(np.zeros(2))
        Gs.append(g)
    for (t, b), p in zip(hb, handles_new):
        r = np.zeros((2, 2 * V))
        for vid, wt in zip(t, b):
            r[:, 2 * vid:2 * vid + 2] += w * wt * np.eye(2)
        rows.append(r)
        rhs.append(w * np.asarray(p))
    v1 = np.linalg.lstsq(np.vstack(rows), np.concatenate(rhs), rcond=None)[0]
    A2, bx, by = [], [], []
    for (i, j), g in zip(edges, Gs):
        c, s = g @ v1
        n = np.hypot(c, s)
        c, s = c / n, s / n
        ex, ey = verts[j] - verts[i]
        row = np.zeros(V)
        row[i], row[j] = -1, 1
        A2.append(row)
        bx.append(c * ex + s * ey)
        by.append(-s * ex + c * ey)
    for (t, b), p in zip(hb, handles_new):
        row = np.zeros(V)
        for vid, wt in zip(t, b):
            row[vid] += w * wt
        A2.append(row)
        bx.append(w * p[0])
        by.append(w * p[1])
    A2 = np.array(A2)
    x = np.linalg.lstsq(A2, np.array(bx), rcond=None)[0]
    y = np.linalg.lstsq(A2, np.array(by), rcond=None)[0]
    return np.stack([x, y], 1)


def test_batched_operators_match_the_plain_two_step_solution():
    m = np.zeros((60, 140), bool)
    m[10:50, 10:130] = True  # a bar, 3 x 8 cells
    mesh = build_mesh(m, cell=16)
    rest = np.array([[20.0, 30.0], [70.0, 30.0], [120.0, 30.0]])
    arap = ARAP(mesh, rest)
    rng = np.random.default_rng(3)
    frames = []
    for _ in range(4):
        f = rest.copy()
        f[2] = _turn(rest[2:3], rest[1], rng.uniform(-90, 90))[0]  # bend the bar at its middle
        f += rng.normal(0, 2, f.shape)
        frames.append(f)
    ours = arap.solve(np.array(frames))
    for k, f in enumerate(frames):
        want = _naive_arap(mesh.vertices, mesh.triangles, rest, f)
        np.testing.assert_allclose(ours[k], want, atol=1e-3)
