"""Scenes from AnimatedDrawings' mvc config files: several characters on a background through a camera.

The placement checks project the posed joints with AnimatedDrawings' camera written out here from its
definition (look-at frame, 35-degree perspective, y flipped to the canvas), independently of
animator.scene's code, and look for each character's own colour there in every frame.
"""
from __future__ import annotations

import io
import json
import logging
import math

import numpy as np
import pytest
import yaml
from PIL import Image

import animator
from animator.errors import ConfigError
from animator.scene import load_scene, render_scene
from tests.conftest import REPO
from tests.support.animator_cli import run
from tests.support.scenes import CAM_FWD, CAM_POS, EX, H, W, scene_file


def _expected_canvas(world: np.ndarray, pos=CAM_POS, fwd=CAM_FWD, w: int = W, h: int = H) -> np.ndarray:
    """AnimatedDrawings' camera: look-at frame from CAMERA_FWD, perspective 35 deg, GL window -> top-left pixels."""
    fwd = np.array(fwd) / np.linalg.norm(fwd)
    right = np.cross([0.0, 1.0, 0.0], fwd)
    right /= np.linalg.norm(right)
    up = np.cross(fwd, right)
    rel = world - np.array(pos)
    x, y, z = rel @ right, rel @ up, rel @ fwd
    f = 1 / math.tan(math.radians(35.0) / 2)
    ndc_x, ndc_y = f * (h / w) * x / -z, f * y / -z
    return np.stack([(ndc_x + 1) / 2 * w, (1 - ndc_y) / 2 * h], axis=-1)


def _joint_world(motion, char, start) -> np.ndarray:
    d = max(char.size)
    rx, ry = next(j.loc for j in char.skeleton if j.name == "root")
    p = motion.positions
    return np.stack([start[0] + (p[..., 0] - rx) / d, start[1] + (ry - p[..., 1]) / d,
                     np.full(p.shape[:-1], start[2])], -1)


def _frames(data: bytes) -> list[np.ndarray]:
    out = []
    with Image.open(io.BytesIO(data)) as im:
        for k in range(im.n_frames):
            im.seek(k)
            out.append(np.asarray(im.convert("RGB")).astype(int))
    return out


def _colour_near(rgb: np.ndarray, p: np.ndarray, channel: int, r: int = 2) -> bool:
    x, y = int(p[0]), int(p[1])
    win = rgb[max(0, y - r):y + r + 1, max(0, x - r):x + r + 1]
    others = [c for c in range(3) if c != channel]
    return bool(((win[..., channel] > 120) & (win[..., others[0]] < 60) & (win[..., others[1]] < 60)).any())


def test_two_characters_on_a_background_are_placed_as_animated_drawings_places_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scene = load_scene(scene_file(tmp_path))
    res = render_scene(scene, animator.RenderOptions(max_frames=30))
    frames = _frames(res.data)
    assert len(frames) == res.frame_count == 30 and frames[0].shape == (H, W, 3)
    starts = [(-0.45, 0.0, -0.5), (0.45, 0.0, -0.5)]
    joints = ("root", "torso", "neck", "left_hand", "right_hand", "left_foot", "right_foot", "left_elbow", "right_knee")
    for k, (sc, motion, start) in enumerate(zip(scene.characters, res.motion, starts)):
        cols = [motion.joint_names.index(j) for j in joints]
        canvas = _expected_canvas(_joint_world(motion, sc.character, start))[:, cols]
        assert canvas[..., 0].min() > 0 and canvas[..., 0].max() < W  # in view
        for f, rgb in enumerate(frames):
            missed = [j for j, p in zip(joints, canvas[f]) if not _colour_near(rgb, p, channel=k)]
            assert len(missed) <= 1, f"character {k}, frame {f}: its colour is not at {missed}"
    # the background shows where no character is: the top corners keep the image's blue
    assert frames[0][2, 2, 2] > 100 and frames[0][2, W - 3, 2] > 100


def test_shorter_clip_holds_its_last_pose_and_time_runs_at_the_first_characters_frame_time(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scene = load_scene(scene_file(tmp_path))
    res = render_scene(scene, animator.RenderOptions(fps="native"))
    dab, jj = res.motion
    assert res.frame_count == 339 and dab.frame_time_s == pytest.approx(0.0333333)  # dab: 339 frames at 30 fps
    # jumping_jacks has 125 frames at 0.03333 s: BVH frame round(t / 0.03333), then its last frame
    assert jj.source_frames[124] == 124 and (jj.source_frames[125:] == 124).all()


def test_nearer_character_is_drawn_over_the_farther_one_whatever_the_file_order(tmp_path):
    # the red character stands behind the green one, at the same x; red is listed first
    scene = load_scene(scene_file(tmp_path, starts=((0.0, 0.0, -1.2), (0.0, 0.0, -0.5))))
    res = render_scene(scene, animator.RenderOptions(max_frames=5))
    rgb = _frames(res.data)[0]
    green_root = _expected_canvas(_joint_world(res.motion[1], scene.characters[1].character, (0.0, 0.0, -0.5)))[0]
    torso = green_root[res.motion[1].joint_names.index("torso")]
    assert _colour_near(rgb, torso, channel=1) and not _colour_near(rgb, torso, channel=0, r=0)
    # and the other way round when the file order is swapped in depth
    swap = tmp_path / "swap"
    swap.mkdir()
    scene = load_scene(scene_file(swap, starts=((0.0, 0.0, -0.5), (0.0, 0.0, -1.2))))
    res = render_scene(scene, animator.RenderOptions(max_frames=5))
    rgb = _frames(res.data)[0]
    red = _expected_canvas(_joint_world(res.motion[0], scene.characters[0].character, (0.0, 0.0, -0.5)))[0]
    assert _colour_near(rgb, red[res.motion[0].joint_names.index("torso")], channel=0)


def test_not_applicable_fields_are_logged_as_ignored_and_unknown_fields_name_themselves(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    path = scene_file(tmp_path, view={"USE_MESA": True, "DRAW_AD_RIG": True}, scene={"ADD_FLOOR": True},
                  controller={"KEYBOARD_TIMESTEP": 0.05, "OUTPUT_VIDEO_CODEC": "avc1"})
    with caplog.at_level(logging.WARNING, logger="animator"):
        scene = load_scene(path)
    assert set(scene.ignored) == {"view.USE_MESA", "view.DRAW_AD_RIG", "scene.ADD_FLOOR",
                                  "controller.KEYBOARD_TIMESTEP",
                                  "controller.OUTPUT_VIDEO_CODEC"}
    for name in scene.ignored:
        assert f"{name} ignored" in caplog.text
    cases = [({"view": {"CAMERA_ZOOM": 2}}, r"field 'view.CAMERA_ZOOM': unknown field"),
             ({"scene": {"ANIMATED_CHARACTERS": [{"character_cfg": "x", "motion_cfg": "y", "speed": 2}]}},
              r"field 'scene.ANIMATED_CHARACTERS\[0\].speed': unknown field"),
             ({"views": {}}, r"field 'views': unknown section"),
             ({"view": {"WINDOW_DIMENSIONS": [0, 10]}}, r"view.WINDOW_DIMENSIONS"),
             ({"view": {"CLEAR_COLOR": [1, 1, 1, 2]}}, r"view.CLEAR_COLOR"),
             ({"view": {"BACKGROUND_IMAGE": "nope.png"}}, r"view.BACKGROUND_IMAGE': file 'nope.png' not found"),
             ({"controller": {"MODE": "movie"}}, r"controller.MODE"),
             ({"controller": {"OUTPUT_VIDEO_PATH": "out.avi"}}, r"controller.OUTPUT_VIDEO_PATH"),
             ({"scene": {"ANIMATED_CHARACTERS": []}}, r"scene.ANIMATED_CHARACTERS': must be a non-empty list"),
             ({"scene": {"ANIMATED_CHARACTERS": [{"character_cfg": "nope/char_cfg.yaml", "motion_cfg": "y"}]}},
              r"ANIMATED_CHARACTERS\[0\].character_cfg': file 'nope/char_cfg.yaml' not found")]
    for change, message in cases:
        cfg = yaml.safe_load(path.read_text())
        for section, fields in change.items():
            if section in cfg and isinstance(fields, dict):
                cfg[section].update(fields)
            else:
                cfg[section] = fields
        bad = tmp_path / "bad.yaml"
        bad.write_text(yaml.safe_dump(cfg))
        with pytest.raises(ConfigError, match=message):
            load_scene(bad)


def test_a_character_without_retarget_cfg_gets_a_derived_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = scene_file(tmp_path)
    cfg = yaml.safe_load(path.read_text())
    del cfg["scene"]["ANIMATED_CHARACTERS"][1]["retarget_cfg"]
    path.write_text(yaml.safe_dump(cfg))
    scene = load_scene(path)
    assert "derived retarget config" in scene.characters[1].retarget_cfg.path
    assert "Hips" in dict(scene.characters[1].retarget_cfg.char_joint_bvh_joints_mapping)["torso"]


def test_cli_renders_a_scene_file_to_its_output_path(tmp_path):
    scene_file(tmp_path, view={"USE_MESA": True})
    r = run("scene.yaml", "--max-frames", "8", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "view.USE_MESA ignored" in r.stderr
    with Image.open(tmp_path / "video.gif") as im:
        assert im.size == (W, H) and im.n_frames == 8
    r = run("scene.yaml", "--max-frames", "4", "-o", "other.webp", "--dump-joints", "joints.json", cwd=tmp_path, timeout=300)
    assert r.returncode == 0 and (tmp_path / "other.webp").stat().st_size > 0
    doc = json.loads((tmp_path / "joints.json").read_text())
    assert [c["character"].split("/")[-2] for c in doc["characters"]] == ["red", "green"]
    assert all(len(c["frames"]) == 4 and len(c["frames"][0]) == 16 for c in doc["characters"])
    r = run("scene.yaml", "--size", "100x100", cwd=tmp_path, timeout=300)
    assert r.returncode == 2 and "WINDOW_DIMENSIONS" in r.stderr
    r = run("scene.yaml", "--background", "white", cwd=tmp_path, timeout=300)
    assert r.returncode == 2 and "CLEAR_COLOR" in r.stderr


def test_cli_interactive_scene_needs_an_output(tmp_path):
    path = scene_file(tmp_path)
    cfg = yaml.safe_load(path.read_text())
    cfg["controller"] = {"MODE": "interactive"}
    path.write_text(yaml.safe_dump(cfg))
    r = run("scene.yaml", cwd=tmp_path, timeout=300)
    assert r.returncode == 1 and "controller.MODE" in r.stderr and "-o" in r.stderr
    r = run("scene.yaml", "-o", "x.gif", "--max-frames", "3", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr


def test_animated_drawings_example_scene_as_written_renders_from_its_folder(tmp_path):
    """AnimatedDrawings' export-GIF example, field for field (paths relative to its repository root,
    no view section: its default 500x500 window, camera and transparent clear colour)."""
    scene = tmp_path / "export_gif_example.yaml"
    scene.write_text("scene:\n  ANIMATED_CHARACTERS:\n    - character_cfg: examples/characters/char3/char_cfg.yaml\n"
                     "      motion_cfg: examples/config/motion/dab.yaml\n"
                     "      retarget_cfg: examples/config/retarget/fair1_ppf.yaml\n"
                     "controller:\n  MODE: video_render\n  OUTPUT_VIDEO_PATH: ./video.gif")
    out = tmp_path / "out.gif"
    r = run(scene, "--max-frames", "5", "-o", out, cwd=REPO / "tests" / "fixtures" / "animated_drawings", timeout=300)
    assert r.returncode == 0, r.stderr
    with Image.open(out) as im:
        assert im.size == (500, 500) and im.n_frames == 5
        assert "transparency" in im.info                  # CLEAR_COLOR's alpha 0
        alpha = np.asarray(im.convert("RGBA"))[..., 3] > 0
    ys, xs = np.nonzero(alpha)
    # where AnimatedDrawings' default camera (0, 0.7, 2), looking along -(0, 0.5, 2), shows the drawing's
    # box in the plane z = -0.5 with its root at (0, 0): the first frame's pose fills most of it
    char = animator.load_character(EX / "characters" / "char3")
    d = max(char.size)
    rx, ry = next(j.loc for j in char.skeleton if j.name == "root")
    rows, cols = np.nonzero(char.mask)
    corners = np.array([[(u - rx) / d, (ry - v) / d, -0.5]
                        for u in (cols.min(), cols.max()) for v in (rows.min(), rows.max())])
    box = _expected_canvas(corners, (0.0, 0.7, 2.0), (0.0, 0.5, 2.0), 500, 500)
    (x0, y0), (x1, y1) = box.min(axis=0), box.max(axis=0)
    grow = 0.25 * max(x1 - x0, y1 - y0)
    assert x0 - grow <= xs.min() and xs.max() <= x1 + grow and y0 - grow <= ys.min() and ys.max() <= y1 + grow
    assert x0 <= xs.mean() <= x1 and y0 <= ys.mean() <= y1
    assert (xs.max() - xs.min()) > 0.5 * (x1 - x0) and (ys.max() - ys.min()) > 0.5 * (y1 - y0)


def test_a_character_outside_the_window_leaves_no_trace_on_its_edge(tmp_path, monkeypatch):
    """A fixed camera lets characters walk out of view: nothing of them is drawn then, not even
    squeezed against the window's edge."""
    monkeypatch.chdir(tmp_path)
    scene = load_scene(scene_file(tmp_path, starts=((-0.45, 0.0, -0.5), (3.0, 0.0, -0.5))))  # green: far right
    rgb = _frames(render_scene(scene, animator.RenderOptions(max_frames=3)).data)[0]
    green = (rgb[..., 1] > 120) & (rgb[..., 0] < 60) & (rgb[..., 2] < 60)
    red = (rgb[..., 0] > 120) & (rgb[..., 1] < 60) & (rgb[..., 2] < 60)
    assert red.sum() > 1000 and green.sum() == 0
    # half out of view: drawn up to the edge, no thicker there than just inside it
    half = tmp_path / "half"
    half.mkdir()
    scene = load_scene(scene_file(half, starts=((-0.45, 0.0, -0.5), (1.4, 0.0, -0.5))))
    rgb = _frames(render_scene(scene, animator.RenderOptions(max_frames=3)).data)[0]
    green = (rgb[..., 1] > 120) & (rgb[..., 0] < 60) & (rgb[..., 2] < 60)
    assert green[:, -1].sum() > 0 and green[:, -1].sum() <= green[:, -8].sum() + 10
