"""Uploaded images: which types we accept, what an upload is from its first bytes, and opening one
(header only) after the checks that need no decoding. Every room may use it: the routes refuse a
bad upload before queueing it, the render processes decode what passes.

Importing it loads Pillow and registers the HEIC/HEIF opener.
"""
from __future__ import annotations

import io

import pillow_heif
from PIL import Image

from .errors import ImageTooSmall, TooLarge, UnreadableImage, UnsupportedType

#: Formats Pillow reports for the images we accept (MPO: the multi-picture JPEG some phones write;
#: HEIF: HEIC/HEIF photos, iPhones' default, read by pillow-heif).
ACCEPTED_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "MPO": "image/jpeg", "WEBP": "image/webp",
                    "HEIF": "image/heic"}
#: The same, for people (error messages).
ACCEPTED_TEXT = "PNG, JPEG, WebP or HEIC"
#: Fewest pixels on an image's shorter side: the detector and the pose model refuse smaller images
#: (a 1x1 PNG came back as a retryable 502 model_server_error), and no drawing fits in fewer.
MIN_SIDE = 32

Image.MAX_IMAGE_PIXELS = None  # we check our own limit (DOODLEPOD_MAX_IMAGE_PIXELS) before decoding
# HEIC/HEIF through libheif; it applies the photo's rotation itself (and reports orientation 1).
pillow_heif.register_heif_opener()



def sniff_unsupported(data: bytes) -> str | None:
    """Name of a well-known image/document type we do not accept, from its first bytes."""
    head = data[:32]
    if len(head) >= 12 and head[4:8] == b"ftyp":
        brand = head[8:12].decode("latin-1")
        if brand.startswith(("hei", "hev", "mif", "msf")):
            return None  # HEIC/HEIF: accepted
        return "AVIF" if brand.startswith("avi") else f"ISO media ({brand.strip()})"
    if head.startswith(b"%PDF"):
        return "PDF"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "GIF"
    if head.startswith(b"<svg") or head.startswith(b"<?xml"):
        return "SVG"
    return None


def open_checked(data: bytes, max_pixels: int) -> Image.Image:
    """The upload opened lazily (header only) after the checks that need no decoding: not empty, an
    accepted type, at most ``max_pixels``. Raises :class:`UnreadableImage`, :class:`UnsupportedType`
    or :class:`TooLarge`. (Async requests run it in the web process before queueing: it is cheap.)"""
    if not data:
        raise UnreadableImage("the uploaded file is empty")
    other = sniff_unsupported(data)
    if other:
        raise UnsupportedType(f"{other} images are not supported; send {ACCEPTED_TEXT}")
    try:
        im = Image.open(io.BytesIO(data))
    except Image.UnidentifiedImageError:
        raise UnreadableImage(f"the upload is not a readable {ACCEPTED_TEXT} image") from None
    except Exception as exc:  # Pillow raises many types on hostile headers
        raise UnreadableImage(f"cannot read the image header: {type(exc).__name__}") from None
    if im.format not in ACCEPTED_FORMATS:
        raise UnsupportedType(f"{im.format} images are not supported; send {ACCEPTED_TEXT}")
    w, h = im.size
    if w < 1 or h < 1:
        raise UnreadableImage("the image has no pixels")
    if min(w, h) < MIN_SIDE:
        raise ImageTooSmall(f"image of {w}x{h} pixels; a drawing needs at least {MIN_SIDE} pixels on each side")
    if w * h > max_pixels:
        raise TooLarge(f"image of {w}x{h} = {w * h / 1e6:.1f} MP is over the limit of {max_pixels / 1e6:.1f} MP")
    return im
