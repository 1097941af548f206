"""animator.character: reading AnimatedDrawings character folders and checking skeletons."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from animator import Character, CharacterError, Joint, load_character
from animator.character import SKELETON_JOINTS, parents_first
from tests.conftest import CHARACTERS


@pytest.mark.parametrize("name", ["char1", "char2", "char3", "char4"])
def test_fixture_characters_load_with_their_joints(name: str) -> None:
    char = load_character(CHARACTERS / name)
    cfg = yaml.safe_load((CHARACTERS / name / "char_cfg.yaml").read_text())
    assert char.size == (cfg["width"], cfg["height"])
    assert [j.name for j in char.skeleton] == [e["name"] for e in cfg["skeleton"]]
    assert set(SKELETON_JOINTS) <= set(char.joint_locations())
    assert char.mask.dtype == bool and 0 < char.mask.mean() < 1


def _copy(tmp_path: Path, name: str = "char1") -> Path:
    dst = tmp_path / name
    shutil.copytree(CHARACTERS / name, dst)
    return dst


def test_children_listed_before_parents_are_accepted_like_animated_drawings(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    cfg = yaml.safe_load((folder / "char_cfg.yaml").read_text())
    cfg["skeleton"] = cfg["skeleton"][::-1]
    (folder / "char_cfg.yaml").write_text(yaml.safe_dump(cfg))
    char = load_character(folder)
    order = [j.name for j in char.skeleton]
    for j in char.skeleton:
        if j.parent is not None:
            assert order.index(j.parent) < order.index(j.name)
    # siblings keep their listed (here: reversed) order, which decides AnimatedDrawings' traversal
    torso_children = [j.name for j in char.skeleton if j.parent == "torso"]
    assert torso_children == ["left_shoulder", "right_shoulder", "neck"]


def test_parents_first_rejects_unknown_parent_duplicates_and_cycles() -> None:
    with pytest.raises(CharacterError, match="unknown parent 'nope'"):
        parents_first([Joint("root", (0, 0), None), Joint("a", (1, 1), "nope")])
    with pytest.raises(CharacterError, match="duplicate joint names: a"):
        parents_first([Joint("a", (0, 0), None), Joint("a", (1, 1), None)])
    with pytest.raises(CharacterError, match="cycle"):
        parents_first([Joint("root", (0, 0), None), Joint("a", (1, 1), "b"), Joint("b", (2, 2), "a")])


def test_bad_character_folders_name_the_file_and_field(tmp_path: Path) -> None:
    with pytest.raises(CharacterError, match=r"char_cfg.yaml: file not found"):
        load_character(tmp_path)
    folder = _copy(tmp_path)
    cfg = yaml.safe_load((folder / "char_cfg.yaml").read_text())
    cfg["width"] = 10
    (folder / "char_cfg.yaml").write_text(yaml.safe_dump(cfg))
    with pytest.raises(CharacterError, match=r"field 'width'"):
        load_character(folder)
    cfg["width"] = 508
    for e in cfg["skeleton"]:  # the same tree with its top joint called 'base'
        e["name"], e["parent"] = ("base" if e["name"] == "root" else e["name"]), ("base" if e["parent"] == "root" else e["parent"])
    (folder / "char_cfg.yaml").write_text(yaml.safe_dump(cfg))
    with pytest.raises(CharacterError, match=r"field 'skeleton'.*missing joint 'root'"):
        load_character(folder)
    (folder / "mask.png").write_bytes(b"not a png")
    with pytest.raises(CharacterError, match=r"mask.png: not a readable image"):
        load_character(folder)


def test_character_rejects_empty_mask_and_size_mismatch() -> None:
    joints = [Joint(n, (1.0, 1.0), None if i == 0 else "root") for i, n in enumerate(SKELETON_JOINTS)]
    tex = np.zeros((4, 5, 4), np.uint8)
    with pytest.raises(CharacterError, match="mask is empty"):
        Character(tex, np.zeros((4, 5), bool), joints)
    with pytest.raises(CharacterError, match="differs from texture size"):
        Character(tex, np.ones((5, 4), bool), joints)


def test_any_tree_under_root_is_a_skeleton_but_root_and_a_bone_are_needed() -> None:
    tex = np.zeros((4, 5, 4), np.uint8)
    mask = np.ones((4, 5), bool)
    tail = Character(tex, mask, [Joint("root", (1.0, 1.0), None), Joint("tail", (3.0, 2.0), "root")])
    assert [j.name for j in tail.skeleton] == ["root", "tail"]
    with pytest.raises(CharacterError, match="at least one joint under 'root'"):
        Character(tex, mask, [Joint("root", (1.0, 1.0), None)])
    with pytest.raises(CharacterError, match="'root' must have no parent"):
        Character(tex, mask, [Joint("a", (1.0, 1.0), None), Joint("root", (2.0, 2.0), "a")])
