"""Decoding an upload in a render process (app/render/steps.prepare_image): EXIF orientation,
HEIC, transparency, the rejections."""
from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from app.errors import TooLarge, UnreadableImage, UnsupportedType
from app.render import steps
from tests.support import stack


def test_prepare_image_honours_exif_orientation_and_downsizes() -> None:
    # Stored 400x200 (landscape) with a black square top-left; EXIF 6 = rotate 90 deg clockwise to show.
    stored = Image.new("RGB", (400, 200), "white")
    stored.paste((0, 0, 0), (0, 0, 40, 40))
    exif = Image.Exif()
    exif[0x0112] = 6
    data = stack.encode(stored, "JPEG", exif=exif, quality=95)
    prepared = steps.prepare_image(data, max_pixels=10**7, max_side=100)
    assert prepared.image_size == (200, 400)               # shown portrait
    assert prepared.rgb.shape == (100, 50, 3)              # downsized to a 100 px longest side
    assert prepared.scale == pytest.approx(0.25)
    assert prepared.rgb[2, -3].max() < 80                  # the square is now top-right
    assert prepared.rgb[2, 2].min() > 200
    assert Image.open(io.BytesIO(prepared.png)).size == (50, 100)


def test_prepare_image_reads_heic_with_its_orientation() -> None:
    # What an iPhone uploads: HEIC (HEVC in HEIF), stored landscape, shown portrait. pillow-heif
    # writes the EXIF orientation as the HEIF rotation that libheif applies when decoding.
    stored = Image.new("RGB", (400, 200), "white")
    stored.paste((0, 0, 0), (0, 0, 40, 40))
    exif = Image.Exif()
    exif[0x0112] = 6
    data = stack.encode(stored, "HEIF", exif=exif.tobytes(), quality=90)
    assert data[4:12] == b"ftypheic"
    prepared = steps.prepare_image(data, max_pixels=10**7, max_side=100)
    assert prepared.format == "HEIF"
    assert prepared.image_size == (200, 400)               # shown portrait
    assert prepared.rgb.shape == (100, 50, 3)
    assert prepared.rgb[2, -3].max() < 80                  # the square is now top-right
    assert prepared.rgb[2, 2].min() > 200
    with pytest.raises(TooLarge, match="0.1 MP"):          # the pixel limit holds, from the header
        steps.prepare_image(data, max_pixels=50_000, max_side=100)
    with pytest.raises(UnreadableImage):                   # a truncated HEIC is a clear 400
        steps.prepare_image(data[: len(data) // 2], max_pixels=10**7, max_side=100)


def test_prepare_image_flattens_transparency_onto_white() -> None:
    rgba = Image.new("RGBA", (40, 40), (0, 0, 0, 0))   # at least app.images.MIN_SIDE
    rgba.paste((10, 10, 10, 255), (5, 5, 10, 10))
    prepared = steps.prepare_image(stack.encode(rgba, "PNG"), 10**6, 1000)
    assert prepared.rgb[0, 0].tolist() == [255, 255, 255] and prepared.rgb[6, 6].tolist() == [10, 10, 10]


def test_prepare_image_rejections() -> None:
    big = stack.encode(Image.new("L", (3000, 2000), 255), "PNG")
    with pytest.raises(TooLarge, match="6.0 MP"):
        steps.prepare_image(big, max_pixels=5_000_000, max_side=1000)
    with pytest.raises(UnsupportedType, match="GIF"):
        steps.prepare_image(stack.encode(Image.new("RGB", (8, 8)), "GIF"), 10**6, 1000)
    with pytest.raises(UnsupportedType, match="BMP"):
        steps.prepare_image(stack.encode(Image.new("RGB", (8, 8)), "BMP"), 10**6, 1000)
    with pytest.raises(UnsupportedType, match="AVIF"):
        steps.prepare_image(b"\x00\x00\x00\x18ftypavif\x00\x00\x00\x00" + b"\x00" * 64, 10**6, 1000)
    with pytest.raises(UnreadableImage):
        steps.prepare_image(b"", 10**6, 1000)
    with pytest.raises(UnreadableImage):
        steps.prepare_image(b"definitely not an image", 10**6, 1000)
    png = stack.encode(Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), np.uint8)), "PNG")
    with pytest.raises(UnreadableImage, match="corrupt or truncated"):
        steps.prepare_image(png[: len(png) // 2], 10**6, 1000)
