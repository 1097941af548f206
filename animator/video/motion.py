"""A motion from a video of a person: frames (:mod:`animator.video.decode`) -> landmarks per frame
(:mod:`animator.video.pose_model`) -> smoothing and gaps (:mod:`animator.video.landmarks`) -> a BVH clip
(:mod:`animator.video.pose_bvh`), which renders like any humanoid clip (derived retarget config).

Command line: ``python -m animator motion-from-video VIDEO -o clip.bvh``.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .decode import VideoLimits, read_frames
from .pose_bvh import VideoClip, track_to_bvh

#: Largest video file accepted, bytes (checked before ffmpeg opens it).
MAX_BYTES = 64 * 1024 * 1024


def motion_from_video(path: str | Path, limits: VideoLimits = VideoLimits(), max_bytes: int = MAX_BYTES,
                      progress=None) -> VideoClip:
    """The BVH clip of the person in the video at ``path``.

    ``progress(frames done, frames expected)`` is called after each frame the pose model reads.

    Raises:
        VideoError: the file is too big, unreadable, too long or too large (before decoding).
        NoPersonError: no person (or too few frames with one) in the video.
    """
    from ..errors import VideoError
    from .pose_model import track_frames

    size = Path(path).stat().st_size
    if size > max_bytes:
        raise VideoError(path, f"{size} bytes; at most {max_bytes} are accepted")
    info, fps, frames = read_frames(path, limits)
    expected = max(1, int(round(min(info.duration_s, limits.max_seconds) * fps)))
    track, _ = track_frames(frames, fps, expected=expected, progress=progress)
    return track_to_bvh(track)


def cli(argv: list[str]) -> int:
    """``motion-from-video VIDEO -o clip.bvh``: exit 0 written, 1 bad video / no person, 3 cannot write."""
    parser = argparse.ArgumentParser(
        prog="python -m animator motion-from-video",
        description="Find the person in a short video (MP4, MOV, WebM) and write their movement as a BVH clip "
                    "(23-joint humanoid, centimetres, y up) that animates a drawing like any humanoid clip.")
    parser.add_argument("video", help="the video file")
    parser.add_argument("-o", "--output", required=True, help="the BVH file to write")
    parser.add_argument("--max-seconds", type=float, default=VideoLimits.max_seconds,
                        help="longest video accepted (default %(default)s)")
    args = parser.parse_args(argv)
    from ..errors import AnimatorError

    t0 = time.perf_counter()
    try:
        clip = motion_from_video(args.video, VideoLimits(max_seconds=args.max_seconds))
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
    print(f"{args.output}: {clip.n_frames} frames at {clip.fps:g} fps (from frame {clip.first_frame}, "
          f"{clip.bridged} bridged) in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0


__all__ = ["MAX_BYTES", "cli", "motion_from_video"]
