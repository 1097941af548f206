"""Reading a short video's frames with the ffmpeg that imageio-ffmpeg ships, bounded before decoding.

The file is probed first (ffmpeg's reading of the header: every video stream's frame size, the frame
rate, the duration) and refused when it is too long or any video stream's frames are too large, before
any frame is decoded. Decoding then reads the first video stream only (the one whose rate and size
were used), with the decoder itself refusing frames over the pixel bound (a Motion-JPEG stream may
change its frame size from one frame to the next) and a bounded number of threads (memory grows
with them). Frames come out as RGB uint8 arrays, (H, W, 3),
scaled so their longer side is at most ``max_side`` pixels and resampled to at most ``max_fps``
frames per second. ffmpeg may read only the local file (protocol whitelist ``file``) and only the
container formats a phone writes (MP4 / MOV, Matroska / WebM), so a playlist or concat file cannot
make it open anything else.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from ..errors import VideoError, VideoTimeout

#: Demuxers ffmpeg may use: MP4 / MOV / 3GP (one demuxer) and Matroska / WebM.
_FORMATS = "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm"
_INPUT_PARAMS = ["-protocol_whitelist", "file", "-format_whitelist", _FORMATS]


@dataclass(frozen=True)
class VideoLimits:
    """What a video may be: at most ``max_seconds`` long, ``max_pixels`` per frame (source size);
    frames are handed on at most ``max_side`` pixels on their longer side, ``max_fps`` per second."""

    max_seconds: float = 20.0
    max_pixels: int = 3840 * 2160
    max_side: int = 640
    max_fps: float = 30.0
    threads: int = 2


@dataclass(frozen=True)
class VideoInfo:
    """A probed video: source ``size`` (width, height) in pixels, frames per second, duration in seconds."""

    size: tuple[int, int]
    fps: float
    duration_s: float
    streams: tuple[tuple[int, int], ...] = ()   # every video stream's frame size, the first one first


def probe(path: str | Path, max_pixels: int | None = None) -> VideoInfo:
    """Size, frame rate and duration from ffmpeg's reading of the header alone (``ffmpeg -i``, no
    output: no frame is decoded into memory). The size and rate are the first video stream's (the one
    :func:`read_window` decodes, ``-map 0:v:0``); ``streams`` lists every video stream's size.

    ``max_pixels``: the decoders ffmpeg opens to read the header refuse frames over it
    (``-max_pixels``), so a file whose header hides its size cannot make them allocate a huge frame
    either; a stream whose size is then unknown is refused.

    Raises:
        VideoError: ffmpeg cannot read the file as a video, it has no frame rate, or (with
            ``max_pixels``) a video stream's frames are over the bound.
    """
    header = _header(path, max_pixels)
    lines = _VIDEO_LINE.findall(header)
    if not lines:
        raise VideoError(path, f"not a video this server can read (MP4, MOV or WebM): {_last_line(header)}")
    streams: list[tuple[int, int]] = []
    for line in lines:
        size = _SIZE.search(line)
        if size is None:
            if max_pixels is not None:
                raise VideoError(path, f"a video stream whose frames are over {max_pixels} pixels (their size "
                                       "could not be read within that bound)")
            continue
        streams.append((int(size.group(1)), int(size.group(2))))
    fps = _fps(lines[0])
    first = _SIZE.search(lines[0])
    size = (int(first.group(1)), int(first.group(2))) if first else (0, 0)
    duration = _duration_s(header) or 0.0
    if not (size[0] > 0 and size[1] > 0) or not (0 < fps < 1000):
        raise VideoError(path, f"no video stream with a frame size and a frame rate (size {size}, fps {fps})")
    return VideoInfo(size=size, fps=fps, duration_s=duration, streams=tuple(streams))


_VIDEO_LINE = re.compile(r"^\s*Stream #\d+:\d+.*?: Video: (.*)$", re.M)
#: A frame size (``1920x1080``), never a codec tag (``0x31637661``): sizes start with 1-9.
_SIZE = re.compile(r"(?<![\w/])([1-9]\d{0,5})x([1-9]\d{0,5})(?!\w)")
_FPS = re.compile(r"\b(\d+(?:\.\d+)?)(k?) (fps|tbr)\b")
_DURATION = re.compile(r"Duration: (\d+):(\d\d):(\d\d(?:\.\d+)?)")


def _fps(line: str) -> float:
    """A stream line's frame rate: its ``fps``, else its ``tbr`` (0.0 if neither)."""
    rates = {kind: float(value) * (1000 if k else 1) for value, k, kind in _FPS.findall(line)}
    return rates.get("fps") or rates.get("tbr") or 0.0


def _header(path: str | Path, max_pixels: int | None = None) -> str:
    """ffmpeg's description of the file (its stderr for ``-i`` alone: no frame decoded)."""
    import subprocess

    import imageio_ffmpeg

    bound = ["-max_pixels", str(int(max_pixels))] if max_pixels is not None else []
    try:
        done = subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", *_INPUT_PARAMS, *bound,
                               "-i", str(path)], capture_output=True, timeout=HEADER_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise VideoTimeout(path, f"ffmpeg did not read the file's header within {HEADER_TIMEOUT_S:g} s") from None
    return done.stderr.decode("utf-8", "replace")


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "ffmpeg said nothing"


def _duration_s(header: str) -> float | None:
    """The header's duration in seconds (hours of any number of digits), or None if it gives none."""
    m = _DURATION.search(header)
    if m is None:
        return None
    return int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))


@dataclass(frozen=True)
class Window:
    """The part of a video that is used: ``start_s`` to ``end_s`` seconds of a ``video_s`` long video
    (0: length unknown). ``chosen``: the caller named it; else it is the first ``max_seconds``."""

    start_s: float
    end_s: float
    video_s: float
    chosen: bool = False

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s

    @property
    def whole(self) -> bool:
        """The window is the whole video (as far as its header says)."""
        return self.start_s <= 0 and (self.video_s <= 0 or self.end_s >= self.video_s - 1e-3)

    def describe(self) -> str:
        """In words, for a person: "the whole 8.4 s video", "0-20 s of the 28.9 s video (the first 20 s:
        choose a start and end to use another part)"."""
        if self.whole:
            return f"the whole {self.video_s:.1f} s video" if self.video_s > 0 else "the whole video"
        span = f"{self.start_s:g}-{self.end_s:g} s of the {self.video_s:.1f} s video"
        if self.chosen:
            return span
        return f"{span} (the first {self.seconds:g} s: choose a start and end to use another part)"


def window(info: VideoInfo, limits: VideoLimits, start_s: float | None = None, end_s: float | None = None,
           path: str | Path | None = None) -> Window:
    """The part of the video to use: from ``start_s`` (default 0) to ``end_s`` (default: ``max_seconds``
    later, or the video's end). A longer video is not refused: without a window its first
    ``max_seconds`` are used. Raises :class:`VideoError` for a window that is empty, starts after the
    video ends, or is longer than ``max_seconds``."""
    chosen = start_s is not None or end_s is not None
    video = max(0.0, info.duration_s)
    start = 0.0 if start_s is None else float(start_s) + 0.0   # -0.0 is 0: never "-0-20 s"
    if not (start >= 0 and np.isfinite(start)):
        raise VideoError(path, f"start {start_s} s: must be 0 or more")
    if video > 0 and start >= video:
        raise VideoError(path, f"start {start:g} s: the video is only {video:.2f} s long")
    limit = limits.max_seconds
    end = start + limit if end_s is None else float(end_s)
    if video > 0:
        end = min(end, video)
    if not (np.isfinite(end) and end > start):
        raise VideoError(path, f"end {end_s} s: must come after the start ({start:g} s)")
    if end - start > limit + 1e-6:
        raise VideoError(path, f"the window {start:g}-{end:g} s is {end - start:.2f} s long; at most {limit:g} s "
                               "of a video are used: choose a shorter window")
    return Window(round(start, 3), round(end, 3), round(video, 3), chosen)


def check(info: VideoInfo, limits: VideoLimits, path: str | Path | None = None) -> None:
    """Raise :class:`VideoError` when the probed video's frames are larger than ``limits`` allow, in
    any of its video streams (its length is not checked: :func:`window` picks the part that is used)."""
    for w, h in info.streams or (info.size,):
        if w * h > limits.max_pixels:
            raise VideoError(path, f"frames of {w}x{h} pixels; at most {limits.max_pixels} pixels per frame are "
                                   "accepted (in every video stream of the file)")


def output_size(size: tuple[int, int], max_side: int) -> tuple[int, int]:
    """(width, height) scaled down (never up) so the longer side is at most ``max_side``, both even."""
    w, h = size
    s = min(1.0, max_side / max(w, h))
    return max(2, int(round(w * s / 2)) * 2), max(2, int(round(h * s / 2)) * 2)


def read_frames(path: str | Path, limits: VideoLimits = VideoLimits(), start_s: float | None = None,
                end_s: float | None = None) -> tuple[VideoInfo, float, Iterator[np.ndarray]]:
    """:func:`read_window` without the window."""
    info, _, fps, frames = read_window(path, limits, start_s, end_s)
    return info, fps, frames


def read_window(path: str | Path, limits: VideoLimits = VideoLimits(), start_s: float | None = None,
                end_s: float | None = None) -> tuple[VideoInfo, Window, float, Iterator[np.ndarray]]:
    """Probe and check the video, then the frames of its window (:func:`window`: ``start_s`` to
    ``end_s``, by default the first ``max_seconds``): ``(info, window, output fps, iterator of (H, W, 3)
    uint8)``.

    The iterator stops after the window's length even when the header said less (a file may lie).

    Raises:
        VideoError: unreadable, too large, or a window that does not fit (before any frame is decoded).
    """
    info = probe(path, limits.max_pixels)
    check(info, limits, path)
    used = window(info, limits, start_s, end_s, path)
    fps = min(info.fps, limits.max_fps)
    w, h = output_size(info.size, limits.max_side)
    max_frames = int(np.ceil(used.seconds * fps)) + 1

    def frames() -> Iterator[np.ndarray]:
        import imageio_ffmpeg

        seek = ["-ss", f"{used.start_s:.3f}"] if used.start_s > 0 else []
        gen = imageio_ffmpeg.read_frames(
            str(path), input_params=[*_INPUT_PARAMS, "-threads", str(limits.threads),
                                     "-max_pixels", str(limits.max_pixels), *seek],
            output_params=["-map", "0:v:0", "-filter_threads", "1", "-vf", f"fps={fps:.6f},scale={w}:{h}",
                           "-t", f"{used.seconds:.3f}"])
        try:
            meta = next(gen)
            ow, oh = meta["size"]
            for k, raw in enumerate(gen):
                if k >= max_frames:
                    break
                yield np.frombuffer(raw, dtype=np.uint8).reshape(oh, ow, 3)
        except (OSError, RuntimeError) as exc:
            if _META_TIMEOUT in str(exc):   # imageio-ffmpeg waited 10 s for ffmpeg to describe the stream
                raise VideoTimeout(path, "ffmpeg did not describe the video within 10 s of starting to "
                                         "decode it (its header was read a moment before)") from None
            raise VideoError(path, f"ffmpeg could not decode the video: {_first_line(exc)}") from None
        finally:
            gen.close()

    return info, used, fps, frames()


#: What imageio-ffmpeg raises when ffmpeg has not described the stream within its (fixed) 10 s.
_META_TIMEOUT = "Could not load meta information"
#: Longest ffmpeg may take to read a video's header (``-i`` alone, no frame decoded).
HEADER_TIMEOUT_S = 20.0


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


__all__ = ["VideoInfo", "VideoLimits", "Window", "check", "output_size", "probe", "read_frames", "read_window",
           "window"]
