"""MP4: H.264 through the ``ffmpeg`` binary bundled with ``imageio-ffmpeg`` (no alpha in H.264: the
character is composited on a background colour, white by default); a :class:`RenderError` says so
when no ffmpeg is available."""
from __future__ import annotations

from typing import Iterable

import numpy as np

from ..errors import RenderError
from .ffmpeg import ffmpeg_exe


def encode_mp4(frames: Iterable[np.ndarray], palette: np.ndarray, transparent: int,
               frame_time_s: float, background: tuple[int, int, int] = (255, 255, 255),
               crf: int = 23) -> bytes:
    """H.264 MP4 (yuv420p, so even width and height) on a solid ``background`` via ffmpeg."""
    import os
    import subprocess
    import tempfile

    exe = ffmpeg_exe()
    lut = np.zeros((256, 3), np.uint8)
    lut[: len(palette)] = palette
    lut[transparent] = background
    it = iter(frames)
    try:
        first = next(it)
    except StopIteration:
        raise RenderError("cannot encode an animation without frames") from None
    h, w = first.shape
    if w % 2 or h % 2:
        raise RenderError(f"MP4 (H.264, yuv420p) needs an even width and height, got {w}x{h}")
    fd, path = tempfile.mkstemp(suffix=".mp4")
    os.close(fd)
    cmd = [exe, "-y", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{w}x{h}",
           "-framerate", f"{1.0 / frame_time_s:.6f}", "-i", "-", "-an", "-c:v", "libx264",
           "-preset", "veryfast", "-crf", str(crf), "-pix_fmt", "yuv420p", "-movflags", "+faststart", path]
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdin is not None
        try:
            proc.stdin.write(lut[first].tobytes())
            for f in it:
                proc.stdin.write(lut[f].tobytes())
            proc.stdin.close()
        except BrokenPipeError:
            pass
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        if proc.wait() != 0:
            raise RenderError("ffmpeg failed to encode MP4: "
                              f"{err.strip().splitlines()[-1] if err.strip() else 'exit ' + str(proc.returncode)}")
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise RenderError(f"MP4 encoding is unavailable: cannot run ffmpeg ({exc})") from exc
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
