"""BVH parsing and forward kinematics (animator.bvh)."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

from animator.bvh import BVH, euler_to_matrix, load_bvh, parse_bvh
from animator.errors import BVHError
from tests.conftest import BVH_DIR

# (file, joints incl. end sites, frames, frame time) as written in the fixture files
CLIPS = [
    ("fair1/dab.bvh", 34, 339, 0.0333333),
    ("fair1/jumping.bvh", 34, 654, 0.008342),
    ("fair1/wave_hello.bvh", 34, 839, 0.008342),
    ("fair1/zombie.bvh", 34, 779, 0.0333333),
    ("cmu1/jumping_jacks.bvh", 38, 125, 0.03333),
]


def _bvh(hierarchy: str, rows: list[list[float]], frame_time: float = 0.04) -> BVH:
    text = "HIERARCHY\n" + hierarchy.strip() + f"\nMOTION\nFrames: {len(rows)}\nFrame Time: {frame_time}\n"
    text += "".join(" ".join(str(v) for v in r) + "\n" for r in rows)
    return parse_bvh(text, "synthetic.bvh")


ARM = """
ROOT Hips
{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
  JOINT Arm
  {
    OFFSET 1 0 0
    CHANNELS 3 %s
    JOINT Hand
    {
      OFFSET 2 0 0
      CHANNELS 3 Zrotation Xrotation Yrotation
      End Site
      {
        OFFSET 0.5 0 0
      }
    }
  }
}
"""


@pytest.mark.parametrize("name,joints,frames,frame_time", CLIPS)
def test_fixture_clips_parse(name, joints, frames, frame_time):
    bvh = load_bvh(BVH_DIR / name)
    assert bvh.n_joints == joints
    assert bvh.n_frames == frames
    assert bvh.frame_time == pytest.approx(frame_time)
    assert bvh.motion.shape == (frames, sum(len(c) for c in bvh.channels))
    assert bvh.joint_names[0] == "Hips" and bvh.parents[0] == -1
    assert all(bvh.parents[j] < j for j in range(1, bvh.n_joints))  # parents first
    pos = bvh.world_positions()
    assert pos.shape == (frames, joints, 3) and np.isfinite(pos).all()
    # bones are rigid: each joint's distance to its parent is its OFFSET length in every frame
    for j in range(1, joints):
        d = np.linalg.norm(pos[:, j] - pos[:, bvh.parents[j]], axis=-1)
        np.testing.assert_allclose(d, np.linalg.norm(bvh.offsets[j]), atol=1e-9)


def test_fair_root_motion_matches_file():
    bvh = load_bvh(BVH_DIR / "fair1/dab.bvh")
    np.testing.assert_allclose(bvh.world_positions()[:, 0], bvh.motion[:, :3])
    # the first data row of the file, root position columns
    np.testing.assert_allclose(bvh.motion[0, :3], [-1.2344, -0.5247, 25.0481])


def test_end_sites_are_named_after_their_parent():
    dab = load_bvh(BVH_DIR / "fair1/dab.bvh")
    # FAIR's RightHandEnd is a real joint; its End Site becomes RightHandEndEnd
    assert not dab.end_site[dab.index("RightHandEnd")]
    assert dab.parents[dab.index("RightHandEnd")] == dab.index("RightHand")
    assert dab.end_site[dab.index("RightHandEndEnd")]
    assert dab.end_site[dab.index("HeadEnd")]
    assert dab.joint_names.count("HeadEnd") == 1
    cmu = load_bvh(BVH_DIR / "cmu1/jumping_jacks.bvh")
    assert cmu.end_site[cmu.index("LeftToeEnd")]
    # AnimatedDrawings' own name for end sites resolves to the first one
    assert dab.index("End Site") == dab.index("HeadEnd")
    # end-site position = parent position + parent rotation @ offset
    rot, pos = dab.forward_kinematics()
    j, p = dab.index("HeadEnd"), dab.index("Head")
    np.testing.assert_allclose(pos[:, j], pos[:, p] + rot[:, p] @ dab.offsets[j])


def test_end_site_name_clash_gets_a_distinct_name():
    bvh = _bvh("""
ROOT A
{
  OFFSET 0 0 0
  CHANNELS 3 Xposition Yposition Zposition
  JOINT AEnd
  {
    OFFSET 1 0 0
    End Site
    {
      OFFSET 1 0 0
    }
  }
  End Site
  {
    OFFSET 0 1 0
  }
}""", [[0, 0, 0]])
    assert bvh.joint_names == ("A", "AEnd", "AEndEnd", "A_EndSite")


def test_ninety_degree_rotation_moves_child():
    # Arm rotates 90 degrees about z: the hand (2 along x from the arm) swings to +y.
    bvh = _bvh(ARM % "Zrotation Xrotation Yrotation", [[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                                                      [0, 0, 0, 0, 0, 0, 90, 0, 0, 0, 0, 0]])
    pos = bvh.world_positions()
    np.testing.assert_allclose(pos[0, 2], [3, 0, 0], atol=1e-12)
    np.testing.assert_allclose(pos[1, 1], [1, 0, 0], atol=1e-12)
    np.testing.assert_allclose(pos[1, 2], [1, 2, 0], atol=1e-12)
    np.testing.assert_allclose(pos[1, 3], [1, 2.5, 0], atol=1e-12)  # end site follows


def test_root_translation_and_rotation():
    # root at (5, 0, 0) turned 90 degrees about y: the arm offset (1,0,0) goes to (0,0,-1)
    bvh = _bvh(ARM % "Zrotation Xrotation Yrotation", [[5, 0, 0, 0, 0, 90, 0, 0, 0, 0, 0, 0]])
    pos = bvh.world_positions()
    np.testing.assert_allclose(pos[0, 0], [5, 0, 0], atol=1e-12)
    np.testing.assert_allclose(pos[0, 1], [5, 0, -1], atol=1e-12)
    np.testing.assert_allclose(pos[0, 2], [5, 0, -3], atol=1e-12)


def test_channel_order_matters():
    # Same two angles (90 about z, 90 about x), listed in two orders: R = Rz Rx vs R = Rx Rz.
    row = [0, 0, 0, 0, 0, 0, 90, 90, 0, 0, 0, 0]
    zx = _bvh(ARM % "Zrotation Xrotation Yrotation", [row]).world_positions()[0, 2]
    xz = _bvh(ARM % "Xrotation Zrotation Yrotation", [row]).world_positions()[0, 2]
    # Rz(90) Rx(90) (2,0,0) = Rz(90) (2,0,0) = (0,2,0); Rx(90) Rz(90) (2,0,0) = Rx(90) (0,2,0) = (0,0,2)
    np.testing.assert_allclose(zx, [1, 2, 0], atol=1e-12)
    np.testing.assert_allclose(xz, [1, 0, 2], atol=1e-12)


def test_euler_to_matrix_composes_in_listed_order():
    rng = np.random.default_rng(0)
    a = rng.uniform(-180, 180, size=(5, 3))
    m = euler_to_matrix(a, "YXZ")
    for k in range(5):
        ry, rx, rz = (euler_to_matrix(a[k, i:i + 1], ax) for i, ax in enumerate("YXZ"))
        np.testing.assert_allclose(m[k], ry @ rx @ rz, atol=1e-12)
        np.testing.assert_allclose(m[k] @ m[k].T, np.eye(3), atol=1e-12)


def test_position_channels_on_non_root_joints():
    hier = """
ROOT Hips
{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Xrotation Yrotation Zrotation
  JOINT mixamorig:Spine
  {
    OFFSET 0 10 0
    CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
    End Site
    {
      OFFSET 0 5 0
    }
  }
}"""
    bvh = _bvh(hier, [[1, 2, 3, 0, 0, 0, 0, 12, 0, 0, 0, 0]])
    assert bvh.joint_names == ("Hips", "Spine", "SpineEnd")  # mixamorig: prefix stripped
    np.testing.assert_allclose(bvh.world_positions()[0, 1], [1, 14, 3])  # channels replace the OFFSET
    # AnimatedDrawings ignores translations below the root: the OFFSET is used
    np.testing.assert_allclose(bvh.world_positions(nonroot_translations=False)[0, 1], [1, 12, 3])


def test_mixamo_prefixes_stripped():
    hier = """
ROOT mixamorig:Hips
{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
  JOINT mixamorig1:LeftUpLeg
  {
    OFFSET 1 0 0
    CHANNELS 3 Zrotation Xrotation Yrotation
    End Site
    {
      OFFSET 0 -1 0
    }
  }
}"""
    bvh = _bvh(hier, [[0] * 9])
    assert bvh.joint_names == ("Hips", "LeftUpLeg", "LeftUpLegEnd")
    assert bvh.has_joint("LeftUpLeg") and not bvh.has_joint("RightUpLeg")
    # configs written for AnimatedDrawings name joints with their prefix: they still resolve
    assert bvh.index("mixamorig:LeftUpLeg") == bvh.index("mixamorig1:LeftUpLeg") == 1


def _quat_fk_reference(bvh: BVH, frame: int) -> np.ndarray:
    """Independent slow FK: per frame, per joint, with quaternions (w, x, y, z)."""
    def qmul(a, b):
        w1, x1, y1, z1 = a
        w2, x2, y2, z2 = b
        return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                         w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])

    def qrot(q, v):
        return qmul(qmul(q, np.array([0.0, *v])), q * np.array([1, -1, -1, -1]))[1:]

    row = bvh.motion[frame]
    world_q = [None] * bvh.n_joints
    world_p = np.zeros((bvh.n_joints, 3))
    for j in range(bvh.n_joints):
        q = np.array([1.0, 0, 0, 0])
        t = np.array(bvh.offsets[j], dtype=float)
        for k, ch in enumerate(bvh.channels[j]):
            v = row[bvh.channel_start[j] + k]
            axis = "XYZ".index(ch[0])
            if ch.endswith("rotation"):
                h = np.radians(v) / 2
                e = np.zeros(3)
                e[axis] = np.sin(h)
                q = qmul(q, np.array([np.cos(h), *e]))
            else:
                t[axis] = v
        p = bvh.parents[j]
        if p < 0:
            world_q[j], world_p[j] = q, t
        else:
            world_q[j] = qmul(world_q[p], q)
            world_p[j] = world_p[p] + qrot(world_q[p], t)
    return world_p


@pytest.mark.parametrize("name", ["fair1/dab.bvh", "cmu1/jumping_jacks.bvh"])
def test_vectorised_fk_matches_per_frame_quaternion_fk(name):
    bvh = load_bvh(BVH_DIR / name)
    pos = bvh.world_positions()
    for f in (0, 1, bvh.n_frames // 2, bvh.n_frames - 1):
        np.testing.assert_allclose(pos[f], _quat_fk_reference(bvh, f), atol=1e-9)


def test_subset_fk_matches_full():
    bvh = load_bvh(BVH_DIR / "fair1/zombie.bvh")
    want = [bvh.index(n) for n in ("RightHand", "LeftFoot", "Head")]
    sub = bvh.world_positions(slice(10, 50), joints=want)
    full = bvh.world_positions(slice(10, 50))
    np.testing.assert_allclose(sub[:, want], full[:, want])
    assert np.isnan(sub[:, bvh.index("LeftHandThumb1")]).all()  # not asked for, not computed


def test_bvh_is_picklable_and_cached():
    a = load_bvh(BVH_DIR / "fair1/dab.bvh")
    assert load_bvh(BVH_DIR / "fair1/dab.bvh") is a
    b = pickle.loads(pickle.dumps(a))
    assert b.joint_names == a.joint_names and b.index("RightHand") == a.index("RightHand")
    np.testing.assert_array_equal(b.motion, a.motion)
    assert not a.motion.flags.writeable


GOOD = ARM % "Zrotation Xrotation Yrotation"


@pytest.mark.parametrize("text,line,words", [
    ("HIERARCHX\n", 1, "HIERARCHY"),
    ("HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0\n}\n", 4, "OFFSET"),
    ("HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  CHANNELS 3 Xposition Yposition\n}\n", 5, "CHANNELS"),
    ("HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  CHANNELS 1 Wrotation\n}\n", 5, "unknown channel"),
    ("HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  CHANNELS 1 Xrotation\n}\nMOTION\nFrames: 2\nFrame Time: 0.1\n0\n", 8, "1 rows"),
    ("HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  CHANNELS 2 Xrotation Yrotation\n}\nMOTION\nFrames: 2\nFrame Time: 0.1\n0 0\n0 x\n", 11, "not a number"),
    ("HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  CHANNELS 2 Xrotation Yrotation\n}\nMOTION\nFrames: 2\nFrame Time: 0.1\n0 0\n0 0 0\n", 11, "3 values"),
    ("HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  CHANNELS 1 Xrotation\n}\nMOTION\nFrames: 1\nFrame Time: -1\n0\n", 9, "Frame Time"),
    ("HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  CHANNELS 1 Xrotation\n}\nMOTION\nFrame: 1\n", 8, "Frames"),
    ("HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  JOINT A\n  {\n    OFFSET 0 0 0\n  }\n", 8, "unclosed"),
    ("HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n}\n}\n", 6, "unbalanced"),
    ("HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n}\n", 5, "MOTION"),
    ("HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  CHANNELS 1 Xrotation\n}\nMOTION\nFrames: 1\nFrame Time: 0.1\nnan\n", 10, "non-finite"),
])
def test_malformed_bvh_names_file_and_line(text, line, words):
    with pytest.raises(BVHError) as exc:
        parse_bvh(text, "bad.bvh")
    assert exc.value.path == "bad.bvh"
    assert exc.value.field == f"line {line}"
    assert words in str(exc.value)
    assert "bad.bvh" in str(exc.value)


def test_missing_file(tmp_path):
    with pytest.raises(BVHError, match="not found"):
        load_bvh(tmp_path / "nope.bvh")
