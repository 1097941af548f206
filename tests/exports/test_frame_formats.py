"""APNG, WebM, PNG frames and the sprite sheet, each read back by an independent decoder (Pillow,
the bundled ffmpeg's libvpx) and compared with the GIF of the same render, which Pillow decodes."""
from __future__ import annotations

import io
import json
import re
import subprocess
import zipfile

import numpy as np
import pytest
from PIL import Image, ImageSequence

from animator.formats.ffmpeg import ffmpeg_exe
from tests.support import procs


def gif_frames(render_as, **options) -> list[np.ndarray]:
    """The GIF's frames as Pillow composes them, RGBA; fully transparent pixels made (0, 0, 0, 0)."""
    im = Image.open(io.BytesIO(render_as("gif", **options).data))
    return [_clear(np.asarray(f.convert("RGBA"))) for f in ImageSequence.Iterator(im)]


def _clear(rgba: np.ndarray) -> np.ndarray:
    out = np.array(rgba)
    out[out[..., 3] == 0] = 0
    return out


def _corners_clear(rgba: np.ndarray) -> bool:
    return all(rgba[y, x, 3] == 0 for y in (0, -1) for x in (0, -1))


def test_apng_has_every_frame_with_alpha_and_the_exact_frame_time(render_as):
    r = render_as("apng")
    assert r.extension == "png" and r.mime == "image/png"
    im = Image.open(io.BytesIO(r.data))
    assert im.format == "PNG" and im.is_animated and im.n_frames == r.frame_count == 12
    assert im.info.get("loop") == 0
    want = gif_frames(render_as)
    frame_ms = 1000 * r.duration_s / r.frame_count
    for i, f in enumerate(ImageSequence.Iterator(im)):
        assert f.info["duration"] == pytest.approx(frame_ms, abs=1e-6)   # a fraction of a second, not rounded
        rgba = np.asarray(f.convert("RGBA"))
        assert rgba.shape == (144, 160, 4)
        assert _corners_clear(rgba)
        assert 0 < (rgba[..., 3] == 255).mean() < 0.9
        assert np.array_equal(_clear(rgba), want[i]), f"frame {i} differs from the GIF's"


def test_apng_frame_time_of_120_fps_is_exact():
    from animator.formats.apng import delay_fraction

    assert delay_fraction(1 / 120) == (1, 120)
    assert delay_fraction(0.04) == (1, 25)
    assert delay_fraction(1 / 30) == (1, 30)
    assert delay_fraction(11.28 / 12) == (47, 50)


def _probe(path) -> str:
    return subprocess.run([ffmpeg_exe(), "-hide_banner", "-i", str(path)], capture_output=True, text=True).stderr


def _decode_webm(path, w, h, codec: str | None) -> np.ndarray:
    cmd = [ffmpeg_exe(), "-v", "error"] + (["-c:v", codec] if codec else []) + [
        "-i", str(path), "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "rgba", "-"]
    out = subprocess.run(cmd, capture_output=True, check=True, timeout=60).stdout
    return np.frombuffer(out, np.uint8).reshape(-1, h, w, 4)


def test_webm_is_vp9_with_an_alpha_plane_and_every_frame(render_as, tmp_path):
    r = render_as("webm")
    assert r.extension == "webm" and r.mime == "video/webm"
    path = tmp_path / "dab.webm"
    path.write_bytes(r.data)
    info = _probe(path)
    assert re.search(r"Input #0, matroska,webm", info), info
    assert re.search(r"Video: vp9", info), info
    assert re.search(r"alpha_mode\s*:\s*1", info), info          # the alpha stream's flag
    frames = _decode_webm(path, 160, 144, "libvpx-vp9")          # libvpx reads BlockAdditional's alpha
    assert len(frames) == r.frame_count == 12
    want = gif_frames(render_as)
    for i, f in enumerate(frames):
        assert (f[[0, 0, -1, -1], [0, -1, 0, -1], 3] < 8).all()    # lossy: clear give or take a step or two
        got, exp = f[..., 3] >= 128, want[i][..., 3] > 0
        assert (got & exp).sum() / (got | exp).sum() > 0.9, f"frame {i}: alpha does not match the character"
    # the native decoder drops the alpha stream: what a reader without BlockAdditional sees
    opaque = _decode_webm(path, 160, 144, None)
    assert len(opaque) == 12 and (opaque[..., 3] == 255).all()


def test_png_frames_zip_holds_rgba_frames_and_their_timing(render_as):
    r = render_as("frames")
    assert r.extension == "zip" and r.mime == "application/zip"
    z = zipfile.ZipFile(io.BytesIO(r.data))
    doc = json.loads(z.read("frames.json"))
    assert doc["width"] == 160 and doc["height"] == 144 and doc["frame_count"] == 12 and doc["loop"] == 0
    assert len(doc["durations_ms"]) == 12 and sum(doc["durations_ms"]) == round(1000 * r.duration_s)
    assert doc["frame_time_s"] == pytest.approx(r.duration_s / 12)
    assert sorted(z.namelist()) == sorted(doc["files"] + ["frames.json"]) and doc["files"] == sorted(doc["files"])
    want = gif_frames(render_as)
    for i, name in enumerate(doc["files"]):
        im = Image.open(io.BytesIO(z.read(name)))
        assert im.format == "PNG" and im.mode == "RGBA" and im.size == (160, 144)
        rgba = np.asarray(im)
        assert _corners_clear(rgba)
        assert np.array_equal(_clear(rgba), want[i]), f"{name} differs from the GIF's frame {i}"


def test_sprite_sheet_recut_gives_back_the_gif_frames_pixel_for_pixel(render_as):
    r = render_as("sheet", max_frames=30)
    z = zipfile.ZipFile(io.BytesIO(r.data))
    assert sorted(z.namelist()) == ["sheet.json", "sheet.png"]
    atlas = json.loads(z.read("sheet.json"))
    sheet = np.asarray(Image.open(io.BytesIO(z.read("sheet.png"))).convert("RGBA"))
    meta = atlas["meta"]
    assert meta["image"] == "sheet.png" and meta["size"] == {"w": sheet.shape[1], "h": sheet.shape[0]}
    want = gif_frames(render_as, max_frames=30)
    names = sorted(atlas["frames"])
    assert len(names) == len(want) == 30
    used = np.zeros(sheet.shape[:2], np.int32)
    for i, name in enumerate(names):
        e = atlas["frames"][name]
        fr, src = e["frame"], e["spriteSourceSize"]
        assert e["rotated"] is False and e["sourceSize"] == {"w": 160, "h": 144}
        assert (fr["w"], fr["h"]) == (src["w"], src["h"])
        canvas = np.zeros((144, 160, 4), np.uint8)
        canvas[src["y"]:src["y"] + src["h"], src["x"]:src["x"] + src["w"]] = \
            sheet[fr["y"]:fr["y"] + fr["h"], fr["x"]:fr["x"] + fr["w"]]
        assert np.array_equal(_clear(canvas), want[i]), f"{name} re-cut from the sheet differs from GIF frame {i}"
        # trimmed tightly: the rectangle's border rows and columns each hold an opaque pixel
        cut = canvas[src["y"]:src["y"] + src["h"], src["x"]:src["x"] + src["w"], 3]
        assert e["trimmed"] and cut[0].any() and cut[-1].any() and cut[:, 0].any() and cut[:, -1].any()
        assert e["duration"] in (round(1000 * r.duration_s / 30), round(1000 * r.duration_s / 30) + 1,
                                 round(1000 * r.duration_s / 30) - 1)
        if used[fr["y"], fr["x"]] != i + 1:   # an alias shares its twin's rectangle; others must not overlap
            assert not used[fr["y"]:fr["y"] + fr["h"], fr["x"]:fr["x"] + fr["w"]].any(), f"{name} overlaps"
            used[fr["y"]:fr["y"] + fr["h"], fr["x"]:fr["x"] + fr["w"]] = i + 1
    assert sum(e["duration"] for e in atlas["frames"].values()) == round(1000 * r.duration_s)
    # packed tightly: the rectangles cover most of the sheet
    assert (used > 0).mean() > 0.6, (used > 0).mean()


def test_shelf_packing_never_overlaps_and_stays_within_the_width():
    from animator.formats.sheet import PADDING, choose_width, shelf_pack

    rng = np.random.default_rng(3)
    sizes = [(int(w), int(h)) for w, h in rng.integers(1, 90, size=(60, 2))]
    width = choose_width(sizes)
    pos, height = shelf_pack(sizes, width)
    grid = np.zeros((height + PADDING, width + PADDING), np.int32)
    for (x, y), (w, h) in zip(pos, sizes):
        assert x + w <= width and y + h <= height
        assert not grid[y:y + h + PADDING, x:x + w + PADDING].any()
        grid[y:y + h, x:x + w] = 1
    assert max(width, height) < 1.5 * np.sqrt(sum(w * h for w, h in sizes)) + 90


def test_apng_delays_are_exact_fractions_where_milliseconds_would_round():
    from animator.formats.apng import encode_apng

    frames = []
    for k in range(6):
        f = np.zeros((20, 30, 4), np.uint8)
        f[5:15, 2 + 4 * k:8 + 4 * k] = (200, 30, 30, 255)       # a block walking right
        frames.append(f)
    im = Image.open(io.BytesIO(encode_apng(iter(frames), 6, 1 / 30)))
    got = [(fr.info["duration"], np.asarray(fr.convert("RGBA")).copy()) for fr in ImageSequence.Iterator(im)]
    assert [d for d, _ in got] == pytest.approx([1000 / 30] * 6, abs=1e-9)
    for (_, rgba), want in zip(got, frames):
        assert np.array_equal(_clear(rgba), want)   # the rectangles that changed compose back exactly


def test_a_failing_frame_source_leaves_no_ffmpeg_and_no_file(tmp_path, monkeypatch):
    import os
    import tempfile

    from animator.formats.webm import encode_webm

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def frames():
        for k in range(3):
            yield np.full((32, 48, 4), 40 * k, np.uint8)
        raise KeyboardInterrupt("the render was cancelled")      # what a cancelled render raises from

    def ffmpeg_children() -> list[int]:
        return [pid for pid in procs.children(os.getpid()) if pid in procs.matching("comm", b"ffmpeg")]

    with pytest.raises(KeyboardInterrupt):
        encode_webm(frames(), 0.04)
    assert ffmpeg_children() == []
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fmt", ["apng", "frames", "sheet"])
def test_encode_writes_the_frame_exports_from_palette_frames(fmt):
    from animator.formats import FORMATS, encode

    palette = np.array([[250, 20, 20], [20, 20, 250]], np.uint8)
    frames = [np.full((12, 16), 2, np.uint8) for _ in range(3)]       # index 2: transparent
    for k, f in enumerate(frames):
        f[3:9, 2 + 3 * k:8 + 3 * k] = k % 2
    data, mime, ext = encode(iter(frames), fmt, palette, 2, 0.1, 3)
    assert (mime, ext) == FORMATS[fmt]
    if fmt == "apng":
        im = Image.open(io.BytesIO(data))
        assert im.n_frames == 3 and np.asarray(im.convert("RGBA"))[4, 3].tolist() == [250, 20, 20, 255]
    else:
        assert len(zipfile.ZipFile(io.BytesIO(data)).namelist()) == (4 if fmt == "frames" else 2)


def test_encode_refuses_the_rig_formats():
    from animator import RenderError
    from animator.formats import encode

    with pytest.raises(RenderError, match="rig"):
        encode(iter([np.zeros((4, 4), np.uint8)]), "glb", np.zeros((1, 3), np.uint8), 1, 0.1, 1)
