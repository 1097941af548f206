"""Retarget configs derived from a BVH's joint names and hierarchy (animator.auto_retarget)."""
from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

import animator
from animator.auto_retarget import (
    configs_for,
    derive_motion_config,
    derive_retarget_config,
    find_body,
    retarget_config_yaml,
    shared_prefix,
    split_name,
)
from animator.bvh import load_bvh, parse_bvh
from animator.config import load_motion_config, load_retarget_config, read_yaml
from animator.errors import BVHError
from animator.retarget import retarget
from tests.conftest import FIXTURES

EX = FIXTURES / "animated_drawings" / "examples"
FAIR1, CMU1 = EX / "config" / "retarget" / "fair1_ppf.yaml", EX / "config" / "retarget" / "cmu1_pfp.yaml"
#: Every fixture clip with the retarget config written for it by hand.
CLIPS = {
    **{n: (EX / "config" / "motion" / f"{n}.yaml", FAIR1) for n in ("dab", "jumping", "wave_hello", "zombie")},
    "jumping_jacks": (EX / "config" / "motion" / "jumping_jacks.yaml", CMU1),
    "mixamo_style_dab": (FIXTURES / "ad_reference" / "mixamo_style_dab.yaml",
                         FIXTURES / "ad_reference" / "mixamo_style_ppf.yaml"),
}
CHARS = ["char1", "char2", "char3", "char4"]


def _errors_pct(char, motion_cfg, hand_cfg, derived_cfg) -> np.ndarray:
    """Per frame and joint, the distance between the two poses in % of the drawing's larger side."""
    a = retarget(char, motion_cfg, hand_cfg).positions
    b = retarget(char, motion_cfg, derived_cfg).positions
    return np.linalg.norm(a - b, axis=-1) / max(char.size) * 100


@pytest.mark.parametrize("clip", list(CLIPS))
def test_derived_config_poses_like_the_hand_written_one(clip):
    motion_path, hand_path = CLIPS[clip]
    motion_cfg = load_motion_config(motion_path)
    derived = derive_retarget_config(load_bvh(motion_cfg.bvh_path))
    hand = load_retarget_config(hand_path)
    for name in CHARS:
        err = _errors_pct(animator.load_character(EX / "characters" / name), motion_cfg, hand, derived)
        assert np.median(err) <= 1.0 and np.percentile(err, 95) <= 3.0, (name, np.median(err), np.percentile(err, 95))


@pytest.mark.parametrize("clip", list(CLIPS))
def test_derived_motion_config_too_stays_within_the_bar(clip):
    """What an upload gets: motion config and retarget config both derived from the BVH alone."""
    motion_path, hand_path = CLIPS[clip]
    motion_cfg = load_motion_config(motion_path)
    bvh = load_bvh(motion_cfg.bvh_path)
    derived_motion = derive_motion_config(bvh, motion_cfg.bvh_path, motion_cfg.start_frame_idx,
                                          motion_cfg.end_frame_idx)
    assert derived_motion.up == motion_cfg.up
    derived_motion = type(derived_motion)(**{**derived_motion.__dict__, "frame_time": motion_cfg.frame_time})
    char = animator.load_character(EX / "characters" / "char1")
    a = retarget(char, motion_cfg, load_retarget_config(hand_path)).positions
    b = retarget(char, derived_motion, derive_retarget_config(bvh)).positions
    err = np.linalg.norm(a - b, axis=-1) / max(char.size) * 100
    assert np.median(err) <= 1.0 and np.percentile(err, 95) <= 3.0


def test_a_wrong_mapping_fails_the_bar():
    """The bar is not loose: swapping the arms' BVH bones (a plausible mistake) fails it."""
    motion_cfg = load_motion_config(CLIPS["dab"][0])
    derived = derive_retarget_config(load_bvh(motion_cfg.bvh_path))
    swapped = dict(derived.char_joint_bvh_joints_mapping)
    for j in ("elbow", "hand"):
        swapped[f"left_{j}"], swapped[f"right_{j}"] = swapped[f"right_{j}"], swapped[f"left_{j}"]
    bad = type(derived)(**{**derived.__dict__, "char_joint_bvh_joints_mapping": tuple(swapped.items())})
    char1 = animator.load_character(EX / "characters" / "char1")
    err = _errors_pct(char1, motion_cfg, load_retarget_config(FAIR1), bad)
    assert np.percentile(err, 95) > 3.0


def _renamed(text: str, rename) -> str:
    return re.sub(r"^(\s*(?:ROOT|JOINT)\s+)(.+?)\s*$", lambda m: m.group(1) + rename(m.group(2)), text, flags=re.M)


_FAIR1_NAMES = ["Hips", "Spine", "Spine1", "Spine2", "Spine3", "Neck", "Head"]
_LIMBS = ["Shoulder", "Arm", "ForeArm", "Hand", "HandEnd", "HandThumb1", "UpLeg", "Leg", "Foot", "ToeBase"]
STYLES = {
    "unreal": ("Unreal",
               dict(zip(_FAIR1_NAMES, ["pelvis", "spine_01", "spine_02", "spine_03", "spine_04", "neck_01", "head"])),
               dict(zip(_LIMBS, ["clavicle_{s}", "upperarm_{s}", "lowerarm_{s}", "hand_{s}", "middle_01_{s}",
                                 "thumb_01_{s}",
                                 "thigh_{s}", "calf_{s}", "foot_{s}", "ball_{s}"]))),
    "daz": ("CMU Daz/Poser or Blender",
            dict(zip(_FAIR1_NAMES, ["hip", "abdomen", "abdomen2", "chest", "chest2", "neck", "head"])),
            dict(zip(_LIMBS, ["{s}Collar", "{s}Shldr", "{s}ForeArm", "{s}Hand", "{s}Mid1", "{s}Thumb1", "{s}Thigh",
                              "{s}Shin",
                              "{s}Foot", "{s}Toe"]))),
    "biped": ("3ds Max Biped or Character Creator",
              dict(zip(_FAIR1_NAMES, ["Bip01 Pelvis", "Bip01 Spine", "Bip01 Spine1", "Bip01 Spine2",
                                      "Bip01 Spine3", "Bip01 Neck", "Bip01 Head"])),
              dict(zip(_LIMBS, ["Bip01 {S} Clavicle", "Bip01 {S} UpperArm", "Bip01 {S} Forearm", "Bip01 {S} Hand",
                                "Bip01 {S} Finger2", "Bip01 {S} Finger0", "Bip01 {S} Thigh", "Bip01 {S} Calf",
                                "Bip01 {S} Foot", "Bip01 {S} Toe0"]))),
    "blender": ("CMU Daz/Poser or Blender",
                dict(zip(_FAIR1_NAMES, ["hips", "spine", "spine.001", "spine.002", "spine.003", "neck", "head"])),
                dict(zip(_LIMBS, ["shoulder.{S}", "upper_arm.{S}", "forearm.{S}", "hand.{S}", "f_middle.{S}",
                                  "thumb.{S}",
                                  "thigh.{S}", "shin.{S}", "foot.{S}", "toe.{S}"]))),
}


def _style(style: str):
    _, trunk, limbs = STYLES[style]

    def rename(name: str) -> str:
        if name in trunk:
            return trunk[name]
        side = "Left" if name.startswith("Left") else "Right"
        return limbs[name[len(side):]].format(s=side[0].lower(), S=side[0])
    return rename


@pytest.mark.parametrize("rename, family", [
    (lambda n: f"mixamorig7:{n}", "FAIR1/Rokoko/Mixamo"),
    (lambda n: f"Armature|{n}", "FAIR1/Rokoko/Mixamo"),
    (lambda n: f"Character1_{n}", "FAIR1/Rokoko/Mixamo"),
    *[(_style(s), STYLES[s][0]) for s in STYLES],
], ids=["mixamorig7", "armature", "character1", *STYLES])
def test_other_namings_and_prefixes_give_the_same_poses(rename, family, tmp_path, caplog):
    motion_cfg = load_motion_config(CLIPS["dab"][0])
    text = Path(motion_cfg.bvh_path).read_text()
    original = parse_bvh(text)
    other = parse_bvh(_renamed(text, rename), tmp_path / "renamed.bvh")
    body = find_body(other)
    assert body.family == family
    char = animator.load_character(EX / "characters" / "char1")
    want = retarget(char, motion_cfg, derive_retarget_config(original)).positions
    with caplog.at_level(logging.INFO, logger="animator"):
        renamed_cfg = derive_retarget_config(other, body)
    assert f"{family} joint names" in caplog.text and "renamed.bvh" in caplog.text
    # the same BVH bones, under their new names (the BVH is cached by path: use one on disk)
    (tmp_path / "renamed.bvh").write_text(_renamed(text, rename))
    moved = type(motion_cfg)(**{**motion_cfg.__dict__, "bvh_path": str(tmp_path / "renamed.bvh"),
                                "groundplane_joint": rename("LeftFoot"),
                                "forward_perp_joint_vectors": ((rename("LeftShoulder"), rename("RightShoulder")),
                                                               (rename("LeftUpLeg"), rename("RightUpLeg")))})
    got = retarget(char, moved, renamed_cfg).positions
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_side_and_part_of_joint_names():
    assert split_name("LeftForeArm") == ("left", "forearm")
    assert split_name("mixamorig:RightUpLeg") == ("right", "upleg")
    assert split_name("lShldr") == ("left", "shldr")
    assert split_name("lhand") == ("left", "hand")
    assert split_name("lowerback") == (None, "lowerback")
    assert split_name("upperarm_r") == ("right", "upperarm")
    assert split_name("forearm.L") == ("left", "forearm")
    assert split_name("Bip01 L Calf", "Bip01 ") == ("left", "calf")
    assert split_name("LHipJoint") == ("left", "hipjoint")
    assert split_name("Hips") == (None, "hips")
    # a side in the middle: a prefix not every joint shares
    assert split_name("CC_Base_L_Thigh") == ("left", "thigh")
    assert split_name("Rig_RightForeArm") == ("right", "forearm")
    assert split_name("CC_Base_NeckTwist01") == (None, "ccbasenecktwist01")


def test_the_prefix_most_joints_share_is_the_rigs_prefix():
    names = ["CC_Base_Hip", "CC_Base_Pelvis", "CC_Base_L_Thigh", "CC_Base_R_Thigh", "CC_Base_Waist", "Sword"]
    assert shared_prefix(names) == "CC_Base_"
    assert shared_prefix(["Hips", "LeftArm", "lowerback"]) == ""
    assert shared_prefix(["Bip01 Pelvis", "Bip01 L Calf", "Bip01 R Calf"]) == "Bip01 "


def test_an_unrecognised_skeleton_lists_what_is_missing(tmp_path):
    text = (EX / "bvh" / "fair1" / "dab.bvh").read_text()
    wings = _renamed(text, lambda n: n.replace("ForeArm", "Wing").replace("Leg", "Stalk") if "Up" not in n else n)
    with pytest.raises(BVHError) as err:
        find_body(parse_bvh(wings, tmp_path / "bird.bvh"))
    msg = str(err.value)
    assert "bird.bvh" in msg
    for part in ("left forearm", "right forearm", "left shin", "right shin"):
        assert f"no {part}" in msg
    assert "LeftWing" in msg  # it lists the joints it saw


def test_an_unsupported_up_axis_is_a_clear_error(tmp_path):
    text = (EX / "bvh" / "fair1" / "dab.bvh").read_text()
    # fair1 is +z up; a clip lying on its side (the root turned 90 degrees about y) has +x up
    lines = text.splitlines()
    start = lines.index(next(ln for ln in lines if ln.startswith("Frame Time"))) + 1
    root_chans = next(ln for ln in lines if "CHANNELS" in ln).split()[2:]
    yrot = root_chans.index("Yrotation")
    for k in range(start, len(lines)):
        vals = lines[k].split()
        if vals:
            vals[yrot] = str(float(vals[yrot]) + 90.0)
            lines[k] = " ".join(vals)
    bvh = parse_bvh("\n".join(lines), tmp_path / "sideways.bvh")
    with pytest.raises(BVHError, match=r"sideways.bvh: the body's up axis .* is [+-]x"):
        derive_motion_config(bvh, tmp_path / "sideways.bvh")


@pytest.mark.parametrize("clip", ["dab", "jumping_jacks"])
def test_printed_yaml_reads_back_as_the_same_config_in_animated_drawings_format(clip, tmp_path):
    motion_cfg = load_motion_config(CLIPS[clip][0])
    derived = derive_retarget_config(load_bvh(motion_cfg.bvh_path))
    text = retarget_config_yaml(derived)
    (tmp_path / "r.yaml").write_text(text)
    back = load_retarget_config(tmp_path / "r.yaml")
    assert back.__dict__ | {"path": None} == derived.__dict__ | {"path": None}
    # the keys and shapes of AnimatedDrawings' own files, tuples tagged as it tags them
    raw = read_yaml(tmp_path / "r.yaml")
    assert list(raw) == list(read_yaml(FAIR1))
    assert "!!python/tuple" in text and isinstance(raw["char_joint_bvh_joints_mapping"]["torso"], tuple)
    assert yaml.load(text, Loader=yaml.UnsafeLoader) == raw  # noqa: S506 - AnimatedDrawings' loader reads it too


def _minimal_bvh(arms=("Left", "Right")) -> str:
    """A bare humanoid, +y up: no collars, fingers or toes, names in Unreal-ish lowercase with sides
    as prefixes; every joint has three rotation channels, three frames of a waving arm."""
    def joint(name, offset, children, indent):
        pad = "  " * indent
        head = "ROOT" if indent == 0 else "JOINT"
        chans = "6 Xposition Yposition Zposition Zrotation Xrotation Yrotation" if indent == 0 \
            else "3 Zrotation Xrotation Yrotation"
        end = f"{pad}  End Site\n{pad}  {{\n{pad}    OFFSET 0 -5 0\n{pad}  }}\n"
        body = "".join(joint(*c, indent + 1) for c in children) or end
        return f"{pad}{head} {name}\n{pad}{{\n{pad}  OFFSET {offset}\n{pad}  CHANNELS {chans}\n{body}{pad}}}\n"
    side = {"Left": 1, "Right": -1}
    arm = [(f"{s}_upperarm", f"{15 * side[s]} 0 0", [(f"{s}_lowerarm", f"{25 * side[s]} 0 0",
           [(f"{s}_hand", f"{22 * side[s]} 0 0", [])])]) for s in arms]
    leg = [(f"{s}_thigh", f"{9 * side[s]} -5 0", [(f"{s}_calf", "0 -42 0", [(f"{s}_foot", "0 -40 0", [])])])
           for s in ("Left", "Right")]
    tree = ("pelvis", "0 95 0", [("spine", "0 20 0", [("neck", "0 25 0", [("head", "0 10 0", [])]), *arm]), *leg])
    text = "HIERARCHY\n" + joint(*tree, 0)
    n_chan = 6 + 3 * (text.count("JOINT"))
    rows = []
    for f in range(3):
        vals = [0.0] * n_chan
        vals[1] = 95.0
        rows.append(" ".join(f"{v:g}" for v in vals))
    return text + "MOTION\nFrames: 3\nFrame Time: 0.04\n" + "\n".join(rows) + "\n"


def test_a_bare_humanoid_without_collars_fingers_or_toes_is_recognised(tmp_path):
    bvh = parse_bvh(_minimal_bvh(), tmp_path / "bare.bvh")
    body = find_body(bvh)
    assert (body.hips, body.chest, body.head) == ("pelvis", "spine", "head")
    assert body.arms["left"].upper == "Left_upperarm" and body.arms["left"].base is None
    assert body.arms["left"].tip is None and body.legs["right"].tip is None
    motion = derive_motion_config(bvh, tmp_path / "bare.bvh")
    assert motion.up == "+y"
    (tmp_path / "bare.bvh").write_text(_minimal_bvh())
    motion, cfg = configs_for(tmp_path / "bare.bvh")
    m = retarget(animator.load_character(EX / "characters" / "char1"), motion, cfg)
    assert m.positions.shape == (3, 16, 2) and np.isfinite(m.positions).all()


def test_a_one_armed_skeleton_names_the_missing_arm(tmp_path):
    with pytest.raises(BVHError, match=r"no right forearm \(a joint like RightForeArm") as err:
        find_body(parse_bvh(_minimal_bvh(arms=("Left",)), tmp_path / "one_arm.bvh"))
    assert "no left" not in str(err.value)


@pytest.mark.parametrize("rename", [_style("biped"), lambda n: f"rig:{n}", lambda n: f'my "rig" #1: {n}'],
                         ids=["biped-spaces", "colon", "quotes-hash"])
def test_printed_yaml_quotes_whatever_the_joint_names_hold(rename, tmp_path):
    text = (EX / "bvh" / "fair1" / "dab.bvh").read_text()
    derived = derive_retarget_config(parse_bvh(_renamed(text, rename), tmp_path / "x.bvh"))
    (tmp_path / "r.yaml").write_text(retarget_config_yaml(derived))
    back = load_retarget_config(tmp_path / "r.yaml")
    assert back.char_joint_bvh_joints_mapping == derived.char_joint_bvh_joints_mapping
    assert back.bvh_projection_bodypart_groups == derived.bvh_projection_bodypart_groups
