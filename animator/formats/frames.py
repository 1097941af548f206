"""A zip of RGBA PNG frames plus ``frames.json``: for video editors, game engines and scripts.

Layout::

    frames.json          {"width", "height", "frame_count", "frame_time_s", "durations_ms": [...],
                          "loop": 0, "files": ["frame_0000.png", ...]}
    frame_0000.png       canvas-sized RGBA PNGs, straight alpha, in playing order
    frame_0001.png
    ...

``durations_ms`` are whole milliseconds rounded cumulatively, so they add up to the clip's
duration; ``frame_time_s`` is exact. ``loop`` 0 means play forever (as in GIF and APNG). PNGs are
already compressed, so they are stored in the zip without compressing them again.
"""
from __future__ import annotations

import io
import json
import zipfile
from typing import Iterable

import numpy as np

from ..errors import RenderError
from .png import png_bytes
from .timing import durations_ms


def frame_stem(i: int, n_frames: int) -> str:
    """``frame_0007``: frame ``i`` of ``n_frames``, zero-padded to at least 4 digits, so names sort
    in playing order (the PNG frames' file names, the sprite sheet's frame keys)."""
    return f"frame_{i:0{max(4, len(str(n_frames - 1)))}d}"


def encode_frames_zip(frames: Iterable[np.ndarray], n_frames: int, frame_time_s: float, loop: int = 0) -> bytes:
    """The zip of RGBA frames ((H, W, 4) uint8, all one size) and their ``frames.json``."""
    durations = durations_ms(n_frames, frame_time_s)
    out = io.BytesIO()
    names: list[str] = []
    size = None
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as z:
        for i, rgba in enumerate(frames):
            if i >= n_frames:
                raise RenderError(f"more than the {n_frames} frames announced")
            if size is None:
                size = rgba.shape[:2]
            elif rgba.shape[:2] != size:
                raise RenderError(f"frame size {rgba.shape[1::-1]} differs from the first frame's {size[::-1]}")
            names.append(frame_stem(i, n_frames) + ".png")
            z.writestr(names[-1], png_bytes(rgba))
        if len(names) != n_frames or size is None:
            raise RenderError(f"{len(names)} frames but {n_frames} announced")
        doc = {"width": int(size[1]), "height": int(size[0]), "frame_count": n_frames,
               "frame_time_s": frame_time_s, "durations_ms": durations, "loop": loop, "files": names}
        z.writestr("frames.json", json.dumps(doc, indent=1))
    return out.getvalue()
