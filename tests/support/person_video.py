"""Videos of a person for the pose model's tests and bench: no video of a person is available
offline, so they are made from a NASA portrait (tests/fixtures/people), shifted and scaled frame by
frame (:func:`placements`, :func:`frame`), and written by ffmpeg as H.264 MP4 (:func:`write_video`)."""
from __future__ import annotations

from pathlib import Path

import imageio_ffmpeg
import numpy as np
from PIL import Image

from tests.conftest import FIXTURES

PHOTO = FIXTURES / "people" / "astronaut.jpg"
#: The size of every frame :func:`frame` makes.
CANVAS = (640, 480)


def placements(n: int) -> list[tuple[float, float, float]]:
    """(scale, x offset, y offset) of the photo on the canvas per frame: she drifts right and grows."""
    t = np.linspace(0, 1, n)
    return [(0.6 + 0.2 * k, 30 + 150 * k, 50 - 30 * k) for k in t]


def frame(photo: Image.Image, scale: float, dx: float, dy: float) -> np.ndarray:
    canvas = Image.new("RGB", CANVAS, (128, 128, 128))
    size = int(round(512 * scale))
    canvas.paste(photo.resize((size, size), Image.BILINEAR), (int(round(dx)), int(round(dy))))
    return np.asarray(canvas)


def write_video(path: Path, frames: list[np.ndarray], fps: float = 15.0) -> Path:
    h, w = frames[0].shape[:2]
    gen = imageio_ffmpeg.write_frames(str(path), (w, h), fps=fps, codec="libx264", quality=8,
                                      macro_block_size=16, ffmpeg_log_level="error")
    gen.send(None)
    for f in frames:
        gen.send(np.ascontiguousarray(f))
    gen.close()
    return path
