"""RGBA frames of palette-index frames, for the formats written from RGBA (WebP and the exports)."""
from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np


def rgba_frames(frames: Iterable[np.ndarray], palette: np.ndarray, transparent: int) -> Iterator[np.ndarray]:
    """(H, W, 4) uint8 RGBA frames of palette-index frames: ``transparent`` becomes (0, 0, 0, 0),
    every other index its palette colour, opaque."""
    lut = np.zeros((256, 4), np.uint8)
    lut[: len(palette), :3] = palette
    lut[: len(palette), 3] = 255
    lut[transparent] = 0
    for f in frames:
        yield lut[f]
