"""Masks bench: IoU with the figure per page kind, and segment_drawing's time per crop, A/B in one run.

Cases: every figure style of tests/fixtures/mask_drawings.py x ``--seeds`` seeds x two crops (tight,
and 12 px of margin) on each page kind (plain paper, a coloured sheet, sky and grass coloured in
around the figure, a lined and a squared sheet, a shadow across the page). The truth of a case is
AnimatedDrawings' segmentation of the same figure on clean white paper.

Columns per page kind: the mean / minimum IoU with the truth of
* ``AD``: AnimatedDrawings' ``segment()`` (``animator.segment.segment_drawing_ad``, equal to it pixel
  for pixel: tests/animator/test_segment_ad_reference.py);
* ``before``: ``segment_drawing`` at ``--baseline`` (default ``main``), in a temporary worktree;
* ``after``: ``segment_drawing`` of this tree;
and how many crops took AnimatedDrawings' exact path (``plain``). Then the time per crop of both
trees (each tree in its own process, ``--rounds`` alternating rounds; median and 90th percentile
over all crops and rounds, split by page kind, with the load average). Asserts nothing.

    python bench/masks.py [--seeds 3] [--first-seed 0] [--rounds 2] [--baseline main]

animator/paper.py's constants were tuned on seeds 0-2: ``--first-seed 3`` measures figures they
were not tuned on.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def checkout(ref: str):
    """``ref`` in a temporary detached worktree -> (path, short commit). Only numpy/scipy code runs
    there (animator.segment), so nothing is compiled (bench/worktree.py's Baseline builds kernels)."""
    path = Path(tempfile.mkdtemp(prefix="dp-masks-"))
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(path), ref], check=True)
    try:
        commit = subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], check=True,
                                capture_output=True, text=True).stdout.strip()
        yield path, commit
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(path)], check=False)
        shutil.rmtree(path, ignore_errors=True)


def _load_generator():
    spec = importlib.util.spec_from_file_location("mask_drawings", REPO / "tests" / "fixtures" / "mask_drawings.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def cases(seeds: int, first: int = 0):
    gen = _load_generator()
    for figure in gen.FIGURES:
        for seed in range(first, first + seeds):
            fig = gen.draw_figure(figure, seed=seed)
            for margin in (0, 12):
                clean = gen.clean_crop(fig, margin)
                for page in gen.PAGES:
                    yield (figure, seed, margin, page), gen.photo(fig, page, seed=seed, margin=margin), clean


def worker(tree: str, seeds: int, first: int, out: str) -> None:
    """In ``tree``'s animator: every case's mask and time; written to ``out`` (npz)."""
    sys.path.insert(0, tree)
    from animator.segment import segment_drawing
    masks, times = {}, {}
    for key, crop, _ in cases(seeds, first):
        name = "/".join(map(str, key))
        t0 = time.perf_counter()
        masks[name] = segment_drawing(crop)
        times[name] = time.perf_counter() - t0
    np.savez_compressed(out, times=json.dumps(times), **{k.replace("/", "|"): v for k, v in masks.items()})


def _run(tree: Path, seeds: int, first: int) -> tuple[dict, dict]:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.npz")
        subprocess.run([sys.executable, __file__, "--worker", str(tree), "--seeds", str(seeds),
                        "--first-seed", str(first), "--out", out],
                       check=True, cwd=tree)
        z = np.load(out)
        times = json.loads(str(z["times"]))
        masks = {k.replace("|", "/"): z[k] for k in z.files if k != "times"}
    return masks, times


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / max(1, (a | b).sum()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--baseline", default="main", help="git ref for the 'before' column")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.seeds, args.first_seed, args.out)
        return

    sys.path.insert(0, str(REPO))
    from animator.segment import segment_drawing_ad, segment_with_check

    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (start)")
    truth, ad, plain = {}, {}, {}
    for key, crop, clean in cases(args.seeds, args.first_seed):
        name = "/".join(map(str, key))
        truth[name] = segment_drawing_ad(clean)
        ad[name] = segment_drawing_ad(crop)
        plain[name] = segment_with_check(crop)[1].plain
    with checkout(args.baseline) as (base, commit):
        runs = {"before": [], "after": []}
        for _ in range(args.rounds):
            runs["before"].append(_run(base, args.seeds, args.first_seed))
            runs["after"].append(_run(REPO, args.seeds, args.first_seed))
        label = f"{args.baseline} ({commit})"
    pages = sorted({n.split("/")[3] for n in truth}, key=["plain", "coloured_sheet", "sky_grass", "lined",
                                                              "squared", "shadow"].index)
    print(f"\nIoU with the figure (mean / min over {len(truth) // len(pages)} crops per page kind, seeds "
          f"{args.first_seed}-{args.first_seed + args.seeds - 1}); before = {label}")
    print(f"{'page':15s} {'AD':>13s} {'before':>13s} {'after':>13s}  plain path")
    for page in pages:
        names = [n for n in truth if n.endswith("/" + page)]
        cols = []
        for masks in (ad, runs["before"][0][0], runs["after"][0][0]):
            v = [_iou(masks[n], truth[n]) for n in names]
            cols.append(f"{np.mean(v):.3f} / {np.min(v):.3f}")
        same = sum((runs["after"][0][0][n] == ad[n]).all() for n in names if plain[n])
        print(f"{page:15s} {cols[0]:>13s} {cols[1]:>13s} {cols[2]:>13s}  {sum(plain[n] for n in names)}/"
              f"{len(names)} (equal to AD: {same})")
    print(f"\nsegment_drawing time per crop, ms (median / p90 over {args.rounds} rounds)")
    print(f"{'page':15s} {'before':>13s} {'after':>13s}")
    for page in pages + ["all"]:
        row = []
        for side in ("before", "after"):
            t = [1e3 * times[n] for _, times in runs[side] for n in times if page == "all" or n.endswith("/" + page)]
            row.append(f"{np.median(t):.1f} / {np.percentile(t, 90):.1f}")
        print(f"{page:15s} {row[0]:>13s} {row[1]:>13s}")
    sizes = [m.shape for m in truth.values()]
    print(f"crops {min(s[0] for s in sizes)}-{max(s[0] for s in sizes)} x {min(s[1] for s in sizes)}-"
          f"{max(s[1] for s in sizes)} px; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (end)")


if __name__ == "__main__":
    main()
