"""Retargeting a BVH clip onto a drawn character (animator.retarget)."""
from __future__ import annotations

import json
import math
import pickle
from pathlib import Path

import numpy as np
import pytest
import yaml

from animator.bvh import load_bvh
from animator.character import Character, Joint, load_character
from animator.config import load_motion_config, load_retarget_config
from animator.errors import ConfigError
from animator.frame_rate import plan_for
from animator.retarget import Motion2D, retarget, to_animated_drawings_frame
from tests.conftest import AD_EXAMPLES

CASES = [("dab", "fair1_ppf"), ("zombie", "fair1_ppf"), ("jumping", "fair1_ppf"), ("wave_hello", "fair1_ppf"),
         ("jumping_jacks", "cmu1_pfp")]


def _fixture(char: str, motion: str, rt: str):
    return (load_character(AD_EXAMPLES / "characters" / char), load_motion_config(AD_EXAMPLES / "config" / "motion" / f"{motion}.yaml"),
            load_retarget_config(AD_EXAMPLES / "config" / "retarget" / f"{rt}.yaml"))


# ------------------------------------------------------------------------------------------------
# A synthetic clip and a character drawn exactly as the clip's rest pose, seen from the front.
# BVH: y up, facing +z, centimetres, the actor's right at -x. Drawing: 2 px per cm, y down.

SYN_BVH = """HIERARCHY
ROOT Hips
{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
  JOINT Spine
  {
    OFFSET 0 20 0
    CHANNELS 3 Zrotation Xrotation Yrotation
    JOINT Neck
    {
      OFFSET 0 25 0
      CHANNELS 3 Zrotation Xrotation Yrotation
      End Site
      {
        OFFSET 0 10 0
      }
    }
    JOINT RightArm
    {
      OFFSET -15 20 0
      CHANNELS 3 Zrotation Xrotation Yrotation
      JOINT RightForeArm
      {
        OFFSET -25 0 0
        CHANNELS 3 Zrotation Xrotation Yrotation
        JOINT RightHand
        {
          OFFSET -20 0 0
          CHANNELS 3 Zrotation Xrotation Yrotation
          End Site
          {
            OFFSET -5 0 0
          }
        }
      }
    }
    JOINT LeftArm
    {
      OFFSET 15 20 0
      CHANNELS 3 Zrotation Xrotation Yrotation
      JOINT LeftForeArm
      {
        OFFSET 25 0 0
        CHANNELS 3 Zrotation Xrotation Yrotation
        JOINT LeftHand
        {
          OFFSET 20 0 0
          CHANNELS 3 Zrotation Xrotation Yrotation
          End Site
          {
            OFFSET 5 0 0
          }
        }
      }
    }
  }
  JOINT RightUpLeg
  {
    OFFSET -10 0 0
    CHANNELS 3 Zrotation Xrotation Yrotation
    JOINT RightLeg
    {
      OFFSET 0 -45 0
      CHANNELS 3 Zrotation Xrotation Yrotation
      JOINT RightFoot
      {
        OFFSET 0 -45 0
        CHANNELS 3 Zrotation Xrotation Yrotation
        End Site
        {
          OFFSET 0 0 10
        }
      }
    }
  }
  JOINT LeftUpLeg
  {
    OFFSET 10 0 0
    CHANNELS 3 Zrotation Xrotation Yrotation
    JOINT LeftLeg
    {
      OFFSET 0 -45 0
      CHANNELS 3 Zrotation Xrotation Yrotation
      JOINT LeftFoot
      {
        OFFSET 0 -45 0
        CHANNELS 3 Zrotation Xrotation Yrotation
        End Site
        {
          OFFSET 0 0 10
        }
      }
    }
  }
}
"""
SYN_JOINTS = ["Hips", "Spine", "Neck", "RightArm", "RightForeArm", "RightHand", "LeftArm", "LeftForeArm", "LeftHand",
              "RightUpLeg", "RightLeg", "RightFoot", "LeftUpLeg", "LeftLeg", "LeftFoot"]
# column of each joint's first rotation channel (Z, X, Y) in a MOTION row
COL = {name: 3 + 3 * i for i, name in enumerate(SYN_JOINTS)}
CHAR_FROM_BVH = {"root": "Hips", "hip": "Hips", "torso": "Spine", "neck": "Neck",
                 "right_shoulder": "RightArm", "right_elbow": "RightForeArm", "right_hand": "RightHand",
                 "left_shoulder": "LeftArm", "left_elbow": "LeftForeArm", "left_hand": "LeftHand",
                 "right_hip": "RightUpLeg", "right_knee": "RightLeg", "right_foot": "RightFoot",
                 "left_hip": "LeftUpLeg", "left_knee": "LeftLeg", "left_foot": "LeftFoot"}
PARENT = {"root": None, "hip": "root", "torso": "hip", "neck": "torso", "right_shoulder": "torso",
          "right_elbow": "right_shoulder", "right_hand": "right_elbow", "left_shoulder": "torso",
          "left_elbow": "left_shoulder", "left_hand": "left_elbow", "right_hip": "root", "right_knee": "right_hip",
          "right_foot": "right_knee", "left_hip": "root", "left_knee": "left_hip", "left_foot": "left_knee"}

SYN_RETARGET = {
    "char_starting_location": [0.0, 0.0, -0.5],
    "bvh_projection_bodypart_groups": [
        {"name": "Upper Limbs", "method": "frontal",
         "bvh_joint_names": ["RightArm", "RightForeArm", "RightHand", "LeftArm", "LeftForeArm", "LeftHand"]},
        {"name": "Lower Limbs", "method": "frontal",
         "bvh_joint_names": ["RightUpLeg", "RightLeg", "RightFoot", "LeftUpLeg", "LeftLeg", "LeftFoot"]},
        {"name": "Trunk", "method": "frontal", "bvh_joint_names": ["Hips", "Spine", "Neck"]},
    ],
    "char_bodypart_groups": [
        {"bvh_depth_drivers": ["Hips"], "char_joints": ["right_shoulder", "left_shoulder", "right_hip", "left_hip", "hip", "torso", "neck"]},
        {"bvh_depth_drivers": ["LeftHand"], "char_joints": ["left_elbow", "left_hand"]},
        {"bvh_depth_drivers": ["RightHand"], "char_joints": ["right_elbow", "right_hand"]},
        {"bvh_depth_drivers": ["LeftFoot"], "char_joints": ["left_knee", "left_foot"]},
        {"bvh_depth_drivers": ["RightFoot"], "char_joints": ["right_knee", "right_foot"]},
    ],
    "char_bvh_root_offset": {
        "bvh_projection_bodypart_group_for_offset": "Lower Limbs",
        "bvh_joints": [["RightFoot", "RightLeg", "RightUpLeg"], ["LeftFoot", "LeftLeg", "LeftUpLeg"]],
        "char_joints": [["right_foot", "right_knee", "right_hip"], ["left_foot", "left_knee", "left_hip"]],
    },
    "char_joint_bvh_joints_mapping": {
        "torso": ["Hips", "Spine"], "neck": ["Spine", "Neck"],
        "right_elbow": ["RightArm", "RightForeArm"], "right_hand": ["RightForeArm", "RightHand"],
        "left_elbow": ["LeftArm", "LeftForeArm"], "left_hand": ["LeftForeArm", "LeftHand"],
        "right_knee": ["RightUpLeg", "RightLeg"], "right_foot": ["RightLeg", "RightFoot"],
        "left_knee": ["LeftUpLeg", "LeftLeg"], "left_foot": ["LeftLeg", "LeftFoot"],
    },
    "char_runtime_checks": [["above", "neck", "right_shoulder", "left_shoulder"]],
}


def _rest_row() -> np.ndarray:
    row = np.zeros(3 + 3 * len(SYN_JOINTS))
    row[1] = 100.0  # hips 1 m above the floor
    return row


def _write_clip(tmp_path: Path, rows: list[np.ndarray], start: int = 0, end: int | None = None,
                retarget_changes: dict | None = None):
    bvh = tmp_path / "syn.bvh"
    bvh.write_text(SYN_BVH + f"MOTION\nFrames: {len(rows)}\nFrame Time: 0.04\n"
                   + "".join(" ".join(f"{v:.6f}" for v in r) + "\n" for r in rows))
    motion = tmp_path / "syn_motion.yaml"
    motion.write_text(yaml.safe_dump({
        "filepath": str(bvh), "start_frame_idx": start, "end_frame_idx": end, "groundplane_joint": "LeftFoot",
        "forward_perp_joint_vectors": [["LeftArm", "RightArm"], ["LeftUpLeg", "RightUpLeg"]],
        "scale": 0.01, "up": "+y"}))
    rt = dict(SYN_RETARGET, **(retarget_changes or {}))
    rtp = tmp_path / "syn_retarget.yaml"
    rtp.write_text(yaml.safe_dump(rt))
    return load_motion_config(motion), load_retarget_config(rtp)


def _syn_character(moved: dict[str, tuple[float, float]] | None = None) -> Character:
    bvh = load_bvh_text(SYN_BVH + "MOTION\nFrames: 1\nFrame Time: 0.04\n" + " ".join(map(str, _rest_row())) + "\n")
    pos = bvh.world_positions()[0]
    skeleton = []
    for name, parent in PARENT.items():
        p = pos[bvh.index(CHAR_FROM_BVH[name])]
        loc = (200 + 2 * p[0], 500 - 2 * p[1])
        if moved and name in moved:
            loc = moved[name]
        skeleton.append(Joint(name, loc, parent))
    texture = np.zeros((520, 400, 4), np.uint8)
    mask = np.zeros((520, 400), bool)
    mask[100:480, 100:300] = True
    return Character(texture, mask, skeleton)


def load_bvh_text(text: str):
    from animator.bvh import parse_bvh
    return parse_bvh(text, "syn.bvh")


def _locs(char: Character) -> np.ndarray:
    return np.array([j.loc for j in char.skeleton], dtype=float)


# ------------------------------------------------------------------------------------------------

def test_rest_pose_reproduces_the_drawing(tmp_path):
    char = _syn_character()
    mc, rc = _write_clip(tmp_path, [_rest_row(), _rest_row()])
    motion = retarget(char, mc, rc)
    assert motion.joint_names == [j.name for j in char.skeleton]
    for f in range(2):
        np.testing.assert_allclose(motion.positions[f], _locs(char), atol=1e-9)


def test_ninety_degree_arm_turn_moves_the_hand_up(tmp_path):
    char = _syn_character()
    raised = _rest_row()
    raised[COL["RightArm"]] = -90.0  # Zrotation about the actor's forward axis: right arm from sideways to up
    mc, rc = _write_clip(tmp_path, [_rest_row(), raised])
    m = retarget(char, mc, rc)
    shoulder = m.joint("right_shoulder")[1]
    np.testing.assert_allclose(shoulder, m.joint("right_shoulder")[0], atol=1e-9)
    # drawn arm: 50 px upper arm, 40 px forearm, pointing left (-x) at rest; raised it points up (-y)
    np.testing.assert_allclose(m.joint("right_hand")[0] - shoulder, [-90, 0], atol=1e-9)
    np.testing.assert_allclose(m.joint("right_elbow")[1] - shoulder, [0, -50], atol=1e-9)
    np.testing.assert_allclose(m.joint("right_hand")[1] - shoulder, [0, -90], atol=1e-9)
    # nothing else moved
    others = [i for i, n in enumerate(m.joint_names) if n not in ("right_elbow", "right_hand")]
    np.testing.assert_allclose(m.positions[1, others], m.positions[0, others], atol=1e-9)


def test_root_motion_is_scaled_to_the_drawing(tmp_path):
    char = _syn_character()
    moved = _rest_row()
    moved[0] += 10.0  # 10 cm towards the actor's left
    moved[1] += 5.0   # 5 cm up
    mc, rc = _write_clip(tmp_path, [_rest_row(), moved])
    m = retarget(char, mc, rc)
    # the drawing is 2 px per cm; the actor's left is the viewer's right (+x); up is -y
    np.testing.assert_allclose(m.positions[1] - m.positions[0], np.broadcast_to([20.0, -10.0], (16, 2)), atol=1e-9)
    # the motion scale does not change the drawing's motion
    mc2 = load_motion_config(Path(mc.path))
    object.__setattr__(mc2, "scale", 3.0)
    np.testing.assert_allclose(retarget(char, mc2, rc).positions, m.positions, atol=1e-9)


def test_turning_in_place_keeps_the_pose(tmp_path):
    char = _syn_character()
    turned = _rest_row()
    turned[5] = 90.0  # root Yrotation: the actor turns to face +x
    mc, rc = _write_clip(tmp_path, [_rest_row(), turned])
    m = retarget(char, mc, rc)
    np.testing.assert_allclose(m.positions[1], m.positions[0], atol=1e-9)


def test_depth_order_follows_the_arms(tmp_path):
    char = _syn_character()
    row = _rest_row()
    row[COL["RightArm"] + 2] = 45.0  # Yrotation: right arm swings forward (towards the viewer)
    row[COL["LeftArm"] + 2] = 45.0   # left arm swings backward
    mc, rc = _write_clip(tmp_path, [_rest_row(), row])
    m = retarget(char, mc, rc)
    assert m.part_joints[1] == ["left_elbow", "left_hand"] and m.part_joints[2] == ["right_elbow", "right_hand"]
    assert m.part_order.shape == (2, 5)
    assert sorted(m.part_order[1]) == [0, 1, 2, 3, 4]
    assert m.part_order[1][0] == 1      # left arm drawn first (behind)
    assert m.part_order[1][-1] == 2     # right arm drawn last (in front)
    assert m.part_depths[1, 2] > 0 > m.part_depths[1, 1]
    assert m.part_reversed[1, 1] and not m.part_reversed[1, 2]
    # the arms still look horizontal from the front: positions unchanged
    np.testing.assert_allclose(m.positions[1], m.positions[0], atol=1e-9)


def test_output_frame_i_is_bvh_frame_start_plus_i(tmp_path):
    char = _syn_character()
    rows = []
    for f in range(10):
        r = _rest_row()
        r[COL["RightForeArm"]] = 10.0 * f  # forearm turns down by 10 degrees per frame
        rows.append(r)
    mc, rc = _write_clip(tmp_path, rows, start=3, end=9)
    m = retarget(char, mc, rc)
    np.testing.assert_array_equal(m.source_frames, np.arange(3, 9))
    assert m.n_frames == 6 and m.frame_time_s == pytest.approx(0.04)
    v = m.joint("right_hand") - m.joint("right_elbow")
    # drawn forearm points -x at rest; turned down by theta in a y-down image: (-cos, +sin)
    theta = np.radians(10.0 * np.arange(3, 9))
    np.testing.assert_allclose(v, 40 * np.stack([-np.cos(theta), np.sin(theta)], -1), atol=1e-9)
    sub = retarget(char, mc, rc, frame_indices=[8, 3, 5])
    np.testing.assert_allclose(sub.positions, m.positions[[5, 0, 2]])
    np.testing.assert_array_equal(sub.source_frames, [8, 3, 5])


def test_runtime_check_drops_neck_of_a_tadpole(tmp_path):
    # neck drawn below the shoulders: its mapping is dropped, so it stays rigid with the torso
    base = _syn_character()
    rs, ls = (j.loc for j in base.skeleton if j.name in ("right_shoulder", "left_shoulder"))
    char = _syn_character({"neck": ((rs[0] + ls[0]) / 2, rs[1] + 20)})
    row = _rest_row()
    row[COL["Spine"]] = 40.0  # the actor leans its chest sideways: the Spine -> Neck bone turns
    mc, rc = _write_clip(tmp_path, [_rest_row(), row])
    m = retarget(char, mc, rc)
    for name in ("neck", "torso", "hip"):
        np.testing.assert_allclose(m.joint(name)[1], m.joint(name)[0], atol=1e-9)
    normal = retarget(base, mc, rc)
    assert np.abs(normal.joint("neck")[1] - normal.joint("neck")[0]).max() > 5  # a normal drawing's head turns


# ------------------------------------------------------------------------------------------------
# fixtures: AnimatedDrawings' own characters, clips and configs

@pytest.mark.parametrize("motion,rt", CASES)
def test_bone_lengths_preserved(motion, rt):
    char, mc, rc = _fixture("char1", motion, rt)
    m = retarget(char, mc, rc)
    locs = _locs(char)
    idx = {n: i for i, n in enumerate(m.joint_names)}
    for j in char.skeleton:
        if j.parent is None:
            continue
        a, b = idx[j.name], idx[j.parent]
        rest = np.linalg.norm(locs[a] - locs[b])
        np.testing.assert_allclose(np.linalg.norm(m.positions[:, a] - m.positions[:, b], axis=-1), rest, atol=1e-6)
    assert np.isfinite(m.positions).all()
    np.testing.assert_allclose(m.joint("root")[0], locs[idx["root"]])  # the clip starts where the drawing is


def test_full_clip_frames_and_timing():
    char, mc, rc = _fixture("char1", "jumping", "fair1_ppf")
    m = retarget(char, mc, rc)
    assert m.positions.shape == (504, 16, 2) and m.part_order.shape == (504, 5)
    np.testing.assert_array_equal(m.source_frames, np.arange(150, 654))
    assert m.frame_time_s == pytest.approx(0.008342)
    plan = plan_for(mc)
    pruned = retarget(char, mc, rc, frame_indices=plan.indices, frame_time_s=plan.frame_time_s)
    np.testing.assert_allclose(pruned.positions, m.positions[plan.indices - 150])
    assert pruned.frame_time_s == plan.frame_time_s
    from_plan = retarget(char, mc, rc, frame_indices=plan)
    np.testing.assert_array_equal(from_plan.positions, pruned.positions)
    assert from_plan.frame_time_s == plan.frame_time_s
    assert retarget(char, mc, rc, frame_indices=plan.indices).duration_s == pytest.approx(m.duration_s)


def test_frame_indices_outside_the_range_are_refused():
    char, mc, rc = _fixture("char1", "jumping", "fair1_ppf")
    with pytest.raises(ConfigError) as exc:
        retarget(char, mc, rc, frame_indices=[100, 200])
    assert exc.value.field == "frame_indices"
    with pytest.raises(ConfigError):
        retarget(char, mc, rc, frame_indices=[])


def test_mismatched_configs_fail_clearly():
    char, mc, _ = _fixture("char1", "dab", "fair1_ppf")
    cmu = load_retarget_config(AD_EXAMPLES / "config" / "retarget" / "cmu1_pfp.yaml")
    with pytest.raises(ConfigError) as exc:
        retarget(char, mc, cmu)
    assert exc.value.path.endswith("cmu1_pfp.yaml") and "bvh_projection_bodypart_groups" in exc.value.field


def test_to_json_and_pickle():
    char, mc, rc = _fixture("char2", "jumping_jacks", "cmu1_pfp")
    m = retarget(char, mc, rc)
    doc = json.loads(json.dumps(m.to_json()))
    assert doc["joints"] == m.joint_names
    assert len(doc["frames"]) == m.n_frames and len(doc["frames"][0]) == 16 and len(doc["frames"][0][0]) == 2
    np.testing.assert_allclose(np.array(doc["frames"]), m.positions, atol=1e-3)
    m2 = pickle.loads(pickle.dumps(m))
    assert isinstance(m2, Motion2D)
    np.testing.assert_array_equal(m2.positions, m.positions)


def test_animated_drawings_frame_conversion():
    char, mc, rc = _fixture("char1", "dab", "fair1_ppf")
    m = retarget(char, mc, rc)
    ad = to_animated_drawings_frame(m, char, rc)
    d = max(char.size)
    np.testing.assert_allclose(ad[0, m.joint_names.index("root")], rc.char_starting_location[:2])
    # same shape, y flipped, scaled by 1/max(width, height)
    np.testing.assert_allclose((ad[:, 3] - ad[:, 0]) * [d, -d], m.positions[:, 3] - m.positions[:, 0], atol=1e-9)


# ------------------------------------------------------------------------------------------------
# An independent, slow, per-frame implementation of the same method (quaternion forward
# kinematics, explicit per-frame rig posing), compared with the vectorised one on the fixtures.

def _qmul(a, b):
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def _qrot(q, v):
    return _qmul(_qmul(q, np.array([0.0, *v])), q * np.array([1, -1, -1, -1]))[1:]


def _qaxis(axis, deg):
    h = math.radians(deg) / 2
    e = np.zeros(3)
    e["XYZ".index(axis)] = math.sin(h)
    return np.array([math.cos(h), *e])


def _frame_positions(bvh, f):
    row = bvh.motion[f]
    wq, wp = {}, {}
    for j in range(bvh.n_joints):
        q, t = np.array([1.0, 0, 0, 0]), np.array(bvh.offsets[j], float)
        for k, ch in enumerate(bvh.channels[j]):
            v = row[bvh.channel_start[j] + k]
            if ch.endswith("rotation"):
                q = _qmul(q, _qaxis(ch[0], v))
            elif j == 0:
                t["XYZ".index(ch[0])] = v
        p = bvh.parents[j]
        wq[j], wp[j] = (q, t) if p < 0 else (_qmul(wq[p], q), wp[p] + _qrot(wq[p], t))
    return np.array([wp[j] for j in range(bvh.n_joints)])


def _reference(char, mc, rc):
    bvh = load_bvh(mc.bvh_path)
    start, end = mc.frame_range(bvh.n_frames)
    up = _qmul(_qaxis("Y", -90), _qaxis("X", -90)) if mc.up == "+z" else np.array([1.0, 0, 0, 0])
    ix = bvh.index
    frames, fwds = [], []
    for f in range(start, end):
        pos = np.array([_qrot(up, p) for p in _frame_positions(bvh, f)])
        vs = []
        for a, b in mc.forward_perp_joint_vectors:
            v = pos[ix(b)] - pos[ix(a)]
            vs.append(v / np.linalg.norm(v))
        avg = np.mean(vs, axis=0)
        fwd = np.cross([0.0, 1.0, 0.0], avg)
        frames.append(pos)
        fwds.append(fwd / np.linalg.norm(fwd))
    yaw0 = math.degrees(math.atan2(fwds[0][2], fwds[0][0]))
    turn = _qaxis("Y", yaw0)  # right-handed turn by yaw0 about +y takes fwd0 to +x
    world = [np.array([_qrot(turn, p) for p in pos]) for pos in frames]
    fwds = [_qrot(turn, v) for v in fwds]
    canon = []
    for pos, fwd in zip(world, fwds):
        yaw = math.degrees(math.atan2(fwd[2], fwd[0]))
        q = _qaxis("Y", yaw)
        canon.append(np.array([_qrot(q, p - pos[0]) for p in pos]))
    canon = np.array(canon)
    plane = {}
    gplane = {}
    for g in rc.bvh_projection_bodypart_groups:
        if g.method == "pca":
            pts = canon[:, [ix(n) for n in g.bvh_joint_names]].reshape(-1, 3)
            w, v = np.linalg.eigh(np.cov(pts.T))
            normal = v[:, 0]
            p = "x" if abs(normal[0]) > abs(normal[2]) else "z"
        else:
            p = "x" if g.method == "frontal" else "z"
        gplane[g.name] = p
        for n in g.bvh_joint_names:
            plane[n] = p

    names = [j.name for j in char.skeleton]
    loc = {j.name: np.array([j.loc[0], -j.loc[1]], float) for j in char.skeleton}
    par = {j.name: j.parent for j in char.skeleton}
    kids = {n: [j.name for j in char.skeleton if j.parent == n] for n in names}
    mapping = rc.mapping
    for _, t, a, b in rc.char_runtime_checks:
        d = loc[b] - loc[a]
        n_ = np.array([-d[1], d[0]])
        if np.dot(loc[t] - loc[a], n_) < 0:
            mapping.pop(t, None)

    def ang(v):
        return math.degrees(math.atan2(v[1], v[0])) - 90.0

    ro = rc.char_bvh_root_offset
    clen = sum(np.linalg.norm(loc[c[i + 1]] - loc[c[i]]) for c in ro.char_joints for i in range(len(c) - 1))
    blen = sum(np.linalg.norm(world[-1][ix(c[i + 1])] - world[-1][ix(c[i])]) for c in ro.bvh_joints for i in range(len(c) - 1))
    root = np.zeros(2)
    out = []
    for f in range(len(canon)):
        if f:
            step = world[f][0] - world[f - 1][0]
            fw = fwds[f]
            axis = fw if gplane[ro.bvh_projection_bodypart_group_for_offset] == "z" else np.array([-fw[2], fw[1], -fw[0]])
            root = root + clen / blen * np.array([np.dot(axis, step), step[1]])
        local = {n: 0.0 for n in names}
        cur = {}

        def visit(n):
            if n in mapping:
                p_, d_ = mapping[n]
                bone = canon[f, ix(d_)] - canon[f, ix(p_)]
                v2 = (-bone[2], bone[1]) if plane[d_] == "x" else (bone[0], bone[1])
                th = math.radians(ang(v2) - ang(loc[n] - loc[par[n]]))
                cur[n] = th
                local[par[n]] = th - cur[par[n]] if par[n] in cur else th
            for c in kids[n]:
                visit(c)
        visit("root")
        pos, wang = {}, {}

        def place(n):
            p = par[n]
            if p is None:
                pos[n], wang[n] = loc[n] + root, local[n]
            else:
                a = wang[p]
                off = loc[n] - loc[p]
                pos[n] = pos[p] + [math.cos(a) * off[0] - math.sin(a) * off[1], math.sin(a) * off[0] + math.cos(a) * off[1]]
                wang[n] = a + local[n]
            for c in kids[n]:
                place(c)
        place("root")
        out.append([[pos[n][0], -pos[n][1]] for n in names])
    return np.array(out)


@pytest.mark.parametrize("char,motion,rt", [("char1", "dab", "fair1_ppf"), ("char2", "jumping_jacks", "cmu1_pfp"),
                                            ("char4", "zombie", "fair1_ppf")])
def test_matches_slow_per_frame_reference(char, motion, rt):
    c, mc, rc = _fixture(char, motion, rt)
    m = retarget(c, mc, rc)
    ref = _reference(c, mc, rc)
    np.testing.assert_allclose(m.positions, ref, atol=1e-6)


def test_mixamo_prefixed_clip_and_config(tmp_path):
    import re
    char = _syn_character()
    row = _rest_row()
    row[COL["RightArm"]] = -60.0
    mc, rc = _write_clip(tmp_path, [_rest_row(), row])
    plain = retarget(char, mc, rc)
    # the same clip with Mixamo names, driven by a config that keeps the prefixes (AnimatedDrawings style)
    bvh_text = re.sub(r"(ROOT|JOINT) (\w+)", r"\1 mixamorig:\2", Path(mc.bvh_path).read_text())
    mixamo = tmp_path / "mixamo"
    mixamo.mkdir()
    prefixed = json.loads(re.sub(r'"([A-Z]\w+)"', r'"mixamorig:\1"', json.dumps(SYN_RETARGET)))
    prefixed["bvh_projection_bodypart_groups"] = [dict(g, name=g["name"].replace("mixamorig:", ""))
                                                  for g in prefixed["bvh_projection_bodypart_groups"]]
    prefixed["char_bvh_root_offset"]["bvh_projection_bodypart_group_for_offset"] = "Lower Limbs"
    mc2, rc2 = _write_clip(mixamo, [_rest_row(), row], retarget_changes=prefixed)
    Path(mc2.bvh_path).write_text(bvh_text)
    assert "mixamorig:RightArm" in Path(mc2.bvh_path).read_text()
    assert rc2.mapping["right_hand"] == ("mixamorig:RightForeArm", "mixamorig:RightHand")
    np.testing.assert_allclose(retarget(char, mc2, rc2).positions, plain.positions, atol=1e-9)
    np.testing.assert_allclose(retarget(char, mc2, rc).positions, plain.positions, atol=1e-9)
