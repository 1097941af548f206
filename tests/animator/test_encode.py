"""GIF / WebP / MP4 encoding of palette frames: exact frames back, delays, disposal, errors."""
import io

import numpy as np
import pytest
from PIL import Image, ImageSequence

from animator import RenderError
from animator.formats import encode
from animator.formats.ffmpeg import ffmpeg_exe
from animator.formats.gif import encode_gif, gif_delays
from animator.formats.mp4 import encode_mp4
from animator.formats.webp import encode_webp

T = 4  # transparent index
PALETTE = np.array([[255, 0, 0], [0, 160, 0], [0, 0, 255], [250, 250, 250]], np.uint8)


def _frames():
    """A square that walks right, changes colour, shrinks (pixels turn transparent) and vanishes."""
    out = []
    for k in range(12):
        f = np.full((40, 60), T, np.uint8)
        size = 12 if k < 8 else 12 - 3 * (k - 7)
        if k < 11:
            f[10:10 + size, 5 + 3 * k:5 + 3 * k + size] = k % 3
            f[12, 8 + 3 * k] = 3
        out.append(f)
    return out


def _rgba(frames):
    lut = np.zeros((256, 4), np.uint8)
    lut[:4, :3] = PALETTE
    lut[:4, 3] = 255
    return [lut[f] for f in frames]


def _decode(data):
    im = Image.open(io.BytesIO(data))
    frames, durations = [], []
    for fr in ImageSequence.Iterator(im):
        frames.append(np.asarray(fr.convert("RGBA")))
        durations.append(fr.info.get("duration", 0))
    return im, frames, durations


def _same_pixels(a, b):
    """RGBA equal, ignoring the colour of fully transparent pixels."""
    both_clear = (a[..., 3] == 0) & (b[..., 3] == 0)
    return np.all((a == b).all(-1) | both_clear)


def test_gif_delays_add_up_to_the_clip():
    for n, ft in [(339, 1 / 30), (283, 0.04), (839, 0.008342), (7, 0.1234)]:
        d = gif_delays(n, ft)
        assert len(d) == n
        assert abs(sum(d) - 100 * n * ft) <= 0.5
        assert max(abs(x - 100 * ft) for x in d) < 1
    assert gif_delays(3, 1 / 30) == [3, 4, 3]


def test_gif_round_trips_exact_frames_with_transparency():
    frames = _frames()
    data = encode_gif(frames, PALETTE, T, gif_delays(len(frames), 0.05))
    im, got, durations = _decode(data)
    assert im.size == (60, 40) and im.n_frames == len(frames)
    assert sum(durations) == 600
    for k, (g, want) in enumerate(zip(got, _rgba(frames))):
        assert _same_pixels(g, want), f"frame {k} differs"
    assert got[-1][..., 3].max() == 0  # the last frame is empty
    # frames that only add pixels keep the rest of the screen (disposal 1) and store a small rect
    im.seek(1)
    assert im.disposal_method in (1, 2)


def test_gif_frame_deltas_store_only_what_changed():
    still = np.full((100, 100), T, np.uint8)
    still[20:80, 20:80] = 1
    frames = [still.copy() for _ in range(10)]
    frames[5][40:45, 40:45] = 2  # one small change, then back
    data = encode_gif(frames, PALETTE, T, gif_delays(10, 0.1))
    im = Image.open(io.BytesIO(data))
    sizes = []
    for k in range(im.n_frames):
        im.seek(k)
        x0, y0, x1, y1 = im.tile[0][1] if im.tile else (0, 0, 0, 0)
        sizes.append((x1 - x0) * (y1 - y0))
    assert max(sizes[1:-1]) <= 25  # only the 5x5 change, or a 1x1 placeholder
    _, got, _ = _decode(data)
    for g, want in zip(got, _rgba(frames)):
        assert _same_pixels(g, want)


def test_gif_tolerance_keeps_frames_close():
    frames = _frames()
    pal = PALETTE.copy()
    pal[1] = [250, 10, 10]  # nearly the same red as index 0
    data = encode_gif(frames, pal, T, gif_delays(len(frames), 0.05), tolerance=20)
    _, got, _ = _decode(data)
    lut = np.zeros((256, 4), np.uint8)
    lut[:4, :3] = pal
    lut[:4, 3] = 255
    for g, f in zip(got, frames):
        want = lut[f]
        assert np.array_equal(g[..., 3] > 0, want[..., 3] > 0)
        diff = np.abs(g[..., :3].astype(int) - want[..., :3].astype(int)).max(-1)
        if (want[..., 3] > 0).any():
            assert diff[want[..., 3] > 0].max() <= 20


def test_gif_bad_input_fails_clearly():
    with pytest.raises(RenderError, match="without frames"):
        encode_gif([], PALETTE, T, [])
    with pytest.raises(RenderError, match="differs"):
        encode_gif([np.zeros((4, 4), np.uint8), np.zeros((5, 4), np.uint8)], PALETTE, T, [1, 1])
    with pytest.raises(RenderError, match="unknown output format"):
        encode(_frames(), "avi", PALETTE, T, 0.1, 12)


def test_webp_round_trips():
    frames = _frames()
    exact = encode_webp(iter(frames), PALETTE, T, 0.05, n_frames=len(frames), lossless=True)
    im = Image.open(io.BytesIO(exact))
    assert im.format == "WEBP" and im.n_frames == len(frames) and im.size == (60, 40)
    for k in (0, 3, 9):
        im.seek(k)
        assert _same_pixels(np.asarray(im.convert("RGBA")), _rgba(frames)[k])
    assert encode_webp(iter(frames), PALETTE, T, 0.05, n_frames=len(frames)) == exact  # lossless by default
    lossy = Image.open(io.BytesIO(encode_webp(frames, PALETTE, T, 0.05, lossless=False)))  # quality 80
    assert lossy.n_frames == len(frames)
    lossy.seek(3)
    got, want = np.asarray(lossy.convert("RGBA")).astype(int), _rgba(frames)[3].astype(int)
    assert np.array_equal(got[..., 3] > 127, want[..., 3] > 127)
    solid = want[..., 3] > 0
    assert np.abs(got[..., :3] - want[..., :3])[solid].mean() < 20


def test_mp4_or_a_clear_error():
    frames = _frames()
    try:
        ffmpeg_exe()
    except RenderError as exc:  # no ffmpeg on this machine: the error says the codec is missing
        assert "unavailable" in str(exc)
        with pytest.raises(RenderError, match="unavailable"):
            encode_mp4(frames, PALETTE, T, 0.05)
        return
    data = encode_mp4(frames, PALETTE, T, 0.05)
    assert data[4:8] == b"ftyp"
    with pytest.raises(RenderError, match="even"):
        encode_mp4([np.zeros((5, 6), np.uint8)], PALETTE, T, 0.05)


@pytest.mark.parametrize("n_colours", [1, 2, 3, 4, 7, 8, 15, 16, 31, 100, 255])
def test_gif_colour_table_and_code_size_fit_the_palette(n_colours):
    """The colour table holds the palette plus the transparent index, rounded up to a power of two
    (at least 4: GIF's LZW minimum code size is at least 2), and the frames decode exactly."""
    rng = np.random.default_rng(n_colours)
    pal = rng.integers(0, 256, (n_colours, 3)).astype(np.uint8)
    tr = n_colours
    frames = []
    for k in range(4):
        f = np.full((30, 40), tr, np.uint8)
        f[5 + k:20 + k, 3 + 2 * k:30 + 2 * k] = rng.integers(0, n_colours, (15, 27))
        frames.append(f)
    data = encode_gif(frames, pal, tr, [5] * 4)
    bits = max(2, int(n_colours).bit_length())
    assert data[10] & 0x80 and (data[10] & 7) + 1 == bits        # global table of 2**bits colours
    image = data.index(b"\x2c", 13 + 3 * (1 << bits))              # first image descriptor
    assert data[image + 10] == bits                                 # LZW minimum code size
    _, got, _ = _decode(data)
    lut = np.zeros((256, 4), np.uint8)
    lut[:n_colours, :3] = pal
    lut[:n_colours, 3] = 255
    for g, f in zip(got, frames):
        assert _same_pixels(g, lut[f])


def test_gif_index_beyond_the_palette_fails_clearly():
    f = np.full((8, 8), 3, np.uint8)
    f[2, 2] = 9  # 3 colours + transparent index 3: 2-bit codes cannot hold 9
    with pytest.raises(RenderError, match="palette index 9"):
        encode_gif([f], PALETTE[:3], 3, [5])


def test_gif_scattered_changes_on_flat_colour_store_the_screen_indices():
    """An opaque clip whose outline wobbles by a pixel: storing only the changed pixels ("keep"
    elsewhere) would chop the flat areas into short runs; the encoder stores the screen's own
    indices instead when that makes fewer runs, and the frames stay exact."""
    rng = np.random.default_rng(1)
    frames = []
    for k in range(8):
        f = np.full((120, 160), 3, np.uint8)          # opaque background colour 3
        f[20:100, 30:130] = 0                          # a flat red body
        edge = rng.integers(0, 2, 80).astype(bool)     # its right edge wobbles row by row
        f[20:100, 130][edge] = 0
        f[20:100, 29][~edge] = 0
        frames.append(f)
    data = encode_gif(frames, PALETTE, T, gif_delays(len(frames), 0.1))
    _, got, _ = _decode(data)
    for g, want in zip(got, _rgba(frames)):
        assert _same_pixels(g, want)
    from animator.formats.gif import _flatter, _transitions

    keep = np.full((80, 102), T, np.uint8)
    screen = np.zeros((80, 102), np.uint8)
    keep[:, 0][rng.integers(0, 2, 80).astype(bool)] = 0
    keep[::3, 50] = 0
    chosen = _flatter(keep, screen, np.uint8(T))
    assert np.array_equal(chosen, screen) and _transitions(chosen) < _transitions(keep)
    # where little changed on a busy screen, "keep" stays
    busy = rng.integers(0, 3, (80, 102)).astype(np.uint8)
    sparse = np.full((80, 102), T, np.uint8)
    sparse[40, 40:44] = 1
    assert np.array_equal(_flatter(sparse, busy, np.uint8(T)), sparse)
