"""Animated PNG (APNG): full RGBA alpha, every frame shown for exactly the clip's frame time.

Written here, chunk by chunk, so frames stream through (memory holds one frame): each frame is
encoded by Pillow as a PNG of the rectangle that changed (the union of the opaque boxes of this
frame and the last one; outside it both are transparent), whose image data becomes the frame's
``IDAT`` (the first frame, always whole) or ``fdAT`` chunks. Every frame is drawn with
``APNG_BLEND_OP_SOURCE`` (its rectangle replaces what is there, alpha included) and
``APNG_DISPOSE_OP_NONE``, so the canvas after frame i is exactly frame i.

Timing: each ``fcTL`` holds the delay as a fraction ``num/den`` of a second; the clip's frame time
is written as the closest fraction with both terms below 2**16 (1/25 s, 1/30 s, 1/120 s are
exact), so frames do not drift the way whole-millisecond or whole-centisecond delays do.
"""
from __future__ import annotations

import struct
from fractions import Fraction
from typing import Iterable

import numpy as np

from ..errors import RenderError
from .boxes import union
from .png import SIGNATURE, chunk, chunks, opaque_box, png_bytes


def delay_fraction(frame_time_s: float) -> tuple[int, int]:
    """``frame_time_s`` as (numerator, denominator), both 1..65535, nearest such fraction."""
    if not frame_time_s > 0:
        raise RenderError(f"frame time must be positive, got {frame_time_s!r}")
    f = Fraction(frame_time_s).limit_denominator(65535)
    while f.numerator > 65535:  # a frame time over 65535 s cannot happen here, but stay in range
        f = Fraction(f.numerator // 2, max(1, f.denominator // 2))
    return max(1, f.numerator), max(1, f.denominator)


def encode_apng(frames: Iterable[np.ndarray], n_frames: int, frame_time_s: float, loop: int = 0,
                compress_level: int = 6) -> bytes:
    """An APNG of ``n_frames`` RGBA frames ((H, W, 4) uint8, all one size), ``loop`` plays (0: forever)."""
    if n_frames < 1:
        raise RenderError("cannot encode an animation without frames")
    num, den = delay_fraction(frame_time_s)
    out = [SIGNATURE]
    seq = 0
    prev_box = None
    size = None
    count = 0
    for rgba in frames:
        rgba = np.asarray(rgba, dtype=np.uint8)
        if size is None:
            size = rgba.shape[:2]
            rect = (0, 0, size[1], size[0])
        elif rgba.shape[:2] != size:
            raise RenderError(f"frame size {rgba.shape[1::-1]} differs from the first frame's {size[::-1]}")
        else:
            rect = union(prev_box, opaque_box(rgba)) or (0, 0, 1, 1)
        count += 1
        if count > n_frames:
            raise RenderError(f"more than the {n_frames} frames announced")
        prev_box = opaque_box(rgba)
        x0, y0, x1, y1 = rect
        png = png_bytes(rgba[y0:y1, x0:x1], compress_level)
        if count == 1:
            for kind, data in chunks(png):
                if kind == b"IHDR":
                    out.append(chunk(b"IHDR", data))
                    out.append(chunk(b"acTL", struct.pack(">II", n_frames, loop)))
                    break
        out.append(chunk(b"fcTL", struct.pack(">IIIIIHHBB", seq, x1 - x0, y1 - y0, x0, y0, num, den, 0, 0)))
        seq += 1
        for kind, data in chunks(png):
            if kind != b"IDAT":
                continue
            if count == 1:
                out.append(chunk(b"IDAT", data))
            else:
                out.append(chunk(b"fdAT", struct.pack(">I", seq) + data))
                seq += 1
    if count != n_frames:
        raise RenderError(f"{count} frames but {n_frames} announced")
    out.append(chunk(b"IEND", b""))
    return b"".join(out)

