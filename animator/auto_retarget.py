"""Retarget and motion configs derived from a BVH's joint names and hierarchy, for humanoid clips.

Most motion-capture exporters name a humanoid's joints after one of a few conventions: FAIR1,
Rokoko and Mixamo (``LeftArm``, ``LeftForeArm``, ``LeftUpLeg``, ``LeftLeg``), CMU as
AnimatedDrawings ships it (``LeftShoulder``, ``LeftElbow``, ``LeftHip``, ``LeftKnee``), CMU's
Daz/Poser conversion (``lShldr``, ``lForeArm``, ``lThigh``, ``lShin``), Unreal (``upperarm_l``,
``lowerarm_l``, ``thigh_l``, ``calf_l``), 3ds Max Biped (``Bip01 L Forearm``, ``Bip01 L Calf``) and
Blender (``forearm.L``, ``shin.L``), often behind a namespace prefix (``mixamorig:``,
``Armature|``, ``Character1_``, ``CC_Base_``). :func:`find_body` reads the body from such a
skeleton, in named steps:

1. :class:`_Tree`: names lose the prefix most joints share (:func:`shared_prefix`; prop joints may
   lack it) and any namespace (up to the last ``:`` or ``|``); the rest splits into a side (left,
   right or none) and a part word (``forearm``, ``shin``, ...). Twist, roll and share bones
   (``ForearmTwist01``, ``KneeShareBone``) are *helpers*: never a part of the body;
2. :func:`_find_limbs`: per side, the forearm is the shallowest joint whose word means forearm
   (``forearm``, ``lowerarm``, ``elbow``); the upper arm is its nearest non-helper ancestor, the
   collar the next one if it is on the same side, the hand the forearm's first descendant called
   hand or wrist, the tip the end of the hand's chain on its side (past fingers, not into a held
   prop). The legs likewise (shin / knee / calf / leg; thigh; foot or ankle; toe);
3. :func:`_find_hips_and_chest`: the chest is where the two arms meet; the hips where the legs'
   branch and the spine meet, which is the legs' meeting joint in most rigs and the joint above
   both branches in Character Creator's (legs under ``CC_Base_Pelvis``, spine under
   ``CC_Base_Waist``, both under ``CC_Base_Hip``). Legs that hang below the arms are no humanoid;
4. :func:`_find_head_chain`: the head is the end of the centre chain that leaves the chest between
   the arms (cut at a joint called ``head`` where there is one; face bones below it are ignored).

:func:`derive_retarget_config` then writes what AnimatedDrawings' hand-written configs say for the
16-joint drawn humanoid: limbs projected by PCA, the trunk on the frontal plane, one draw group per
limb driven by its hand or foot, root motion scaled by the legs, and each drawn bone turned by its
BVH bone (torso: hips -> chest, neck: hips -> head). :func:`derive_motion_config` adds the up axis
(from the clip's first frame), the forward vector (upper arms and thighs) and the ground joint.
:func:`retarget_config_yaml` writes a config in AnimatedDrawings' YAML format for a person to adjust.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .bvh import BVH
from .config import BodyPartGroup, MotionConfig, ProjectionGroup, RetargetConfig, RootOffset
from .errors import BVHError

log = logging.getLogger("animator")

_FOREARM = {"forearm", "lowerarm", "elbow", "loarm", "lowarm", "lforearm"}
_SHIN = {"leg", "lowerleg", "knee", "shin", "calf", "loleg", "lowleg", "tibia"}
_HAND = {"hand", "wrist"}
_FOOT = {"foot", "ankle"}
_TWIST = re.compile(r"twist|roll|share")
_WORDS = _FOREARM | _SHIN | _HAND | _FOOT | {"arm", "upperarm", "shoulder", "collar", "clavicle", "thigh", "upleg",
                                             "upperleg", "hip", "toe", "toebase", "ball", "shldr", "fingers"}

#: Families by the words their forearm and shin use (for the log; the rules are the same for all).
_FAMILIES = {
    ("forearm", "leg"): "FAIR1/Rokoko/Mixamo",
    ("elbow", "knee"): "CMU (AnimatedDrawings' cmu1)",
    ("forearm", "shin"): "CMU Daz/Poser or Blender",
    ("lowerarm", "calf"): "Unreal",
    ("forearm", "calf"): "3ds Max Biped or Character Creator",
}

#: Char joints of the 16-joint drawn humanoid, by body role (side ``{s}``: left / right).
_CHAR_ARM = ("{s}_shoulder", "{s}_elbow", "{s}_hand")
_CHAR_LEG = ("{s}_hip", "{s}_knee", "{s}_foot")


@dataclass(frozen=True)
class Limb:
    """One arm or leg, BVH joint names from the body outwards (``base``: collar, or None for legs)."""

    base: str | None
    upper: str
    lower: str
    end: str
    tip: str | None  # hand end / toe: the limb's outermost joint, if the BVH has one


@dataclass(frozen=True)
class Body:
    """A humanoid found in a BVH skeleton (joint names as the BVH has them)."""

    family: str
    hips: str
    chest: str
    trunk: tuple[str, ...]        # hips ... chest ... head, along the tree
    head: str
    arms: dict[str, Limb]         # 'left' / 'right'
    legs: dict[str, Limb]


def split_name(name: str, prefix: str = "") -> tuple[str | None, str]:
    """(side, part word) of a joint name: side 'left', 'right' or None; part lowercase alphanumerics.

    ``prefix`` (shared by every joint) and any namespace up to the last ':' or '|' are dropped first.
    A name whose side is not at its start or end (``CC_Base_L_Thigh``, ``Rig_LeftArm`` when a prop
    joint spoils the shared prefix) is read from the first separated word that carries a side.
    """
    n = name[len(prefix):] if prefix and name.startswith(prefix) else name
    n = re.split(r"[:|]", n)[-1].strip()
    side, rest = _side_and_rest(n)
    if side is None:
        words = [w for w in re.split(r"[\s_.\-]+", n) if w]
        for k in range(1, len(words)):
            if words[k].lower() in ("l", "r", "left", "right") and k + 1 < len(words):
                side, rest = ("left" if words[k][0] in "lL" else "right"), "_".join(words[k + 1:])
                break
            side, rest = _side_and_rest("_".join(words[k:]))
            if side is not None:
                break
        else:
            side, rest = None, n
    return side, re.sub(r"[^a-z0-9]", "", rest.lower())


def _side_and_rest(n: str) -> tuple[str | None, str]:
    """(side, rest of the name) when ``n`` starts or ends with a side (``Left``, ``r_``, ``.L``, ``lShldr``)."""
    for pattern in (r"^(left|right)[\s_.\-]*(.+)$", r"^(.+?)[\s_.\-]*(left|right)$"):
        m = re.match(pattern, n, re.IGNORECASE)
        if m:
            k = 1 if m.group(1).lower() in ("left", "right") else 2
            return m.group(k).lower(), m.group(3 - k)
    m = (re.match(r"^([lr])[\s_.\-]+(.+)$", n, re.IGNORECASE) or re.match(r"^([lLrR])([A-Z].*)$", n))
    if m:
        side, rest = m.group(1), m.group(2)
    else:
        m = re.match(r"^(.+?)[\s_.\-]+([lr])$", n, re.IGNORECASE)
        if m:
            side, rest = m.group(2), m.group(1)
        else:
            m = re.match(r"^([lr])([a-z]+)$", n)
            if not (m and m.group(2) in _WORDS):
                return None, n
            side, rest = m.group(1), m.group(2)
    return ("left" if side.lower() == "l" else "right"), rest


def shared_prefix(names: list[str], share: float = 0.75) -> str:
    """The longest prefix, up to and including a separator (``_ : | . -`` or space), that at least
    ``share`` of the names start with: a rig's own prefix even when a few prop or helper joints
    (``Sword``, ``Camera``) lack it. Empty when there is none."""
    if len(names) < 2:
        return ""
    counts: dict[str, int] = {}
    for name in set(names):
        for k, ch in enumerate(name[:-1]):
            if ch in "_:|. -":
                counts[name[:k + 1]] = counts.get(name[:k + 1], 0) + names.count(name)
    need = share * len(names)
    best = [p for p, c in counts.items() if c >= need]
    return max(best, key=len) if best else ""


class _Tree:
    """A BVH skeleton's hierarchy as :func:`find_body` reads it: each real joint's (side, part word),
    children (End Sites left out), depth and helper status. Indices are the BVH's joint indices."""

    def __init__(self, bvh: BVH):
        self.bvh = bvh
        self.names = list(bvh.joint_names)
        self.parents = [int(p) for p in bvh.parents]
        self.real = [i for i in range(bvh.n_joints) if not bvh.end_site[i]]
        prefix = shared_prefix([self.names[i] for i in self.real[1:]])
        self.side: dict[int, str | None] = {}
        self.part: dict[int, str] = {}
        for i in self.real:
            self.side[i], self.part[i] = split_name(self.names[i], prefix)
        self.children: list[list[int]] = [[] for _ in self.names]
        for i, p in enumerate(self.parents):
            if p >= 0 and not bvh.end_site[i]:
                self.children[p].append(i)
        self.depth = [0] * len(self.names)
        for i in range(1, len(self.names)):
            self.depth[i] = self.depth[self.parents[i]] + 1

    def helper(self, j: int) -> bool:
        """A twist, roll or share bone: it rides along a limb bone and is never one of the body's parts."""
        return bool(_TWIST.search(self.part.get(j, "")))

    def ancestors(self, j: int) -> list[int]:
        """``j`` and every joint above it, up to the root."""
        out = []
        while j >= 0:
            out.append(j)
            j = self.parents[j]
        return out

    def descendants(self, j: int) -> list[int]:
        """Every joint below ``j``, breadth first."""
        out, todo = [], list(self.children[j])
        while todo:
            k = todo.pop(0)
            out.append(k)
            todo.extend(self.children[k])
        return out

    def meet(self, a: int, b: int) -> int:
        """The deepest joint above (or at) both ``a`` and ``b``."""
        up = set(self.ancestors(a))
        return next(j for j in self.ancestors(b) if j in up)

    def upward(self, j: int) -> int:
        """The nearest proper ancestor of ``j`` that is not a helper bone."""
        p = self.parents[j]
        while p > 0 and self.helper(p):
            p = self.parents[p]
        return p

    def tip(self, j: int, avoid: str) -> int | None:
        """The outermost joint of ``j``'s main chain: each step takes a child on ``j``'s side that is
        no helper (a prop or helper bone only when there is nothing else), one whose word lacks
        ``avoid`` first."""
        out, side = None, self.side.get(j)
        while self.children[j]:
            kids = self.children[j]
            kids = [c for c in kids if self.side.get(c) == side and not self.helper(c)] or kids
            j = out = ([c for c in kids if avoid not in self.part[c]] or kids)[0]
        return out

    def joint_list(self, limit: int = 40) -> str:
        names = [self.names[i] for i in self.real[:limit]]
        return ", ".join(names) + (" ..." if len(self.real) > limit else "")


@dataclass(frozen=True)
class _LimbKind:
    """What an arm or a leg looks like by name: its middle joint's words (forearm / shin), its end
    joint's words (hand / foot), the word its tip chain avoids, and how an error describes them."""

    kind: str
    middles: frozenset[str]
    ends: frozenset[str]
    avoid: str
    middle_like: str
    end_name: str
    end_like: str


_ARM = _LimbKind("arm", frozenset(_FOREARM), frozenset(_HAND), "thumb",
                 "forearm (a joint like {Side}ForeArm, {Side}Elbow, lowerarm_{s})", "hand", "{Side}Hand or {Side}Wrist")
_LEG = _LimbKind("leg", frozenset(_SHIN), frozenset(_FOOT), "_none_",
                 "shin (a joint like {Side}Leg, {Side}Knee, calf_{s})", "foot", "{Side}Foot or {Side}Ankle")


def _find_limb(tree: _Tree, side: str, kind: _LimbKind, missing: list[str]) -> tuple[Limb, str] | None:
    """``side``'s arm or leg and its middle joint's word: the shallowest non-helper joint on that side
    whose word is a middle word (forearm, shin), the nearest non-helper joint above it (upper arm,
    thigh), the first joint below it with an end word (hand, foot; else its first child), that end's
    outermost tip and, for an arm, the collar above the upper arm when it is on the same side.
    None, with what is missing appended to ``missing``, when a part is not found."""
    fmt = {"Side": side.title(), "s": side[0]}
    found = sorted((i for i in tree.real if tree.side[i] == side and tree.part[i] in kind.middles
                    and not tree.helper(i)), key=lambda i: tree.depth[i])
    if not found:
        missing.append(f"{side} {kind.middle_like.format(**fmt)}")
        return None
    middle = found[0]
    kids = [c for c in tree.children[middle] if not tree.helper(c)] or tree.children[middle]
    end = next((d for d in tree.descendants(middle) if tree.part[d] in kind.ends), kids[0] if kids else None)
    if end is None:
        like = kind.end_like.format(**fmt)
        missing.append(f"{side} {kind.end_name} (a joint below {tree.names[middle]} like {like})")
        return None
    upper = tree.upward(middle)
    base = None
    if kind is _ARM:
        collar = tree.upward(upper)
        base = tree.names[collar] if collar > 0 and tree.side.get(collar) == side else None
    tip = tree.tip(end, kind.avoid)
    limb = Limb(base, tree.names[upper], tree.names[middle], tree.names[end], None if tip is None else tree.names[tip])
    return limb, tree.part[middle]


def _find_limbs(tree: _Tree) -> tuple[dict[str, Limb], dict[str, Limb], str]:
    """Both arms and both legs, and the family their middle joints' words name.

    Raises:
        BVHError: a limb is missing (the message lists every one, and the joints seen).
    """
    missing: list[str] = []
    arms: dict[str, Limb] = {}
    legs: dict[str, Limb] = {}
    words: dict[str, str] = {}
    for side in ("left", "right"):
        for kind, out in ((_ARM, arms), (_LEG, legs)):
            found = _find_limb(tree, side, kind, missing)
            if found is not None:
                out[side], words[kind.kind] = found
    if missing:
        raise BVHError(tree.bvh.path, None, "not a humanoid skeleton this animator recognises: no "
                       + "; no ".join(missing) + f". Its joints: {tree.joint_list()}. "
                       "Write a retarget config for it (see --print-retarget for the format)")
    family = _FAMILIES.get((words["arm"], words["leg"]), f"generic humanoid ({words['arm']} / {words['leg']})")
    return arms, legs, family


def _find_hips_and_chest(tree: _Tree, arms: dict[str, Limb], legs: dict[str, Limb]) -> tuple[int, int]:
    """(hips, chest): the chest is where the two arms meet; the hips where the legs' branch and the
    spine meet: the legs' meeting joint when the spine grows from it or above it (most rigs), else
    the joint both branch from (Character Creator: legs under ``Pelvis``, spine under ``Waist``,
    both under ``Hip``).

    Raises:
        BVHError: the arms meet inside a leg, or the legs meet below the arms (not a humanoid).
    """
    idx = {n: i for i, n in enumerate(tree.names)}
    chest = tree.meet(idx[arms["left"].upper], idx[arms["right"].upper])
    legs_meet = tree.meet(idx[legs["left"].upper], idx[legs["right"].upper])
    hips = tree.meet(legs_meet, chest)
    thighs = {idx[legs[s].upper] for s in legs}
    if hips == chest or thighs & set(tree.ancestors(chest)):
        raise BVHError(tree.bvh.path, None, f"not a humanoid skeleton this animator recognises: the arms meet at "
                       f"'{tree.names[chest]}', which is not above the hips '{tree.names[legs_meet]}' where the "
                       "legs meet")
    return hips, chest


def _find_head_chain(tree: _Tree, chest: int, arms: dict[str, Limb]) -> list[int]:
    """The joints from the chest's child towards the head, up to the head: the centre branch that
    leaves the chest between the arms (towards a joint called head where there is one; helper bones
    such as ``NeckTwist`` stay in the chain, face bones below the head do not). Empty when the
    chest has no such child (the chest is then the head)."""
    idx = {n: i for i, n in enumerate(tree.names)}
    arm_roots = set(tree.ancestors(idx[arms["left"].upper])) | set(tree.ancestors(idx[arms["right"].upper]))

    def leads_to_head(j: int) -> bool:
        return any("head" in tree.part[d] for d in [j, *tree.descendants(j)])

    centre = [c for c in tree.children[chest] if c not in arm_roots and tree.side[c] is None]
    chain: list[int] = []
    while centre:
        j = next((c for c in centre if leads_to_head(c)), centre[0])
        chain.append(j)
        centre = [c for c in tree.children[j] if tree.side[c] is None]
    named = [j for j in chain if tree.part[j].startswith("head") and "end" not in tree.part[j]]
    if named:
        chain = chain[:chain.index(named[0]) + 1]
    return chain


def find_body(bvh: BVH) -> Body:
    """Find a humanoid's trunk and limbs in ``bvh`` (see the module docstring).

    Raises:
        BVHError: the skeleton is not recognised; the message lists every part not found.
    """
    tree = _Tree(bvh)
    arms, legs, family = _find_limbs(tree)
    hips, chest = _find_hips_and_chest(tree, arms, legs)
    chain = _find_head_chain(tree, chest, arms)
    head = chain[-1] if chain else chest
    spine = [j for j in reversed(tree.ancestors(chest)) if tree.depth[j] >= tree.depth[hips]]
    names = tree.names
    return Body(family=family, hips=names[hips], chest=names[chest], trunk=tuple(names[j] for j in spine + chain),
                head=names[head], arms=arms, legs=legs)


def derive_retarget_config(bvh: BVH, body: Body | None = None) -> RetargetConfig:
    """A retarget config for the 16-joint drawn humanoid, from the BVH's names and hierarchy.

    Raises:
        BVHError: the skeleton is not recognised (the message lists what is missing).
    """
    b = body or find_body(bvh)
    arms, legs = b.arms, b.legs
    log.info("retarget: derived from %s: %s joint names (hips %s, chest %s, head %s)", bvh.path or "the BVH",
             b.family, b.hips, b.chest, b.head)

    def limb_joints(limb: Limb) -> list[str]:
        return [n for n in (limb.base, limb.upper, limb.lower, limb.end, limb.tip) if n]

    groups = (
        ProjectionGroup("Upper Limbs", tuple(limb_joints(arms["right"]) + limb_joints(arms["left"])), "pca"),
        ProjectionGroup("Lower Limbs", tuple(limb_joints(legs["right"]) + limb_joints(legs["left"])), "pca"),
        ProjectionGroup("Trunk", b.trunk, "frontal"),
    )
    parts = (
        BodyPartGroup((b.hips,), ("right_shoulder", "left_shoulder", "right_hip", "left_hip", "hip", "torso", "neck")),
        BodyPartGroup((arms["left"].end,), ("left_elbow", "left_hand")),
        BodyPartGroup((arms["right"].end,), ("right_elbow", "right_hand")),
        BodyPartGroup((legs["left"].end,), ("left_knee", "left_foot")),
        BodyPartGroup((legs["right"].end,), ("right_knee", "right_foot")),
    )
    root_offset = RootOffset(
        "Lower Limbs",
        tuple((leg.end, leg.lower, leg.upper) for leg in (legs["right"], legs["left"])),
        (("left_foot", "left_knee", "left_hip"), ("right_foot", "right_knee", "right_hip")),
    )
    mapping: list[tuple[str, tuple[str, str]]] = []
    for side in ("left", "right"):
        arm, leg = arms[side], legs[side]
        mapping += [(f"{side}_elbow", (arm.upper, arm.lower)), (f"{side}_hand", (arm.lower, arm.end)),
                    (f"{side}_knee", (leg.upper, leg.lower)), (f"{side}_foot", (leg.lower, leg.end))]
    mapping += [("torso", (b.hips, b.chest)), ("neck", (b.hips, b.head))]
    where = f"{bvh.path or '<bvh>'} (derived retarget config)"
    return RetargetConfig(
        path=where, char_starting_location=(0.0, 0.0, -0.5), bvh_projection_bodypart_groups=groups,
        char_bodypart_groups=parts, char_bvh_root_offset=root_offset, char_joint_bvh_joints_mapping=tuple(mapping),
        char_runtime_checks=(("above", "neck", "right_shoulder", "left_shoulder"),),
    )


def derive_motion_config(bvh: BVH, bvh_path: str | Path, start_frame_idx: int = 0,
                         end_frame_idx: int | None = None, body: Body | None = None) -> MotionConfig:
    """A motion config for a humanoid clip: up axis from its first frame (hips -> head), forward
    vector from the upper arms and thighs, the left foot on the ground, a scale that makes the body
    about 4 world units tall (it only sizes AnimatedDrawings' 3D scene).

    Raises:
        BVHError: the skeleton is not recognised, or its up axis is neither +y nor +z.
    """
    b = body or find_body(bvh)
    pos = bvh.world_positions(slice(0, 1), nonroot_translations=False)[0]
    up_vec = pos[bvh.index(b.head)] - pos[bvh.index(b.hips)]
    axis = int(np.argmax(np.abs(up_vec)))
    if axis == 0 or up_vec[axis] <= 0:
        raise BVHError(bvh.path, None, f"the body's up axis in the first frame is {'-' if up_vec[axis] < 0 else '+'}"
                       f"{'xyz'[axis]} (hips -> head {np.round(up_vec, 2).tolist()}); AnimatedDrawings' motion "
                       "configs support +y or +z: write a motion config for it")
    height = float(np.ptp(pos[[bvh.index(n) for n in (b.head, b.legs["left"].end, b.legs["right"].end)], axis]))
    scale = 4.25 / height if height > 0 else 0.025
    arms, legs = b.arms, b.legs
    return MotionConfig(
        path=f"{bvh.path or bvh_path} (derived motion config)", bvh_path=str(bvh_path),
        start_frame_idx=int(start_frame_idx), end_frame_idx=end_frame_idx, groundplane_joint=legs["left"].end,
        forward_perp_joint_vectors=((arms["left"].upper, arms["right"].upper),
                                    (legs["left"].upper, legs["right"].upper)),
        scale=float(scale), up="+y" if axis == 1 else "+z",
    )


def configs_for(motion: str | Path, retarget: str | Path | None = None, start_frame: int = 0,
                end_frame: int | None = None) -> tuple[MotionConfig, RetargetConfig]:
    """The motion and retarget configs to use: ``motion`` is a motion config (YAML) or a BVH file
    (its motion config then derived, frames ``start_frame`` to ``end_frame`` (exclusive, None: to
    the end)); ``retarget`` a retarget config, or None to derive one from the clip's skeleton."""
    from .bvh import load_bvh
    from .config import load_motion_config, load_retarget_config

    if str(motion).lower().endswith(".bvh"):
        bvh = load_bvh(motion)
        body = find_body(bvh)
        motion_cfg = derive_motion_config(bvh, motion, start_frame, end_frame, body=body)
        motion_cfg.frame_range(bvh.n_frames)  # an empty range is an error now, naming the field
    else:
        motion_cfg = load_motion_config(motion)
        if retarget is not None:
            return motion_cfg, load_retarget_config(retarget)
        bvh, body = load_bvh(motion_cfg.bvh_path), None
    if retarget is not None:
        return motion_cfg, load_retarget_config(retarget)
    return motion_cfg, derive_retarget_config(bvh, body)


def retarget_config_yaml(cfg: RetargetConfig) -> str:
    """``cfg`` in AnimatedDrawings' retarget-config YAML (its key order; mappings as ``!!python/tuple``)."""
    def q(s: str) -> str:
        plain = re.fullmatch(r"[A-Za-z_][A-Za-z0-9_ .\-]*", s) and s.strip() == s and s.lower() not in (
            "yes", "no", "true", "false", "null", "on", "off", "y", "n", "~")
        return s if plain else '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    out = [f"char_starting_location: [{', '.join(repr(float(v)) for v in cfg.char_starting_location)}]",
           "bvh_projection_bodypart_groups:"]
    for g in cfg.bvh_projection_bodypart_groups:
        out.append("- bvh_joint_names:")
        out += [f"  - {q(n)}" for n in g.bvh_joint_names]
        out += [f"  method: {g.method}", f"  name: {q(g.name)}"]
    out.append("char_bodypart_groups:")
    for p in cfg.char_bodypart_groups:
        out.append("- bvh_depth_drivers:")
        out += [f"  - {q(n)}" for n in p.bvh_depth_drivers]
        out.append("  char_joints:")
        out += [f"  - {q(n)}" for n in p.char_joints]
    ro = cfg.char_bvh_root_offset
    out += ["char_bvh_root_offset:",
            f"  bvh_projection_bodypart_group_for_offset: {q(ro.bvh_projection_bodypart_group_for_offset)}",
            "  bvh_joints:"]
    for chain in ro.bvh_joints:
        out += [f"  {'-' if k == 0 else ' '} - {q(n)}" for k, n in enumerate(chain)]
    out.append("  char_joints:")
    for chain in ro.char_joints:
        out += [f"  {'-' if k == 0 else ' '} - {q(n)}" for k, n in enumerate(chain)]
    out.append("char_joint_bvh_joints_mapping:")
    for char_joint, (prox, dist) in cfg.char_joint_bvh_joints_mapping:
        out += [f"  {q(char_joint)}: !!python/tuple", f"  - {q(prox)}", f"  - {q(dist)}"]
    out.append("char_runtime_checks:")
    for check in cfg.char_runtime_checks:
        out += [f"  {'-' if k == 0 else ' '} - {q(v)}" for k, v in enumerate(check)]
    return "\n".join(out) + "\n"


__all__ = ["Body", "Limb", "configs_for", "derive_motion_config", "derive_retarget_config", "find_body",
           "retarget_config_yaml",
           "shared_prefix", "split_name"]
