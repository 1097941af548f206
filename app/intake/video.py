"""Whether a client's file is a video (POST /motions' field ``video``, :data:`app.intake.shapes.VideoFile`).

The request reads the body within DOODLEPOD_VIDEO_MAX_MB (413 beyond) and checks that the file
starts like an MP4 / MOV (an ISO base-media box: ``ftyp``, ``moov``, ``mdat``, ``free``, ``wide``,
``skip``) or a Matroska / WebM file (the EBML magic); anything else is 415. Its duration and frame
size are checked by the job before any frame is decoded (:mod:`animator.video.decode`).
"""
from __future__ import annotations

_ISO_BOXES = (b"ftyp", b"moov", b"mdat", b"free", b"wide", b"skip")
_EBML = b"\x1a\x45\xdf\xa3"


def looks_like_video(data: bytes) -> bool:
    """True for the first bytes of an MP4 / MOV / 3GP or a Matroska / WebM file."""
    return data[4:8] in _ISO_BOXES or data[:4] == _EBML
