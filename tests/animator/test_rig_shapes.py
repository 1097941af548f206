"""Derived retargeting on synthetic rigs of each common shape: one body, one motion, written out as
a CMU 3dsMax-style rig, a Daz-style rig, a Character Creator-style rig (legs and spine branching
from different joints, twist, share, finger, toe, face and breast bones) and a prefixed rig with
prop bones. Each must be found and pose char1 exactly like the others; non-humanoids keep a
clear error."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import animator
from animator.auto_retarget import derive_motion_config, derive_retarget_config, find_body
from animator.bvh import load_bvh, parse_bvh
from animator.errors import BVHError
from animator.retarget import retarget
from tests.conftest import AD_EXAMPLES

#: Body roles -> offset from the parent role (cm, +y up, the character faces +z; ``{x}`` is +1 left, -1 right).
GEOMETRY = {
    "hips": (0, 95, 0), "waist": (0, 10, 0), "chest": (0, 20, 0), "neck": (0, 20, 0), "head": (0, 10, 0),
    "collar": ("3x", 15, 0), "upper": ("12x", 0, 0), "fore": ("26x", 0, 0), "hand": ("24x", 0, 0),
    "finger": ("8x", 0, 0), "thigh": ("9x", -5, 0), "shin": (0, -42, 0), "foot": (0, -40, 0), "toe": (0, -3, 12),
}
#: Rotations (degrees, per frame k) of some roles; every other joint keeps a zero rotation.
POSE = {"left_upper": ("Z", 25), "right_fore": ("X", 30), "left_thigh": ("X", -15), "right_shin": ("X", 20),
        "chest": ("Y", 8), "neck": ("Z", 5), "left_hand": ("Z", 10)}
FRAMES = 5


def _node(name, role, side=None, children=(), offset=None):
    return {"name": name, "role": role, "side": side, "children": list(children), "offset": offset}


def _offset(role: str, side: str | None) -> tuple[float, float, float]:
    x = 1.0 if side == "left" else -1.0
    return tuple(float(v[:-1]) * x if isinstance(v, str) else float(v) for v in GEOMETRY[role])


def cmu_3dsmax() -> dict:
    """CMU's 3dsMax-friendly naming (AnimatedDrawings' cmu1): LHipJoint -> LeftHip (thigh) -> LeftKnee."""
    def arm(s, S):
        return _node(f"{S}Collar", "collar", s, [_node(f"{S}Shoulder", "upper", s, [_node(f"{S}Elbow", "fore", s, [
            _node(f"{S}Wrist", "hand", s, [_node(f"{s[0]}hand", "finger", s), _node(f"{S[0]}Thumb", None, s)])])])])

    def leg(s, S):
        return _node(f"{S[0]}HipJoint", "thigh", s, [_node(f"{S}Hip", None, s, [_node(f"{S}Knee", "shin", s, [
            _node(f"{S}Ankle", "foot", s, [_node(f"{S}Toe", "toe", s)])])])])
    spine = _node("lowerback", "waist", None, [_node("Chest", "chest", None, [
        _node("Neck", "neck", None, [_node("Head", "head")]), arm("left", "Left"), arm("right", "Right")])])
    return _node("Hips", "hips", None, [leg("left", "Left"), leg("right", "Right"), spine])


def daz() -> dict:
    """CMU's Daz/Poser naming: hip, lButtock -> lThigh -> lShin, lCollar -> lShldr -> lForeArm."""
    def arm(s):
        return _node(f"{s[0]}Collar", "collar", s, [_node(f"{s[0]}Shldr", "upper", s, [
            _node(f"{s[0]}ForeArm", "fore", s, [_node(f"{s[0]}Hand", "hand", s, [
                _node(f"{s[0]}Thumb1", None, s), _node(f"{s[0]}Mid1", "finger", s)])])])])

    def leg(s):
        return _node(f"{s[0]}Buttock", "thigh", s, [_node(f"{s[0]}Thigh", None, s, [_node(f"{s[0]}Shin", "shin", s, [
            _node(f"{s[0]}Foot", "foot", s, [_node(f"{s[0]}Toe", "toe", s)])])])])
    spine = _node("abdomen", "waist", None, [_node("chest", "chest", None, [
        _node("neck", "neck", None, [_node("head", "head", None, [_node("leftEye", None), _node("rightEye", None)])]),
        arm("right"), arm("left")])])
    return _node("hip", "hips", None, [spine, leg("right"), leg("left")])


def character_creator(prefix: str = "CC_Base_", props: bool = False) -> dict:
    """Reallusion Character Creator's shape: under ``Hip`` the legs hang from ``Pelvis`` and the
    spine from ``Waist``; twist and share bones beside every limb bone, five fingers, five toes,
    ``NeckTwist`` joints on the way to the head, face and breast bones. ``props``: a sword in the
    right hand and a hat on the head, named without the prefix."""
    p = prefix

    def twist(s, S, bone):
        return [_node(f"{p}{S}_{bone}Twist01", None, s, [_node(f"{p}{S}_{bone}Twist02", None, s)])]

    def arm(s, S):
        fingers = [_node(f"{p}{S}_Mid1", "finger", s, [_node(f"{p}{S}_Mid2", None, s, [_node(f"{p}{S}_Mid3", None, s)])])]
        fingers += [_node(f"{p}{S}_{f}1", None, s, [_node(f"{p}{S}_{f}2", None, s)]) for f in ("Index", "Ring", "Thumb")]
        if props and s == "right":
            fingers.insert(0, _node("Sword", None, None, [_node("Sword_Tip", None)]))
        hand = _node(f"{p}{S}_Hand", "hand", s, fingers)
        fore = _node(f"{p}{S}_Forearm", "fore", s, [*twist(s, S, "Forearm"), _node(f"{p}{S}_ElbowShareBone", None, s),
                                                     hand])
        upper = _node(f"{p}{S}_Upperarm", "upper", s, [*twist(s, S, "Upperarm"), fore])
        return _node(f"{p}{S}_Clavicle", "collar", s, [upper])

    def leg(s, S):
        toes = [_node(f"{p}{S}_{t}Toe1", None, s) for t in ("Pinky", "Big", "Mid")]
        foot = _node(f"{p}{S}_Foot", "foot", s, [_node(f"{p}{S}_ToeBaseShareBone", None, s),
                                                  _node(f"{p}{S}_ToeBase", "toe", s, toes)])
        calf = _node(f"{p}{S}_Calf", "shin", s, [*twist(s, S, "Calf"), _node(f"{p}{S}_KneeShareBone", None, s), foot])
        return _node(f"{p}{S}_Thigh", "thigh", s, [*twist(s, S, "Thigh"), calf])

    face = _node(f"{p}FacialBone", None, None, [_node(f"{p}JawRoot", None, None, [_node(f"{p}Tongue01", None)]),
                                                _node(f"{p}R_Eye", None, "right"), _node(f"{p}L_Eye", None, "left")])
    head = _node(f"{p}Head", "head", None, [face, *([_node("Hat", None)] if props else [])])
    neck = _node(f"{p}NeckTwist01", "neck", None, [_node(f"{p}NeckTwist02", None, None, [head])])
    ribs = [_node(f"{p}{S}_RibsTwist", None, s, [_node(f"{p}{S}_Breast", None, s)]) for s, S in (("right", "R"),
                                                                                               ("left", "L"))]
    chest = _node(f"{p}Spine02", "chest", None, [neck, arm("left", "L"), arm("right", "R"), *ribs])
    waist = _node(f"{p}Waist", "waist", None, [_node(f"{p}Spine01", None, None, [chest])])
    pelvis = _node(f"{p}Pelvis", None, None, [leg("left", "L"), leg("right", "R")])
    return _node(f"{p}Hip", "hips", None, [pelvis, waist])


def _key(node: dict) -> str | None:
    """The POSE key of a node: 'chest', 'left_upper', ... (None for helper and extra bones)."""
    role, side = node["role"], node["side"]
    return None if role is None else (f"{side}_{role}" if side else role)


def write_bvh(root: dict) -> str:
    """The rig as BVH text: +y up, the geometry of GEOMETRY whatever the joint names, FRAMES frames of
    POSE (rotations ZXY; the root also walks forward along +z)."""
    order: list[dict] = []
    lines = ["HIERARCHY"]

    def emit(node, depth):
        order.append(node)
        pad = "  " * depth
        off = _offset(node["role"], node["side"]) if node["role"] else (0.0, 0.0, 0.0)
        chans = "6 Xposition Yposition Zposition Zrotation Xrotation Yrotation" if depth == 0 else \
            "3 Zrotation Xrotation Yrotation"
        lines.extend([f"{pad}{'ROOT' if depth == 0 else 'JOINT'} {node['name']}", f"{pad}{{",
                      f"{pad}  OFFSET {off[0]:g} {off[1]:g} {off[2]:g}", f"{pad}  CHANNELS {chans}"])
        for c in node["children"]:
            emit(c, depth + 1)
        if not node["children"]:
            lines.extend([f"{pad}  End Site", f"{pad}  {{", f"{pad}    OFFSET 0 1 0", f"{pad}  }}"])
        lines.append(f"{pad}}}")
    emit(root, 0)
    lines += ["MOTION", f"Frames: {FRAMES}", "Frame Time: 0.0333333"]
    for k in range(FRAMES):
        row: list[float] = [0.0, 95.0, 6.0 * k]
        for node in order:
            rot = {"Z": 0.0, "X": 0.0, "Y": 0.0}
            axis_deg = POSE.get(_key(node) or "")
            if axis_deg:
                rot[axis_deg[0]] = axis_deg[1] * k
            row += [rot["Z"], rot["X"], rot["Y"]]
        lines.append(" ".join(f"{v:g}" for v in row))
    return "\n".join(lines) + "\n"


RIGS = {
    "cmu_3dsmax": cmu_3dsmax(),
    "daz": daz(),
    "character_creator": character_creator(),
    "prefixed_with_props": character_creator(prefix="Rig07:CC_Base_", props=True),
}


def _poses(tmp_path: Path, name: str, root: dict) -> np.ndarray:
    path = tmp_path / f"{name}.bvh"
    path.write_text(write_bvh(root))
    bvh = load_bvh(path)
    motion = derive_motion_config(bvh, path)
    char = animator.load_character(AD_EXAMPLES / "characters" / "char1")
    return retarget(char, motion, derive_retarget_config(bvh)).positions


@pytest.mark.parametrize("name", list(RIGS))
def test_each_rig_shape_is_found_with_its_own_joints(name, tmp_path):
    root = RIGS[name]
    body = find_body(parse_bvh(write_bvh(root), tmp_path / f"{name}.bvh"))
    by_key: dict[str, str] = {}

    def walk(node):
        if _key(node) and _key(node) not in by_key:
            by_key[_key(node)] = node["name"]
        for c in node["children"]:
            walk(c)
    walk(root)
    assert body.hips == by_key["hips"] and body.chest == by_key["chest"] and body.head == by_key["head"]
    for side in ("left", "right"):
        arm, leg = body.arms[side], body.legs[side]
        assert (arm.upper, arm.lower, arm.end) == tuple(by_key[f"{side}_{r}"] for r in ("upper", "fore", "hand"))
        assert arm.base == by_key[f"{side}_collar"]
        assert (leg.lower, leg.end) == (by_key[f"{side}_shin"], by_key[f"{side}_foot"])
        assert "Twist" not in arm.upper + leg.upper and "Share" not in (leg.tip or "")
        assert arm.tip is not None and "Sword" not in arm.tip and "Thumb" not in arm.tip
    assert body.trunk[0] == body.hips and body.trunk[-1] == body.head and body.chest in body.trunk
    assert not any(w in j for j in body.trunk for w in ("Facial", "Jaw", "Eye", "Hat", "Ribs"))


def test_every_rig_shape_poses_the_character_alike(tmp_path):
    """The same body and motion under four rigs: the derived configs pose char1 identically."""
    poses = {name: _poses(tmp_path, name, root) for name, root in RIGS.items()}
    want = poses.pop("cmu_3dsmax")
    assert np.ptp(want, axis=0).max() > 10  # the pose moves (so equality says something)
    for name, got in poses.items():
        np.testing.assert_allclose(got, want, atol=1e-6, err_msg=name)


def test_character_creator_legs_and_spine_on_different_branches(tmp_path):
    """Under CC_Base_Hip the legs hang from CC_Base_Pelvis and the spine from CC_Base_Waist: the hips
    are the joint both branch from, the torso bone runs from there to where the arms meet."""
    body = find_body(parse_bvh(write_bvh(character_creator()), tmp_path / "cc.bvh"))
    assert body.hips == "CC_Base_Hip" and body.chest == "CC_Base_Spine02"
    assert body.trunk == ("CC_Base_Hip", "CC_Base_Waist", "CC_Base_Spine01", "CC_Base_Spine02",
                          "CC_Base_NeckTwist01", "CC_Base_NeckTwist02", "CC_Base_Head")
    assert body.legs["left"].upper == "CC_Base_L_Thigh" and body.legs["left"].tip == "CC_Base_L_PinkyToe1"


def _bird() -> dict:
    """Wings and legs, no forearms: a skeleton that is not a humanoid."""
    def wing(s):
        return _node(f"{s}_Wing", "upper", s, [_node(f"{s}_WingTip", "fore", s, [_node(f"{s}_Feathers", "hand", s)])])

    def leg(s):
        return _node(f"{s}_Thigh", "thigh", s, [_node(f"{s}_Shin", "shin", s, [_node(f"{s}_Foot", "foot", s)])])
    body = _node("Body", "waist", None, [_node("Chest", "chest", None, [_node("Head", "head"), wing("L"), wing("R")])])
    return _node("Root", "hips", None, [body, leg("L"), leg("R")])


def _upside_down() -> dict:
    """Legs that hang from the chest, below the arms' branch point: not a humanoid."""
    root = daz()
    spine, leg_r, leg_l = root["children"]
    chest = spine["children"][0]
    chest["children"] += [leg_r, leg_l]
    root["children"] = [spine]
    return root


@pytest.mark.parametrize("rig, want", [
    (_bird, r"no left forearm .*no right forearm .*Its joints: Root, Body"),
    (_upside_down, r"the arms meet at 'chest', which is not above the hips"),
], ids=["bird", "legs-under-the-arms"])
def test_non_humanoids_keep_a_clear_error(rig, want, tmp_path):
    with pytest.raises(BVHError, match=want) as err:
        find_body(parse_bvh(write_bvh(rig()), tmp_path / "creature.bvh"))
    assert "creature.bvh" in str(err.value) and "not a humanoid skeleton" in str(err.value)
