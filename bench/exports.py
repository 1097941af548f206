"""Export formats benchmark: char1 + dab (every output frame at 25 fps) in each format, in this process.

Prints, per format, the render's stage timings (``rasterize`` and ``encode`` are the ones a format
changes; ``joints`` and ``glb`` draw no frames), the whole render and the file's size, with the load
average beside them (a shared machine's figures only compare within one run). GIF first, as the
reference. Asserts nothing.

    python bench/exports.py [--size 500] [--formats gif,apng,...] [--repeat 1]
"""
from __future__ import annotations

import argparse
import statistics
import time

from common import REPO, load_avg

import animator

EX = REPO / "tests" / "fixtures" / "animated_drawings" / "examples"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=500)
    p.add_argument("--formats", default=",".join(animator.FORMATS))
    p.add_argument("--repeat", type=int, default=1)
    args = p.parse_args()
    char = animator.load_character(EX / "characters" / "char1")
    motion = animator.load_motion_config(EX / "config" / "motion" / "dab.yaml")
    retarget = animator.load_retarget_config(EX / "config" / "retarget" / "fair1_ppf.yaml")
    print(f"char1 + dab, {args.size}x{args.size}, 25 fps, threads 1; load average {load_avg()} at start")
    print(f"{'format':8} {'frames':>6} {'rasterize ms':>12} {'encode ms':>10} {'total ms':>9} {'bytes':>10}")
    for fmt in args.formats.split(","):
        runs = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            r = animator.render(char, motion, retarget, animator.RenderOptions(
                width=args.size, height=args.size, format=fmt, threads=1))
            runs.append(((time.perf_counter() - t) * 1e3, r))
        total = statistics.median(ms for ms, _ in runs)
        r = runs[-1][1]
        print(f"{fmt:8} {r.frame_count:>6} {r.timings_ms.get('rasterize', 0):>12.0f} {r.timings_ms['encode']:>10.0f} "
              f"{total:>9.0f} {len(r.data):>10}")
    print(f"load average {load_avg()} at the end")


if __name__ == "__main__":
    main()
