"""A drawn character: its texture, its mask and its skeleton.

Coordinates: every joint location is in the drawing's own pixel frame, origin at the texture's
top-left corner, x to the right, y *down* (the frame of ``char_cfg.yaml``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import yaml
from PIL import Image

from .config import load_yaml
from .errors import CharacterError

#: Most joints a skeleton may have. AnimatedDrawings' own characters have 16 to a few dozen; the
#: cost of a render grows with the joint count (bones per texel, ARAP handles), so a skeleton
#: is bounded before any work starts.
MAX_JOINTS = 128
#: Longest joint name, in characters.
MAX_JOINT_NAME = 64

#: The 16 joints of the skeleton made from COCO keypoints (:mod:`animator.skeleton`) and of
#: AnimatedDrawings' example characters, parents before children. Other skeletons work too: any tree
#: under a joint called ``root`` that the retarget config maps.
SKELETON_JOINTS: tuple[str, ...] = (
    "root", "hip", "torso", "neck",
    "right_shoulder", "right_elbow", "right_hand",
    "left_shoulder", "left_elbow", "left_hand",
    "right_hip", "right_knee", "right_foot",
    "left_hip", "left_knee", "left_foot",
)


@dataclass(frozen=True)
class Joint:
    """One skeleton joint: ``loc`` is (x, y) in texture pixels, y down; ``parent`` is None for the root."""

    name: str
    loc: tuple[float, float]
    parent: str | None


@dataclass
class Character:
    """A rigged drawing.

    Attributes:
        texture: RGBA uint8 array, shape (H, W, 4).
        mask: bool array, shape (H, W); True where the character is.
        skeleton: joints in any order (as AnimatedDrawings accepts); stored parents-first, siblings
            kept in their given order (AnimatedDrawings visits children in that order). Any tree
            works whose top joint is called ``root`` (AnimatedDrawings' rig starts there) with at
            least one joint under it; which joints move is the retarget config's business.
    """

    texture: np.ndarray
    mask: np.ndarray
    skeleton: list[Joint]

    def __post_init__(self) -> None:
        if self.texture.ndim != 3 or self.texture.shape[2] != 4 or self.texture.dtype != np.uint8:
            raise CharacterError(None, "texture", f"expected an RGBA uint8 image, got {self.texture.dtype} "
                                                  f"{self.texture.shape}")
        if self.mask.shape != self.texture.shape[:2]:
            raise CharacterError(None, "mask", f"mask size {self.mask.shape[::-1]} differs from texture size "
                                               f"{self.texture.shape[1::-1]}")
        self.mask = self.mask.astype(bool, copy=False)
        if not self.mask.any():
            raise CharacterError(None, "mask", "mask is empty: no character pixels")
        check_joints(self.skeleton, self.size)
        self.skeleton = parents_first(self.skeleton)
        root = next((j for j in self.skeleton if j.name == "root"), None)
        if root is None:
            raise CharacterError(None, "skeleton", "missing joint 'root' (the top of the skeleton, as in "
                                                   "AnimatedDrawings)")
        if root.parent is not None:
            raise CharacterError(None, "skeleton", f"joint 'root' must have no parent, has '{root.parent}'")
        if len(self.skeleton) < 2:
            raise CharacterError(None, "skeleton", "needs at least one joint under 'root' (a bone to move)")

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) in pixels."""
        return int(self.texture.shape[1]), int(self.texture.shape[0])

    def joint_locations(self) -> dict[str, np.ndarray]:
        """Joint name -> (x, y) float64 array in texture pixels, y down."""
        return {j.name: np.asarray(j.loc, dtype=np.float64) for j in self.skeleton}


def check_joints(joints: Sequence[Joint], size: tuple[int, int] | None = None) -> None:
    """Bound a skeleton before any work: at most :data:`MAX_JOINTS` joints, names of at most
    :data:`MAX_JOINT_NAME` characters, finite locations and, given the texture ``size`` (width,
    height), locations no farther outside the texture than its own size.

    Raises CharacterError naming the first joint out of bounds.
    """
    if len(joints) > MAX_JOINTS:
        raise CharacterError(None, "skeleton", f"{len(joints)} joints; at most {MAX_JOINTS} are allowed")
    for j in joints:
        if not isinstance(j.name, str) or not 0 < len(j.name) <= MAX_JOINT_NAME:
            raise CharacterError(None, "skeleton", f"joint names must be 1 to {MAX_JOINT_NAME} characters, "
                                 f"got {str(j.name)[:MAX_JOINT_NAME]!r}...")
        x, y = j.loc
        if not (np.isfinite(x) and np.isfinite(y)):
            raise CharacterError(None, f"skeleton.{j.name}", "coordinates must be finite numbers")
        if size is not None:
            w, h = size
            if not (-w <= x <= 2 * w and -h <= y <= 2 * h):
                raise CharacterError(None, f"skeleton.{j.name}", f"location ({x:g}, {y:g}) lies far outside "
                                     f"the {w}x{h} drawing")


def parents_first(joints: Sequence[Joint]) -> list[Joint]:
    """Order joints so every parent precedes its children, keeping the given order otherwise.

    The order is that of repeated passes over the list, each placing (in list order) the joints
    whose parent is already placed: a list that is already parents-first comes back unchanged.
    It is computed in O(n log n): a joint is placed in its parent's pass when it comes after its
    parent in the list, else in the pass after.

    Raises CharacterError for duplicate names, unknown parents or cycles.
    """
    index: dict[str, int] = {}
    dupes: set[str] = set()
    for i, j in enumerate(joints):
        if j.name in index:
            dupes.add(j.name)
        index[j.name] = i
    if dupes:
        raise CharacterError(None, "skeleton", f"duplicate joint names: {', '.join(sorted(dupes))}")
    parent_of: list[int] = []
    for j in joints:
        if j.parent is not None and j.parent not in index:
            raise CharacterError(None, "skeleton", f"joint '{j.name}' has unknown parent '{j.parent}'")
        parent_of.append(-1 if j.parent is None else index[j.parent])
    passes = [-1] * len(joints)  # -1: not computed yet
    for start in range(len(joints)):
        chain: list[int] = []
        on_chain: set[int] = set()
        i = start
        while i >= 0 and passes[i] < 0:  # walk up to a root or to a joint already done
            if i in on_chain:
                raise CharacterError(None, "skeleton", "parent links form a cycle: "
                                     + ", ".join(joints[k].name for k in chain[chain.index(i):]))
            chain.append(i)
            on_chain.add(i)
            i = parent_of[i]
        for k in reversed(chain):  # back down: each joint's pass from its parent's
            p = parent_of[k]
            passes[k] = 0 if p < 0 else passes[p] + (1 if p > k else 0)
    order = sorted(range(len(joints)), key=lambda k: (passes[k], k))
    return [joints[k] for k in order]


def skeleton_from_config(entries: Sequence[Mapping[str, Any]], path: str | Path | None = None) -> list[Joint]:
    """Parse the ``skeleton`` list of a ``char_cfg.yaml`` (``{name, loc: [x, y], parent}`` per joint)."""
    if len(entries) > MAX_JOINTS:
        raise CharacterError(path, "skeleton", f"{len(entries)} joints; at most {MAX_JOINTS} are allowed")
    joints: list[Joint] = []
    for i, e in enumerate(entries):
        try:
            name = str(e["name"])
            x, y = (float(v) for v in e["loc"])
            parent = e.get("parent")
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise CharacterError(path, f"skeleton[{i}]",
                                 f"expected {{name, loc: [x, y], parent}}, got {_short_repr(e)}") from exc
        joints.append(Joint(name, (x, y), None if parent is None else str(parent)))
    return joints


def load_character(folder: str | Path) -> Character:
    """Read an AnimatedDrawings character folder (``char_cfg.yaml``, ``texture.png``, ``mask.png``),
    or its ``char_cfg.yaml`` given as a file (texture and mask beside it)."""
    folder = Path(folder)
    cfg_path = folder / "char_cfg.yaml"
    if folder.is_file():  # a scene file names the char_cfg.yaml itself (any file name)
        cfg_path, folder = folder, folder.parent
    try:
        cfg = load_yaml(cfg_path.read_text())
    except FileNotFoundError as exc:
        raise CharacterError(cfg_path, None, "file not found") from exc
    except yaml.YAMLError as exc:
        raise CharacterError(cfg_path, None, f"not valid YAML: {exc}") from exc
    if not isinstance(cfg, dict) or "skeleton" not in cfg:
        raise CharacterError(cfg_path, "skeleton", "missing")
    skeleton = skeleton_from_config(cfg["skeleton"], cfg_path)
    texture = _read_image(folder / "texture.png", "RGBA")
    mask = _read_image(folder / "mask.png", "L") > 127
    try:
        char = Character(texture, mask, skeleton)
    except CharacterError as exc:
        raise CharacterError(folder, exc.field, exc.message) from exc
    for key, actual in (("width", char.size[0]), ("height", char.size[1])):
        if key in cfg and int(cfg[key]) != actual:
            raise CharacterError(cfg_path, key, f"says {cfg[key]} but texture.png is {actual}")
    return char


def _read_image(path: Path, mode: str) -> np.ndarray:
    try:
        with Image.open(path) as im:
            return np.asarray(im.convert(mode))
    except FileNotFoundError as exc:
        raise CharacterError(path, None, "file not found") from exc
    except OSError as exc:
        raise CharacterError(path, None, f"not a readable image: {exc}") from exc


def _short_repr(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
