"""Skeletons other than the 16-joint humanoid: a character we make from char1 by drawing a second
left arm onto its texture and mask, with its own joints and retarget mappings."""
from __future__ import annotations

import io
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

import animator
from animator.config import load_motion_config, load_retarget_config
from animator.errors import ConfigError
from animator.retarget import retarget
from tests.conftest import AD_EXAMPLES
from tests.support.three_arms import ARM, three_arm_retarget, three_armed_char1

DAB = AD_EXAMPLES / "config" / "motion" / "dab.yaml"
FAIR1 = AD_EXAMPLES / "config" / "retarget" / "fair1_ppf.yaml"
@pytest.fixture(scope="module")
def three_arms(tmp_path_factory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("three_arms")
    return three_armed_char1(tmp / "char"), three_arm_retarget(tmp / "retarget.yaml")


def _angles(m, a: str, b: str) -> np.ndarray:
    d = m.joint(b) - m.joint(a)
    return np.arctan2(d[:, 1], d[:, 0])


def test_extra_arm_is_posed_like_the_limb_it_is_mapped_to(three_arms):
    char_dir, rcfg = three_arms
    char = animator.load_character(char_dir)
    assert len(char.skeleton) == 19
    m = retarget(char, load_motion_config(DAB), load_retarget_config(rcfg))
    assert m.positions.shape == (339, 19, 2)
    # both arms follow the same BVH bones, so each bone points the same way in every frame
    for (a, b), (a2, b2) in ((("left_elbow", "left_hand"), ("left_elbow2", "left_hand2")),
                             (("left_shoulder", "left_elbow"), ("left_shoulder2", "left_elbow2"))):
        diff = np.angle(np.exp(1j * (_angles(m, a, b) - _angles(m, a2, b2))))
        assert np.abs(diff).max() < 1e-9
    # and the arm really moves (it is not just carried along rigidly)
    assert np.ptp(_angles(m, "left_elbow2", "left_hand2")) > 1.0
    # bones keep the drawn lengths
    drawn = np.hypot(*np.subtract(ARM["left_hand2"], ARM["left_elbow2"]))
    np.testing.assert_allclose(np.linalg.norm(m.joint("left_hand2") - m.joint("left_elbow2"), axis=1), drawn)


def test_extra_arm_is_drawn_where_its_hand_is_posed(three_arms):
    char_dir, rcfg = three_arms
    char = animator.load_character(char_dir)
    res = animator.render(char, load_motion_config(DAB), load_retarget_config(rcfg),
                          animator.RenderOptions(width=300, height=300, max_frames=12, background=(255, 255, 255),
                                                 colours=64, merge=0))
    hand = res.motion.joint("left_hand2") * res.scale + res.offsets   # canvas pixels per frame
    elbow = res.motion.joint("left_elbow2") * res.scale + res.offsets
    with Image.open(io.BytesIO(res.data)) as im:
        for f in range(res.frame_count):
            im.seek(f)
            rgb = np.asarray(im.convert("RGB")).astype(int)
            red = (rgb[..., 0] > rgb[..., 1] + 60) & (rgb[..., 0] > rgb[..., 2] + 60)  # char1 has no red
            for p in (hand[f], 0.5 * (hand[f] + elbow[f])):  # the hand and the middle of the forearm
                x, y = int(p[0]), int(p[1])
                assert red[y - 3:y + 4, x - 3:x + 4].any(), f"frame {f}: no red arm at {p}"


def test_an_unmapped_limb_end_is_an_error_that_names_it(three_arms, tmp_path):
    char = animator.load_character(three_arms[0])
    rcfg = load_retarget_config(three_arm_retarget(tmp_path / "r.yaml", drop="left_hand2"))
    with pytest.raises(ConfigError, match=r"char_joint_bvh_joints_mapping.*'left_hand2' not mapped"):
        retarget(char, load_motion_config(DAB), rcfg)


def test_a_mapping_to_a_missing_bvh_joint_is_an_error_that_names_both(three_arms, tmp_path):
    char = animator.load_character(three_arms[0])
    rcfg = load_retarget_config(three_arm_retarget(tmp_path / "r.yaml", bvh_for_hand2="LeftHand7"))
    with pytest.raises(ConfigError,
                       match=r"char_joint_bvh_joints_mapping\.left_hand2.*BVH joint 'LeftHand7' not found"):
        retarget(char, load_motion_config(DAB), rcfg)


def test_a_mapping_for_a_joint_the_drawing_lacks_names_it(tmp_path):
    folder = tmp_path / "char"
    shutil.copytree(AD_EXAMPLES / "characters" / "char1", folder)
    cfg = yaml.safe_load((folder / "char_cfg.yaml").read_text())
    cfg["skeleton"] = [e for e in cfg["skeleton"] if e["name"] != "left_hand"]
    (folder / "char_cfg.yaml").write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError,
                       match=r"fair1_ppf.yaml: field .*character joint 'left_hand' not in the character's skeleton"):
        retarget(animator.load_character(folder), load_motion_config(DAB), load_retarget_config(FAIR1))
