"""The CPU-heavy steps of a request, run inside the render processes (never on the gevent loop).

Each function takes and returns plain picklable values (bytes, numpy arrays, dicts, animator
objects) because it runs in a ``ProcessPoolExecutor`` child started with the ``spawn`` method.
This module does not import Flask's app, the metrics or gevent.

Image coordinates: "image pixels" are those of the uploaded image after its EXIF orientation is
applied; "work pixels" are those of the downsized copy the pipeline works on
(``work = image * scale``). Both are x right, y down.
"""
from __future__ import annotations

import io
import os
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image, ImageOps

from ..errors import (
    BadMask,
    InvalidCharacter,
    MaskWrongSize,
    NoCharacter,
    UnreadableImage,
    animator_boundary,
)
from ..images import open_checked

if TYPE_CHECKING:
    import animator


@dataclass
class PreparedImage:
    rgb: np.ndarray            # uint8 (h, w, 3), work pixels
    scale: float               # work pixels per image pixel (<= 1)
    image_size: tuple[int, int]  # (width, height) of the uploaded image, oriented
    format: str
    png: bytes                 # the work image encoded for the detector
    timings_ms: dict[str, float]


def prepare_image(data: bytes, max_pixels: int, max_side: int) -> PreparedImage:
    """Decode an upload, apply its EXIF orientation, flatten alpha onto white, downsize to ``max_side``.

    Raises :class:`UnsupportedType` (not PNG/JPEG/WebP/HEIC), :class:`TooLarge` (over ``max_pixels``,
    checked from the header before decoding) or :class:`UnreadableImage`.
    """
    t0 = time.perf_counter()
    im = open_checked(data, max_pixels)
    fmt = im.format  # exif_transpose returns a new image without it
    w, h = im.size
    try:
        orientation = im.getexif().get(0x0112, 1)
    except Exception:
        orientation = 1
    longest = max(w, h)
    if fmt in ("JPEG", "MPO") and longest > max_side:
        # Let libjpeg decode at 1/2, 1/4 or 1/8 scale when that still leaves >= max_side pixels.
        k = max_side / longest
        im.draft("RGB", (max(1, int(np.ceil(w * k))), max(1, int(np.ceil(h * k)))))
    try:
        im.load()
        im = ImageOps.exif_transpose(im)
        rgb = _flatten(im)
    except Exception as exc:
        raise UnreadableImage(f"the image data is corrupt or truncated ({type(exc).__name__}: {exc})") from None
    t1 = time.perf_counter()
    image_size = (h, w) if orientation in (5, 6, 7, 8) else (w, h)
    cw, ch = rgb.size
    k = min(1.0, max_side / max(cw, ch))
    if k < 1.0:
        rgb = rgb.resize((max(1, round(cw * k)), max(1, round(ch * k))), Image.Resampling.BILINEAR,
                         reducing_gap=2.0)
    scale = rgb.size[0] / image_size[0]
    t2 = time.perf_counter()
    buf = io.BytesIO()
    rgb.save(buf, format="PNG", compress_level=1)
    t3 = time.perf_counter()
    return PreparedImage(np.asarray(rgb), scale, image_size, fmt, buf.getvalue(),
                         {"decode": (t1 - t0) * 1e3, "downsize": (t2 - t1) * 1e3, "encode_png": (t3 - t2) * 1e3})


#: Modes of greyscale images with more than 8 bits per sample (16-bit PNG): their values run to
#: 65535, which Pillow's convert("RGB") clips to white instead of scaling.
_WIDE_GREY = ("I;16", "I;16L", "I;16B", "I;16N", "I")


def _eight_bit_grey(im: Image.Image) -> Image.Image:
    """``im`` as 8-bit "L" when it is 16-bit greyscale (values scaled, not clipped); else ``im``."""
    if im.mode not in _WIDE_GREY:
        return im
    wide = np.asarray(im).astype(np.float64)
    return Image.fromarray(np.clip(np.round(wide / 257.0), 0, 255).astype(np.uint8), "L")


def _flatten(im: Image.Image) -> Image.Image:
    """RGB copy of ``im`` with any transparency composited onto white paper; 16-bit greyscale is
    scaled to 8 bits."""
    im = _eight_bit_grey(im)
    if im.mode in ("RGBA", "LA") or (im.mode == "P" and "transparency" in im.info):
        rgba = im.convert("RGBA")
        page = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        page.alpha_composite(rgba)
        return page.convert("RGB")
    return im.convert("RGB")


@dataclass
class SegmentedCrop:
    box: tuple[int, int, int, int]  # work pixels
    texture: np.ndarray             # RGBA uint8 of the crop (alpha 255, as AnimatedDrawings' texture)
    mask: np.ndarray                # bool, True on the character
    png: bytes                      # the crop encoded for the pose model
    timings_ms: dict[str, float]


def segment_crop(crop: np.ndarray, box: tuple[int, int, int, int]) -> SegmentedCrop:
    """Segment the character in ``crop`` (uint8 RGB, the work image's ``box``; the caller crops so
    that only the crop travels to the render process)."""
    from animator.segment import segment_drawing

    t0 = time.perf_counter()
    with animator_boundary("the character cannot be separated from the paper"):
        mask = segment_drawing(crop)
    t1 = time.perf_counter()
    if not mask.any():
        raise NoCharacter("no drawn character could be separated from the paper in the detected box")
    texture = np.dstack([crop, np.full(crop.shape[:2], 255, np.uint8)])
    buf = io.BytesIO()
    Image.fromarray(crop).save(buf, format="PNG", compress_level=1)
    t2 = time.perf_counter()
    return SegmentedCrop(box, texture, mask, buf.getvalue(),
                         {"segment": (t1 - t0) * 1e3, "encode_crop": (t2 - t1) * 1e3})


def segment_png(work_png: bytes, box: tuple[int, int, int, int]) -> SegmentedCrop:
    """:func:`segment_crop` of ``box`` (work pixels) in a stored work image (PNG)."""
    with Image.open(io.BytesIO(work_png)) as im:
        rgb = np.asarray(im.convert("RGB"))
    l, t, r, b = box
    r, b = min(r, rgb.shape[1]), min(b, rgb.shape[0])  # the caller's work size may be 1 px off (rounding)
    return segment_crop(np.ascontiguousarray(rgb[t:b, l:r]), (l, t, r, b))


@lru_cache(maxsize=64)
def _load_configs(motion_path: str, retarget_path: str, _mtimes: tuple[float, float]):
    import animator
    return animator.load_motion_config(motion_path), animator.load_retarget_config(retarget_path)


def _configs(motion_path: str, retarget_path: str | None):
    """A library motion's configs (cached by path and modification time), or, for a client's .bvh
    clip (``retarget_path`` None), both configs derived from the clip."""
    if retarget_path is None:
        from animator.auto_retarget import configs_for

        return configs_for(motion_path, None)
    mtimes = (os.stat(motion_path).st_mtime, os.stat(retarget_path).st_mtime)
    return _load_configs(motion_path, retarget_path, mtimes)


#: Character versions whose rig (mesh + ARAP) and sprites a render process keeps: about half of a
#: short render's CPU, reused by every later motion of the same version that lands in the process
#: (the other motions of a request, a later request for more motions, sizes or formats).
RIG_CACHE_CHARACTERS = 4


@lru_cache(maxsize=1)
def _rigs():
    """This process's :class:`animator.RigCache` (one per render process: each builds its own)."""
    import animator

    return animator.RigCache(max_characters=RIG_CACHE_CHARACTERS)


def render_motion(character: Any, motion_path: str, retarget_path: str | None,
                  options: animator.RenderOptions) -> dict[str, Any]:
    """Render one motion for ``character`` (an :class:`animator.Character`) with ``options``.

    ``motion_path``/``retarget_path``: a library motion's configs, or a client's .bvh clip and None.
    Returns the encoded file and its facts (not the per-frame motion, to keep the answer small).
    The animator's errors (e.g. a skeleton it cannot rig) become API errors at
    :func:`app.errors.animator_boundary` (422 for bad input). In a render pool job, its frames' progress
    goes to :func:`app.render.process.report_progress`.
    """
    import animator

    from .process import report_progress

    t0 = time.perf_counter()
    with animator_boundary("the character cannot be animated"):
        motion_cfg, retarget_cfg = _configs(motion_path, retarget_path)
        t1 = time.perf_counter()
        result = animator.render(character, motion_cfg, retarget_cfg, options,
                                 rigs=_rigs(), progress=report_progress)
    t2 = time.perf_counter()
    timings = {"load_configs": (t1 - t0) * 1e3, **{k: float(v) for k, v in result.timings_ms.items()},
               "total": (t2 - t0) * 1e3}
    return {"data": result.data, "mime": result.mime, "extension": result.extension,
            "frame_count": int(result.frame_count), "duration_s": float(result.duration_s),
            "timings_ms": timings, "pid": os.getpid()}


def render_reference(character_dir: str, motion_path: str, retarget_path: str | None,
                     options: animator.RenderOptions) -> dict[str, Any]:
    """:func:`render_motion` for a character folder on disk (a motion preview's reference character;
    read once per render process)."""
    return render_motion(_character_from(character_dir), motion_path, retarget_path, options)


@lru_cache(maxsize=4)
def _character_from(folder: str) -> Any:
    import animator

    return animator.load_character(folder)


def warm(seconds: float = 0.2) -> int:
    """Import what renders need, then linger so that the pool starts every process (returns the pid)."""
    import animator
    import animator.segment  # noqa: F401
    time.sleep(seconds)
    return os.getpid()


def read_bytes(path: str | Path) -> bytes:
    return Path(path).read_bytes()


# --- characters: the rig check and the files a person judges a character by ---------------------

#: Fewer joints than this fraction on the drawing's mesh: the skeleton is refused (422).
MIN_JOINTS_ON_DRAWING = 0.5


def check_rig(mask: np.ndarray, joints: list[tuple[str, tuple[float, float]]], mesh_cells: int = 300) -> int:
    """Check that a skeleton can drive the drawing: count the joints within one mesh cell of the
    character (the renderer attaches a joint to its mesh within that distance; the cell size is the
    one :func:`animator.mesh.build_mesh` picks for ``mesh_cells`` cells). Joints are texture pixels.
    Returns how many lie on the drawing; raises :class:`InvalidCharacter` when fewer than half do
    (e.g. joints placed on blank paper: the renderer could not deform the drawing sensibly).
    """
    mask = np.asarray(mask, dtype=bool)
    area = int(mask.sum())
    if not area:
        raise InvalidCharacter("the mask is empty: paint the character white")
    cell = int(np.clip(round(np.sqrt(area / mesh_cells) / 2) * 2, 4, 256))
    h, w = mask.shape
    on: list[bool] = []
    for _, (x, y) in joints:
        l, t = max(0, int(np.floor(x - cell))), max(0, int(np.floor(y - cell)))
        r, b = min(w, int(np.ceil(x + cell)) + 1), min(h, int(np.ceil(y + cell)) + 1)
        ys, xs = np.nonzero(mask[t:b, l:r]) if r > l and b > t else (np.empty(0), np.empty(0))
        on.append(bool(len(xs)) and bool((((xs + l - x) ** 2 + (ys + t - y) ** 2) <= cell * cell).any()))
    if sum(on) < max(1, MIN_JOINTS_ON_DRAWING * len(joints)):
        off = [name for (name, _), ok in zip(joints, on) if not ok]
        raise InvalidCharacter(f"{len(off)} of {len(joints)} skeleton joints lie off the drawing ({', '.join(off)}): "
                               "the skeleton cannot be rigged; place the joints on the character")
    return int(sum(on))


def encode_png(array: np.ndarray, compress_level: int = 1) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="PNG", compress_level=compress_level)
    return buf.getvalue()


def mask_png(mask: np.ndarray) -> bytes:
    """The mask as a greyscale PNG: white (255) on the character, black elsewhere."""
    return encode_png(np.where(mask, 255, 0).astype(np.uint8), compress_level=6)


def read_texture(data: bytes) -> np.ndarray:
    """A stored texture PNG -> RGBA uint8 (alpha 255, as :func:`segment_crop` makes it)."""
    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im.convert("RGBA"))


def read_mask(data: bytes, size: tuple[int, int] | None = None) -> np.ndarray:
    """A mask image (PNG, or any image Pillow reads) -> bool array, True where it is white.

    Grey levels above 127 count as white; transparent pixels count as black. ``size`` (width, height)
    is the texture's: a mask of another size raises :class:`MaskWrongSize`; bytes that are not an
    image raise :class:`BadMask`.
    """
    try:
        with Image.open(io.BytesIO(data)) as im:
            if im.format not in ("PNG", "WEBP", "BMP", "TIFF"):
                raise BadMask(f"the mask must be a PNG image, got {im.format or 'an unknown format'}")
            if size is not None and im.size != tuple(size):  # checked from the header, before decoding
                raise MaskWrongSize(f"the mask is {im.size[0]}x{im.size[1]} but the texture is "
                                    f"{size[0]}x{size[1]}: send a mask of the texture's size")
            im.load()
            im = _eight_bit_grey(im)   # a 16-bit mask: scaled, not clipped to all white
            if im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info):
                rgba = im.convert("RGBA")
                grey = np.asarray(rgba.convert("L"), dtype=np.uint16) * np.asarray(rgba)[..., 3] // 255
            else:
                grey = np.asarray(im.convert("L"))
    except (BadMask, MaskWrongSize):
        raise
    except Exception:
        raise BadMask("the mask is not a readable PNG image") from None
    return grey > 127


#: Overlay colours (RGB): the mask tint, the box, and the skeleton by side of the figure.
_TINT = (255, 215, 0)
_BOX = (220, 0, 220)
_SIDE_COLOURS = {"left": (40, 110, 255), "right": (235, 50, 50), "": (30, 190, 60)}


#: Colours of the crop in the tinted picture; the overlay's own colours take the palette entries after.
_CROP_COLOURS = 60
_INK = {"box": _BOX, "left": _SIDE_COLOURS["left"], "right": _SIDE_COLOURS["right"], "": _SIDE_COLOURS[""],
        "white": (255, 255, 255)}
_INK_INDEX = {name: _CROP_COLOURS + i for i, name in enumerate(_INK)}


def tinted_png(texture: np.ndarray, mask: np.ndarray) -> bytes:
    """The crop with the mask tinted, as a palette PNG whose entries after :data:`_CROP_COLOURS` are
    the overlay's inks: the part of the overlay only a new box or a new mask changes. It is stored
    beside the mask, so that moving a joint costs a 2 ms decode and drawing, no quantizing."""
    rgb = texture[..., :3]
    tinted = ((rgb.astype(np.uint16) * 141 + np.array(_TINT, np.uint16) * 115) >> 8).astype(np.uint8)
    im = Image.fromarray(np.where(mask[..., None], tinted, rgb)).quantize(
        _CROP_COLOURS, method=Image.Quantize.FASTOCTREE)
    palette = (im.getpalette() or [])[: 3 * _CROP_COLOURS]
    palette += [0] * (3 * _CROP_COLOURS - len(palette))
    im.putpalette(palette + [c for ink in _INK.values() for c in ink])
    buf = io.BytesIO()
    im.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def overlay_png(tinted: bytes, joints: list[tuple[str, tuple[float, float], str | None]]) -> bytes:
    """A picture to judge a character at a glance: the :func:`tinted_png` crop, the box (the crop's
    border) and the skeleton (bones, and a dot per joint; the figure's left side blue, its right
    side red, the rest green). Everything in texture pixels."""
    from PIL import ImageDraw

    with Image.open(io.BytesIO(tinted)) as im:
        im.load()
        draw = ImageDraw.Draw(im)
        w, h = im.size
        line = max(2, round(min(w, h) / 150))
        draw.rectangle([0, 0, w - 1, h - 1], outline=_INK_INDEX["box"], width=line)
        where = {name: loc for name, loc, _ in joints}

        def ink(name: str) -> int:
            return _INK_INDEX[name.split("_", 1)[0] if name.startswith(("left_", "right_")) else ""]

        for name, loc, parent in joints:
            if parent in where:
                draw.line([tuple(where[parent]), tuple(loc)], fill=ink(name), width=line)
        r = line * 2
        for name, (x, y), _ in joints:
            draw.ellipse([x - r, y - r, x + r, y + r], fill=ink(name), outline=_INK_INDEX["white"])
        buf = io.BytesIO()
        im.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def character_files(joints: list[tuple[str, tuple[float, float], str | None]], *,
                    texture: np.ndarray | None = None, texture_png: bytes | None = None,
                    mask: np.ndarray | None = None, mask_bytes: bytes | None = None, new_mask: bool = False,
                    tinted: bytes | None = None) -> dict[str, Any]:
    """One render-process job for a character version: check the rig and make the files that changed.

    Given arrays (a new crop) are encoded; given bytes are stored files (or, with ``new_mask``, a
    mask a client sent: read, checked against the texture's size, stored binarised). With
    ``tinted`` (the stored :func:`tinted_png`) and the stored mask, only the skeleton changed:
    nothing is decoded but two small PNGs. Returns PNG bytes ``texture``, ``mask``, ``tinted`` and
    ``overlay`` for the files to write (None: unchanged), ``size`` (width, height) and ``joints_on``.
    """
    out: dict[str, Any] = {"texture": None, "mask": None, "tinted": None}
    if tinted is not None and mask is None and not new_mask:
        with Image.open(io.BytesIO(tinted)) as im:
            size = im.size
        mask = read_mask(mask_bytes, size)  # type: ignore[arg-type]
    else:
        if texture is None:
            texture = read_texture(texture_png)  # type: ignore[arg-type]
        else:
            out["texture"] = encode_png(np.ascontiguousarray(texture[..., :3]))
        size = (texture.shape[1], texture.shape[0])
        if mask is None:
            mask = read_mask(mask_bytes, size)  # type: ignore[arg-type]
            if new_mask:
                out["mask"] = mask_png(mask)
        else:
            out["mask"] = mask_png(mask)
        tinted = out["tinted"] = tinted_png(texture, mask)
    if not mask.any():
        raise InvalidCharacter("the mask is empty: paint the character white")
    out["joints_on"] = check_rig(mask, [(n, loc) for n, loc, _ in joints])
    out["overlay"] = overlay_png(tinted, joints)
    out["size"] = size
    return out


def render_stored(texture_png: bytes, mask_png_bytes: bytes, joints: list[tuple[str, tuple[float, float], str | None]],
                  motion_path: str, retarget_path: str, options: animator.RenderOptions) -> dict[str, Any]:
    """:func:`render_motion` for a stored character (its texture and mask PNGs, joints in texture pixels)."""
    import animator

    t0 = time.perf_counter()
    with animator_boundary("the character cannot be animated"):
        character = animator.Character(_stored_texture(texture_png), _stored_mask(mask_png_bytes),
                                       [animator.Joint(n, tuple(loc), p) for n, loc, p in joints])
    read_ms = (time.perf_counter() - t0) * 1e3
    out = render_motion(character, motion_path, retarget_path, options)
    out["timings_ms"]["read_character"] = read_ms
    return out


# A stored version's texture and mask, decoded once per process: its later motions, and the versions
# that only move joints (the same files), skip the PNG decode. Read-only: a Character never writes them.
@lru_cache(maxsize=RIG_CACHE_CHARACTERS)
def _stored_texture(texture_png: bytes) -> np.ndarray:
    texture = read_texture(texture_png)
    texture.setflags(write=False)
    return texture


@lru_cache(maxsize=RIG_CACHE_CHARACTERS)
def _stored_mask(mask_png_bytes: bytes) -> np.ndarray:
    mask = read_mask(mask_png_bytes)
    mask.setflags(write=False)
    return mask
