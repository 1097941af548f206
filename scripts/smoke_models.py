#!/usr/bin/env python3
"""Smoke test of the model stack the venv's model half installed: both handlers load and answer.

For each of the two models: the tiny random-initialised checkpoint of its architecture
(scripts/build_archives.py's, seed 0), the handler's own ``initialize`` on it as TorchServe would call
it (a model folder with config.py and the checkpoint, the archive's handler settings), then ``handle``
on one stand-in drawing. The answers must have the handler's form (a list of boxes; 17 keypoints): the
weights are random, so not what they see. No TorchServe, no Java, no network; 37 s measured in the
rehearsal (2 cores, load 14, nice 10: the detector's load and one image at its test scale are most of it).

Run by scripts/bootstrap.sh after the model half is installed, once per model-half key (its stamp);
exits 1 with what failed. By hand: ``.venv/bin/python scripts/smoke_models.py``.
"""
from __future__ import annotations

import io
import json
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))


def drawing_png(width: int = 192, height: int = 256) -> bytes:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (width, height), (245, 242, 235))
    d = ImageDraw.Draw(img)
    cx, s = width / 2, min(width, height) / 10
    d.ellipse([cx - s, 0.15 * height, cx + s, 0.15 * height + 2 * s], outline=(20, 20, 30), width=3)
    d.line([(cx, 0.15 * height + 2 * s), (cx, 0.15 * height + 6 * s)], fill=(20, 20, 30), width=3)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def check_form(kind: str, answer: object) -> None:
    if kind == "detector":
        assert isinstance(answer, list), answer
        for det in answer:
            assert set(det) == {"bbox", "score", "category"} and len(det["bbox"]) == 4, det
    else:
        assert isinstance(answer, list) and len(answer) == 1, answer
        assert len(answer[0]["keypoints"]) == 17 and all(len(k) == 3 for k in answer[0]["keypoints"]), answer


def smoke(name: str, spec: dict, png: bytes, scratch: Path) -> str:
    import importlib

    from build_archives import tiny_checkpoint

    t0 = time.perf_counter()
    folder = scratch / name
    folder.mkdir()
    cfg = tiny_checkpoint(spec["kind"], spec["tiny_config"], folder / "model.pth", seed=0)
    cfg.dump(str(folder / "config.py"))
    module = importlib.import_module(f"handlers.{name}")
    handler_cls = next(v for v in vars(module).values()
                       if isinstance(v, type) and getattr(v, "model_name", None) == name)
    context = SimpleNamespace(
        system_properties={"model_dir": str(folder), "gpu_id": None},
        manifest={"model": {"serializedFile": "model.pth"}},
        model_yaml_config={"handler": {"config": "config.py", **spec["settings"], "weights": "tiny"}},
    )
    handler = handler_cls()
    handler.initialize(context)
    t1 = time.perf_counter()
    [answer] = handler.handle([{"body": png}], context)
    if isinstance(answer, dict) and "error" in answer:
        raise AssertionError(f"the handler answered an error: {json.dumps(answer)}")
    check_form(spec["kind"], answer)
    return f"{name}: loaded in {t1 - t0:.1f} s, one image in {time.perf_counter() - t1:.2f} s"


def main() -> int:
    t0 = time.perf_counter()
    try:
        from build_archives import MODELS

        png = drawing_png()
        with tempfile.TemporaryDirectory(prefix="doodlepod-model-smoke-") as tmp:
            lines = [smoke(name, spec, png, Path(tmp)) for name, spec in MODELS.items()]
    except Exception as err:  # noqa: BLE001 - any failure is the answer; say which
        import traceback

        traceback.print_exc()
        print(f"[smoke_models] FAILED: the model stack cannot run the handlers: {type(err).__name__}: {err}",
              file=sys.stderr)
        return 1
    for line in lines:
        print(f"[smoke_models] {line}", file=sys.stderr)
    print(f"[smoke_models] both handlers load and answer on CPU (tiny weights; {time.perf_counter() - t0:.1f} s)",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
