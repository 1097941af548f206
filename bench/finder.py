"""The finder's bench: boxes and joints read from photos of drawings without trained weights.

The set (all built here, deterministic):
- ``gen-<style>``: generated photos of drawn people with known joints (tests/support/drawn_figures.py:
  stick, filled, outlined, crayon, dress; one to three per sheet; perspective, light, shadow, grain,
  the table around the sheet, blur, JPEG), ``--photos`` of them from ``--first-seed``, style by
  seed (the finder was tuned looking at seeds 0-79: held-out figures come from other seeds);
- ``gen-lined``: a fifth as many again on ruled paper (random styles);
- ``ad-photo``: AnimatedDrawings' char4 ``original_img.png`` (EXIF-turned, downsized to 1000 px like
  the app does), its box found by matching char4's texture in it, its joints from char_cfg.yaml;
- ``ad-scene``: tests/fixtures/scene_photo.py (the four example characters pasted on paper, one
  partly in front of another);
- ``ad-texture``: each example's texture.png read as a photo (box: its mask's box);
- ``ad-mask``: the joints fitted to AnimatedDrawings' own masks (no box, no segmentation).

Per figure: box IoU of the best box the finder returned; joints from the photo alone: that box,
:func:`animator.segment.segment_drawing` of the crop, :func:`animator.finder.fit_skeleton`; PCK: the
share of the 16 joints within 0.1 / 0.2 of the figure's size = the LONGER SIDE of its true box.
A figure whose box was not found (IoU < 0.3) counts all its joints as misses. Time per photo: CPU
seconds of this process (one core: BLAS runs one thread) for find_figures plus segment + fit of each
figure found for a true one. Asserts nothing.

    python bench/finder.py [--photos 60] [--first-seed 1000] [--verbose]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import yaml
from PIL import Image, ImageOps

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from animator.finder import find_figures, fit_skeleton  # noqa: E402
from animator.segment import segment_drawing  # noqa: E402
from tests.support.drawn_figures import STYLES, make_photo  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHARS = ROOT / "tests" / "fixtures" / "animated_drawings" / "examples" / "characters"


def iou(a, b) -> float:
    ix = max(0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def cfg_joints(name: str) -> dict[str, np.ndarray]:
    cfg = yaml.safe_load((CHARS / name / "char_cfg.yaml").read_text())
    return {j["name"]: np.array(j["loc"], float) for j in cfg["skeleton"]}


def ad_photo():
    """char4's photo as the app sees it, and its truth (box found by template matching the texture)."""
    import cv2

    im = ImageOps.exif_transpose(Image.open(CHARS / "char4" / "original_img.png")).convert("RGB")
    k = 1000 / max(im.size)
    im = im.resize((round(im.width * k), round(im.height * k)), Image.Resampling.BILINEAR)
    rgb = np.asarray(im)
    tex = np.asarray(Image.open(CHARS / "char4" / "texture.png").convert("RGB"))
    res = cv2.matchTemplate(rgb, tex, cv2.TM_CCOEFF_NORMED)
    _, best, _, (x0, y0) = cv2.minMaxLoc(res)
    mask = np.asarray(Image.open(CHARS / "char4" / "mask.png")) > 127
    ys, xs = np.nonzero(mask)
    box = (x0 + xs.min(), y0 + ys.min(), x0 + xs.max() + 1, y0 + ys.max() + 1)
    joints = {n: v + (x0, y0) for n, v in cfg_joints("char4").items()}
    return rgb, [(box, joints)], best


def items(photos: int, first_seed: int = 0):
    for seed in range(first_seed, first_seed + photos):
        style = STYLES[seed % len(STYLES)]
        rgb, truth = make_photo(seed, style)
        yield f"gen-{style}", rgb, [(t.box, {n: np.array(v) for n, v in t.joints.items()}) for t in truth]
    for seed in range(first_seed, first_seed + photos // 5):
        rgb, truth = make_photo(seed, lined=True)
        yield "gen-lined", rgb, [(t.box, {n: np.array(v) for n, v in t.joints.items()}) for t in truth]
    rgb, truth, match = ad_photo()
    yield "ad-photo", rgb, truth
    from tests.fixtures.scene_photo import make_scene_photo

    photo, pasted = make_scene_photo()
    truth = []
    for p in pasted:
        ys, xs = np.nonzero(p.mask)
        truth.append(((xs.min(), ys.min(), xs.max() + 1, ys.max() + 1), {n: np.array(v) for n, v in p.joints.items()}))
    yield "ad-scene", photo, truth
    for name in ("char1", "char2", "char3", "char4"):
        tex = np.asarray(Image.open(CHARS / name / "texture.png").convert("RGB"))
        mask = np.asarray(Image.open(CHARS / name / "mask.png")) > 127
        ys, xs = np.nonzero(mask)
        yield "ad-texture", tex, [((xs.min(), ys.min(), xs.max() + 1, ys.max() + 1), cfg_joints(name))]


def pck(pred: dict, truth: dict, size: float) -> list[float]:
    return [float(np.hypot(*(np.asarray(pred[n]) - truth[n]))) / size for n in truth]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--photos", type=int, default=60, help="generated photos (default 60)")
    ap.add_argument("--first-seed", type=int, default=0,
                    help="seed of the first generated photo (default 0; the finder was tuned on 0-79)")
    ap.add_argument("--verbose", action="store_true", help="a line per figure")
    args = ap.parse_args()
    print(f"load before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    ious: dict[str, list[float]] = defaultdict(list)
    errs: dict[str, list[float]] = defaultdict(list)
    cpu: dict[str, list[float]] = defaultdict(list)
    top1: dict[str, list[bool]] = defaultdict(list)
    parts = {"find_figures": [], "segment_drawing": [], "fit_skeleton": []}
    for kind, rgb, truth in items(args.photos, args.first_seed):
        t0 = time.process_time()
        figs = find_figures(rgb)
        parts["find_figures"].append(1000 * (time.process_time() - t0))
        top1[kind].append(bool(figs) and max(iou(figs[0].box, b) for b, _ in truth) >= 0.7)
        used = 0.0
        for box, joints in truth:
            size = float(max(box[2] - box[0], box[3] - box[1]))
            best = max(figs, key=lambda f: iou(f.box, box), default=None)
            v = iou(best.box, box) if best else 0.0
            ious[kind].append(v)
            if v < 0.3:
                errs[kind] += [np.inf] * 16
                continue
            t1 = time.process_time()
            left, top, right, bottom = best.box
            mask = segment_drawing(rgb[top:bottom, left:right])
            t2 = time.process_time()
            fit = fit_skeleton(mask, origin=(left, top))
            t3 = time.process_time()
            used += t3 - t1
            parts["segment_drawing"].append(1000 * (t2 - t1))
            parts["fit_skeleton"].append(1000 * (t3 - t2))
            e = pck(fit.joints, joints, size)
            errs[kind] += e
            if args.verbose:
                bad = {n: round(x, 2) for n, x in zip(joints, e) if x >= 0.1}
                print(f"  {kind} iou {v:.2f} score {fit.score:.2f} {fit.reason or ''} {bad}")
        cpu[kind].append(1000 * (time.process_time() - t0))
    for name in ("char1", "char2", "char3", "char4"):
        mask = np.asarray(Image.open(CHARS / name / "mask.png")) > 127
        ys, xs = np.nonzero(mask)
        fit = fit_skeleton(mask)
        errs["ad-mask"] += pck(fit.joints, cfg_joints(name), float(max(np.ptp(ys), np.ptp(xs)) + 1))
    print(f"{'set':12s} {'photos':>6s} {'figures':>7s} {'IoU>=0.7':>8s} {'IoU med':>7s} {'top box':>7s} "
          f"{'PCK@0.1':>7s} {'PCK@0.2':>7s} {'ms/photo':>8s} {'ms max':>6s}")

    def row(name, iv, ev, cv, tv):
        e = np.asarray(ev)
        box = f"{np.mean(np.asarray(iv) >= 0.7):8.0%} {statistics.median(iv):7.2f}" if iv else f"{'-':>8s} {'-':>7s}"
        top = f"{np.mean(tv):7.0%}" if tv else f"{'-':>7s}"
        ms = f"{statistics.median(cv):8.0f} {max(cv):6.0f}" if cv else f"{'-':>8s} {'-':>6s}"
        print(f"{name:12s} {len(tv):6d} {len(iv) or len(e) // 16:7d} {box} {top} {np.mean(e < 0.1):7.0%} "
              f"{np.mean(e < 0.2):7.0%} {ms}")
    kinds = sorted(set(ious) | set(errs), key=lambda k: (k.startswith("ad"), k))
    for k in kinds:
        row(k, ious.get(k, []), errs.get(k, []), cpu.get(k, []), top1.get(k, []))
    photos = [k for k in kinds if k != "ad-mask"]
    row("all photos", sum((ious[k] for k in photos), []), sum((errs[k] for k in photos), []),
        sum((cpu[k] for k in photos), []), sum((top1[k] for k in photos), []))
    print("CPU ms per call, median / max: " + ", ".join(
        f"{k} {statistics.median(v):.0f} / {max(v):.0f}" for k, v in parts.items() if v))
    print(f"load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
