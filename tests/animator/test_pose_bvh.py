"""A person's pose track -> BVH (animator.video.landmarks, animator.video.pose_bvh, animator.bvh_write).

The round trip needs no video: library clips' joints become the 33 landmarks the pose model would
give, the landmarks become a BVH clip on our fixed skeleton, and both clips are retargeted onto
char1 with derived configs (what a person's upload gets).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import animator
from animator.auto_retarget import derive_motion_config, derive_retarget_config, find_body
from animator.bvh import BVH, euler_to_matrix, load_bvh, parse_bvh
from animator.bvh_write import bvh_text, matrix_to_euler_zxy
from animator.errors import NoPersonError
from animator.retarget import retarget, up_rotation
from animator.video.landmarks import INDEX, N_LANDMARKS, PoseTrack, bridge_gaps, clean_track, smooth, usable_span
from animator.video.pose_bvh import SKELETON, track_to_bvh
from tests.conftest import AD_REFERENCE, BVH_DIR, CHAR1

CLIPS = sorted(BVH_DIR.glob("*/*.bvh")) + [AD_REFERENCE / "mixamo_style_dab.bvh"]
#: BVH file units (centimetres) -> the pose model's axes: metres, x right, y down, z away from the camera.
_TO_MODEL = np.array([0.01, -0.01, -0.01])


def clip_landmarks(bvh: BVH) -> np.ndarray:
    """(F, 33, 3) landmarks the pose model would give for the clip's person (model axes, metres).

    Joints map to their landmarks by body role (:func:`animator.auto_retarget.find_body`); the ears
    sit either side of the head joint along the shoulder line, the nose in front of it, the hand
    landmarks at the hand's tip (or beyond the wrist), the toes at the toe joint.
    """
    body = find_body(bvh)
    w = bvh.world_positions(nonroot_translations=False) @ up_rotation(derive_motion_config(bvh, "x").up).T

    def at(name: str) -> np.ndarray:
        return w[:, bvh.index(name)]

    lsh, rsh = at(body.arms["left"].upper), at(body.arms["right"].upper)
    across = lsh - rsh
    width = np.linalg.norm(across, axis=-1, keepdims=True)
    up = (lsh + rsh) / 2 - (at(body.legs["left"].upper) + at(body.legs["right"].upper)) / 2
    fwd = np.cross(across, up)
    fwd /= np.linalg.norm(fwd, axis=-1, keepdims=True)
    head = at(body.head)
    out = np.repeat(head[:, None], N_LANDMARKS, axis=1)
    out[:, INDEX["nose"]] = head + 0.3 * width * fwd
    out[:, INDEX["left_ear"]] = head + 0.2 * across
    out[:, INDEX["right_ear"]] = head - 0.2 * across
    for side in ("left", "right"):
        arm, leg = body.arms[side], body.legs[side]
        tip = at(arm.tip) if arm.tip else at(arm.end) + 0.3 * (at(arm.end) - at(arm.lower))
        toe = at(leg.tip) if leg.tip else at(leg.end) + 0.3 * width * fwd
        for landmark, point in (("shoulder", at(arm.upper)), ("elbow", at(arm.lower)), ("wrist", at(arm.end)),
                                ("pinky", tip), ("index", tip), ("thumb", tip), ("hip", at(leg.upper)),
                                ("knee", at(leg.lower)), ("ankle", at(leg.end)), ("heel", at(leg.end)),
                                ("foot_index", toe)):
            out[:, INDEX[f"{side}_{landmark}"]] = point
    return out * _TO_MODEL


def _height(char: animator.Character) -> int:
    """The drawn figure's height in pixels (its mask's rows)."""
    rows = np.flatnonzero(char.mask.any(axis=1))
    return int(rows[-1] - rows[0] + 1)


def _pose_on_char1(path: Path) -> np.ndarray:
    bvh = load_bvh(path)
    return retarget(animator.load_character(CHAR1), derive_motion_config(bvh, path),
                    derive_retarget_config(bvh)).positions


def _round_trip_error(clip: Path, tmp_path: Path, landmarks: np.ndarray | None = None) -> np.ndarray:
    """Per frame and char1 joint, the distance between the two retargeted poses in % of char1's height."""
    bvh = load_bvh(clip)
    lm = clip_landmarks(bvh) if landmarks is None else landmarks
    made = track_to_bvh(PoseTrack(lm, np.ones(len(lm), bool), 1.0 / bvh.frame_time))
    out = tmp_path / "from_landmarks.bvh"
    out.write_text(made.text)
    a, b = _pose_on_char1(clip), _pose_on_char1(out)
    return np.linalg.norm(a - b, axis=-1) / _height(animator.load_character(CHAR1)) * 100


@pytest.mark.parametrize("clip", CLIPS, ids=lambda p: p.stem)
def test_round_trip_through_landmarks_poses_char1_like_the_clip(clip, tmp_path):
    err = _round_trip_error(clip, tmp_path)
    assert np.median(err) <= 2.0 and np.percentile(err, 95) <= 5.0, (np.median(err), np.percentile(err, 95))


def test_the_round_trip_bar_catches_a_mirrored_person(tmp_path):
    """The bar is not loose: the same landmarks with left and right swapped (a mirrored video) fail it."""
    clip = BVH_DIR / "fair1" / "dab.bvh"
    lm = clip_landmarks(load_bvh(clip))
    swap = list(range(N_LANDMARKS))
    for name, i in INDEX.items():
        if name.startswith("left_"):
            j = INDEX["right_" + name[5:]]
            swap[i], swap[j] = j, i
    err = _round_trip_error(clip, tmp_path, lm[:, swap])
    assert np.median(err) > 2.0 or np.percentile(err, 95) > 5.0


def test_the_clip_is_a_recognised_humanoid_with_root_motion_from_the_hips():
    bvh = load_bvh(BVH_DIR / "fair1" / "jumping.bvh")
    lm = clip_landmarks(bvh)
    made = parse_bvh(track_to_bvh(PoseTrack(lm, np.ones(len(lm), bool), 1.0 / bvh.frame_time),
                                  smooth_sigma_s=0).text)
    assert [n for n, end in zip(made.joint_names, made.end_site) if not end] == [
        b.name for b in SKELETON if not b.end_site]
    body = find_body(made)
    assert (body.hips, body.chest, body.head) == ("Hips", "Chest", "Head")
    assert body.arms["left"].upper == "LeftArm" and body.legs["right"].end == "RightFoot"
    hips_cm = (lm[:, INDEX["left_hip"]] + lm[:, INDEX["right_hip"]]) / 2 / _TO_MODEL
    np.testing.assert_allclose(made.world_positions()[:, 0], hips_cm, atol=1e-3)
    # every bone points where its landmarks do (positions differ only by the fixed bone lengths)
    pos = made.world_positions()
    for joint, a, b in (("LeftForeArm", "left_elbow", "left_wrist"), ("RightLeg", "right_knee", "right_ankle")):
        child = made.index(joint) + 1
        seen = (lm[:, INDEX[b]] - lm[:, INDEX[a]]) / _TO_MODEL
        made_dir = pos[:, child] - pos[:, made.index(joint)]
        cos = np.sum(seen * made_dir, -1) / np.linalg.norm(seen, axis=-1) / np.linalg.norm(made_dir, axis=-1)
        assert cos.min() > 0.9999, joint


def _flat_angle(a: np.ndarray, b: np.ndarray) -> float:
    """Unsigned angle in degrees between two vectors' projections on the horizontal plane (x, z)."""
    a, b = a[[0, 2]], b[[0, 2]]
    return float(np.degrees(np.arccos(np.clip(a @ b / np.linalg.norm(a) / np.linalg.norm(b), -1, 1))))


@pytest.mark.parametrize("turn_deg", [0.0, 40.0, -70.0])
def test_pelvis_and_chest_twist_follow_the_hip_and_shoulder_lines(turn_deg):
    """The first pose of a clip with everything above the hips turned about the vertical: the angle
    between the Hips' and the Chest's x axes is the angle between the hip and shoulder lines."""
    lm = clip_landmarks(load_bvh(BVH_DIR / "fair1" / "dab.bvh"))[:1].repeat(3, axis=0)
    centre = (lm[0, INDEX["left_hip"]] + lm[0, INDEX["right_hip"]]) / 2
    t = np.radians(turn_deg)
    rot = np.array([[np.cos(t), 0, np.sin(t)], [0, 1, 0], [-np.sin(t), 0, np.cos(t)]])
    upper = [i for n, i in INDEX.items() if not any(k in n for k in ("hip", "knee", "ankle", "heel", "foot"))]
    lm[:, upper] = (lm[:, upper] - centre) @ rot.T + centre
    made = parse_bvh(track_to_bvh(PoseTrack(lm, np.ones(3, bool), 30.0), smooth_sigma_s=0).text)
    rots, _ = made.forward_kinematics()
    made_twist = _flat_angle(rots[0, made.index("Hips")] @ [1.0, 0, 0], rots[0, made.index("Chest")] @ [1.0, 0, 0])
    seen = _flat_angle(lm[0, INDEX["left_hip"]] - lm[0, INDEX["right_hip"]],
                       lm[0, INDEX["left_shoulder"]] - lm[0, INDEX["right_shoulder"]])
    assert abs(made_twist - seen) < 1.0, (made_twist, seen)
    if turn_deg:
        assert seen > 20.0


def test_euler_zxy_round_trip_including_gimbal_lock():
    rng = np.random.default_rng(0)
    angles = rng.uniform(-180, 180, (500, 3))
    angles[:, 1] = rng.uniform(-89.9, 89.9, 500)
    angles[:5, 1] = [90, -90, 90, -90, 89.9999999]
    m = euler_to_matrix(angles, "ZXY")
    back = euler_to_matrix(matrix_to_euler_zxy(m), "ZXY")
    np.testing.assert_allclose(back, m, atol=1e-6)


def test_bvh_text_rejects_joints_out_of_depth_first_order():
    rots = np.tile(np.eye(3), (1, 4, 1, 1))
    with pytest.raises(ValueError, match="depth-first"):  # C (under A) listed after A's sibling B
        bvh_text(["Hips", "A", "B", "C"], [-1, 0, 0, 1], np.zeros((4, 3)), [False] * 4, np.zeros((1, 3)), rots, 0.1)
    text = bvh_text(["Hips", "A", "AEnd"], [-1, 0, 1], np.eye(3), [False, False, True], np.zeros((2, 3)),
                    np.tile(np.eye(3), (2, 3, 1, 1)), 0.1)
    parsed = parse_bvh(text)
    assert parsed.joint_names == ("Hips", "A", "AEnd") and parsed.n_frames == 2


# ---------------------------------------------------------------------------------------------
# frames without a person, smoothing

def _ramp_track(present: list[bool], fps: float = 10.0) -> PoseTrack:
    n = len(present)
    pts = np.arange(n, dtype=float)[:, None, None] * np.ones((1, N_LANDMARKS, 3))
    pts[~np.asarray(present)] = np.nan
    return PoseTrack(pts, np.asarray(present), fps)


def test_leading_and_trailing_frames_without_a_person_are_trimmed_and_inner_gaps_bridged():
    present = [False, False, True, True, False, False, True, True, False]
    clean, start = clean_track(_ramp_track(present), sigma_s=0, max_gap_s=0.2)
    assert start == 2 and clean.n_frames == 6
    np.testing.assert_allclose(clean.points[:, 0, 0], [2, 3, 4, 5, 6, 7])  # the gap filled on the line
    assert not np.isnan(clean.points).any()


def test_a_gap_longer_than_the_bridge_keeps_the_longest_run():
    present = [True, True, False, False, False, True, True, True, True]
    assert usable_span(np.array(present), max_gap=2) == (5, 9)
    assert usable_span(np.array(present), max_gap=3) == (0, 9)


def test_no_person_is_a_clear_error():
    with pytest.raises(NoPersonError, match="no person"):
        clean_track(_ramp_track([False] * 5))
    with pytest.raises(NoPersonError, match="only 1 frame"):
        clean_track(_ramp_track([False, True, False]))
    with pytest.raises(NoPersonError):
        track_to_bvh(_ramp_track([False] * 4))


def test_a_person_followed_in_a_few_frames_is_refused_not_a_tenth_of_a_second_motion():
    """Issue 43: a video where the person was found in 3 of 100 frames became a 0.1 s motion without a word."""
    present = [False] * 100
    present[40:43] = [True] * 3
    with pytest.raises(NoPersonError, match=r"only 3 of 100 frames, 0\.12 s of the 4\.0 s read"):
        clean_track(_ramp_track(present, fps=25.0))
    present[40:53] = [True] * 13                 # half a second in a row: a motion
    assert clean_track(_ramp_track(present, fps=25.0))[0].n_frames == 13


def test_smoothing_is_centred_and_keeps_a_still_pose_still():
    ramp = np.arange(50, dtype=float)[:, None]
    out = smooth(ramp, 2.0)
    np.testing.assert_allclose(out[7:-7], ramp[7:-7])  # no lag on a steady movement
    still = np.full((20, 3), 4.2)
    np.testing.assert_allclose(smooth(still, 3.0), still)
    spike = np.zeros((21, 1))
    spike[10] = 1.0
    assert smooth(spike, 1.5)[10, 0] < 0.3
    np.testing.assert_array_equal(smooth(spike, 0), spike)


def test_bridge_gaps_interpolates_each_coordinate():
    pts = np.array([[[0.0, 10.0, 0.0]], [[np.nan] * 3], [[2.0, 30.0, 4.0]]])
    out = bridge_gaps(pts, np.array([True, False, True]))
    np.testing.assert_allclose(out[1, 0], [1.0, 20.0, 2.0])
