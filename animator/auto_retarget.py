"""Retarget and motion configs derived from a BVH's joint names and hierarchy, for humanoid clips.

Most motion-capture exporters name a humanoid's joints after one of a few conventions: FAIR1,
Rokoko and Mixamo (``LeftArm``, ``LeftForeArm``, ``LeftUpLeg``, ``LeftLeg``), CMU as
AnimatedDrawings ships it (``LeftShoulder``, ``LeftElbow``, ``LeftHip``, ``LeftKnee``), CMU's
Daz/Poser conversion (``lShldr``, ``lForeArm``, ``lThigh``, ``lShin``), Unreal (``upperarm_l``,
``lowerarm_l``, ``thigh_l``, ``calf_l``), 3ds Max Biped (``Bip01 L Forearm``, ``Bip01 L Calf``) and
Blender (``forearm.L``, ``shin.L``), often behind a namespace prefix (``mixamorig:``,
``Armature|``, ``Character1_``). :func:`find_body` reads the body from such a skeleton:

1. names lose the prefix every joint shares and any namespace (up to the last ``:`` or ``|``);
   the rest splits into a side (left, right or none) and a part word (``forearm``, ``shin``, ...);
2. per side, the forearm is the shallowest joint whose word means forearm (``forearm``,
   ``lowerarm``, ``elbow``); the upper arm is its parent (twist and roll joints skipped), the
   collar the upper arm's parent if it is on the same side, the hand the forearm's first
   descendant called hand or wrist. The legs likewise (shin / knee / calf / leg; thigh; foot or
   ankle; toe);
3. the chest is where the two arms meet, the hips where the two legs meet, the head the end of
   the chain that leaves the chest between the arms (``neck`` and ``head`` by name where they are).

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
    ("forearm", "calf"): "3ds Max Biped",
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
    """
    n = name[len(prefix):] if prefix and name.startswith(prefix) else name
    n = re.split(r"[:|]", n)[-1].strip()
    side, rest = None, n
    for pattern in (r"^(left|right)[\s_.\-]*(.+)$", r"^(.+?)[\s_.\-]*(left|right)$"):
        m = re.match(pattern, n, re.IGNORECASE)
        if m:
            k = 1 if m.group(1).lower() in ("left", "right") else 2
            side, rest = m.group(k).lower(), m.group(3 - k)
            break
    else:
        m = (re.match(r"^([lr])[\s_.\-]+(.+)$", n, re.IGNORECASE) or re.match(r"^([lLrR])([A-Z].*)$", n))
        if m:
            side, rest = m.group(1), m.group(2)
        else:
            m = re.match(r"^(.+?)[\s_.\-]+([lr])$", n, re.IGNORECASE)
            if m:
                side, rest = m.group(2), m.group(1)
            else:
                m = re.match(r"^([lr])([a-z]+)$", n)
                if m and m.group(2) in _WORDS:
                    side, rest = m.group(1), m.group(2)
        if side is not None:
            side = "left" if side.lower() == "l" else "right"
    return side, re.sub(r"[^a-z0-9]", "", rest.lower())


def shared_prefix(names: list[str]) -> str:
    """The prefix every name shares, up to and including its last separator (``_ : | . -`` or space)."""
    if len(names) < 2:
        return ""
    first, last = min(names), max(names)
    k = 0
    while k < min(len(first), len(last)) and first[k] == last[k]:
        k += 1
    common = first[:k]
    cut = max(common.rfind(c) for c in "_:|. -")
    return common[:cut + 1] if cut >= 0 else ""


def find_body(bvh: BVH) -> Body:
    """Find a humanoid's trunk and limbs in ``bvh`` (see the module docstring).

    Raises:
        BVHError: the skeleton is not recognised; the message lists every part not found.
    """
    names = list(bvh.joint_names)
    real = [i for i in range(bvh.n_joints) if not bvh.end_site[i]]
    prefix = shared_prefix([names[i] for i in real[1:]])
    sides, parts = {}, {}
    for i in real:
        sides[i], parts[i] = split_name(names[i], prefix)
    children: list[list[int]] = [[] for _ in names]
    for i, p in enumerate(bvh.parents):
        if p >= 0 and not bvh.end_site[i]:
            children[int(p)].append(i)
    depth = np.zeros(len(names), int)
    for i in range(1, len(names)):
        depth[i] = depth[bvh.parents[i]] + 1

    def ancestors(j: int) -> list[int]:
        out = []
        while j >= 0:
            out.append(j)
            j = int(bvh.parents[j])
        return out

    def descendants(j: int) -> list[int]:
        out, todo = [], list(children[j])
        while todo:
            k = todo.pop(0)
            out.append(k)
            todo.extend(children[k])
        return out

    def upward(j: int) -> int:
        """The nearest proper ancestor of j that is not a twist / roll helper."""
        p = int(bvh.parents[j])
        while p > 0 and _TWIST.search(parts.get(p, "")):
            p = int(bvh.parents[p])
        return p

    def tip(j: int, avoid: str) -> int | None:
        """The outermost joint of j's main child chain (a child whose word avoids ``avoid`` first)."""
        out = None
        while children[j]:
            pick = [c for c in children[j] if avoid not in parts[c]] or children[j]
            j = out = pick[0]
        return out

    missing: list[str] = []
    words: dict[str, str] = {}

    def limb(side: str, kind: str, middles: set[str], middle_like: str, end: str, ends: set[str], end_like: str,
             avoid: str) -> tuple[int, int, int, int | None] | None:
        """``side``'s arm or leg as joint indices (upper, middle, end, tip): the shallowest joint whose
        word is in ``middles`` (forearm, shin), the nearest non-twist joint above it, the first joint
        below it whose word is in ``ends`` (else its first child) and that end's outermost tip. None,
        with what is missing noted, when a part is not found."""
        found = sorted((i for i in real if sides[i] == side and parts[i] in middles), key=lambda i: depth[i])
        if not found:
            missing.append(f"{side} {middle_like}")
            return None
        m = found[0]
        words[kind] = parts[m]
        e = next((d for d in descendants(m) if parts[d] in ends), children[m][0] if children[m] else None)
        if e is None:
            missing.append(f"{side} {end} (a joint below {names[m]} like {end_like})")
            return None
        return upward(m), m, e, tip(e, avoid)

    arms: dict[str, Limb] = {}
    legs: dict[str, Limb] = {}
    for side in ("left", "right"):
        Side, s = side.title(), side[0]
        arm = limb(side, "arm", _FOREARM, f"forearm (a joint like {Side}ForeArm, {Side}Elbow, lowerarm_{s})",
                   "hand", _HAND, f"{Side}Hand or {Side}Wrist", "thumb")
        if arm is not None:
            upper, fore, hand, t = arm
            coll = int(bvh.parents[upper])
            base = names[coll] if coll > 0 and sides.get(coll) == side else None
            arms[side] = Limb(base, names[upper], names[fore], names[hand], None if t is None else names[t])
        leg = limb(side, "leg", _SHIN, f"shin (a joint like {Side}Leg, {Side}Knee, calf_{s})",
                   "foot", _FOOT, f"{Side}Foot or {Side}Ankle", "_none_")
        if leg is not None:
            thigh, shin, foot, t = leg
            legs[side] = Limb(None, names[thigh], names[shin], names[foot], None if t is None else names[t])
    if missing:
        raise BVHError(bvh.path, None, "not a humanoid skeleton this animator recognises: no " + "; no ".join(missing)
                       + f". Its joints: {', '.join(names[i] for i in real[:40])}{' ...' if len(real) > 40 else ''}. "
                       "Write a retarget config for it (see --print-retarget for the format)")

    idx = {n: i for i, n in enumerate(names)}

    def meet(a: str, b: str) -> int:
        up = ancestors(idx[a])
        return next(j for j in ancestors(idx[b]) if j in up)

    chest = meet(arms["left"].upper, arms["right"].upper)
    hips = meet(legs["left"].upper, legs["right"].upper)
    if hips not in ancestors(chest):
        raise BVHError(bvh.path, None, f"not a humanoid skeleton this animator recognises: the arms meet at "
                       f"'{names[chest]}', which is not above the hips '{names[hips]}' where the legs meet")
    arm_roots = set(ancestors(idx[arms["left"].upper])) | set(ancestors(idx[arms["right"].upper]))
    head_side = [c for c in children[chest] if c not in arm_roots and sides[c] is None]
    chain: list[int] = []
    if head_side:
        # the child chain towards a joint called head (else the first one), to its end
        start = next((c for c in head_side if any("head" in parts[d] for d in [c, *descendants(c)])), head_side[0])
        j = start
        chain.append(j)
        while children[j]:
            centre = [c for c in children[j] if sides[c] is None] or children[j]
            j = next((c for c in centre if any("head" in parts[d] for d in [c, *descendants(c)])), centre[0])
            if sides[j] is not None:
                break
            chain.append(j)
    named_head = [j for j in chain if parts[j].startswith("head") and "end" not in parts[j]]
    head = named_head[0] if named_head else (chain[-1] if chain else chest)
    if chain:
        chain = chain[:chain.index(head) + 1]
    trunk = [j for j in reversed(ancestors(chest)) if j in ancestors(chest) and depth[j] >= depth[hips]] + chain
    family = _FAMILIES.get((words["arm"], words["leg"]), f"generic humanoid ({words['arm']} / {words['leg']})")
    return Body(family=family, hips=names[hips], chest=names[chest], trunk=tuple(names[j] for j in trunk),
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
