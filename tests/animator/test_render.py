"""Rendering: rest pose reproduces the drawing, draw order, placement, and render() end to end."""
import io

import numpy as np
import pytest
from PIL import Image, ImageSequence

import animator
from animator import ConfigError, RenderOptions, load_character, render
from animator.arap import ARAP
from animator.canvas import place
from animator.formats.ffmpeg import ffmpeg_exe
from animator.mesh import build_mesh
from animator.rasterize import prepare_sprite, rasterize
from tests.conftest import AD_EXAMPLES, CMU, FAIR

MOTIONS = {"dab": FAIR, "zombie": FAIR, "wave_hello": FAIR, "jumping": FAIR, "jumping_jacks": CMU}


@pytest.fixture(scope="module")
def char1():
    return load_character(AD_EXAMPLES / "characters" / "char1")


def _joints(ch):
    return [(j.name, j.loc, j.parent) for j in ch.skeleton]


def _groups(ch):
    return [list(g.char_joints) for g in animator.load_retarget_config(FAIR).char_bodypart_groups]


@pytest.mark.parametrize("name,scale", [("char1", 0.5), ("char2", 1.0), ("char4", 0.8)])
def test_rest_pose_reproduces_the_drawing(name, scale):
    ch = load_character(AD_EXAMPLES / "characters" / name)
    rest = np.array([j.loc for j in ch.skeleton])
    mesh = build_mesh(ch.mask, keep_points=rest)
    sprite = prepare_sprite(ch.texture, ch.mask, mesh, scale, _joints(ch), _groups(ch), colours=64)
    h, w = ch.mask.shape
    pad = 5
    W, H = int(round(w * scale)) + 2 * pad, int(round(h * scale)) + 2 * pad
    sx, sy = (W - 2 * pad) / w, (H - 2 * pad) / h
    verts = mesh.vertices * [sx, sy] + pad
    frame = next(rasterize(sprite, verts[None], W, H))
    got_alpha = frame != sprite.transparent
    # the drawing through its mask, downsized the same way
    rgba = ch.texture.copy()
    rgba[..., 3] = np.where(ch.mask, 255, 0)
    small = np.asarray(Image.fromarray(rgba).resize((W - 2 * pad, H - 2 * pad), Image.Resampling.BOX
                                                    if scale < 1 else Image.Resampling.BILINEAR))
    want_alpha = np.zeros((H, W), bool)
    want_alpha[pad:-pad, pad:-pad] = small[..., 3] >= 128
    iou = (got_alpha & want_alpha).sum() / (got_alpha | want_alpha).sum()
    assert iou > 0.98, iou
    both = got_alpha & want_alpha
    want_rgb = np.zeros((H, W, 3), np.uint8)
    want_rgb[pad:-pad, pad:-pad] = small[..., :3]
    got_rgb = sprite.palette[frame[both]].astype(int)
    err = np.abs(got_rgb - want_rgb[both].astype(int)).mean()
    assert err < 8, err
    # nothing is drawn off the character's own place
    assert not got_alpha[:pad].any() and not got_alpha[-pad:].any()


def test_draw_order_follows_part_order(char1):
    ch = char1
    names = [j.name for j in ch.skeleton]
    rest = np.array([j.loc for j in ch.skeleton])
    mesh = build_mesh(ch.mask, keep_points=rest)
    groups = _groups(ch)
    sprite = prepare_sprite(ch.texture, ch.mask, mesh, 0.5, _joints(ch), groups)
    # paint each point with its part number to see who wins
    part_of_point = np.zeros(sprite.n_points, np.uint8)
    for p, spans in enumerate(sprite.groups):
        for a, b in spans:
            part_of_point[a:b] = p
    sprite.colour = part_of_point
    # fold the left arm (part 1) across the body (part 0)
    pose = rest.copy()
    sh = rest[names.index("left_shoulder")]
    for n, target in (("left_elbow", [300.0, 300.0]), ("left_hand", [240.0, 300.0])):
        pose[names.index(n)] = target
    verts = ARAP(mesh, rest).solve(pose) * 0.5 + 10
    hand = (np.array([240.0, 300.0]) * 0.5 + 10).astype(int)
    front = next(rasterize(sprite, verts[None], 300, 330, np.array([[0, 2, 3, 4, 1]])))
    behind = next(rasterize(sprite, verts[None], 300, 330, np.array([[1, 2, 3, 4, 0]])))
    assert front[hand[1], hand[0]] == 1
    assert behind[hand[1], hand[0]] == 0
    assert groups[1] == ["left_elbow", "left_hand"] and sh is not None


def test_placement_keeps_a_travelling_character_in_view():
    F = 50
    size = np.array([100.0, 200.0])
    root = np.stack([np.linspace(0, 2000, F), np.full(F, 150.0)], 1)  # walks 2000 px to the right
    bounds = np.concatenate([root - size / 2, root + size / 2], 1)
    pl = place(bounds, root, 300, 300, margin=10)
    assert pl.scale == pytest.approx(280 / 200)           # fits the pose, not the whole walk
    lo = pl.scale * bounds[:, :2] + pl.offsets
    hi = pl.scale * bounds[:, 2:] + pl.offsets
    assert (lo >= 10 - 1e-9).all() and (hi <= 290 + 1e-9).all()
    assert np.ptp(pl.offsets[:, 1]) == 0                   # vertical view fixed: it fits


def test_placement_shows_a_jump_instead_of_following_it():
    F = 41
    size = np.array([100.0, 200.0])
    t = np.linspace(0, np.pi, F)  # includes the top of the jump
    root = np.stack([np.full(F, 50.0), 150.0 - 60.0 * np.sin(t)], 1)  # jumps 60 px up and down
    bounds = np.concatenate([root - size / 2, root + size / 2], 1)
    pl = place(bounds, root, 300, 300, margin=10)
    assert pl.scale == pytest.approx(280 / 260)            # the whole jump fits, at one scale
    assert np.ptp(pl.offsets, axis=0).max() == 0           # a fixed view: the jump shows
    lo = pl.scale * bounds[:, :2] + pl.offsets
    hi = pl.scale * bounds[:, 2:] + pl.offsets
    assert (lo >= 10 - 1e-9).all() and (hi <= 290 + 1e-9).all()
    assert np.ptp(lo[:, 1]) == pytest.approx(60 * pl.scale)


def _decode(data):
    im = Image.open(io.BytesIO(data))
    frames, total = [], 0
    for fr in ImageSequence.Iterator(im):
        frames.append(np.asarray(fr.convert("RGBA"))[..., 3])
        total += fr.info.get("duration", 0)
    return im, frames, total / 1000.0


@pytest.mark.parametrize("motion", sorted(MOTIONS))
def test_render_gif_fits_the_canvas_and_the_clip(char1, motion):
    mcfg = animator.load_motion_config(AD_EXAMPLES / "config" / "motion" / f"{motion}.yaml")
    rcfg = animator.load_retarget_config(MOTIONS[motion])
    res = render(char1, mcfg, rcfg, RenderOptions(width=160, height=144, max_frames=40))
    assert res.mime == "image/gif" and res.extension == "gif"
    im, alphas, total = _decode(res.data)
    assert im.size == (160, 144)
    assert len(alphas) == res.frame_count == res.motion.n_frames <= 40
    assert abs(total - res.duration_s) <= 0.02 * res.duration_s
    # the clip's own duration: frames x frame time of the BVH range
    bvh = animator.retarget(char1, mcfg, rcfg)
    assert abs(res.duration_s - bvh.duration_s) <= 0.02 * bvh.duration_s
    for k, a in enumerate(alphas):
        assert a.any(), f"frame {k} is empty"
        border = np.concatenate([a[0], a[-1], a[:, 0], a[:, -1]])
        assert not border.any(), f"frame {k} touches the border"
        op = a > 0
        enclosed = ~op[1:-1, 1:-1] & op[:-2, 1:-1] & op[2:, 1:-1] & op[1:-1, :-2] & op[1:-1, 2:]
        assert not enclosed.any(), f"frame {k} has holes"
    assert set(res.timings_ms) >= {"retarget", "setup", "deform", "sprite", "rasterize", "encode", "total"}


def test_native_fps_keeps_every_bvh_frame(char1):
    mcfg = animator.load_motion_config(AD_EXAMPLES / "config" / "motion" / "jumping_jacks.yaml")
    rcfg = animator.load_retarget_config(CMU)
    res = render(char1, mcfg, rcfg, RenderOptions(width=96, height=96, fps="native"))
    assert res.frame_count == 125
    np.testing.assert_array_equal(res.motion.source_frames, np.arange(125))
    im, alphas, total = _decode(res.data)
    assert len(alphas) == 125 and abs(total - 125 * 0.03333) < 0.02 * 125 * 0.03333


def test_default_fps_prunes_to_25(char1):
    mcfg = animator.load_motion_config(AD_EXAMPLES / "config" / "motion" / "wave_hello.yaml")
    res = render(char1, mcfg, animator.load_retarget_config(FAIR), RenderOptions(width=64, height=64))
    assert res.frame_count == round(839 * 0.008342 * 25)
    assert res.motion.frame_time_s == pytest.approx(0.04, rel=0.01)


def test_render_webp_and_mp4(char1):
    mcfg = animator.load_motion_config(AD_EXAMPLES / "config" / "motion" / "dab.yaml")
    rcfg = animator.load_retarget_config(FAIR)
    res = render(char1, mcfg, rcfg, RenderOptions(width=96, height=96, max_frames=6, format="webp"))
    im = Image.open(io.BytesIO(res.data))
    assert res.mime == "image/webp" and im.n_frames == 6 and im.size == (96, 96)
    try:
        ffmpeg_exe()
    except animator.RenderError:
        pytest.skip("no ffmpeg here (MP4 gives a clear RenderError, see test_encode)")
    res = render(char1, mcfg, rcfg, RenderOptions(width=96, height=96, max_frames=6, format="mp4"))
    assert res.mime == "video/mp4" and res.data[4:8] == b"ftyp"


@pytest.mark.parametrize("kwargs,field", [
    ({"width": 5}, "width"), ({"height": "big"}, "height"), ({"format": "avi"}, "format"),
    ({"fps": -1}, "fps"), ({"fps": "fast"}, "fps"), ({"max_frames": 0}, "max_frames"),
    ({"colours": 1}, "colours"), ({"margin": 400}, "margin"), ({"background": (1, 2)}, "background"),
    ({"background": "white"}, "background"), ({"tolerance": -1}, "tolerance"), ({"threads": 0}, "threads"),
    ({"mesh_cells": 2}, "mesh_cells"),
])
def test_bad_options_fail_clearly(kwargs, field):
    with pytest.raises(ConfigError) as exc:
        RenderOptions(**kwargs)
    assert exc.value.field == field


def test_result_pickles(char1):
    import pickle

    mcfg = animator.load_motion_config(AD_EXAMPLES / "config" / "motion" / "dab.yaml")
    res = render(char1, mcfg, animator.load_retarget_config(FAIR), RenderOptions(width=64, height=64, max_frames=3))
    back = pickle.loads(pickle.dumps(res))
    assert back.data == res.data and back.frame_count == 3
    assert pickle.loads(pickle.dumps(RenderOptions(fps="native"))).fps == "native"


def test_opaque_background_gif_stores_deltas_and_stays_close(char1):
    mcfg = animator.load_motion_config(AD_EXAMPLES / "config" / "motion" / "dab.yaml")
    rcfg = animator.load_retarget_config(FAIR)
    clear = render(char1, mcfg, rcfg, RenderOptions(width=200, height=200, max_frames=60, tolerance=0))
    white = render(char1, mcfg, rcfg, RenderOptions(width=200, height=200, max_frames=60, background=(255, 255, 255)))
    # with the clip's flat palette a transparent GIF's full redraws compress about as well as an
    # opaque GIF's deltas; the deltas must at least never cost more
    assert len(white.data) <= len(clear.data)
    a = Image.open(io.BytesIO(clear.data))
    b = Image.open(io.BytesIO(white.data))
    assert a.n_frames == b.n_frames == 60
    kept = 0
    for k in range(1, 59):  # opaque frames never need clearing: each keeps the previous one
        b.seek(k)
        kept += b.disposal_method == 1
    assert kept == 58
    for k in (0, 17, 59):
        a.seek(k)
        b.seek(k)
        ra = np.asarray(a.convert("RGBA")).astype(int)
        rb = np.asarray(b.convert("RGBA")).astype(int)
        assert (rb[..., 3] == 255).all()                      # opaque everywhere
        # the transparent frame composited on white is what the opaque GIF shows, within tolerance
        comp = np.where(ra[..., 3:] > 0, ra[..., :3], 255)
        assert np.abs(comp - rb[..., :3]).max(-1).mean() < 2
        assert np.sqrt(((comp - rb[..., :3]) ** 2).sum(-1)).max() <= 16 + 1e-6
        border = np.concatenate([rb[0], rb[-1], rb[:, 0], rb[:, -1]])
        assert (border[:, :3] == 255).all()


def test_threads_do_not_change_the_output(char1):
    mcfg = animator.load_motion_config(AD_EXAMPLES / "config" / "motion" / "zombie.yaml")
    rcfg = animator.load_retarget_config(FAIR)
    one = render(char1, mcfg, rcfg, RenderOptions(width=120, height=120, max_frames=25, threads=1))
    two = render(char1, mcfg, rcfg, RenderOptions(width=120, height=120, max_frames=25, threads=2))
    assert one.data == two.data


@pytest.mark.parametrize("shape", [(1, 1, 3), (2, 5, 3), (37, 23, 3), (64, 48)])
def test_median3_matches_pillows_median_filter(shape):
    from PIL import ImageFilter

    from animator.rasterize import median3

    img = np.random.default_rng(sum(shape)).integers(0, 256, shape, dtype=np.uint8)
    mode = "RGB" if len(shape) == 3 else "L"
    want = np.asarray(Image.fromarray(img, mode).filter(ImageFilter.MedianFilter(3)))
    assert np.array_equal(median3(img), want)
