"""Page scenes: several characters cut from one photo, each moving where and as large as it was drawn.

The photo is tests/fixtures/scene_photo.py's (four example characters pasted on paper, char2 partly in
front of char1); its answer key (boxes, joints, masks) is what a client would send. Expected positions
come from rendering each character alone with ``animator.render`` and mapping its canvas joints back
through that render's own scale and offsets, then onto the page by the character's box.
"""
from __future__ import annotations

import io
import json
import subprocess
import sys
from dataclasses import replace
from functools import lru_cache

import numpy as np
import pytest
import yaml
from PIL import Image

import animator
from animator import inpaint
from animator.auto_retarget import configs_for
from animator.errors import ConfigError
from animator.page_scene import (
    MAX_CHARACTERS,
    Background,
    PageCharacter,
    PageScene,
    canvas_size,
    keep_in_frame,
    page_background,
    page_fit,
    render_page_scene,
    z_order,
)
from tests.conftest import MOTION_CONFIGS, REPO
from tests.fixtures.scene_photo import cut_out, make_scene_photo

FRAMES = 10


@lru_cache(maxsize=None)
def _photo():
    return make_scene_photo()


@lru_cache(maxsize=None)
def _configs(name: str):
    return configs_for(MOTION_CONFIGS / name, None)


def _scene(motions=("dab.yaml", "jumping_jacks.yaml", "wave_hello.yaml", "jumping.yaml"), background=None):
    photo, pasted = _photo()
    chars = []
    for p, m in zip(pasted, motions):
        c, origin = cut_out(photo, p)
        chars.append(PageCharacter(c, *_configs(m), origin=origin, scale=1.0, name=p.name))
    return PageScene(chars, (photo.shape[1], photo.shape[0]), background or Background("page", image=photo))


def _opts(scene, fmt="joints", **kw):
    w, h = canvas_size(scene.page_size, 400)
    return animator.RenderOptions(width=w, height=h, format=fmt, **{"max_frames": FRAMES, **kw})


def test_each_characters_joints_are_its_joints_alone_placed_where_it_was_drawn():
    scene = _scene()
    opts = replace(_opts(scene), max_frames=None)   # every frame at 25 fps, as alone (no frames drawn)
    result = render_page_scene(scene, opts)
    fit, pad = page_fit(scene.page_size, opts.width, opts.height)
    for k, ch in enumerate(scene.characters):
        alone = animator.render(ch.character, ch.motion_cfg, ch.retarget_cfg, animator.RenderOptions(format="joints"))
        n = alone.frame_count
        assert n > 20 and result.frame_count >= n
        canvas_alone = alone.scale * alone.motion.positions + alone.offsets[:, None, :]
        drawing = (canvas_alone - alone.offsets[:, None, :]) / alone.scale       # its own pixels, per frame
        expected = fit * (np.asarray(ch.origin) + ch.scale * drawing) + pad     # placed on the page, on the canvas
        got = result.joints(k)[:n]
        assert result.motion[k].joint_names == alone.motion.joint_names
        if result.frame_count > n:     # a shorter clip starts again
            np.testing.assert_allclose(result.joints(k)[n:2 * n], got[:result.frame_count - n], atol=1e-6)
        np.testing.assert_allclose(got, expected, atol=1e-6, err_msg=ch.name)
        # and at rest, where the fixture drew its joints
        rest = fit * np.array([_photo()[1][k].joints[n] for n in alone.motion.joint_names]) + pad
        assert np.abs(got[0] - rest).max() < fit * max(ch.character.size) * 0.5
    # the joints file carries the same numbers
    doc = json.loads(result.data)
    c0 = doc["characters"][0]
    frames = np.asarray(c0["frames"]) * c0["canvas"]["scale"] + np.asarray(c0["canvas"]["offsets"])[:, None, :]
    np.testing.assert_allclose(frames, result.joints(0), atol=0.01)


def test_back_to_front_by_the_bottom_of_each_box():
    scene = _scene()
    # fixture boxes' bottoms: char3 270, char4 594, char1 621, char2 714
    assert [scene.characters[i].name for i in z_order(scene.characters)] == ["char3", "char4", "char1", "char2"]
    moved = replace(scene, characters=[replace(c, origin=(c.origin[0], 0.0)) if c.name == "char2" else c
                                       for c in scene.characters])   # char2's bottom now 274: behind char4 and char1
    assert [moved.characters[i].name for i in z_order(moved.characters)] == ["char3", "char2", "char4", "char1"]


def _tinted(ch: PageCharacter, channel: int) -> PageCharacter:
    tex = np.zeros_like(ch.character.texture)
    tex[..., channel] = 255
    tex[..., 3] = 255
    return replace(ch, character=replace(ch.character, texture=tex))


@pytest.mark.parametrize("front_drawn_lower", [True, False])
def test_the_character_lower_on_the_page_covers_the_one_behind(front_drawn_lower):
    scene = _scene(motions=("dab.yaml",) * 4)
    one, two = _tinted(scene.characters[1], 0), _tinted(scene.characters[3], 2)   # char1 red, char2 blue
    # char2 (274 px tall) over char1's body (box 70,260 to 375,621): bottom 654 (in front) or 574 (behind)
    x, y = one.origin
    two = replace(two, origin=(x + 60, y + (120 if front_drawn_lower else 40)))
    s = PageScene([one, two], scene.page_size, Background("colour", colour=(255, 255, 255)))
    opts = _opts(s, "webp", merge=0.0, smooth=0, max_frames=1)
    result = render_page_scene(s, opts)
    frame = np.asarray(Image.open(io.BytesIO(result.data)).convert("RGB")).astype(int)
    w, h = opts.width, opts.height
    masks = [page_mask(c, scene.page_size, w, h) for c in (one, two)]
    overlap = masks[0] & masks[1]
    assert overlap.sum() > 50
    red = (frame[..., 0] > 150) & (frame[..., 2] < 100)
    blue = (frame[..., 2] > 150) & (frame[..., 0] < 100)
    front = blue if front_drawn_lower else red
    assert front[overlap].mean() > 0.8, (red[overlap].mean(), blue[overlap].mean())


def page_mask(ch: PageCharacter, page_size, w, h) -> np.ndarray:
    """The character's rest mask on the canvas (pose at frame 0 is close to rest for the dab's start)."""
    from animator.page_scene import mask_on_canvas

    fit, pad = page_fit(page_size, w, h)
    inner = mask_on_canvas(ch.character.mask, fit * ch.scale, fit * np.asarray(ch.origin) + pad, w, h)
    from scipy.ndimage import binary_erosion

    return binary_erosion(inner, iterations=3)


def test_a_walking_character_stays_in_frame():
    photo, pasted = _photo()
    c, origin = cut_out(photo, pasted[2])          # char4, in the middle of the page, walks like a zombie
    ch = PageCharacter(c, *_configs("zombie.yaml"), origin=origin, name="char4")
    scene = PageScene([ch], (photo.shape[1], photo.shape[0]), Background("none"))
    opts = replace(_opts(scene), max_frames=None)
    result = render_page_scene(scene, opts)
    kx, ky = result.travel_kept[0]
    assert kx < 1.0, "the zombie clip walks out of a 400-pixel page: its travel must have been scaled"
    rig = animator.api.Rig.build(c, result.motion[0])
    verts, bounds = rig.deform(result.motion[0])
    pl = result.placements[0]
    lo = pl.scale * bounds[:, :2] + pl.offsets
    hi = pl.scale * bounds[:, 2:] + pl.offsets
    assert (lo >= -1e-6).all() and (hi[:, 0] <= opts.width + 1e-6).all() and (hi[:, 1] <= opts.height + 1e-6).all()
    # it still walks: the root covers ground
    root = result.joints(0)[:, result.motion[0].joint_names.index("root")]
    assert np.ptp(root[:, 0]) > 20
    # ... but less far than the clip carries it: untouched, it would have left the canvas
    clip_travel = result.motion[0].positions[:, result.motion[0].joint_names.index("root"), 0]
    assert np.ptp(clip_travel) * pl.scale > np.ptp(root[:, 0]) + 1
    assert (pl.scale * bounds[:, 2] + pl.offsets[0, 0] + pl.scale * (clip_travel - clip_travel[0]) * (1 - kx)).max() \
        > opts.width or (pl.scale * bounds[:, 0] + pl.offsets[0, 0] - pl.scale * (clip_travel - clip_travel[0])
                         * (1 - kx)).min() < 0


def test_keep_in_frame_scales_travel_only_as_much_as_needed():
    F = 11
    travel = np.stack([np.linspace(0, 100, F), np.zeros(F)], axis=1)
    bounds = np.array([[0.0, 0.0, 10.0, 10.0]] * F) + np.concatenate([travel, travel], axis=1)
    offsets, kept = keep_in_frame(bounds, travel, 1.0, np.array([0.0, 0.0]), 200, 50)
    assert kept == (1.0, 1.0) and np.allclose(offsets, 0)
    offsets, kept = keep_in_frame(bounds, travel, 1.0, np.array([140.0, 0.0]), 200, 50)
    assert kept[0] == pytest.approx(0.5)                            # 50 px of room for 100 px of travel
    right = bounds[:, 2] + offsets[:, 0]
    assert right.max() == pytest.approx(200) and (right <= 200 + 1e-9).all()
    assert np.all(np.diff(right) > 0)                               # still walks the same way


def test_inpainting_leaves_no_trace_of_the_characters():
    scene = _scene()
    w, h = canvas_size(scene.page_size, 500)
    fit, pad = page_fit(scene.page_size, w, h)
    from animator.canvas import Placement
    from animator.page_scene import mask_on_canvas

    places = [Placement(fit * c.scale, (fit * np.asarray(c.origin) + pad)[None], w, h, 0.0) for c in scene.characters]
    after = page_background(scene, w, h, fit, pad)
    pw, ph = scene.page_size
    sw, sh = round(pw * fit), round(ph * fit)      # the page on the canvas (500x375 in a 500x376 canvas)
    assert (w - sw, h - sh) == (0, 1) and tuple(pad) == (0, 0.5)
    before = np.zeros((h, w, 3), np.uint8)
    before[:sh, :sw] = np.asarray(Image.fromarray(_photo()[0]).resize((sw, sh), Image.Resampling.LANCZOS))
    before[sh:] = before[sh - 1]
    masks = [mask_on_canvas(c.character.mask, p.scale, p.offsets[0], w, h) for c, p in zip(scene.characters, places)]
    union = np.logical_or.reduce(masks)
    for c, m in zip(scene.characters, masks):
        others = union & ~m
        grain = inpaint.paper_grain(before, m, others)
        t_before, t_after = inpaint.trace(before, m, others), inpaint.trace(after, m, others)
        assert t_before > 20 * grain, (c.name, t_before, grain)
        assert t_after < 1.5 * grain, (c.name, t_after, grain)
    # and the paper away from the characters is the photo's
    far = ~inpaint.grow(union, 8)
    far[sh:] = False
    assert np.abs(after[far].astype(int) - before[far]).max() == 0


def test_the_page_is_cleaned_where_each_drawing_was_drawn_not_where_its_character_stands():
    """Moved characters (``origin`` elsewhere, ``drawn_at`` where drawn), one cut from another photo
    (``on_page`` False) and a dropped drawing (``taken_out``): the background differs from the photo only
    at the drawn places, and there it is paper."""
    from animator.page_scene import Drawing, drawn_on_canvas, mask_on_canvas

    scene = _scene()
    pw, ph = scene.page_size
    ch = scene.characters
    moved = [replace(c, origin=(c.origin[0] + 40, max(0.0, c.origin[1] - 200)), drawn_at=c.origin) for c in ch[:2]]
    elsewhere = replace(ch[2], origin=(600.0, 450.0), on_page=False)      # drawn on another photo
    dropped = Drawing(ch[3].character.mask, ch[3].origin, ch[3].scale)
    s = replace(scene, characters=[*moved, elsewhere], taken_out=[dropped])
    w, h = canvas_size(scene.page_size, 500)
    fit, pad = page_fit(scene.page_size, w, h)
    after = page_background(s, w, h, fit, pad)
    sw, sh = round(pw * fit), round(ph * fit)
    before = np.zeros((h, w, 3), np.uint8)
    before[:sh, :sw] = np.asarray(Image.fromarray(_photo()[0]).resize((sw, sh), Image.Resampling.LANCZOS))
    before[sh:] = before[sh - 1]
    hole = drawn_on_canvas(s, w, h, fit, pad)
    drawn = [mask_on_canvas(c.character.mask, fit * c.scale, fit * np.asarray(c.origin) + pad, w, h)
             for c in (*ch[:2], ch[3])]
    np.testing.assert_array_equal(hole, np.logical_or.reduce(drawn))    # char3's (from elsewhere) is not a hole
    union = np.logical_or.reduce([mask_on_canvas(c.character.mask, fit * c.scale, fit * np.asarray(c.origin) + pad,
                                                 w, h) for c in ch])
    for m in drawn:
        grain = inpaint.paper_grain(before, m, union & ~m)
        assert inpaint.trace(after, m, union & ~m) < 1.5 * grain
    far = ~inpaint.grow(hole, 8)
    far[sh:] = False
    assert np.abs(after[far].astype(int) - before[far]).max() == 0       # where they stand now: the photo, untouched
    # without drawn_at a character stands where it was drawn: the old scenes' pages are unchanged
    np.testing.assert_array_equal(drawn_on_canvas(scene, w, h, fit, pad), np.logical_or.reduce(
        [mask_on_canvas(c.character.mask, fit * c.scale, fit * np.asarray(c.origin) + pad, w, h) for c in ch]))


@pytest.mark.parametrize("method", ["telea", "biharmonic"])
def test_other_inpainting_methods_also_clean(method):
    photo, pasted = _photo()
    small = photo[::2, ::2]
    m = pasted[0].mask[::2, ::2]
    out = inpaint.remove(small, m, method)
    others = np.logical_or.reduce([p.mask[::2, ::2] for p in pasted[1:]])
    assert inpaint.trace(out, m, others) < 3 * inpaint.paper_grain(small, m, others)


@pytest.mark.parametrize("fmt,reader", [("gif", "pil"), ("webp", "pil"), ("apng", "pil"), ("mp4", "ffmpeg"),
                                        ("webm", "ffmpeg"), ("frames", "zip"), ("sheet", "zip")])
def test_renders_in_the_frame_formats(fmt, reader):
    scene = _scene(motions=("dab.yaml",) * 4)
    opts = replace(_opts(scene, fmt), max_frames=4)
    result = render_page_scene(scene, opts)
    if reader == "pil":
        im = Image.open(io.BytesIO(result.data))
        assert im.size == (opts.width, opts.height) and getattr(im, "n_frames", 1) == 4
    elif reader == "zip":
        import zipfile

        names = zipfile.ZipFile(io.BytesIO(result.data)).namelist()
        assert len([n for n in names if n.endswith(".png")]) == (4 if fmt == "frames" else 1), names
    else:
        import imageio_ffmpeg

        proc = subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-i", "-", "-f", "null", "-"],
                              input=result.data, capture_output=True)
        assert proc.returncode == 0, proc.stderr
    assert result.frame_count == 4


def test_an_image_background_covers_the_canvas_and_a_colour_fills_it():
    scene = _scene(motions=("dab.yaml",) * 4)
    sky = np.zeros((60, 300, 3), np.uint8)
    sky[..., 2] = 200
    for bg, expect in ((Background("image", image=sky), (0, 0, 200)), (Background("colour", colour=(10, 200, 30)),
                                                                        (10, 200, 30))):
        s = replace(scene, background=bg)
        opts = replace(_opts(s, "webp"), max_frames=1)
        frame = np.asarray(Image.open(io.BytesIO(render_page_scene(s, opts).data)).convert("RGB")).astype(int)
        corner = frame[:5, :5].reshape(-1, 3).mean(axis=0)
        assert np.abs(corner - expect).max() < 12, (bg.kind, corner)


def test_bounds_and_bad_scenes_are_refused_before_any_work():
    scene = _scene(motions=("dab.yaml",) * 4)
    with pytest.raises(ConfigError, match="glb"):
        render_page_scene(scene, _opts(scene, "glb"))
    many = replace(scene, characters=scene.characters * 5)
    assert len(many.characters) > MAX_CHARACTERS
    with pytest.raises(ConfigError, match="characters"):
        render_page_scene(many, _opts(scene))
    off = replace(scene, characters=[replace(scene.characters[0], origin=(5000.0, 0.0))])
    with pytest.raises(ConfigError, match="outside"):
        render_page_scene(off, _opts(scene))
    with pytest.raises(ConfigError, match="scale"):
        render_page_scene(replace(scene, characters=[replace(scene.characters[0], scale=0.0)]), _opts(scene))
    with pytest.raises(ConfigError, match="background"):
        render_page_scene(replace(scene, background=Background("page")), _opts(scene))
    with pytest.raises(ConfigError, match="background"):
        render_page_scene(replace(scene, background=Background("stars")), _opts(scene))
    with pytest.raises(ConfigError, match="page_size"):
        render_page_scene(replace(scene, page_size=(0, 10)), _opts(scene))


def _write_folder(photo, p, folder):
    c, origin = cut_out(photo, p)
    folder.mkdir()
    Image.fromarray(c.texture).save(folder / "texture.png")
    Image.fromarray(c.mask.astype(np.uint8) * 255).save(folder / "mask.png")
    (folder / "char_cfg.yaml").write_text(yaml.safe_dump({
        "width": c.size[0], "height": c.size[1],
        "skeleton": [{"name": j.name, "loc": [float(j.loc[0]), float(j.loc[1])], "parent": j.parent}
                     for j in c.skeleton]}))
    return origin


def test_cli_renders_character_folders_on_their_page(tmp_path):
    photo, pasted = _photo()
    Image.fromarray(photo).save(tmp_path / "page.png")
    at = [_write_folder(photo, p, tmp_path / p.name) for p in pasted[:2]]
    cmd = [sys.executable, "-m", "animator", "scene", str(tmp_path / "char3"), str(tmp_path / "char1"),
           "--page", str(tmp_path / "page.png"), "--at", "%g,%g" % at[0], "--at", "%g,%g" % at[1],
           "--motion", str(MOTION_CONFIGS / "dab.yaml"), "--max-frames", "3", "-o", str(tmp_path / "s.gif"),
           "--dump-joints", str(tmp_path / "j.json")]
    run = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    im = Image.open(tmp_path / "s.gif")
    assert im.size == canvas_size((photo.shape[1], photo.shape[0])) and im.n_frames == 3
    doc = json.loads((tmp_path / "j.json").read_text())
    assert [c["character"] for c in doc["characters"]] == [str(tmp_path / "char3"), str(tmp_path / "char1")]
    # a bad command line is a usage error naming the option
    bad = subprocess.run(cmd[:-4] + ["--at", "1,2"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--at" in bad.stderr
    bad = subprocess.run(cmd[:6] + ["--background", "page", "--motion", "x.yaml", "-o", str(tmp_path / "t.gif")],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--page" in bad.stderr


def test_cli_takes_library_motion_names_and_one_number_for_the_size(tmp_path):
    """As the main command: ``--motion dab`` names a motion of the library, ``--size N`` a canvas (here of the
    page's shape, its longer side N); a name the library lacks is an input error naming the nearest."""
    photo, pasted = _photo()
    Image.fromarray(photo).save(tmp_path / "page.png")
    at = _write_folder(photo, pasted[1], tmp_path / "char1")
    cmd = [sys.executable, "-m", "animator", "scene", str(tmp_path / "char1"), "--page", str(tmp_path / "page.png"),
           "--at", "%g,%g" % at, "--max-frames", "2", "--size", "300"]
    run = subprocess.run(cmd + ["--motion", "dab", "-o", str(tmp_path / "s.gif")], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    im = Image.open(tmp_path / "s.gif")
    assert im.size == canvas_size((photo.shape[1], photo.shape[0]), 300) == (300, 224) and im.n_frames == 2
    run = subprocess.run(cmd + ["--motion", "dabb", "-o", str(tmp_path / "t.gif")], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 1 and "did you mean dab" in run.stderr, run.stderr
    run = subprocess.run(cmd[:-1] + ["5", "--motion", "dab", "-o", str(tmp_path / "t.gif")], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "--size" in run.stderr, run.stderr


def test_written_as_animated_drawings_scene_files_every_character_stands_where_it_was_drawn(tmp_path):
    from animator.ad_scene import ad_scene_files
    from animator.scene import _to_world, load_scene, render_scene

    scene = _scene(motions=("dab.yaml", "jumping_jacks.yaml", "wave_hello.yaml", "dab.yaml"))
    w, h = canvas_size(scene.page_size, 400)
    for name, data in ad_scene_files(scene, w, h).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    ad = load_scene(tmp_path / "scene.yaml")
    assert (ad.width, ad.height) == (w, h) and ad.background_image is not None
    fit, pad = page_fit(scene.page_size, w, h)
    for ch, sc in zip(scene.characters, ad.characters):
        rest = np.array([j.loc for j in ch.character.skeleton], np.float64)
        on_canvas, depth = ad.camera.project(_to_world(rest, sc))
        np.testing.assert_allclose(on_canvas, fit * (np.asarray(ch.origin) + ch.scale * rest) + pad, atol=0.01)
        assert (depth > 0).all()
    # and AnimatedDrawings' scene renders (its own order: nearer = larger in front)
    out = render_scene(ad, animator.RenderOptions(format="gif", max_frames=2))
    assert Image.open(io.BytesIO(out.data)).size == (w, h)
    # the CLI writes the same files
    photo, pasted = _photo()
    at = _write_folder(photo, pasted[1], tmp_path / "c1")
    run = subprocess.run([sys.executable, "-m", "animator", "scene", str(tmp_path / "c1"), "--at", "%g,%g" % at,
                          "--page-size", "1000x750", "--motion", str(MOTION_CONFIGS / "dab.yaml"),
                          "--write-ad", str(tmp_path / "ad")], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert load_scene(tmp_path / "ad" / "scene.yaml").characters[0].retarget_cfg.char_starting_location[2] < 0


def _mask_on_canvas_whole(mask, scale, offset, width, height):
    """The drawing resampled whole at its scale, then cropped: what mask_on_canvas must equal."""
    import math

    h, w = mask.shape
    ox, oy = float(offset[0]), float(offset[1])
    x0, y0 = math.floor(ox), math.floor(oy)
    x1, y1 = math.ceil(ox + scale * w), math.ceil(oy + scale * h)
    out = np.zeros((height, width), bool)
    img = Image.fromarray(mask.astype(np.uint8) * 255)
    a = (1 / scale, 0, (x0 - ox) / scale, 0, 1 / scale, (y0 - oy) / scale)
    part = np.asarray(img.transform((x1 - x0, y1 - y0), Image.Transform.AFFINE, a, Image.Resampling.BILINEAR)) > 127
    cx0, cy0, cx1, cy1 = max(0, x0), max(0, y0), min(width, x1), min(height, y1)
    out[cy0:cy1, cx0:cx1] = part[cy0 - y0:cy1 - y0, cx0 - x0:cx1 - x0]
    return out


@pytest.mark.parametrize("scale,offset", [(1.0, (10.3, 20.7)), (2.7, (-150.2, -80.6)), (0.4, (300.5, -10.0))])
def test_a_mask_on_the_canvas_is_the_whole_drawing_resampled_then_cropped(scale, offset):
    from animator.page_scene import mask_on_canvas

    photo, pasted = _photo()
    c, _ = cut_out(photo, pasted[0])
    got = mask_on_canvas(c.mask, scale, np.array(offset), 400, 300)
    assert got.any() and np.array_equal(got, _mask_on_canvas_whole(c.mask, scale, offset, 400, 300))


def test_a_character_drawn_huge_is_masked_within_the_canvas_only():
    """Issue 41 S2: a character from a 6300 px photo on the page of a 54 px one is drawn at ~400 canvas
    px per texture px; its mask was resampled whole (about 91,000 x 98,000 px) before any size check,
    and the render process was killed for memory. Run under a 1 GiB data limit."""
    code = ("import resource, numpy as np; resource.setrlimit(resource.RLIMIT_DATA, (2**30, 2**30))\n"
            "from animator.page_scene import mask_on_canvas\n"
            "mask = np.zeros((237, 230), bool); mask[20:200, 30:210] = True\n"
            "out = mask_on_canvas(mask, 400.0, np.array([-20000.0, -30000.0]), 400, 300)\n"
            "print(int(out.sum()))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert run.returncode == 0, run.stderr[-800:]
    assert int(run.stdout) == 400 * 300  # the canvas lies inside the drawing's mask
