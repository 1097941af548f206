"""Bounds on untrusted BVH files: joints and frames are checked before the frames are read."""
from __future__ import annotations

import pytest

from animator.auto_retarget import configs_for
from animator.bvh import parse_bvh
from animator.errors import BVHError, ConfigError
from tests.conftest import BVH_DIR

DAB = BVH_DIR / "fair1" / "dab.bvh"


def test_joint_and_frame_limits_name_the_line():
    text = DAB.read_text()
    bvh = parse_bvh(text, max_joints=100, max_frames=339)
    assert bvh.n_frames == 339
    with pytest.raises(BVHError, match=r"field 'line 165': HIERARCHY has \d+ joints .*at most 20"):
        parse_bvh(text, max_joints=20)
    with pytest.raises(BVHError, match=r"field 'line 166': 'Frames: 339': at most 300 frames"):
        parse_bvh(text, max_frames=300)


def test_frame_limit_is_checked_before_the_rows_are_read():
    # a header claiming a billion frames with no rows fails on the limit, not on the (absent) rows
    head = DAB.read_text().split("Frames:")[0]
    with pytest.raises(BVHError, match="at most 1000 frames"):
        parse_bvh(head + "Frames: 1000000000\nFrame Time: 0.01\n", max_frames=1000)


def test_a_bvh_clip_with_a_frame_range_derives_both_configs(tmp_path):
    motion, retarget = configs_for(DAB, None, 10, 50)
    assert (motion.start_frame_idx, motion.end_frame_idx, motion.up) == (10, 50, "+z")
    assert dict(retarget.char_joint_bvh_joints_mapping)["left_hand"] == ("LeftForeArm", "LeftHand")
    with pytest.raises(ConfigError, match="start_frame_idx.*empty"):
        configs_for(DAB, None, 400)
