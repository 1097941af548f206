"""A sprite sheet: one RGBA PNG holding every frame, trimmed and packed, plus a "JSON Hash" atlas.

The atlas is the JSON Hash format that TexturePacker writes and Phaser, PixiJS, Cocos and Godot
importers read without a plugin::

    {"frames": {"frame_0000": {"frame": {"x", "y", "w", "h"},      # the rectangle in the sheet
                               "rotated": false,
                               "trimmed": true,
                               "spriteSourceSize": {"x", "y", "w", "h"},  # where it sits in the canvas
                               "sourceSize": {"w", "h"},                 # the canvas
                               "duration": 40,                           # ms
                               "pivot": {"x": 0.5, "y": 0.5}},           # canvas centre
                ...},
     "meta": {"app", "version", "image": "sheet.png", "format": "RGBA8888", "size": {"w", "h"},
              "scale": "1", "frame_time_s", "loop", "frameTags": [{"name", "from", "to", "direction"}]}}

Drawing each frame's rectangle at ``spriteSourceSize.x, .y`` on a transparent ``sourceSize``
canvas gives back the rendered frame exactly. ``duration`` is in whole milliseconds, rounded
cumulatively so that the sum is the clip's duration; ``frameTags`` names the whole clip once (the
Aseprite extension several engines read for animations).

Packing: each frame is trimmed to the box of its pixels with alpha > 0 (a blank frame keeps one
transparent pixel); frames whose trimmed pixels are identical share one rectangle (an alias, as
TexturePacker does). The distinct rectangles are packed in shelves (next-fit decreasing height):
sorted tallest first, placed left to right along a shelf as wide as the sheet, a new shelf below
when the next one does not fit; rectangles are kept ``PADDING`` pixels apart (transparent), so a
texture sampled with bilinear filtering does not bleed a neighbour in. The sheet's width is the
candidate (from the widest rectangle to one row of all of them) that gives the smallest square
around the sheet (GPUs and engines limit the longer side), the smaller area on ties.
"""
from __future__ import annotations

import hashlib
import io
import json
import zipfile
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from ..errors import OutputTooLarge, RenderError
from .frames import frame_stem
from .png import opaque_box, png_bytes
from .timing import durations_ms

#: Transparent pixels between two rectangles of the sheet.
PADDING = 1
#: Largest sheet side in pixels: textures beyond this load on no GPU (and nothing is packed beyond).
MAX_SIDE = 16384
#: Most pixels of trimmed frames a sheet holds (256 MB of RGBA while packing); packing stops with
#: :class:`OutputTooLarge` as soon as the frames seen so far pass it, so memory stays bounded.
MAX_PIXELS = 8192 * 8192


@dataclass
class Sheet:
    """A packed sheet: the RGBA image and the atlas that cuts it (see the module docstring)."""

    image: np.ndarray
    atlas: dict


def trim(rgba: np.ndarray) -> tuple[np.ndarray, tuple[int, int]]:
    """The frame cut to the box of its pixels with alpha > 0, and that box's (x, y) in the frame."""
    box = opaque_box(rgba)
    if box is None:
        return np.zeros((1, 1, 4), np.uint8), (0, 0)
    x0, y0, x1, y1 = box
    return np.ascontiguousarray(rgba[y0:y1, x0:x1]), (x0, y0)


def shelf_pack(sizes: list[tuple[int, int]], width: int, padding: int = PADDING) -> tuple[list[tuple[int, int]], int]:
    """Positions (x, y) of rectangles of ``sizes`` (w, h) on shelves of ``width`` pixels, tallest
    first, and the height used. Every rectangle must be at most ``width`` wide."""
    order = sorted(range(len(sizes)), key=lambda i: (-sizes[i][1], -sizes[i][0], i))
    pos: list[tuple[int, int]] = [(0, 0)] * len(sizes)
    x = y = shelf_h = 0
    for i in order:
        w, h = sizes[i]
        if x > 0 and x + w > width:
            y += shelf_h + padding
            x = shelf_h = 0
        pos[i] = (x, y)
        x += w + padding
        shelf_h = max(shelf_h, h)
    return pos, y + shelf_h


def choose_width(sizes: list[tuple[int, int]], padding: int = PADDING, candidates: int = 48) -> int:
    """The sheet width (of up to ``candidates`` tried) whose shelf packing has the shortest longer
    side, then the smallest area."""
    widest = max(w for w, _ in sizes)
    row = sum(w for w, _ in sizes) + padding * (len(sizes) - 1)
    best = None
    for width in sorted(set(np.linspace(widest, max(widest, row), candidates).astype(int).tolist())):
        _, height = shelf_pack(sizes, width, padding)
        key = (max(width, height), width * height)
        if best is None or key < best[0]:
            best = (key, width)
    return best[1]


def pack_sheet(frames: Iterable[np.ndarray], n_frames: int, frame_time_s: float, loop: int = 0,
               image_name: str = "sheet.png", max_pixels: int = MAX_PIXELS) -> Sheet:
    """Trim, deduplicate and pack RGBA frames ((H, W, 4) uint8, all one size) into a :class:`Sheet`.

    Raises :class:`OutputTooLarge` when the distinct trimmed frames pass ``max_pixels`` or the sheet
    a side of :data:`MAX_SIDE`."""
    durations = durations_ms(n_frames, frame_time_s)
    crops: list[np.ndarray] = []
    seen: dict[bytes, int] = {}
    uses: list[tuple[int, tuple[int, int], bool]] = []   # (crop index, offset, trimmed) per frame
    size = None
    pixels = 0
    for rgba in frames:
        rgba = np.asarray(rgba, np.uint8)
        if size is None:
            size = rgba.shape[:2]
        elif rgba.shape[:2] != size:
            raise RenderError(f"frame size {rgba.shape[1::-1]} differs from the first frame's {size[::-1]}")
        if len(uses) >= n_frames:
            raise RenderError(f"more than the {n_frames} frames announced")
        crop, offset = trim(rgba)
        key = hashlib.blake2b(np.array(crop.shape, np.int64).tobytes() + crop.tobytes(), digest_size=16).digest()
        if key not in seen:
            seen[key] = len(crops)
            crops.append(crop)
            pixels += crop.shape[0] * crop.shape[1]
            if pixels > max_pixels:
                raise OutputTooLarge(f"a sprite sheet of these {n_frames} frames would hold over {max_pixels} pixels: "
                                     "ask for fewer frames (max_frames) or a smaller size")
        uses.append((seen[key], offset, crop.shape[:2] != rgba.shape[:2]))
    if size is None or len(uses) != n_frames:
        raise RenderError(f"{len(uses)} frames but {n_frames} announced")
    sizes = [(c.shape[1], c.shape[0]) for c in crops]
    width = choose_width(sizes)
    pos, height = shelf_pack(sizes, width)
    if width > MAX_SIDE or height > MAX_SIDE:
        raise OutputTooLarge(f"the sprite sheet would be {width}x{height} pixels, over {MAX_SIDE} a side: "
                             "ask for fewer frames (max_frames) or a smaller size")
    image = np.zeros((height, width, 4), np.uint8)
    for c, (x, y) in zip(crops, pos):
        image[y:y + c.shape[0], x:x + c.shape[1]] = c
    H, W = size
    names = [frame_stem(i, n_frames) for i in range(n_frames)]
    entries = {}
    for name, (k, (ox, oy), trimmed), ms in zip(names, uses, durations):
        (x, y), (w, h) = pos[k], sizes[k]
        entries[name] = {"frame": {"x": x, "y": y, "w": w, "h": h}, "rotated": False, "trimmed": bool(trimmed),
                         "spriteSourceSize": {"x": ox, "y": oy, "w": w, "h": h}, "sourceSize": {"w": W, "h": H},
                         "duration": ms, "pivot": {"x": 0.5, "y": 0.5}}
    meta = {"app": "doodlepod", "version": "1.0", "image": image_name, "format": "RGBA8888",
            "size": {"w": width, "h": height}, "scale": "1", "frame_time_s": frame_time_s, "loop": loop,
            "frameTags": [{"name": "motion", "from": 0, "to": n_frames - 1, "direction": "forward"}]}
    return Sheet(image=image, atlas={"frames": entries, "meta": meta})


def encode_sheet_zip(frames: Iterable[np.ndarray], n_frames: int, frame_time_s: float, loop: int = 0) -> bytes:
    """A zip of ``sheet.png`` and its atlas ``sheet.json`` (see :func:`pack_sheet`)."""
    sheet = pack_sheet(frames, n_frames, frame_time_s, loop, image_name="sheet.png")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("sheet.png"), png_bytes(sheet.image),
                   compress_type=zipfile.ZIP_STORED)
        z.writestr("sheet.json", json.dumps(sheet.atlas, indent=1))
    return out.getvalue()
