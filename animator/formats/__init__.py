"""Every output format, one module each, and the one dispatcher that writes any of them.

Formats written from palette-index frames ((H, W) uint8 arrays, one palette and one transparent
index for the clip, as :mod:`animator.rasterize` draws them):

- ``gif``: animated GIF with frame deltas (:mod:`.gif`);
- ``webp``: animated WebP, lossless (:mod:`.webp`);
- ``mp4``: H.264 on a solid background, through ffmpeg (:mod:`.mp4`).

Formats written from RGBA frames (the palette frames turned to RGBA by :mod:`.rgba`):

- ``apng``: animated PNG with full alpha and exact frame timing (:mod:`.apng`, chunks in :mod:`.png`);
- ``webm``: VP9 with alpha, yuva420p, through ffmpeg (:mod:`.webm`);
- ``frames``: a zip of RGBA PNG frames plus ``frames.json`` (:mod:`.frames`);
- ``sheet``: a zip of one sprite-sheet PNG plus its JSON Hash atlas (:mod:`.sheet`).

Formats written from the rig and the motion (no frames are drawn):

- ``joints``: per-frame joint positions as JSON, with the skeleton's parent links (:mod:`.joints`);
- ``glb``: the textured mesh, skinned to the skeleton, with the motion as a glTF animation
  (:mod:`.gltf`, weights and transforms in :mod:`.skin`).

Shared leaves: the names, MIME types and extensions in :mod:`.registry` (standard library only, so
``from animator.formats import FORMATS`` loads neither numpy nor Pillow), frame durations in
:mod:`.timing`, pixel boxes in :mod:`.boxes`, the ffmpeg binary in :mod:`.ffmpeg`. The format
modules load on first use.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from .registry import FORMATS, FRAME_FORMATS, INDEXED_FORMATS, RIG_FORMATS

if TYPE_CHECKING:
    import numpy as np

WHITE = (255, 255, 255)


def encode(frames: Iterable[np.ndarray], fmt: str, palette: np.ndarray, transparent: int,
           frame_time_s: float, n_frames: int, *, tolerance: float = 0.0, threads: int = 2,
           background: tuple[int, int, int] | None = WHITE) -> tuple[bytes, str, str]:
    """Encode palette-index frames in ``fmt``, a format made from frames (all but ``joints`` and
    ``glb``, which are made from the rig: :func:`encode_rig`). Returns (data, mime type, extension).

    ``tolerance`` and ``threads``: GIF's (:func:`.gif.encode_gif`); ``background``: the colour MP4
    composites the character on (None: white)."""
    from ..errors import RenderError

    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise RenderError(f"unknown output format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt in RIG_FORMATS:
        raise RenderError(f"{fmt} is made from the rig and motion, not from frames (animator.formats.encode_rig)")
    if fmt == "gif":
        from .gif import encode_gif
        from .timing import gif_delays

        data = encode_gif(frames, palette, transparent, gif_delays(n_frames, frame_time_s), tolerance=tolerance,
                          threads=threads)
    elif fmt == "webp":
        from .webp import encode_webp

        data = encode_webp(frames, palette, transparent, frame_time_s, n_frames)
    elif fmt == "mp4":
        from .mp4 import encode_mp4

        data = encode_mp4(frames, palette, transparent, frame_time_s, background or WHITE)
    else:
        from .rgba import rgba_frames

        data = encode_rgba(fmt, rgba_frames(frames, palette, transparent), n_frames, frame_time_s)
    mime, ext = FORMATS[fmt]
    return data, mime, ext


def encode_rgba(fmt: str, frames: Iterable[np.ndarray], n_frames: int, frame_time_s: float) -> bytes:
    """The file of format ``fmt`` (one of :data:`FRAME_FORMATS`) of ``n_frames`` RGBA frames
    ((H, W, 4) uint8, straight alpha, all one size), each shown ``frame_time_s`` seconds, looping."""
    if fmt == "apng":
        from .apng import encode_apng

        return encode_apng(frames, n_frames, frame_time_s)
    if fmt == "webm":
        from .webm import encode_webm

        return encode_webm(frames, frame_time_s)
    if fmt == "frames":
        from .frames import encode_frames_zip

        return encode_frames_zip(frames, n_frames, frame_time_s)
    if fmt == "sheet":
        from .sheet import encode_sheet_zip

        return encode_sheet_zip(frames, n_frames, frame_time_s)
    raise ValueError(f"not a frame format: {fmt!r}")


def encode_rig(fmt: str, character: Any, mesh: Any, motion: Any, scale: float | None = None,
               offsets: np.ndarray | None = None, width: int | None = None, height: int | None = None,
               deformed: np.ndarray | None = None) -> bytes:
    """The file of format ``fmt`` (one of :data:`RIG_FORMATS`) of ``character``
    (:class:`animator.Character`) moved by ``motion`` (:class:`animator.Motion2D`, drawing pixels)
    over its ``mesh`` (:class:`animator.mesh.Mesh`). ``scale``, ``offsets``, ``width``, ``height``:
    the canvas placement of the rendered frames, recorded by ``joints``; ``deformed``: (F, V, 2) the
    mesh as ARAP deformed it per frame, which ``glb``'s skin weights are fitted to."""
    if fmt == "joints":
        from .joints import encode_joints, joints_document

        return encode_joints(joints_document(motion, character.skeleton, scale, offsets, width, height))
    if fmt == "glb":
        from .gltf import glb_of_rig

        return glb_of_rig(character, mesh, motion, deformed)
    raise ValueError(f"not a rig format: {fmt!r}")


__all__ = ["FORMATS", "FRAME_FORMATS", "INDEXED_FORMATS", "RIG_FORMATS", "encode", "encode_rgba", "encode_rig"]
