"""Motion and retarget configs, read from AnimatedDrawings' YAML formats unchanged.

A *motion config* names a BVH clip and how to read it (frame range, up axis, forward vectors,
ground-plane joint, scale); a *retarget config* says how the clip drives a drawn character's skeleton
(projection planes for BVH body-part groups, which BVH bone drives which character bone, draw-order
groups, root-motion scaling, runtime checks). Field names and meanings follow AnimatedDrawings'
``examples/config/README.md``; the checks mirror its ``animated_drawings/config.py``.

Every problem raises :class:`animator.errors.ConfigError` naming the file and the field.
Checks that need the BVH skeleton or the character skeleton are in :func:`check_against_bvh` and
:func:`check_against_character` (called by :func:`animator.retarget.retarget`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import yaml

from .errors import ConfigError

#: Projection methods. AnimatedDrawings spelt sagittal 'saggital' in older releases: both are read.
PROJECTION_METHODS = ("pca", "frontal", "sagittal")
_METHOD_ALIASES = {"saggital": "sagittal"}
#: Up axes AnimatedDrawings supports.
UP_AXES = ("+y", "+z")


#: PyYAML's safe loader, in C (libyaml) where PyYAML was built with it: several times quicker.
SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str):
    """A YAML document with :data:`SafeLoader`."""
    return yaml.load(text, Loader=SafeLoader)  # noqa: S506 - a safe loader


class _ConfigLoader(SafeLoader):  # type: ignore[misc, valid-type]
    """Safe YAML loader that also reads ``!!python/tuple`` (as a tuple), as AnimatedDrawings' files use it."""


def _construct_tuple(loader: yaml.SafeLoader, node: yaml.Node) -> tuple:
    if not isinstance(node, yaml.SequenceNode):
        raise yaml.constructor.ConstructorError(None, None, "!!python/tuple must tag a sequence", node.start_mark)
    return tuple(loader.construct_sequence(node, deep=True))


_ConfigLoader.add_constructor("tag:yaml.org,2002:python/tuple", _construct_tuple)


@dataclass(frozen=True)
class MotionConfig:
    """A motion config (AnimatedDrawings ``examples/config/motion/*.yaml``).

    Attributes:
        path: the YAML file.
        bvh_path: the BVH clip, resolved (see :func:`resolve_bvh_path`).
        start_frame_idx: first BVH frame used (0-based).
        end_frame_idx: one past the last frame used; None (or 0, as in AnimatedDrawings) = to the end.
            Values past the clip's end are clamped to it, as AnimatedDrawings does.
        groundplane_joint: BVH joint that stands on the floor at the first frame.
        forward_perp_joint_vectors: BVH joint pairs (left, right); the skeleton's forward vector is
            perpendicular (counter-clockwise about up) to the mean of their normalised differences.
        scale: uniform scale of the BVH skeleton (positive). It only sizes AnimatedDrawings' 3D
            scene; it cancels out of the 2D pose.
        up: ``'+y'`` or ``'+z'``, the BVH's up axis.
        frame_time: optional override of the BVH's seconds per frame (newer AnimatedDrawings).
    """

    path: str
    bvh_path: str
    start_frame_idx: int
    end_frame_idx: int | None
    groundplane_joint: str
    forward_perp_joint_vectors: tuple[tuple[str, str], ...]
    scale: float
    up: str
    frame_time: float | None = None

    def frame_range(self, n_frames: int) -> tuple[int, int]:
        """(start, end) BVH frame indices for a clip of ``n_frames`` frames, end exclusive.

        Raises ConfigError if the range is empty.
        """
        end = self.end_frame_idx if self.end_frame_idx else n_frames
        end = min(end, n_frames)
        if self.start_frame_idx >= end:
            field = "start_frame_idx" if self.start_frame_idx >= n_frames else "end_frame_idx"
            raise ConfigError(self.path, field, f"frame range [{self.start_frame_idx}, {end}) is empty (the BVH has "
                                                f"{n_frames} frames)")
        return self.start_frame_idx, end


@dataclass(frozen=True)
class ProjectionGroup:
    """BVH joints projected onto one plane: ``method`` is 'pca', 'frontal' or 'sagittal'."""

    name: str
    bvh_joint_names: tuple[str, ...]
    method: str


@dataclass(frozen=True)
class BodyPartGroup:
    """Character joints drawn in one pass; its depth is the mean depth of ``bvh_depth_drivers``."""

    bvh_depth_drivers: tuple[str, ...]
    char_joints: tuple[str, ...]


@dataclass(frozen=True)
class RootOffset:
    """How the BVH root path is scaled and projected onto the character (``char_bvh_root_offset``)."""

    bvh_projection_bodypart_group_for_offset: str
    bvh_joints: tuple[tuple[str, ...], ...]
    char_joints: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class RetargetConfig:
    """A retarget config (AnimatedDrawings ``examples/config/retarget/*.yaml``).

    Attributes:
        path: the YAML file.
        char_starting_location: (x, y, z) of the character root in AnimatedDrawings' 3D scene.
            It places the character in that scene only; poses here are in the drawing's pixels.
        bvh_projection_bodypart_groups: projection plane per group of BVH joints.
        char_bodypart_groups: draw-order groups of character joints with their depth drivers.
        char_bvh_root_offset: root-motion scaling (limb chains) and projection group.
        char_joint_bvh_joints_mapping: character joint -> (proximal, distal) BVH joints; the bone
            ending at the character joint is turned to the projected BVH bone's angle. File order.
        char_runtime_checks: checks on the drawn pose, e.g. ``('above', 'neck', 'right_shoulder',
            'left_shoulder')``: if the target is below the line joint1 -> joint2 its mapping is dropped.
    """

    path: str
    char_starting_location: tuple[float, float, float]
    bvh_projection_bodypart_groups: tuple[ProjectionGroup, ...]
    char_bodypart_groups: tuple[BodyPartGroup, ...]
    char_bvh_root_offset: RootOffset
    char_joint_bvh_joints_mapping: tuple[tuple[str, tuple[str, str]], ...]
    char_runtime_checks: tuple[tuple[str, ...], ...]

    @property
    def mapping(self) -> dict[str, tuple[str, str]]:
        """``char_joint_bvh_joints_mapping`` as an ordered dict."""
        return dict(self.char_joint_bvh_joints_mapping)

    def group(self, name: str) -> ProjectionGroup:
        for g in self.bvh_projection_bodypart_groups:
            if g.name == name:
                return g
        raise KeyError(name)


# ----------------------------------------------------------------------------------------------
# reading

def read_yaml(path: str | Path) -> Any:
    """Read a YAML config with a safe loader (``!!python/tuple`` allowed); errors name the file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(p, None, "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(p, None, f"cannot read: {exc}") from None
    try:
        return yaml.load(text, Loader=_ConfigLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ConfigError(p, None, f"not valid YAML: {exc}") from None


def resolve_bvh_path(filepath: str, config_path: str | Path) -> Path | None:
    """Find a motion config's BVH file.

    AnimatedDrawings resolves ``filepath`` from the current working directory (or as an absolute
    path), then from its repository root. We try the same first, then the config file's folder and
    each of its parents (a config in ``<repo>/examples/config/motion/`` thus finds
    ``examples/bvh/...`` from ``<repo>``), so configs work from anywhere. None if not found.
    """
    fp = Path(filepath).expanduser()
    if fp.is_file():
        return fp
    if fp.is_absolute():
        return None
    base = Path(config_path).resolve().parent
    for folder in (base, *base.parents):
        cand = folder / fp
        if cand.is_file():
            return cand
    return None


def load_motion_config(path: str | Path) -> MotionConfig:
    """Read and check a motion config; the BVH path is resolved but the clip is not parsed here."""
    p = str(path)
    cfg = _mapping(read_yaml(path), p)

    start = cfg.get("start_frame_idx", 0)
    if start is None:
        start = 0
    if not _is_int(start) or start < 0:
        raise ConfigError(p, "start_frame_idx", f"must be an integer >= 0, got {start!r}")
    end = cfg.get("end_frame_idx")
    if end is not None:
        if not _is_int(end) or end < 0:
            raise ConfigError(p, "end_frame_idx", f"must be an integer >= 0 or null, got {end!r}")
        if end and end <= start:
            raise ConfigError(p, "end_frame_idx", f"must be greater than start_frame_idx ({start}), got {end}")

    frame_time = cfg.get("frame_time")
    if frame_time is not None:
        if not _is_number(frame_time) or not frame_time > 0:
            raise ConfigError(p, "frame_time", f"must be a positive number of seconds, got {frame_time!r}")
        frame_time = float(frame_time)

    ground = _required(cfg, "groundplane_joint", p)
    if not isinstance(ground, str) or not ground:
        raise ConfigError(p, "groundplane_joint", f"must be a BVH joint name, got {ground!r}")

    fwd = _required(cfg, "forward_perp_joint_vectors", p)
    if not isinstance(fwd, (list, tuple)) or not fwd:
        raise ConfigError(p, "forward_perp_joint_vectors", "must be a non-empty list of [joint, joint] pairs")
    pairs: list[tuple[str, str]] = []
    for k, pair in enumerate(fwd):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2 or not all(isinstance(x, str) for x in pair):
            raise ConfigError(p, f"forward_perp_joint_vectors[{k}]", f"must be a pair of BVH joint names, got {pair!r}")
        pairs.append((pair[0], pair[1]))

    scale = _required(cfg, "scale", p)
    if not _is_number(scale) or not scale > 0 or not math.isfinite(scale):
        raise ConfigError(p, "scale", f"must be a number > 0, got {scale!r}")

    up = _required(cfg, "up", p)
    if up not in UP_AXES:
        raise ConfigError(p, "up", f"must be one of {', '.join(repr(u) for u in UP_AXES)}, got {up!r}")

    filepath = _required(cfg, "filepath", p)
    if not isinstance(filepath, str) or not filepath:
        raise ConfigError(p, "filepath", f"must be the path of a BVH file, got {filepath!r}")
    bvh_path = resolve_bvh_path(filepath, p)
    if bvh_path is None:
        raise ConfigError(p, "filepath", f"BVH file '{filepath}' not found (looked in the working directory and in "
                                         f"{Path(p).resolve().parent} and its parents)")

    return MotionConfig(
        path=p, bvh_path=str(bvh_path), start_frame_idx=int(start), end_frame_idx=None if end is None else int(end),
        groundplane_joint=ground, forward_perp_joint_vectors=tuple(pairs), scale=float(scale), up=up,
        frame_time=frame_time,
    )


def load_retarget_config(path: str | Path) -> RetargetConfig:
    """Read and check a retarget config (everything that can be checked without BVH or character)."""
    p = str(path)
    cfg = _mapping(read_yaml(path), p)
    loc = _starting_location(cfg, p)
    groups = _projection_groups(cfg, p)
    parts = _bodypart_groups(cfg, p)
    root_offset = _root_offset(cfg, p, [g.name for g in groups])
    mapping = _joint_mapping(cfg, p)
    checks = _runtime_checks(cfg, p)
    return RetargetConfig(
        path=p, char_starting_location=loc, bvh_projection_bodypart_groups=groups, char_bodypart_groups=parts,
        char_bvh_root_offset=root_offset, char_joint_bvh_joints_mapping=mapping, char_runtime_checks=checks,
    )


def _starting_location(cfg: dict, p: str) -> tuple[float, float, float]:
    loc = _required(cfg, "char_starting_location", p)
    if not isinstance(loc, (list, tuple)) or len(loc) != 3 or not all(_is_number(v) for v in loc):
        raise ConfigError(p, "char_starting_location", f"must be a list of 3 numbers, got {loc!r}")
    return tuple(float(v) for v in loc)  # type: ignore[return-value]


def _projection_groups(cfg: dict, p: str) -> tuple[ProjectionGroup, ...]:
    """``bvh_projection_bodypart_groups``: a non-empty list with unique names."""
    groups_raw = _required(cfg, "bvh_projection_bodypart_groups", p)
    if not isinstance(groups_raw, list) or not groups_raw:
        raise ConfigError(p, "bvh_projection_bodypart_groups", "must be a non-empty list of {name, bvh_joint_names, "
                                                               "method}")
    groups: list[ProjectionGroup] = []
    for k, g in enumerate(groups_raw):
        f = f"bvh_projection_bodypart_groups[{k}]"
        g = _mapping(g, p, f)
        name = _required(g, "name", p, f)
        if not isinstance(name, str):
            raise ConfigError(p, f"{f}.name", f"must be a string, got {name!r}")
        method = _required(g, "method", p, f)
        method = _METHOD_ALIASES.get(method, method)
        if method not in PROJECTION_METHODS:
            raise ConfigError(p, f"{f}.method", f"must be 'pca', 'frontal' or 'sagittal', got {g.get('method')!r}")
        names = _name_list(_required(g, "bvh_joint_names", p, f), p, f"{f}.bvh_joint_names")
        groups.append(ProjectionGroup(name, names, method))
    seen = [g.name for g in groups]
    dupes = sorted({n for n in seen if seen.count(n) > 1})
    if dupes:
        raise ConfigError(p, "bvh_projection_bodypart_groups", "group names must be unique; repeated: "
                                                               f"{', '.join(dupes)}")
    return tuple(groups)


def _bodypart_groups(cfg: dict, p: str) -> tuple[BodyPartGroup, ...]:
    """``char_bodypart_groups``: a non-empty list of {bvh_depth_drivers, char_joints}."""
    parts_raw = _required(cfg, "char_bodypart_groups", p)
    if not isinstance(parts_raw, list) or not parts_raw:
        raise ConfigError(p, "char_bodypart_groups", "must be a non-empty list of {bvh_depth_drivers, char_joints}")
    parts: list[BodyPartGroup] = []
    for k, g in enumerate(parts_raw):
        f = f"char_bodypart_groups[{k}]"
        g = _mapping(g, p, f)
        drivers = _name_list(_required(g, "bvh_depth_drivers", p, f), p, f"{f}.bvh_depth_drivers")
        joints = _name_list(_required(g, "char_joints", p, f), p, f"{f}.char_joints")
        parts.append(BodyPartGroup(drivers, joints))
    return tuple(parts)


def _root_offset(cfg: dict, p: str, group_names: list[str]) -> RootOffset:
    """``char_bvh_root_offset``: its projection group must be one of ``group_names``."""
    f = "char_bvh_root_offset"
    ro = _mapping(_required(cfg, f, p), p, f)
    group_for_offset = _required(ro, "bvh_projection_bodypart_group_for_offset", p, f)
    if group_for_offset not in group_names:
        raise ConfigError(p, f"{f}.bvh_projection_bodypart_group_for_offset",
                          f"{group_for_offset!r} is not the name of a bvh_projection_bodypart_groups entry "
                          f"({', '.join(group_names)})")
    chains = {}
    for key in ("bvh_joints", "char_joints"):
        raw = _required(ro, key, p, f)
        if not isinstance(raw, (list, tuple)) or not raw:
            raise ConfigError(p, f"{f}.{key}", "must be a non-empty list of joint chains")
        chains[key] = tuple(_name_list(c, p, f"{f}.{key}[{k}]") for k, c in enumerate(raw))
    return RootOffset(group_for_offset, chains["bvh_joints"], chains["char_joints"])


def _joint_mapping(cfg: dict, p: str) -> tuple[tuple[str, tuple[str, str]], ...]:
    """``char_joint_bvh_joints_mapping``: character joint -> (proximal, distal) BVH joints, in file order."""
    mapping_raw = _required(cfg, "char_joint_bvh_joints_mapping", p)
    if not isinstance(mapping_raw, dict):
        raise ConfigError(p, "char_joint_bvh_joints_mapping",
                          "must map character joint names to (bvh_joint, bvh_joint)")
    mapping: list[tuple[str, tuple[str, str]]] = []
    for key, val in mapping_raw.items():
        fk = f"char_joint_bvh_joints_mapping.{key}"
        if not isinstance(key, str):
            raise ConfigError(p, "char_joint_bvh_joints_mapping", f"keys must be character joint names, got {key!r}")
        if not isinstance(val, (list, tuple)) or len(val) != 2 or not all(isinstance(v, str) for v in val):
            raise ConfigError(p, fk, f"must be a pair (proximal, distal) of BVH joint names, got {val!r}")
        mapping.append((key, (val[0], val[1])))
    return tuple(mapping)


def _runtime_checks(cfg: dict, p: str) -> tuple[tuple[str, ...], ...]:
    """``char_runtime_checks`` (optional): only ``[above, target, joint1, joint2]`` is supported."""
    checks_raw = cfg.get("char_runtime_checks") or []
    if not isinstance(checks_raw, list):
        raise ConfigError(p, "char_runtime_checks", "must be a list of checks such as [above, neck, right_shoulder, "
                                                    "left_shoulder]")
    checks: list[tuple[str, ...]] = []
    for k, c in enumerate(checks_raw):
        fk = f"char_runtime_checks[{k}]"
        if not isinstance(c, (list, tuple)) or not c:
            raise ConfigError(p, fk, f"must be a list such as [above, target, joint1, joint2], got {c!r}")
        if c[0] != "above":
            raise ConfigError(p, fk, f"only the 'above' check is supported, got {c[0]!r}")
        if len(c) != 4 or not all(isinstance(x, str) for x in c):
            raise ConfigError(p, fk, f"'above' needs 3 character joint names (target, joint1, joint2), got {c!r}")
        checks.append(tuple(c))
    return tuple(checks)


# ----------------------------------------------------------------------------------------------
# checks that need the skeletons

def check_against_bvh(motion: MotionConfig, retarget: RetargetConfig, has_joint) -> None:
    """Check that every BVH joint the configs name exists (``has_joint(name) -> bool``).

    Also checks what AnimatedDrawings would only trip on at run time: mapped distal joints and
    depth drivers must belong to a projection group.
    """
    def need(cfg_path: str, field: str, names: Iterable[str]) -> None:
        for n in names:
            if not has_joint(n):
                raise ConfigError(cfg_path, field, f"BVH joint '{n}' not found in {motion.bvh_path}")

    need(motion.path, "groundplane_joint", [motion.groundplane_joint])
    for k, pair in enumerate(motion.forward_perp_joint_vectors):
        need(motion.path, f"forward_perp_joint_vectors[{k}]", pair)
    rp = retarget.path
    for k, g in enumerate(retarget.bvh_projection_bodypart_groups):
        need(rp, f"bvh_projection_bodypart_groups[{k}].bvh_joint_names", g.bvh_joint_names)
    projected = {n for g in retarget.bvh_projection_bodypart_groups for n in g.bvh_joint_names}
    for k, g in enumerate(retarget.char_bodypart_groups):
        f = f"char_bodypart_groups[{k}].bvh_depth_drivers"
        need(rp, f, g.bvh_depth_drivers)
        for n in g.bvh_depth_drivers:
            if n not in projected:
                raise ConfigError(rp, f, f"depth driver '{n}' is in no bvh_projection_bodypart_groups entry, so it has "
                                         "no depth")
    for k, chain in enumerate(retarget.char_bvh_root_offset.bvh_joints):
        need(rp, f"char_bvh_root_offset.bvh_joints[{k}]", chain)
    for char_joint, (prox, dist) in retarget.char_joint_bvh_joints_mapping:
        f = f"char_joint_bvh_joints_mapping.{char_joint}"
        need(rp, f, (prox, dist))
        if dist not in projected:
            raise ConfigError(rp, f, f"distal BVH joint '{dist}' is in no bvh_projection_bodypart_groups entry, so it "
                                     "has no projection plane")


def check_against_character(retarget: RetargetConfig, char_joints: Sequence[str],
                            parents: Mapping[str, str | None]) -> None:
    """Check that every character joint the retarget config names exists in the character."""
    names = set(char_joints)
    rp = retarget.path

    def need(field: str, js: Iterable[str]) -> None:
        for n in js:
            if n not in names:
                raise ConfigError(rp, field, f"character joint '{n}' not in the character's skeleton")

    for k, g in enumerate(retarget.char_bodypart_groups):
        need(f"char_bodypart_groups[{k}].char_joints", g.char_joints)
    for k, chain in enumerate(retarget.char_bvh_root_offset.char_joints):
        need(f"char_bvh_root_offset.char_joints[{k}]", chain)
    for char_joint, _ in retarget.char_joint_bvh_joints_mapping:
        f = f"char_joint_bvh_joints_mapping.{char_joint}"
        need(f, [char_joint])
        if parents.get(char_joint) is None:
            raise ConfigError(rp, f, f"'{char_joint}' has no parent joint, so it ends no bone to turn")
    for k, c in enumerate(retarget.char_runtime_checks):
        need(f"char_runtime_checks[{k}]", c[1:])
    unmapped = unmapped_joints(retarget, char_joints, parents)
    if unmapped:
        raise ConfigError(rp, "char_joint_bvh_joints_mapping",
                          f"character joint(s) {', '.join(repr(n) for n in unmapped)} not mapped: every joint at the "
                          "end of a limb needs a (proximal, distal) BVH joint pair, or it never moves")


def unmapped_joints(retarget: RetargetConfig, char_joints: Sequence[str],
                    parents: Mapping[str, str | None]) -> list[str]:
    """Character joints at the end of a limb (no children, not the root) that the mapping leaves out.

    A mapped joint turns the bone that ends at it; a joint with no mapping below it stays rigid on its
    parent forever, which is always a config mistake in AnimatedDrawings' examples (their every leaf
    is mapped; runtime checks may still drop a mapping on purpose, see ``char_runtime_checks``).
    """
    has_child = {p for p in parents.values() if p is not None}
    mapped = {name for name, _ in retarget.char_joint_bvh_joints_mapping}
    return [n for n in char_joints if n not in has_child and parents.get(n) is not None and n not in mapped]


# ----------------------------------------------------------------------------------------------
# helpers

def _mapping(obj: Any, path: str, field: str | None = None) -> dict:
    if not isinstance(obj, dict):
        what = "the file" if field is None else "this entry"
        raise ConfigError(path, field, f"{what} must be a YAML mapping, got {type(obj).__name__}")
    return obj


def _required(cfg: Mapping[str, Any], key: str, path: str, prefix: str | None = None) -> Any:
    field = f"{prefix}.{key}" if prefix else key
    if key not in cfg or cfg[key] is None:
        raise ConfigError(path, field, "missing")
    return cfg[key]


def _name_list(obj: Any, path: str, field: str) -> tuple[str, ...]:
    if not isinstance(obj, (list, tuple)) or not obj or not all(isinstance(x, str) for x in obj):
        raise ConfigError(path, field, f"must be a non-empty list of joint names, got {obj!r}")
    return tuple(obj)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


__all__ = [
    "BodyPartGroup", "MotionConfig", "ProjectionGroup", "RetargetConfig", "RootOffset",
    "check_against_bvh", "check_against_character", "load_motion_config", "unmapped_joints", "load_retarget_config",
    "read_yaml", "resolve_bvh_path",
]
