"""The output formats by name: MIME type, file extension and what each file is made from.

A leaf with no imports beyond the standard library, so the app can check a format name (and the
CLI list the formats) without loading numpy, Pillow or the compiled kernels.
"""
from __future__ import annotations

#: formats written from palette-index frames (:mod:`.gif`, :mod:`.webp`, :mod:`.mp4`)
INDEXED_FORMATS = ("gif", "webp", "mp4")
#: formats whose file is made from the RGBA frames
FRAME_FORMATS = ("apng", "webm", "frames", "sheet")
#: formats made from the character's rig and motion, without drawing frames
RIG_FORMATS = ("joints", "glb")

#: format name -> (MIME type, file extension), in the order the CLI and the API list them
FORMATS: dict[str, tuple[str, str]] = {
    "gif": ("image/gif", "gif"),
    "webp": ("image/webp", "webp"),
    "mp4": ("video/mp4", "mp4"),
    "apng": ("image/png", "png"),  # an APNG is a PNG: servers and readers take it as one
    "webm": ("video/webm", "webm"),
    "frames": ("application/zip", "zip"),
    "sheet": ("application/zip", "zip"),
    "joints": ("application/json", "json"),
    "glb": ("model/gltf-binary", "glb"),
}

__all__ = ["FORMATS", "FRAME_FORMATS", "INDEXED_FORMATS", "RIG_FORMATS"]
