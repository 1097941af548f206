"""A client's video for POST /motions: the multipart field ``video``, bounded and sniffed in the request.

The request reads the body within DOODLEPOD_VIDEO_MAX_MB (413 beyond) and checks that the file
starts like an MP4 / MOV (an ISO base-media box: ``ftyp``, ``moov``, ``mdat``, ``free``, ``wide``,
``skip``) or a Matroska / WebM file (the EBML magic); anything else is 415. Its duration and frame
size are checked by the job before any frame is decoded (:mod:`animator.video.decode`).
"""
from __future__ import annotations

from typing import Any, Mapping

from ..errors import BadRequest, TooLarge, UnsupportedType

_ISO_BOXES = (b"ftyp", b"moov", b"mdat", b"free", b"wide", b"skip")
_EBML = b"\x1a\x45\xdf\xa3"


def looks_like_video(data: bytes) -> bool:
    """True for the first bytes of an MP4 / MOV / 3GP or a Matroska / WebM file."""
    return data[4:8] in _ISO_BOXES or data[:4] == _EBML


def read_video_upload(files: Mapping[str, Any], max_bytes: int) -> bytes:
    """The bytes of the ``video`` field: 400 without one, 413 over ``max_bytes``, 415 if not a video file."""
    part = files.get("video")
    if part is None:
        raise BadRequest("send the video as the multipart form field 'video' (MP4, MOV or WebM)")
    data = part.stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise TooLarge(f"the video is over the limit of {max_bytes / 2**20:g} MiB")
    if not looks_like_video(data):
        raise UnsupportedType("field 'video': not an MP4, MOV or WebM file")
    return data
