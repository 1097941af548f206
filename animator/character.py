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

from .errors import CharacterError

#: The 16 joints of the skeleton made from COCO keypoints (:mod:`animator.photo_skeleton`) and of
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
            raise CharacterError(None, "texture", f"expected an RGBA uint8 image, got {self.texture.dtype} {self.texture.shape}")
        if self.mask.shape != self.texture.shape[:2]:
            raise CharacterError(None, "mask", f"mask size {self.mask.shape[::-1]} differs from texture size {self.texture.shape[1::-1]}")
        self.mask = self.mask.astype(bool, copy=False)
        if not self.mask.any():
            raise CharacterError(None, "mask", "mask is empty: no character pixels")
        self.skeleton = parents_first(self.skeleton)
        root = next((j for j in self.skeleton if j.name == "root"), None)
        if root is None:
            raise CharacterError(None, "skeleton", "missing joint 'root' (the top of the skeleton, as in AnimatedDrawings)")
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


def parents_first(joints: Sequence[Joint]) -> list[Joint]:
    """Order joints so every parent precedes its children, keeping the given order otherwise.

    Raises CharacterError for duplicate names, unknown parents or cycles.
    """
    names = [j.name for j in joints]
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise CharacterError(None, "skeleton", f"duplicate joint names: {', '.join(dupes)}")
    for j in joints:
        if j.parent is not None and j.parent not in names:
            raise CharacterError(None, "skeleton", f"joint '{j.name}' has unknown parent '{j.parent}'")
    ordered: list[Joint] = []
    placed: set[str] = set()
    pending = list(joints)
    while pending:  # one pass when the list is already parents-first, so its order is kept
        waiting = []
        for j in pending:
            if j.parent is None or j.parent in placed:
                ordered.append(j)
                placed.add(j.name)
            else:
                waiting.append(j)
        if len(waiting) == len(pending):
            raise CharacterError(None, "skeleton", "parent links form a cycle: " + ", ".join(j.name for j in waiting))
        pending = waiting
    return ordered


def skeleton_from_config(entries: Sequence[Mapping[str, Any]], path: str | Path | None = None) -> list[Joint]:
    """Parse the ``skeleton`` list of a ``char_cfg.yaml`` (``{name, loc: [x, y], parent}`` per joint)."""
    joints: list[Joint] = []
    for i, e in enumerate(entries):
        try:
            name = str(e["name"])
            x, y = (float(v) for v in e["loc"])
            parent = e.get("parent")
        except (KeyError, TypeError, ValueError) as exc:
            raise CharacterError(path, f"skeleton[{i}]", f"expected {{name, loc: [x, y], parent}}, got {e!r}") from exc
        joints.append(Joint(name, (x, y), None if parent is None else str(parent)))
    return joints


def load_character(folder: str | Path) -> Character:
    """Read an AnimatedDrawings character folder (``char_cfg.yaml``, ``texture.png``, ``mask.png``)."""
    folder = Path(folder)
    cfg_path = folder / "char_cfg.yaml"
    try:
        cfg = yaml.safe_load(cfg_path.read_text())
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
