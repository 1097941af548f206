#!/usr/bin/env python3
"""Measure which functions of mmcv's compiled extension (``mmcv._ext``) the two models call on CPU.

    .venv/bin/python scripts/mmcv_ops_used.py [--sizes tiny full] [--json OUT]

For each size (``tiny``: models/*_tiny.py, what the tests and ``make run`` serve; ``full``:
models/drawn_humanoid_*.py, what the images serve with the released weights) and each model, the
script random-initialises the model from a fixed seed as ``scripts/build_archives.py --tiny`` does
(the detector's foreground bias raised so it reports boxes and its mask branch runs, as a trained
one would), then answers two drawings through the handler's real path: ``load_model`` (mmdet's
``init_detector`` / mmpose's ``init_model`` and the config's test pipeline) and ``handle`` (decode,
batch, ``test_step``). Every public function of ``mmcv._ext`` is wrapped beforehand to count its
calls: every op module of ``mmcv.ops`` reaches the extension through attribute lookups on that one
module at call time, so no call is missed. On the CPU subset build (scripts/mmcv_subset.py --cpu)
calls of the functions it left out are counted too (as ``LEFT OUT <name>``), even where a caller
catches their error, so the subset build measures what the full one would.

Prints the calls per model and size, and exits non-zero when a model's answer is an error, when a
called function is not among ``CPU_CALLED`` of scripts/mmcv_subset.py (the ops the CPU subset build
keeps), or when the detector reported no box (its mask branch would then not have run). Run it on
the full mmcv to see what a new model calls; on the subset build it proves the subset suffices.
"""
from __future__ import annotations

import argparse
import collections
import importlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))
import build_archives  # noqa: E402
import mmcv_subset  # noqa: E402

HANDLERS = {
    "drawn_humanoid_detector": ("handlers.drawn_humanoid_detector", "DrawnHumanoidDetectorHandler"),
    "drawn_humanoid_pose_estimator": ("handlers.drawn_humanoid_pose_estimator", "DrawnHumanoidPoseEstimatorHandler"),
}


def drawing(width: int, height: int, fmt: str) -> bytes:
    """A stick figure on paper, encoded as ``fmt``: enough for the detector to propose boxes."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (width, height), (245, 242, 235))
    d = ImageDraw.Draw(img)
    cx, s = width / 2, min(width, height) / 10
    d.ellipse([cx - s, 0.15 * height, cx + s, 0.15 * height + 2 * s], outline=(20, 20, 30), width=3)
    d.line([(cx, 0.15 * height + 2 * s), (cx, 0.15 * height + 6 * s)], fill=(20, 20, 30), width=3)
    for dx in (-1, 1):
        d.line([(cx, 0.15 * height + 3 * s), (cx + dx * 2.5 * s, 0.15 * height + 2 * s)], fill=(20, 20, 30), width=3)
        d.line([(cx, 0.15 * height + 6 * s), (cx + dx * 1.5 * s, 0.15 * height + 8.5 * s)], fill=(20, 20, 30), width=3)
    buf = io.BytesIO()
    img.save(buf, format=fmt)
    return buf.getvalue()


class CallRecorder:
    """Wraps every public function of ``mmcv._ext`` in place; ``take()`` returns and resets the counts."""

    def __init__(self) -> None:
        import mmcv.ops  # noqa: F401  (loads the extension and every op module)

        self.ext = importlib.import_module("mmcv._ext")
        self.counts: collections.Counter[str] = collections.Counter()
        self.subset = getattr(self.ext, "doodlepod_subset", None)
        self.bound = sorted(n for n in dir(self.ext) if not n.startswith("_") and callable(getattr(self.ext, n)))
        for name in self.bound:
            setattr(self.ext, name, self._wrap(name, getattr(self.ext, name)))
        if self.subset:  # the stand-ins of the left-out functions (the patched mmcv/utils/ext_loader.py)
            from mmcv.utils import ext_loader

            left_out = ext_loader._left_out
            ext_loader._left_out = lambda fun, subset: self._wrap(f"LEFT OUT {fun}", left_out(fun, subset))

    def _wrap(self, name: str, fn: Any) -> Any:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            self.counts[name] += 1
            return fn(*args, **kwargs)
        return recorded

    def take(self) -> dict[str, int]:
        out = dict(sorted(self.counts.items()))
        self.counts.clear()
        return out


def measure(size: str, name: str, recorder: CallRecorder, scratch: Path) -> dict[str, Any]:
    spec = build_archives.MODELS[name]
    config = spec["tiny_config"] if size == "tiny" else spec["config"]
    checkpoint, config_file = scratch / f"{name}-{size}.pth", scratch / f"{name}-{size}.py"
    t0 = time.perf_counter()
    cfg = build_archives.tiny_checkpoint(spec["kind"], config, checkpoint, seed=0)
    cfg.dump(str(config_file))
    module, cls = HANDLERS[name]
    handler = getattr(importlib.import_module(module), cls)()
    handler.settings = dict(spec["settings"])
    handler.model = handler.load_model(str(config_file), str(checkpoint), "cpu")
    handler.initialized = True
    recorder.take()  # count inference only (loading calls no op, but keep the figure clean)
    answers = handler.handle([{"body": drawing(200, 150, "PNG")}, {"data": drawing(120, 200, "JPEG")}], None)
    calls = recorder.take()
    errors = [a for a in answers if isinstance(a, dict) and "error" in a]
    boxes = sum(len(a) for a in answers if isinstance(a, list)) if spec["kind"] == "detector" else None
    return {"size": size, "model": name, "calls": calls, "errors": errors, "detections": boxes,
            "seconds": round(time.perf_counter() - t0, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", choices=("tiny", "full"), default=["tiny", "full"])
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    recorder = CallRecorder()
    allowed = {fun for funs in mmcv_subset.CPU_CALLED.values() for fun in funs}
    print(f"mmcv._ext: {len(recorder.bound)} functions bound"
          f" ({recorder.subset or 'the full build: every op'})", flush=True)
    results, problems = [], []
    with tempfile.TemporaryDirectory(prefix="mmcv-ops-used-") as tmp:
        for size in args.sizes:
            for name in HANDLERS:
                r = measure(size, name, recorder, Path(tmp))
                results.append(r)
                calls = ", ".join(f"{fun} x{n}" for fun, n in r["calls"].items()) or "none"
                print(f"{size:4} {name:30} calls: {calls}  ({r['seconds']} s)", flush=True)
                problems += [f"{size} {name}: answered {e}" for e in r["errors"]]
                problems += [f"{size} {name}: calls {fun}, which scripts/mmcv_subset.py CPU_CALLED does not list"
                             for fun in r["calls"] if fun not in allowed]
                if r["detections"] == 0:
                    problems.append(f"{size} {name}: no box reported, so the mask branch did not run")
    used = sorted({fun for r in results for fun in r["calls"]})
    print(f"used in all: {', '.join(used) or 'none'}; the CPU subset keeps {dict(mmcv_subset.CPU_CALLED)}")
    if args.json:
        args.json.write_text(json.dumps({"subset": recorder.subset, "used": used, "results": results}, indent=2) + "\n")
    for p in problems:
        print(f"mmcv_ops_used: PROBLEM: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
