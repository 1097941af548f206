"""The ffmpeg binary that writes MP4 and WebM."""
from __future__ import annotations

from ..errors import RenderError


def ffmpeg_exe() -> str:
    """Path of an ffmpeg binary (imageio-ffmpeg's bundled one, else one on PATH)."""
    try:
        import imageio_ffmpeg

        return imageio_ffmpeg.get_ffmpeg_exe()
    except Exception as exc:  # ImportError, RuntimeError (no binary for this platform)
        import shutil

        exe = shutil.which("ffmpeg")
        if exe:
            return exe
        raise RenderError("MP4 output needs ffmpeg (pip install imageio-ffmpeg): "
                          f"the codec is unavailable ({exc})") from exc
