"""Inpainting bench: which method takes the characters out of a drawn page best, and how fast.

On the scene fixture photo (tests/fixtures/scene_photo.py: four example characters on paper,
1000x750), downsized to each canvas size asked (the scene's background is made at its canvas size),
every method of :mod:`animator.inpaint` fills the union of the characters' masks. Printed per method
and size: the time (median of ``--repeat`` runs, all methods in turn in the same run) and, per
character, :func:`animator.inpaint.trace` before and after (the mean RGB distance inside its mask to
the paper around it) beside :func:`animator.inpaint.paper_grain` (the paper's own grain, the floor).
Asserts nothing.

    python bench/inpaint.py [--sizes 500 1000] [--repeat 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from animator import inpaint  # noqa: E402
from tests.fixtures.scene_photo import make_scene_photo  # noqa: E402


def _resized(photo: np.ndarray, masks: list[np.ndarray], longest: int):
    h, w = photo.shape[:2]
    k = longest / max(w, h)
    size = (round(w * k), round(h * k))
    small = np.asarray(Image.fromarray(photo).resize(size, Image.Resampling.LANCZOS))
    ms = [np.asarray(Image.fromarray(m.astype(np.uint8) * 255).resize(size, Image.Resampling.BILINEAR)) > 127
          for m in masks]
    return small, ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[500, 1000])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    photo, pasted = make_scene_photo()
    print(f"load average {os.getloadavg()[0]:.2f}; photo {photo.shape[1]}x{photo.shape[0]}, "
          f"{len(pasted)} characters ({', '.join(p.name for p in pasted)})")
    for longest in args.sizes:
        img, masks = _resized(photo, [p.mask for p in pasted], longest)
        union = np.logical_or.reduce(masks)
        others = [union & ~m for m in masks]
        before = [inpaint.trace(img, m, o) for m, o in zip(masks, others)]
        grain = [inpaint.paper_grain(img, m, o) for m, o in zip(masks, others)]
        times: dict[str, list[float]] = {m: [] for m in inpaint.METHODS}
        outs: dict[str, np.ndarray] = {}
        for r in range(args.repeat):
            for method in inpaint.METHODS[r % 3:] + inpaint.METHODS[:r % 3]:
                t = time.perf_counter()
                outs[method] = inpaint.remove(img, union, method)
                times[method].append((time.perf_counter() - t) * 1e3)
        print(f"\n{img.shape[1]}x{img.shape[0]}: {int(union.sum())} masked pixels; trace before: "
              + ", ".join(f"{p.name} {b:.1f}" for p, b in zip(pasted, before))
              + "; paper grain: " + ", ".join(f"{g:.1f}" for g in grain))
        print(f"  {'method':<11} {'ms':>9}   trace after (per character)      worst/grain")
        for method in inpaint.METHODS:
            after = [inpaint.trace(outs[method], m, o) for m, o in zip(masks, others)]
            worst = max(a / g for a, g in zip(after, grain))
            print(f"  {method:<11} {statistics.median(times[method]):9.1f}   "
                  + ", ".join(f"{a:5.1f}" for a in after) + f"      {worst:.2f}")
        if os.environ.get("INPAINT_BENCH_OUT"):
            for method, out in outs.items():
                Image.fromarray(out).save(Path(os.environ["INPAINT_BENCH_OUT"]) / f"{method}-{longest}.png")


if __name__ == "__main__":
    main()
