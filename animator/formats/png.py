"""PNG bytes of RGBA frames, the chunks inside a PNG file (for the APNG writer), and the box of a
frame's visible pixels.

Frames are (H, W, 4) uint8 arrays, straight (not premultiplied) alpha, rows top to bottom.
"""
from __future__ import annotations

import io
import struct
import zlib
from typing import Iterator

import numpy as np

from ..errors import RenderError

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_bytes(rgba: np.ndarray, compress_level: int = 6) -> bytes:
    """One RGBA PNG (Pillow's encoder, which also picks the row filters)."""
    from PIL import Image

    frame = np.ascontiguousarray(rgba, dtype=np.uint8)
    if frame.ndim != 3 or frame.shape[2] != 4:
        raise RenderError(f"expected an (H, W, 4) RGBA frame, got shape {frame.shape}")
    out = io.BytesIO()
    Image.fromarray(frame, "RGBA").save(out, "PNG", compress_level=compress_level)
    return out.getvalue()


def chunks(png: bytes) -> Iterator[tuple[bytes, bytes]]:
    """(type, data) of each chunk of a PNG file, in order (CRCs are not checked: the bytes are ours)."""
    if not png.startswith(SIGNATURE):
        raise RenderError("not a PNG file")
    at = len(SIGNATURE)
    while at + 8 <= len(png):
        (length,) = struct.unpack(">I", png[at:at + 4])
        kind = png[at + 4:at + 8]
        yield kind, png[at + 8:at + 8 + length]
        at += 12 + length


def chunk(kind: bytes, data: bytes) -> bytes:
    """One PNG chunk: length, type, data, CRC-32 of type and data."""
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def opaque_box(rgba: np.ndarray) -> tuple[int, int, int, int] | None:
    """(x0, y0, x1, y1), exclusive, of the pixels with alpha > 0, or None when there are none."""
    a = rgba[..., 3]
    rows = np.flatnonzero(a.any(axis=1))
    if len(rows) == 0:
        return None
    cols = np.flatnonzero(a[rows[0]:rows[-1] + 1].any(axis=0))
    return int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1
