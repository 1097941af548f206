"""A motion from a video of a person: frames (:mod:`animator.video.decode`) -> landmarks per frame
(:mod:`animator.video.pose_model`) -> smoothing and gaps (:mod:`animator.video.landmarks`) -> a BVH clip
(:mod:`animator.video.pose_bvh`), which renders like any humanoid clip (derived retarget config).

Command line: ``python -m animator motion-from-video VIDEO -o clip.bvh [--start S] [--end S]``.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from .decode import VideoLimits, read_window
from .pose_bvh import VideoClip, track_to_bvh

#: Largest video file accepted, bytes (checked before ffmpeg opens it).
MAX_BYTES = 64 * 1024 * 1024


def motion_from_video(path: str | Path, limits: VideoLimits = VideoLimits(), max_bytes: int = MAX_BYTES,
                      progress=None, start_s: float | None = None, end_s: float | None = None) -> VideoClip:
    """The BVH clip of the person in the video at ``path``, made from its window ``start_s`` to
    ``end_s`` (by default its first ``limits.max_seconds``; see :func:`animator.video.decode.window`).
    The clip's ``window`` says which part was used.

    ``progress(frames done, frames expected)`` is called after each frame the pose model reads.

    Raises:
        VideoError: the file is too big, unreadable or too large, or the window does not fit (before decoding).
        NoPersonError: no person (or too few frames with one) in the video.
    """
    from ..errors import VideoError
    from .pose_model import track_frames

    size = Path(path).stat().st_size
    if size > max_bytes:
        raise VideoError(path, f"{size} bytes; at most {max_bytes} are accepted")
    info, used, fps, frames = read_window(path, limits, start_s, end_s)
    expected = max(1, int(round(used.seconds * fps)))
    track, _ = track_frames(frames, fps, expected=expected, progress=progress)
    return replace(track_to_bvh(track), window=used)


#: ``motion-from-video``'s help.
DESCRIPTION = ("Find the person in a video (MP4, MOV, WebM) and write their movement as a BVH clip "
               "(23-joint humanoid, centimetres, y up) that animates a drawing like any humanoid clip. "
               f"At most {VideoLimits.max_seconds:g} s of the video are used: --start and --end choose "
               "which (default: the first ones).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``motion-from-video``'s arguments (its parser is a subparser of the animator's command)."""
    parser.add_argument("video", help="the video file")
    parser.add_argument("-o", "--output", required=True, help="the BVH file to write")
    parser.add_argument("--start", type=float, default=None, metavar="S",
                        help="the second of the video the motion starts at (default 0)")
    parser.add_argument("--end", type=float, default=None, metavar="S",
                        help="the second it ends at (default: --max-seconds after the start, or the video's end)")
    parser.add_argument("--max-seconds", type=float, default=VideoLimits.max_seconds,
                        help="longest part of a video used (default %(default)s)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="show the pose model's own log lines (MediaPipe, TensorFlow Lite) on stderr")


def run(args: argparse.Namespace) -> int:
    """``motion-from-video VIDEO -o clip.bvh``: exit 0 written, 1 bad video / no person, 3 cannot write."""
    from ..errors import AnimatorError

    t0 = time.perf_counter()
    try:
        with native_logs(shown=args.verbose):
            clip = motion_from_video(args.video, VideoLimits(max_seconds=args.max_seconds),
                                     start_s=args.start, end_s=args.end)
    except FileNotFoundError:
        print(f"error: {args.video}: file not found", file=sys.stderr)
        return 1
    except AnimatorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        Path(args.output).write_text(clip.text)
    except OSError as exc:
        print(f"error: cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return 3
    print(f"{args.output}: {clip.n_frames} frames at {clip.fps:g} fps from {clip.window.describe()} "
          f"(from frame {clip.first_frame}, {clip.bridged} bridged) in {time.perf_counter() - t0:.1f} s",
          file=sys.stderr)
    return 0


@contextmanager
def native_logs(shown: bool = False) -> Iterator[None]:
    """While the pose model loads and runs, its native libraries' log lines (MediaPipe's glog, TensorFlow
    Lite's "Created delegate", absl's warnings: dozens of lines written straight to file descriptor 2)
    go to a scratch file instead of the terminal, unless ``shown``; Python's own stderr is untouched.
    When the block fails, the last of those lines are printed after all (they may say why)."""
    if shown:
        yield
        return
    os.environ.setdefault("GLOG_minloglevel", "2")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as scratch:
        os.dup2(scratch.fileno(), 2)
        failed = False
        try:
            yield
        except BaseException:
            failed = True
            raise
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            if failed:
                scratch.seek(0)
                tail = scratch.read().decode("utf-8", "replace").strip().splitlines()[-5:]
                for line in tail:
                    print(f"  pose model: {line}", file=sys.stderr)


__all__ = ["DESCRIPTION", "MAX_BYTES", "add_arguments", "motion_from_video", "native_logs", "run"]
