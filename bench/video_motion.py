"""A motion from a video, stage by stage, in this process: ffmpeg decode, the pose model (video mode,
one frame after another), the landmarks -> BVH step, on a video made from the astronaut photo
(tests/fixtures/people; shifted and scaled frames, H.264, 640x480) at the app's frame bounds.

Prints ms per frame of each stage, the model's load time and the whole call, with the load average
beside them (a shared machine's figures only compare within one run). Asserts nothing.

    python bench/video_motion.py [--seconds 4] [--fps 30]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from common import REPO, load_avg  # noqa: F401  (REPO: puts the repository on sys.path)
from PIL import Image

from tests.support.person_video import PHOTO, frame, placements, write_video


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--fps", type=float, default=30.0)
    args = p.parse_args()
    n = int(args.seconds * args.fps)
    photo = Image.open(PHOTO).convert("RGB")
    with tempfile.TemporaryDirectory() as tmp:
        video = write_video(Path(tmp) / "person.mp4", [frame(photo, *pl) for pl in placements(n)], fps=args.fps)
        print(f"video: {n} frames, {args.seconds:g} s at {args.fps:g} fps, 640x480 H.264; load {load_avg()}")

        from animator.video.decode import read_frames
        from animator.video.motion import motion_from_video
        from animator.video.pose_bvh import track_to_bvh
        from animator.video.pose_model import track_frames

        t0 = time.perf_counter()
        _, fps, frames = read_frames(video)
        decoded = list(frames)
        t_decode = time.perf_counter() - t0
        t0 = time.perf_counter()
        track_frames(decoded[:1], fps)
        t_load = time.perf_counter() - t0  # import + model load + one frame
        t0 = time.perf_counter()
        track, _ = track_frames(decoded, fps)
        t_model = time.perf_counter() - t0
        t0 = time.perf_counter()
        track_to_bvh(track)
        t_bvh = time.perf_counter() - t0
        t0 = time.perf_counter()
        motion_from_video(video)
        t_all = time.perf_counter() - t0
    print(f"{'stage':<28}{'ms/frame':>10}{'total ms':>10}")
    for name, t in (("decode (ffmpeg, 640 px)", t_decode), ("pose model (video mode)", t_model),
                    ("landmarks -> BVH", t_bvh), ("motion_from_video (all)", t_all)):
        print(f"{name:<28}{t / n * 1e3:>10.1f}{t * 1e3:>10.0f}")
    print(f"first call (import, model load, one frame): {t_load * 1e3:.0f} ms; load {load_avg()}")


if __name__ == "__main__":
    main()
