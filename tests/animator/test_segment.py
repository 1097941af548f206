"""animator.segment (mask of a drawing on paper) and animator.skeleton (16 joints from COCO)."""
from __future__ import annotations

import numpy as np
import pytest
import yaml
from PIL import Image, ImageDraw

from animator import CharacterError
from animator.character import SKELETON_JOINTS
from animator.segment import adaptive_threshold, largest_component, segment_drawing
from animator.skeleton import COCO_KEYPOINTS, skeleton_from_client, skeleton_from_coco, transform_skeleton
from tests.conftest import CHARACTERS


def _texture_and_mask(name: str) -> tuple[np.ndarray, np.ndarray]:
    rgb = np.asarray(Image.open(CHARACTERS / name / "texture.png").convert("RGB"))
    mask = np.asarray(Image.open(CHARACTERS / name / "mask.png").convert("L")) > 127
    return rgb, mask


@pytest.mark.parametrize("name", ["char1", "char2", "char3", "char4"])
def test_segmentation_matches_animated_drawings_masks(name: str) -> None:
    # The fixture masks were made by AnimatedDrawings' OpenCV segmentation of these textures: equal.
    rgb, expected = _texture_and_mask(name)
    mask = segment_drawing(rgb)
    iou = (mask & expected).sum() / (mask | expected).sum()
    assert mask.dtype == bool and mask.shape == expected.shape
    assert (mask == expected).all(), f"{(mask != expected).sum()} pixels differ (IoU {iou:.4f})"


def test_outlined_figure_is_filled_and_stray_marks_dropped() -> None:
    page = Image.new("RGB", (300, 300), "white")
    draw = ImageDraw.Draw(page)
    draw.ellipse((60, 60, 220, 240), outline="black", width=4)   # an outlined body: inside is paper-white
    draw.rectangle((260, 20, 266, 26), fill="black")              # a stray mark
    mask = segment_drawing(np.asarray(page))
    assert mask[150, 140], "the inside of the outline must be part of the character"
    assert not mask[23, 263], "a small separate mark is not the character"
    assert not mask[10, 10] and not mask[290, 290]
    labels = largest_component(mask)
    assert (labels == mask).all()


def test_uneven_lighting_does_not_become_character() -> None:
    # A page that darkens smoothly from left to right (phone photo shadow) with a dark stick figure.
    x = np.linspace(250, 150, 400)[None, :].repeat(400, axis=0)
    gray = x.copy()
    gray[100:300, 195:205] = 40
    gray[150:160, 120:280] = 40
    mask = segment_drawing(gray.astype(np.uint8))
    assert mask[200, 200] and mask[155, 130]
    assert mask.mean() < 0.1, "the shadow gradient must not be segmented"


def test_blank_page_gives_empty_mask() -> None:
    assert not segment_drawing(np.full((120, 90, 3), 255, np.uint8)).any()
    assert not segment_drawing(np.zeros((2, 2, 3), np.uint8)).any()


def test_adaptive_threshold_rejects_even_block() -> None:
    with pytest.raises(ValueError):
        adaptive_threshold(np.zeros((10, 10)), block_size=10)


def _char1_joints() -> dict[str, tuple[float, float]]:
    cfg = yaml.safe_load((CHARACTERS / "char1" / "char_cfg.yaml").read_text())
    return {j["name"]: tuple(j["loc"]) for j in cfg["skeleton"]}


def test_coco_to_skeleton_follows_animated_drawings() -> None:
    joints = _char1_joints()
    # COCO keypoints that AnimatedDrawings would turn into char1's skeleton.
    on = {"nose": "neck", "left_eye": "neck", "right_eye": "neck", "left_ear": "neck", "right_ear": "neck",
          "left_wrist": "left_hand", "right_wrist": "right_hand", "left_ankle": "left_foot",
          "right_ankle": "right_foot"}
    kps = np.array([[*joints[on.get(k, k)], 0.9] for k in COCO_KEYPOINTS])
    skeleton = skeleton_from_coco(kps)
    assert [j.name for j in skeleton] == list(SKELETON_JOINTS)
    got = {j.name: j.loc for j in skeleton}
    for name in SKELETON_JOINTS:
        assert np.allclose(got[name], joints[name], atol=1.0), name
    parents = {j.name: j.parent for j in skeleton}
    assert parents["root"] is None and parents["hip"] == "root" and parents["left_hand"] == "left_elbow"
    # root/hip: hip midpoint; torso: shoulder midpoint (not any single keypoint)
    kps2 = kps.copy()
    kps2[11, :2] = (100, 400)
    kps2[12, :2] = (200, 410)
    got2 = {j.name: j.loc for j in skeleton_from_coco(kps2)}
    assert got2["root"] == got2["hip"] == (150.0, 405.0)


def test_coco_offset_scale_and_bad_input() -> None:
    kps = np.tile([[10.0, 20.0]], (17, 1))
    sk = skeleton_from_coco(kps, offset=(5, 5), scale=2.0)
    assert all(j.loc == (30.0, 50.0) for j in sk)
    with pytest.raises(CharacterError):
        skeleton_from_coco(np.zeros((16, 2)))
    bad = kps.copy()
    bad[3, 0] = np.nan
    with pytest.raises(CharacterError):
        skeleton_from_coco(bad)


def test_client_joints_both_formats() -> None:
    joints = _char1_joints()
    as_map = skeleton_from_client({k: list(v) for k, v in joints.items()})
    cfg = yaml.safe_load((CHARACTERS / "char1" / "char_cfg.yaml").read_text())
    as_list = skeleton_from_client(cfg["skeleton"])
    as_cfg = skeleton_from_client(cfg)
    assert {j.name: j.loc for j in as_map} == {j.name: j.loc for j in as_list} == {j.name: j.loc for j in as_cfg}
    moved = transform_skeleton(as_map, offset=(-10, -20), scale=0.5)
    assert moved[0].loc == ((joints["root"][0] - 10) * 0.5, (joints["root"][1] - 20) * 0.5)


@pytest.mark.parametrize("spec, fragment", [
    ({"root": [1, 2]}, "missing"),
    ({**{n: [1, 2] for n in SKELETON_JOINTS}, "tail": [0, 0]}, "unknown: tail"),
    ({**{n: [1, 2] for n in SKELETON_JOINTS}, "neck": ["a", 2]}, "joints.neck"),
    ({**{n: [1, 2] for n in SKELETON_JOINTS}, "neck": [1]}, "joints.neck"),
    ("root", "expected a mapping"),
    ([{"name": "root", "loc": [1, 2], "parent": None}], "missing joints"),
])
def test_client_joints_errors_name_the_problem(spec, fragment: str) -> None:
    with pytest.raises(CharacterError) as err:
        skeleton_from_client(spec)
    assert fragment in str(err.value)
