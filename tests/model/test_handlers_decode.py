"""Request decoding and validation shared by both TorchServe handlers (handlers/handler_base.py).

Pure functions on bytes; the same paths run inside TorchServe in tests/model/test_handlers.py.
"""
from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from handlers.handler_base import ImageLimits, RequestError, clip_box, decode_image, request_bytes


def encode(img: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


def test_png_decodes_to_bgr_in_pixel_order():
    rgb = np.zeros((20, 30, 3), np.uint8)
    rgb[2, 5] = (255, 0, 0)      # red at x=5, y=2
    rgb[17, 25] = (0, 0, 255)    # blue at x=25, y=17
    out = decode_image(encode(Image.fromarray(rgb), "PNG"))
    assert out.shape == (20, 30, 3) and out.dtype == np.uint8
    assert tuple(out[2, 5]) == (0, 0, 255)    # BGR
    assert tuple(out[17, 25]) == (255, 0, 0)
    assert out.flags["C_CONTIGUOUS"]


def test_jpeg_decodes():
    img = Image.new("RGB", (64, 48), (200, 30, 30))
    out = decode_image(encode(img, "JPEG", quality=95))
    assert out.shape == (48, 64, 3)
    b, g, r = out[24, 32].astype(int)
    assert r > 180 and g < 60 and b < 60


def test_transparent_png_reads_as_white_paper():
    rgba = np.zeros((20, 20, 4), np.uint8)           # fully transparent black ...
    rgba[5:10, 5:10] = (0, 0, 0, 255)                # ... with an opaque black square
    out = decode_image(encode(Image.fromarray(rgba, "RGBA"), "PNG"))
    assert tuple(out[0, 0]) == (255, 255, 255)
    assert tuple(out[7, 7]) == (0, 0, 0)


def test_greyscale_and_palette_become_three_channels():
    grey = Image.fromarray(np.full((20, 20), 77, np.uint8), "L")
    assert decode_image(encode(grey, "PNG"))[3, 3].tolist() == [77, 77, 77]
    pal = Image.new("RGB", (20, 20), (10, 200, 40)).convert("P")
    assert decode_image(encode(pal, "PNG")).shape == (20, 20, 3)


def test_exif_orientation_is_applied():
    img = Image.new("RGB", (40, 20), (255, 255, 255))   # wide as stored ...
    exif = Image.Exif()
    exif[0x0112] = 6                                     # ... rotate 90 deg to display
    out = decode_image(encode(img, "JPEG", exif=exif.tobytes()))
    assert out.shape[:2] == (40, 20)                     # tall as displayed


@pytest.mark.parametrize("row, code, status", [
    ({}, "empty_body", 400),
    ({"body": b""}, "empty_body", 400),
    ({"data": bytearray()}, "empty_body", 400),
    ({"body": "hello"}, "not_an_image", 415),
    ({"body": {"image": "x"}}, "not_an_image", 415),
])
def test_request_bytes_refuses_non_images(row, code, status):
    with pytest.raises(RequestError) as err:
        request_bytes(row)
    assert (err.value.code, err.value.status) == (code, status)
    assert err.value.answer() == {"error": code, "message": err.value.message}
    assert err.value.message


def test_request_bytes_prefers_multipart_field():
    assert request_bytes({"data": bytearray(b"abc"), "body": b"zzz"}) == b"abc"
    assert request_bytes({"body": bytearray(b"xyz")}) == b"xyz"


def test_bad_images_are_refused_with_codes():
    png = encode(Image.new("RGB", (64, 64), (1, 2, 3)), "PNG")
    cases = {
        "unsupported_format": b"GIF89a" + b"\0" * 40,
        "corrupt_image": png[: len(png) // 2],
        "image_too_small": encode(Image.new("RGB", (1, 1)), "PNG"),
    }
    for code, data in cases.items():
        with pytest.raises(RequestError) as err:
            decode_image(data)
        assert err.value.code == code, (code, err.value.message)
        assert 400 <= err.value.status < 500


def test_truncated_jpeg_is_corrupt():
    jpg = encode(Image.effect_noise((128, 128), 60).convert("RGB"), "JPEG")
    with pytest.raises(RequestError) as err:
        decode_image(jpg[: len(jpg) // 3])
    assert err.value.code == "corrupt_image"


def test_size_limits():
    png = encode(Image.new("RGB", (300, 20)), "PNG")
    with pytest.raises(RequestError) as err:
        decode_image(png, ImageLimits(min_side=16, max_side=256, max_pixels=10**6))
    assert (err.value.code, err.value.status) == ("image_too_large", 413)
    with pytest.raises(RequestError) as err:
        decode_image(png, ImageLimits(min_side=32, max_side=4096, max_pixels=10**6))
    assert err.value.code == "image_too_small"
    assert decode_image(png, ImageLimits(min_side=16, max_side=300, max_pixels=6000)).shape == (20, 300, 3)


def test_clip_box():
    assert clip_box([-5, 3, 120, 90], 100, 80) == [0.0, 3.0, 100.0, 80.0]


def test_device_follows_torchserve_gpu_assignment(monkeypatch):
    """No GPU here: CUDA availability is mocked to check the choice the GPU image will make."""
    from types import SimpleNamespace

    import torch

    from handlers.handler_base import select_device

    monkeypatch.delenv("DOODLEPOD_DEVICE", raising=False)
    with_gpu = SimpleNamespace(system_properties={"gpu_id": 1, "model_dir": "/x"})
    without_gpu = SimpleNamespace(system_properties={"gpu_id": None, "model_dir": "/x"})
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert select_device(with_gpu) == "cuda:1"
    assert select_device(without_gpu) == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert select_device(with_gpu) == "cpu"          # a GPU id but no usable CUDA: stay on CPU
    monkeypatch.setenv("DOODLEPOD_DEVICE", "cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert select_device(with_gpu) == "cpu"          # explicit override wins
