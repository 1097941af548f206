"""BVH (Biovision Hierarchy) motion capture: parsing and forward kinematics over all frames at once.

Conventions
-----------
* Joints are listed depth-first in file order (parents before children), the order of the channel
  columns in the MOTION block. ``End Site`` blocks become joints too (no channels); they are named
  ``<Parent>End`` (``<Parent>_EndSite`` if a real joint already has that name). AnimatedDrawings
  calls every end site ``End Site``; :meth:`BVH.index` accepts that name as an alias of the first
  end site, as AnimatedDrawings' name look-up does. (The FAIR clips' ``RightHandEnd`` /
  ``LeftHandEnd`` are real joints of those files, not end sites.)
* Mixamo namespace prefixes (``mixamorig:``, ``mixamorig1:`` ...) are stripped from joint names.
* Rotations: a joint's local rotation is the product of its rotation channels in the order they are
  listed, ``R = R_c1 @ R_c2 @ R_c3`` (column vectors), angles in degrees, right-handed axes.
* Translations: a joint's local translation is its OFFSET; position channels replace the matching
  OFFSET components (for the root this is the usual root motion). ``forward_kinematics`` can ignore
  position channels on non-root joints, as AnimatedDrawings does.
* Units are the file's own (centimetres for FAIR and CMU clips), axes as in the file (no up-axis fix).
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import BVHError

_MIXAMO_PREFIX = re.compile(r"^mixamorig\d*:")
_AXES = "XYZ"
#: Alias AnimatedDrawings uses for end sites (all of them share this name there).
END_SITE_ALIAS = "End Site"


@dataclass(frozen=True, eq=False)
class BVH:
    """A parsed BVH clip.

    Attributes:
        path: the file it was read from (for error messages), or None.
        joint_names: J names, depth-first file order; index 0 is the root.
        parents: (J,) int array, parent index of each joint, -1 for the root.
        offsets: (J, 3) float64 OFFSET of each joint from its parent, file units.
        channels: per joint, its channel names as written (e.g. ``('Xposition', ..., 'Zrotation')``).
        channel_start: (J,) int array, first MOTION column of each joint's channels.
        end_site: (J,) bool array, True for joints made from ``End Site`` blocks.
        motion: (F, C) float64 raw channel values, one row per frame.
        frame_time: seconds per frame as written in the file.
    """

    path: str | None
    joint_names: tuple[str, ...]
    parents: np.ndarray
    offsets: np.ndarray
    channels: tuple[tuple[str, ...], ...]
    channel_start: np.ndarray
    end_site: np.ndarray
    motion: np.ndarray
    frame_time: float

    @property
    def n_frames(self) -> int:
        return int(self.motion.shape[0])

    @property
    def n_joints(self) -> int:
        return len(self.joint_names)

    @property
    def duration_s(self) -> float:
        """Length of the whole clip in seconds (frames x frame time)."""
        return self.n_frames * self.frame_time

    def index(self, name: str) -> int:
        """Index of the first joint called ``name``.

        ``'End Site'`` means the first end site, and a ``mixamorig:`` prefix in ``name`` is ignored,
        so configs written for AnimatedDrawings (which keeps the prefixes) still resolve.
        """
        try:
            return self._name_index[name]
        except KeyError:
            if name == END_SITE_ALIAS and self.end_site.any():
                return int(np.argmax(self.end_site))
            stripped = _MIXAMO_PREFIX.sub("", name)
            if stripped != name and stripped in self._name_index:
                return self._name_index[stripped]
            raise KeyError(name) from None

    def has_joint(self, name: str) -> bool:
        try:
            self.index(name)
        except KeyError:
            return False
        return True

    @property
    def _name_index(self) -> dict[str, int]:
        cache = self.__dict__.get("_names_cache")
        if cache is None:
            cache = {}
            for i, n in enumerate(self.joint_names):
                cache.setdefault(n, i)
            object.__setattr__(self, "_names_cache", cache)
        return cache

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_names_cache", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def closure(self, joints: "np.ndarray | list[int] | None") -> np.ndarray:
        """Sorted indices of ``joints`` and all their ancestors (all joints if None)."""
        if joints is None:
            return np.arange(self.n_joints)
        keep = np.zeros(self.n_joints, dtype=bool)
        for j in np.asarray(joints, dtype=np.int64).ravel():
            while j >= 0 and not keep[j]:
                keep[j] = True
                j = int(self.parents[j])
        return np.flatnonzero(keep)

    def local_quaternions(self, frames: np.ndarray | slice | None = None,
                          joints: np.ndarray | None = None) -> np.ndarray:
        """Local rotations as unit quaternions (w, x, y, z), (F, len(joints), 4); identity without channels."""
        data = self.motion if frames is None else self.motion[frames]
        joints = np.arange(self.n_joints) if joints is None else np.asarray(joints, dtype=np.int64)
        quat = np.zeros((data.shape[0], len(joints), 4))
        quat[..., 0] = 1.0
        # Group joints sharing one rotation-channel order so each group is built in one pass.
        groups: dict[str, tuple[list[int], list[list[int]]]] = {}
        for slot, j in enumerate(joints):
            chans = self.channels[j]
            cols = [int(self.channel_start[j]) + k for k, c in enumerate(chans) if c.lower().endswith("rotation")]
            if not cols:
                continue
            order = "".join(c[0].upper() for c in chans if c.lower().endswith("rotation"))
            slots, columns = groups.setdefault(order, ([], []))
            slots.append(slot)
            columns.append(cols)
        for order, (slots, columns) in groups.items():
            quat[:, slots] = euler_to_quaternion(data[:, np.asarray(columns)], order)
        return quat

    def local_rotations(self, frames: np.ndarray | slice | None = None, joints: np.ndarray | None = None) -> np.ndarray:
        """Local rotation matrices (F, len(joints), 3, 3) (all joints by default; identity without channels)."""
        return quaternion_to_matrix(self.local_quaternions(frames, joints))

    def local_translations(self, frames: np.ndarray | slice | None = None, nonroot_translations: bool = True,
                           joints: np.ndarray | None = None) -> np.ndarray:
        """Local translations (F, len(joints), 3): OFFSET, with position channels substituted where present."""
        data = self.motion if frames is None else self.motion[frames]
        joints = np.arange(self.n_joints) if joints is None else np.asarray(joints, dtype=np.int64)
        trans = np.broadcast_to(self.offsets[joints], (data.shape[0], len(joints), 3)).copy()
        for slot, j in enumerate(joints):
            if j > 0 and not nonroot_translations:
                continue
            for k, c in enumerate(self.channels[j]):
                if c.lower().endswith("position"):
                    trans[:, slot, _AXES.index(c[0].upper())] = data[:, int(self.channel_start[j]) + k]
        return trans

    def _fk(self, frames, nonroot_translations: bool, joints) -> tuple[np.ndarray, np.ndarray]:
        """World quaternions (F, J, 4) and positions (F, J, 3); joints outside the closure are NaN."""
        sub = self.closure(joints)
        local_q = self.local_quaternions(frames, sub)
        local_t = self.local_translations(frames, nonroot_translations, sub)
        n = local_q.shape[0]
        world_q = np.full((n, self.n_joints, 4), np.nan)
        world_p = np.full((n, self.n_joints, 3), np.nan)
        slot_of = np.full(self.n_joints, -1, dtype=np.int64)
        slot_of[sub] = np.arange(len(sub))
        depth = np.zeros(self.n_joints, dtype=np.int64)
        for j in range(1, self.n_joints):
            depth[j] = depth[self.parents[j]] + 1
        for d in range(int(depth[sub].max()) + 1):
            level = sub[depth[sub] == d]
            slots = slot_of[level]
            if d == 0:
                world_q[:, level] = local_q[:, slots]
                world_p[:, level] = local_t[:, slots]
                continue
            par = self.parents[level]
            pq = world_q[:, par]
            world_p[:, level] = world_p[:, par] + quaternion_rotate(pq, local_t[:, slots])
            world_q[:, level] = quaternion_multiply(pq, local_q[:, slots])
        return world_q, world_p

    def forward_kinematics(self, frames: np.ndarray | slice | None = None, nonroot_translations: bool = True,
                           joints: "np.ndarray | list[int] | None" = None) -> tuple[np.ndarray, np.ndarray]:
        """World rotation matrices (F, J, 3, 3) and positions (F, J, 3) of the joints, file units and axes.

        Vectorised over frames (quaternion products, element-wise): the only Python loop is over the
        depth levels of the tree. ``joints``: compute only these and their ancestors (others NaN).
        ``nonroot_translations=False`` ignores position channels below the root, as AnimatedDrawings does.
        """
        world_q, world_p = self._fk(frames, nonroot_translations, joints)
        return quaternion_to_matrix(world_q), world_p

    def world_positions(self, frames: np.ndarray | slice | None = None, nonroot_translations: bool = True,
                        joints: "np.ndarray | list[int] | None" = None) -> np.ndarray:
        """World positions (F, J, 3) float64, file units and axes (see :meth:`forward_kinematics`)."""
        return self._fk(frames, nonroot_translations, joints)[1]


def euler_to_quaternion(angles_deg: np.ndarray, order: str) -> np.ndarray:
    """Unit quaternions (w, x, y, z) for Euler angles applied in BVH channel order.

    ``angles_deg[..., i]`` is the angle (degrees) about axis ``order[i]``; the rotation is
    ``R_order[0] @ R_order[1] @ ...`` (column vectors). Shape ``angles_deg.shape[:-1] + (4,)``.
    """
    half = np.radians(np.asarray(angles_deg, dtype=np.float64)) * 0.5
    out = np.zeros(half.shape[:-1] + (4,))
    out[..., 0] = 1.0
    for i, axis in enumerate(order.upper()):
        q = np.zeros(half.shape[:-1] + (4,))
        q[..., 0] = np.cos(half[..., i])
        q[..., 1 + _AXES.index(axis)] = np.sin(half[..., i])
        out = quaternion_multiply(out, q)
    return out


def quaternion_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product ``a * b`` of (..., 4) quaternions (w, x, y, z): rotation b, then a."""
    aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    out[..., 0] = aw * bw - ax * bx - ay * by - az * bz
    out[..., 1] = aw * bx + ax * bw + ay * bz - az * by
    out[..., 2] = aw * by - ax * bz + ay * bw + az * bx
    out[..., 3] = aw * bz + ax * by - ay * bx + az * bw
    return out


def quaternion_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate (..., 3) vectors by (..., 4) unit quaternions."""
    w = q[..., :1]
    u = q[..., 1:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def quaternion_to_matrix(q: np.ndarray) -> np.ndarray:
    """(..., 3, 3) rotation matrices of (..., 4) unit quaternions (w, x, y, z)."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    m = np.empty(q.shape[:-1] + (3, 3))
    m[..., 0, 0] = 1 - 2 * (y * y + z * z)
    m[..., 0, 1] = 2 * (x * y - w * z)
    m[..., 0, 2] = 2 * (x * z + w * y)
    m[..., 1, 0] = 2 * (x * y + w * z)
    m[..., 1, 1] = 1 - 2 * (x * x + z * z)
    m[..., 1, 2] = 2 * (y * z - w * x)
    m[..., 2, 0] = 2 * (x * z - w * y)
    m[..., 2, 1] = 2 * (y * z + w * x)
    m[..., 2, 2] = 1 - 2 * (x * x + y * y)
    return m


def euler_to_matrix(angles_deg: np.ndarray, order: str) -> np.ndarray:
    """Rotation matrices for Euler angles applied in BVH channel order.

    ``angles_deg[..., i]`` is the angle (degrees) about axis ``order[i]``; the result is
    ``R_order[0] @ R_order[1] @ ...`` with shape ``angles_deg.shape[:-1] + (3, 3)``.
    """
    return quaternion_to_matrix(euler_to_quaternion(angles_deg, order))


def axis_rotation(angle_rad: np.ndarray, axis: str) -> np.ndarray:
    """Right-handed rotation matrices about one coordinate axis, shape ``angle.shape + (3, 3)``."""
    a = np.asarray(angle_rad, dtype=np.float64)
    c, s = np.cos(a), np.sin(a)
    m = np.zeros(a.shape + (3, 3))
    i = _AXES.index(axis.upper())
    j, k = (i + 1) % 3, (i + 2) % 3
    m[..., i, i] = 1.0
    m[..., j, j] = c
    m[..., k, k] = c
    m[..., j, k] = -s
    m[..., k, j] = s
    return m


# ----------------------------------------------------------------------------------------------
# parsing

def parse_bvh(text: str, path: str | Path | None = None, *, max_joints: int | None = None,
              max_frames: int | None = None) -> BVH:
    """Parse the text of a BVH file; raise :class:`BVHError` naming the line of any problem.

    Steps: the HIERARCHY block (:func:`_parse_hierarchy`), the MOTION header
    (:func:`_parse_motion_header`), the frame rows (:func:`_parse_motion_rows`), then end sites get
    names and each joint its first channel column. ``max_joints`` (end sites included) and
    ``max_frames`` bound an untrusted file: each is checked as soon as it is known, before the
    frames are read.
    """
    where = str(path) if path is not None else None
    lines = text.splitlines()
    skel, i = _parse_hierarchy(lines, where)
    if max_joints is not None and len(skel.names) > max_joints:
        raise BVHError(where, f"line {i + 1}", f"HIERARCHY has {len(skel.names)} joints (end sites included); "
                       f"at most {max_joints} are accepted")
    n_frames, frame_time, frames_line, data_start = _parse_motion_header(lines, i, where)
    if max_frames is not None and n_frames > max_frames:
        raise BVHError(where, f"line {frames_line}", f"'Frames: {n_frames}': at most {max_frames} frames are accepted")
    motion = _parse_motion_rows(lines, data_start, n_frames, sum(len(c) for c in skel.channels), where, frames_line)
    _name_end_sites(skel.names, skel.parents, skel.end_site)
    return BVH(
        path=where,
        joint_names=tuple(skel.names),
        parents=_readonly(np.asarray(skel.parents, dtype=np.int64)),
        offsets=_readonly(np.asarray(skel.offsets, dtype=np.float64)),
        channels=tuple(skel.channels),
        channel_start=_readonly(_channel_starts(skel.channels)),
        end_site=_readonly(np.asarray(skel.end_site, dtype=bool)),
        motion=_readonly(motion),
        frame_time=float(frame_time),
    )


@dataclass
class _Skeleton:
    """The HIERARCHY block as it is read: one entry per joint, depth-first file order."""

    names: list[str] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    offsets: list[tuple[float, float, float]] = field(default_factory=list)
    channels: list[tuple[str, ...]] = field(default_factory=list)
    end_site: list[bool] = field(default_factory=list)

    def add(self, name: str, parent: int, is_end: bool) -> int:
        self.names.append(name)
        self.parents.append(parent)
        self.offsets.append((0.0, 0.0, 0.0))
        self.channels.append(())
        self.end_site.append(is_end)
        return len(self.names) - 1


def _parse_hierarchy(lines: list[str], where: str | None) -> tuple[_Skeleton, int]:
    """Read the HIERARCHY block; return the skeleton and the index of the 'MOTION' line."""
    i = _skip_blank(lines, 0)
    if i >= len(lines) or lines[i].strip().upper() != "HIERARCHY":
        raise BVHError(where, f"line {i + 1}", "expected 'HIERARCHY' as the first line")
    i += 1
    skel = _Skeleton()
    stack: list[int] = []      # joint indices whose '{' is open
    pending: int | None = None  # joint declared, its '{' not seen yet
    expect_offset: int | None = None
    saw_root = False

    while i < len(lines):
        s = lines[i].strip()
        lineno = i + 1
        i += 1
        if not s:
            continue
        word = s.split(None, 1)[0]
        upper = word.upper()
        if upper == "MOTION":
            i -= 1
            break
        if upper in ("ROOT", "JOINT", "END"):
            if pending is not None:
                raise BVHError(where, f"line {lineno}", f"expected '{{' after joint '{skel.names[pending]}'")
            if upper == "ROOT":
                if saw_root or stack:
                    raise BVHError(where, f"line {lineno}", "only one ROOT skeleton per file is supported")
                saw_root = True
            elif not stack:
                raise BVHError(where, f"line {lineno}", f"'{s}' outside of a joint block")
            name, opens = _joint_declaration(s, word, lineno, where)
            pending = skel.add(name, stack[-1] if stack else -1, upper == "END")
            if opens:
                stack.append(pending)
                expect_offset, pending = pending, None
        elif s.startswith("{"):
            if pending is None:
                raise BVHError(where, f"line {lineno}", "'{' without a joint")
            stack.append(pending)
            expect_offset, pending = pending, None
        elif s.startswith("}"):
            if not stack:
                raise BVHError(where, f"line {lineno}", "unbalanced '}'")
            j = stack.pop()
            if expect_offset == j:
                raise BVHError(where, f"line {lineno}", f"joint '{skel.names[j] or 'End Site'}' has no OFFSET")
        elif upper == "OFFSET":
            if not stack:
                raise BVHError(where, f"line {lineno}", "OFFSET outside of a joint block")
            skel.offsets[stack[-1]] = _offset(s, lineno, where)
            if expect_offset == stack[-1]:
                expect_offset = None
        elif upper == "CHANNELS":
            if not stack:
                raise BVHError(where, f"line {lineno}", "CHANNELS outside of a joint block")
            if skel.end_site[stack[-1]]:
                raise BVHError(where, f"line {lineno}", "an End Site cannot have CHANNELS")
            skel.channels[stack[-1]] = _channel_list(s, lineno, where)
        else:
            raise BVHError(where, f"line {lineno}", f"unexpected '{s[:60]}' in HIERARCHY")
    else:
        if stack or pending is not None:
            raise BVHError(where, f"line {len(lines)}", "the file ends inside an unclosed joint block")
        raise BVHError(where, f"line {len(lines)}", "no MOTION section")

    if pending is not None or stack:
        raise BVHError(where, f"line {i + 1}", "HIERARCHY ends with an unclosed joint block")
    if not skel.names:
        raise BVHError(where, f"line {i + 1}", "HIERARCHY has no ROOT joint")
    return skel, i


def _joint_declaration(s: str, word: str, lineno: int, where: str | None) -> tuple[str, bool]:
    """Name (prefix stripped; '' for an end site) and whether the line also opens the block."""
    if word.upper() == "END":
        if not s.lower().startswith("end site"):
            raise BVHError(where, f"line {lineno}", f"expected 'End Site', got '{s}'")
        return "", s[len("end site"):].strip().startswith("{")
    parts = s.split(None, 1)
    rest = parts[1].strip() if len(parts) > 1 else ""
    name = _MIXAMO_PREFIX.sub("", rest.rstrip("{").strip())
    if not name:
        raise BVHError(where, f"line {lineno}", f"{word} without a name")
    return name, rest.endswith("{")


def _offset(s: str, lineno: int, where: str | None) -> tuple[float, float, float]:
    try:
        vals = tuple(float(v) for v in s.split()[1:])
    except ValueError:
        raise BVHError(where, f"line {lineno}", f"OFFSET needs 3 numbers, got '{s}'") from None
    if len(vals) != 3 or not np.all(np.isfinite(vals)):
        raise BVHError(where, f"line {lineno}", f"OFFSET needs 3 finite numbers, got '{s}'")
    if max(abs(v) for v in vals) > MAX_ABS_VALUE:
        raise BVHError(where, f"line {lineno}", f"OFFSET values must be within +-{MAX_ABS_VALUE:g} (file units), "
                       f"got '{s[:80]}'")
    return vals  # type: ignore[return-value]


#: Largest magnitude of an OFFSET or channel value accepted: far beyond any real clip (a 10 km offset in
#: centimetres, 2800 turns of a joint), small enough that the skeleton's maths stays finite (1e308 made
#: the body fit's SVD fail).
MAX_ABS_VALUE = 1e6


def _channel_list(s: str, lineno: int, where: str | None) -> tuple[str, ...]:
    parts = s.split()[1:]
    try:
        count = int(parts[0])
    except (ValueError, IndexError):
        raise BVHError(where, f"line {lineno}", f"CHANNELS needs a count, got '{s}'") from None
    chans = tuple(parts[1:])
    if count != len(chans):
        raise BVHError(where, f"line {lineno}", f"CHANNELS says {count} channels but lists {len(chans)}")
    for c in chans:
        if len(c) != 9 or c[0].upper() not in _AXES or c[1:].lower() not in ("position", "rotation"):
            raise BVHError(where, f"line {lineno}", f"unknown channel '{c}' (expected e.g. Xposition, Zrotation)")
    return chans


def _parse_motion_header(lines: list[str], i: int, where: str | None) -> tuple[int, float, int, int]:
    """From the 'MOTION' line at ``i``: (frames, frame time, 1-based line of 'Frames:', first data row index)."""
    i = _skip_blank(lines, i + 1)
    frames_line = i + 1
    n_frames = _header_value(lines, i, "frames", int, where)
    i = _skip_blank(lines, i + 1)
    frame_time = _header_value(lines, i, "frame time", float, where)
    if n_frames < 1:
        raise BVHError(where, f"line {i}", f"'Frames: {n_frames}': a clip needs at least one frame")
    if not (frame_time > 0 and np.isfinite(frame_time)):
        raise BVHError(where, f"line {i + 1}", f"'Frame Time' must be a positive number of seconds, got {frame_time}")
    return n_frames, frame_time, frames_line, i + 1


def _channel_starts(channels: list[tuple[str, ...]]) -> np.ndarray:
    """First MOTION column of each joint's channels."""
    counts = np.array([len(c) for c in channels], dtype=np.int64)
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _skip_blank(lines: list[str], i: int) -> int:
    while i < len(lines) and not lines[i].strip():
        i += 1
    return i


def _header_value(lines: list[str], i: int, key: str, kind: type, where: str | None):
    if i >= len(lines):
        raise BVHError(where, f"line {i + 1}", f"missing '{key.title()}:' line after MOTION")
    s = lines[i].strip()
    head, sep, value = s.partition(":")
    if not sep or " ".join(head.lower().split()) != key:
        raise BVHError(where, f"line {i + 1}", f"expected '{key.title()}: <value>', got '{s[:60]}'")
    try:
        return kind(value.strip())
    except ValueError:
        raise BVHError(where, f"line {i + 1}", f"'{key.title()}' is not a valid number: '{value.strip()}'") from None


def _parse_motion_rows(lines: list[str], start: int, n_frames: int, n_channels: int, where: str | None,
                       frames_line: int) -> np.ndarray:
    rows = [ln for ln in lines[start:] if ln.strip()]
    if len(rows) != n_frames:
        raise BVHError(where, f"line {frames_line}",
                       f"'Frames: {n_frames}' but the MOTION block has {len(rows)} rows of data")
    if n_channels == 0:
        return np.zeros((n_frames, 0))
    try:  # numpy's C text parser: ~2 ms for 839 frames x 84 channels
        flat = np.loadtxt(rows, dtype=np.float64, ndmin=2, comments=None)
    except ValueError:
        flat = None
    if (flat is None or flat.shape != (n_frames, n_channels) or not np.isfinite(flat).all()
            or np.abs(flat).max(initial=0.0) > MAX_ABS_VALUE):
        # Slow path, only to name the offending line.
        k = 0
        for ln_no, ln in enumerate(lines[start:], start=start + 1):
            if not ln.strip():
                continue
            parts = ln.split()
            if len(parts) != n_channels:
                raise BVHError(where, f"line {ln_no}",
                               f"frame {k} has {len(parts)} values, the HIERARCHY declares {n_channels} channels")
            try:
                vals = np.array(parts, dtype=np.float64)
            except ValueError:
                raise BVHError(where, f"line {ln_no}", f"frame {k} holds a value that is not a number") from None
            if not np.isfinite(vals).all():
                raise BVHError(where, f"line {ln_no}", f"frame {k} holds a non-finite value (nan/inf)")
            if np.abs(vals).max(initial=0.0) > MAX_ABS_VALUE:
                raise BVHError(where, f"line {ln_no}", f"frame {k} holds a value beyond +-{MAX_ABS_VALUE:g}")
            k += 1
        raise BVHError(where, f"line {start + 1}", "malformed MOTION data")  # pragma: no cover - defensive
    return flat


def _name_end_sites(names: list[str], parents: list[int], end_site: list[bool]) -> None:
    taken = {n for n, e in zip(names, end_site) if not e}
    for j, is_end in enumerate(end_site):
        if not is_end:
            continue
        base = names[parents[j]] if parents[j] >= 0 else "Root"
        name = f"{base}End"
        if name in taken:
            name = f"{base}_EndSite"
        k = 2
        candidate = name
        while candidate in taken:
            candidate = f"{name}{k}"
            k += 1
        names[j] = candidate
        taken.add(candidate)


_cache: dict[tuple[str, int, int], BVH] = {}
_cache_lock = threading.Lock()
_CACHE_MAX = 8


def load_bvh(path: str | Path) -> BVH:
    """Read and parse a BVH file (cached by path, size and modification time; the result is immutable)."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise BVHError(p, None, "file not found") from None
    except OSError as exc:
        raise BVHError(p, None, f"cannot read: {exc}") from None
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None:
        return hit
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise BVHError(p, None, f"cannot read: {exc}") from None
    bvh = parse_bvh(text, p)
    with _cache_lock:
        if len(_cache) >= _CACHE_MAX:
            _cache.pop(next(iter(_cache)))
        _cache[key] = bvh
    return bvh


__all__ = ["BVH", "END_SITE_ALIAS", "axis_rotation", "euler_to_matrix", "euler_to_quaternion", "load_bvh", "parse_bvh",
           "quaternion_multiply", "quaternion_rotate", "quaternion_to_matrix"]
