"""Frame pruning (animator.frame_rate)."""
from __future__ import annotations

import numpy as np
import pytest

from animator.bvh import load_bvh
from animator.config import load_motion_config
from animator.errors import ConfigError
from animator.frame_rate import DEFAULT_FPS, frame_indices_for, plan_for, plan_frames
from tests.conftest import MOTION_CONFIGS

# motion config -> (first BVH frame, frames in range, frame time)
CLIPS = {
    "dab": (0, 339, 0.0333333),
    "jumping": (150, 504, 0.008342),
    "wave_hello": (0, 839, 0.008342),
    "zombie": (0, 779, 0.0333333),
    "jumping_jacks": (0, 125, 0.03333),
}


def test_default_is_a_gif_exact_rate():
    # GIF delays are whole centiseconds: the default frame time must be one
    assert 100 / DEFAULT_FPS == int(100 / DEFAULT_FPS)


@pytest.mark.parametrize("name", sorted(CLIPS))
def test_default_pruning_keeps_duration(name):
    start, n, ft = CLIPS[name]
    plan = plan_for(load_motion_config(MOTION_CONFIGS / f"{name}.yaml"))
    clip = n * ft
    assert plan.frame_time_s == pytest.approx(1 / DEFAULT_FPS)
    assert len(plan.indices) == round(clip * DEFAULT_FPS)
    assert abs(plan.duration_s - clip) <= 0.02 * clip
    assert plan.indices[0] == start and plan.indices[-1] <= start + n - 1
    assert np.all(np.diff(plan.indices) >= 1)  # never shows a frame twice when downsampling
    # each output frame shows the source frame nearest its time
    t = np.arange(len(plan.indices)) * plan.frame_time_s
    assert np.all(np.abs((plan.indices - start) * ft - t) <= ft / 2 + 1e-9)


def test_native_keeps_every_frame():
    mc = load_motion_config(MOTION_CONFIGS / "jumping.yaml")
    plan = plan_for(mc, fps="native")
    np.testing.assert_array_equal(plan.indices, np.arange(150, 654))
    assert plan.frame_time_s == pytest.approx(0.008342)
    np.testing.assert_array_equal(frame_indices_for(mc, fps=None), plan.indices)


def test_rate_above_the_clips_keeps_every_frame():
    plan = plan_frames(339, 1 / 30, fps=60)
    assert len(plan.indices) == 339 and plan.frame_time_s == pytest.approx(1 / 30)


def test_120fps_clip_pruned_to_25fps():
    plan = plan_frames(839, 0.008342, fps=25)
    assert len(plan.indices) == 175  # 7.0 s at 25 fps (the seed pruned 850 -> 150 by hand)
    assert plan.indices[1] - plan.indices[0] in (4, 5)


@pytest.mark.parametrize("cap", [1, 10, 150])
def test_max_frames_caps_and_keeps_duration(cap):
    plan = plan_frames(779, 0.0333333, fps=25, max_frames=cap)
    assert len(plan.indices) == cap
    assert plan.duration_s == pytest.approx(779 * 0.0333333)
    assert plan.indices[0] == 0 and plan.indices.max() < 779


def test_max_frames_with_native():
    plan = plan_frames(100, 0.01, start=7, fps="native", max_frames=40)
    assert len(plan.indices) == 40 and plan.indices[0] == 7 and plan.indices[-1] <= 106
    assert plan.duration_s == pytest.approx(1.0)


def test_short_clip_duration_within_two_percent():
    for n in range(1, 40):
        for fps in (7, 10, 12.5, 20, 25):
            plan = plan_frames(n, 1 / 30, fps=fps)
            assert abs(plan.duration_s - n / 30) <= 0.02 * n / 30, (n, fps)


def test_plan_for_a_whole_bvh():
    bvh = load_bvh(MOTION_CONFIGS.parent.parent / "bvh" / "cmu1" / "jumping_jacks.bvh")
    assert len(frame_indices_for(bvh, fps="native")) == 125
    assert len(frame_indices_for(bvh)) == round(125 * 0.03333 * 25)


@pytest.mark.parametrize("kwargs,field", [
    ({"fps": 0}, "fps"), ({"fps": "fast"}, "fps"), ({"fps": -5}, "fps"),
    ({"max_frames": 0}, "max_frames"), ({"max_frames": 2.5}, "max_frames"),
])
def test_bad_arguments(kwargs, field):
    with pytest.raises(ConfigError) as exc:
        plan_frames(100, 0.03, **kwargs)
    assert exc.value.field == field
