#!/usr/bin/env python3
"""Build the two TorchServe archives (.mar) doodlepod serves.

Two sources of weights:

``--tiny``
    Random-initialised models of the same architectures at small widths (models/*_tiny.py), from a
    fixed seed: deterministic, built offline in seconds. For tests and for ``make run`` on a machine
    without the real weights. Their answers have the right shape, not the right content. The
    detector's classification bias is raised so that it reports boxes (random weights would hover
    around the score threshold); nothing else is tuned.

``--finder``
    No trained weights at all: the ink finder (animator/finder, docs/finder.md) under the same two
    model names, requests and answers (handlers/ink_finder_*.py). What ``make run`` and the CPU model
    image serve where AnimatedDrawings' released weights are absent. Needs neither mmcv nor
    mmdet/mmpose (nor, here, torch): the archive holds the handlers and the ``animator`` modules the
    finder imports, no checkpoint.

``--weights-dir DIR``
    AnimatedDrawings' released ``drawn_humanoid_detector.mar`` / ``drawn_humanoid_pose_estimator.mar``
    (as downloaded by scripts/fetch_weights.sh), or folders of that name holding their unzipped
    contents. Their mmdet 2.x / mmpose 0.x checkpoints and configs are converted to the pinned stack
    by scripts/convert_checkpoint.py (strictly checked).

Each archive holds the handler (handlers/<model>.py), handlers/handler_base.py, the flattened mm
config (config.py), the weights and a model-config YAML whose ``handler`` section carries the
handler's settings. An archive is rebuilt only when one of its inputs changed (a JSON stamp next
to it records them), and lands in ``--out`` by an atomic rename.

    scripts/build_archives.py --tiny --out build/model-store
    scripts/build_archives.py --finder --out build/model-store
    scripts/build_archives.py --weights-dir ~/.cache/doodlepod/weights --out build/model-store
"""
from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import convert_checkpoint as cc  # noqa: E402

MODELS = {
    "drawn_humanoid_detector": {
        "kind": "detector",
        "config": REPO / "models" / "drawn_humanoid_detector.py",
        "tiny_config": REPO / "models" / "drawn_humanoid_detector_tiny.py",
        "handler": REPO / "handlers" / "drawn_humanoid_detector.py",
        "finder_handler": REPO / "handlers" / "ink_finder_detector.py",
        "settings": {"score_threshold": 0.5, "max_detections": 10},
        # the finder's score is its confidence that a box is one drawn figure (docs/finder.md);
        # the app keeps DOODLEPOD_MIN_DETECTION_SCORE's cut
        "finder_settings": {"score_threshold": 0.05, "max_detections": 8},
    },
    "drawn_humanoid_pose_estimator": {
        "kind": "pose",
        "config": REPO / "models" / "drawn_humanoid_pose_estimator.py",
        "tiny_config": REPO / "models" / "drawn_humanoid_pose_estimator_tiny.py",
        "handler": REPO / "handlers" / "drawn_humanoid_pose_estimator.py",
        "finder_handler": REPO / "handlers" / "ink_finder_pose_estimator.py",
        "settings": {},
        "finder_settings": {},
    },
}
HANDLER_BASE = REPO / "handlers" / "handler_base.py"
FINDER_BASE = REPO / "handlers" / "ink_finder_base.py"
#: The animator modules the finder archives carry: these and every animator module they import.
FINDER_ROOTS = ("animator/__init__.py", "animator/finder", "animator/segment.py", "animator/skeleton.py")
ARCHIVE_VERSION = "1.0"  # handlers/config.properties refers to this version
TINY_DETECTOR_FOREGROUND_BIAS = 4.0

log = logging.getLogger("build_archives")


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("torch", "mmcv", "mmengine", "mmdet", "mmpose", "torch-model-archiver"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out


def _inputs_key(name: str, spec: dict[str, Any], source: dict[str, Any]) -> str:
    h = hashlib.sha256()
    files = [spec["handler"], HANDLER_BASE, Path(__file__), Path(cc.__file__), spec["config"], spec["tiny_config"]]
    if source.get("weights") == "finder":
        files = [spec["finder_handler"], HANDLER_BASE, FINDER_BASE, Path(__file__), *finder_modules()]
    for path in files:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    finder = source.get("weights") == "finder"
    versions = {"torch-model-archiver": _versions()["torch-model-archiver"]} if finder else _versions()
    h.update(json.dumps({"source": source, "settings": spec["finder_settings" if finder else "settings"],
                         "versions": versions},
                        sort_keys=True, default=str).encode())
    return h.hexdigest()[:20]


# -- the finder's modules ------------------------------------------------------------------------------
def finder_modules() -> list[Path]:
    """The ``animator`` source files the finder archives carry: :data:`FINDER_ROOTS` and, transitively,
    every ``animator`` module they import (read from their ``import`` statements), sorted."""
    import ast

    pkg = REPO / "animator"
    todo = [REPO / root for root in FINDER_ROOTS]
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path.is_dir():
            todo += sorted(path.rglob("*.py"))
            continue
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        package = path.parent if path.name != "__init__.py" else path.parent
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:  # relative: from the module's package, up node.level - 1 folders
                    base = package
                    for _ in range(node.level - 1):
                        base = base.parent
                    mod = (node.module or "").split(".") if node.module else []
                    names = [str(base.joinpath(*mod)) ] + [str(base.joinpath(*mod, a.name)) for a in node.names]
                elif node.module and node.module.split(".")[0] == "animator":
                    names = [str(REPO.joinpath(*node.module.split(".")))]
                    names += [str(REPO.joinpath(*node.module.split("."), a.name)) for a in node.names]
            elif isinstance(node, ast.Import):
                names = [str(REPO.joinpath(*a.name.split("."))) for a in node.names
                         if a.name.split(".")[0] == "animator"]
            for name in names:
                for candidate in (Path(name + ".py"), Path(name) / "__init__.py"):
                    if candidate.is_file() and pkg in candidate.parents:
                        todo.append(candidate)
                        # a subpackage's own __init__ runs first on import
                        for parent in candidate.parents:
                            if parent == pkg or pkg not in parent.parents:
                                break
                            todo.append(parent / "__init__.py")
    return sorted(seen)


def stage_finder_package(dst: Path) -> Path:
    """Copy :func:`finder_modules` into ``dst/animator/...``; return ``dst`` (its contents go to the
    archive's root, so ``import animator.finder`` finds them there)."""
    for path in finder_modules():
        target = dst / path.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return dst


# -- weights ----------------------------------------------------------------------------------------------
def tiny_checkpoint(kind: str, config: Path, dst: Path, seed: int) -> Any:
    """Random-initialise the tiny model of ``config`` from ``seed`` and save it; return its config."""
    import numpy as np
    import torch
    from mmengine.config import Config

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    cfg = Config.fromfile(str(config))
    model = cc.build_model(kind, cfg)
    model.init_weights()
    meta: dict[str, Any] = {"tiny": True, "seed": seed, "note": "random weights; for tests only"}
    if kind == "detector":
        # fc_cls has num_classes + 1 outputs, background last. Favour the foreground so the random
        # model reports boxes above the handler's score threshold instead of an empty list.
        with torch.no_grad():
            model.roi_head.bbox_head.fc_cls.bias[:-1] += TINY_DETECTOR_FOREGROUND_BIAS
        meta["dataset_meta"] = {"classes": tuple(cfg.classes)}
    state = {k: v.detach().clone() for k, v in model.state_dict().items()
             if not k.startswith("data_preprocessor.")}
    cc.save_atomically({"meta": meta, "state_dict": state}, dst)
    return cfg


def _looks_like_mm_config(source: bytes) -> bool:
    """An OpenMMLab config defines ``model = dict(...)``; a handler defines a class."""
    text = source.decode("utf-8", "replace")
    return bool(re.search(r"^model\s*=\s*dict\(", text, re.M)) and not re.search(r"^class\s", text, re.M)


def find_released(weights_dir: Path, name: str, scratch: Path) -> tuple[Path, Path | None, Path]:
    """Locate a released model in ``weights_dir``: ``<name>.mar`` or a folder ``<name>/``.

    Returns (checkpoint, legacy config or None, the file whose hash identifies the source).
    """
    mar = weights_dir / f"{name}.mar"
    folder = weights_dir / name
    if mar.is_file():
        out = scratch / f"{name}-unzipped"
        with zipfile.ZipFile(mar) as zf:
            members = [m for m in zf.infolist() if not m.is_dir()]
            pths = sorted((m for m in members if m.filename.endswith((".pth", ".pt"))), key=lambda m: -m.file_size)
            cfgs = [m for m in members if Path(m.filename).name == "config.py"] or [
                m for m in members if m.filename.endswith(".py") and _looks_like_mm_config(zf.read(m))]
            if not pths:
                raise cc.ConversionError(f"{mar} holds no .pth checkpoint (members: {[m.filename for m in members]})")
            zf.extract(pths[0], out)
            config = None
            if cfgs:
                zf.extract(cfgs[0], out)
                config = out / cfgs[0].filename
        return out / pths[0].filename, config, mar
    if folder.is_dir():
        pths = sorted((p for p in folder.rglob("*.pth")), key=lambda p: -p.stat().st_size)
        if not pths:
            raise cc.ConversionError(f"{folder} holds no .pth checkpoint")
        configs = list(folder.rglob("config.py")) or [
            p for p in folder.rglob("*.py") if _looks_like_mm_config(p.read_bytes())]
        return pths[0], (configs[0] if configs else None), pths[0]
    raise FileNotFoundError(f"neither {mar} nor {folder}/ exists: run scripts/fetch_weights.sh {weights_dir}")


# -- archives ------------------------------------------------------------------------------------------
def write_model_yaml(path: Path, name: str, settings: dict[str, Any]) -> None:
    lines = [f"# Model config of {name} (written by scripts/build_archives.py).",
             "# Workers, batch size and timeouts are left to handlers/config.properties (TorchServe",
             "# would let values here override it); this only configures the handler, which reads",
             "# context.model_yaml_config['handler'].",
             "handler:", "  config: config.py"]
    lines += [f"  {k}: {json.dumps(v)}" for k, v in sorted(settings.items())]
    path.write_text("\n".join(lines) + "\n")


def archive(name: str, spec: dict[str, Any], checkpoint: Path | None, config_file: Path | None, stage: Path,
            out: Path, weights: str = "released") -> Path:
    """Run torch-model-archiver and move the .mar into ``out`` atomically. ``weights`` ("tiny",
    "released" or "finder") goes to the handler's settings: its answers name it (header
    X-Doodlepod-Weights), so the app can tell a person what found the drawing. A finder archive has
    no checkpoint nor config: its handler, the finder's base and the ``animator`` modules instead."""
    yaml_path = stage / "model-config.yaml"
    finder = weights == "finder"
    settings = spec["finder_settings"] if finder else spec["settings"]
    write_model_yaml(yaml_path, name, {**settings, "weights": weights})
    export = stage / "export"
    export.mkdir(parents=True, exist_ok=True)
    if finder:
        extra = [HANDLER_BASE, FINDER_BASE, stage_finder_package(stage / "finder-package")]
    else:
        extra = [HANDLER_BASE, config_file]
    cmd = [sys.executable, "-m", "model_archiver.model_packaging",
           "--model-name", name, "--version", ARCHIVE_VERSION,
           *(["--serialized-file", str(checkpoint)] if checkpoint is not None else []),
           "--handler", str(spec["finder_handler" if finder else "handler"]),
           "--extra-files", ",".join(str(p) for p in extra),
           "--config-file", str(yaml_path),
           "--export-path", str(export), "--force"]
    # torch-model-archiver stages files in $TMPDIR/<model name> and deletes that folder after:
    # two builds of the same model on one machine (make run beside a test run) would race there.
    staging = stage / "archiver-tmp"
    staging.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "TMPDIR": str(staging)})
    built = export / f"{name}.mar"
    if res.returncode != 0 or not built.is_file():
        raise RuntimeError(f"torch-model-archiver failed for {name}:\n{res.stdout}\n{res.stderr}")
    out.mkdir(parents=True, exist_ok=True)
    dst = out / f"{name}.mar"
    tmp = out / f".{name}.mar.tmp-{os.getpid()}"
    shutil.copyfile(built, tmp)
    os.replace(tmp, dst)
    return dst


def build_one(name: str, out: Path, tiny: bool, weights_dir: Path | None, seed: int, force: bool,
              finder: bool = False) -> dict[str, Any]:
    spec = MODELS[name]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"doodlepod-{name}-") as tmpdir:
        stage = Path(tmpdir)
        if finder:
            source: dict[str, Any] = {"weights": "finder"}
            key = _inputs_key(name, spec, source)
            legacy = None
        elif tiny:
            source = {"weights": "tiny", "seed": seed}
            key = _inputs_key(name, spec, source)
            legacy = None
        else:
            assert weights_dir is not None
            ckpt_src, legacy_cfg, ident = find_released(weights_dir, name, stage)
            source = {"weights": "released", "file": ident.name, "sha256": cc.sha256(ident)}
            key = _inputs_key(name, spec, source)
            legacy = (ckpt_src, legacy_cfg)
        stamp = out / f"{name}.mar.json"
        if not force and (out / f"{name}.mar").is_file() and stamp.is_file():
            try:
                if json.loads(stamp.read_text()).get("inputs") == key:
                    log.info("%s: up to date (%s)", name, out / f"{name}.mar")
                    return json.loads(stamp.read_text())
            except ValueError:
                pass
        checkpoint: Path | None = stage / f"{name}.pth"
        config_file: Path | None = stage / "config.py"
        summary: dict[str, Any] = {}
        if finder:
            checkpoint = config_file = None
        elif legacy is None:
            cfg = tiny_checkpoint(spec["kind"], spec["tiny_config"], checkpoint, seed)
            cfg.dump(str(config_file))
        else:
            summary = cc.convert(spec["kind"], legacy[0], checkpoint, legacy[1], spec["config"], config_file)
        mar = archive(name, spec, checkpoint, config_file, stage, out, source["weights"])
    info = {
        "model": name,
        "archive": str(mar),
        "archive_bytes": mar.stat().st_size,
        "source": source,
        "inputs": key,
        "versions": _versions(),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": round(time.perf_counter() - t0, 2),
        "converted": {k: v for k, v in summary.items() if k in ("parameters", "tensors", "classes")},
    }
    tmp = out / f".{name}.mar.json.tmp-{os.getpid()}"
    tmp.write_text(json.dumps(info, indent=2, default=str) + "\n")
    os.replace(tmp, stamp)
    log.info("%s: built %s (%.1f MB, %s weights) in %.1f s", name, mar, mar.stat().st_size / 1e6,
             source["weights"], info["seconds"])
    return info


def build(out: Path, tiny: bool = True, weights_dir: Path | None = None, seed: int = 0,
          force: bool = False, models: tuple[str, ...] = tuple(MODELS), finder: bool = False) -> list[dict[str, Any]]:
    """Build (or reuse) the archives of ``models`` in ``out``; return their stamps."""
    return [build_one(name, Path(out), tiny, weights_dir, seed, force, finder) for name in models]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--tiny", action="store_true", help="random-init tiny models (tests of the learned path)")
    src.add_argument("--finder", action="store_true",
                     help="the ink finder, no trained weights (what runs where the released weights are absent)")
    src.add_argument("--weights-dir", type=Path,
                     help="folder with AnimatedDrawings' released .mar files (scripts/fetch_weights.sh)")
    parser.add_argument("--out", type=Path, default=REPO / "build" / "model-store",
                        help="model store to write the .mar files into (default %(default)s)")
    parser.add_argument("--model", action="append", choices=sorted(MODELS),
                        help="build only this model (repeatable; default both)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the tiny models' random weights")
    parser.add_argument("--force", action="store_true", help="rebuild even if the stamp says up to date")
    parser.add_argument("-q", "--quiet", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="[archives %(asctime)s] %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("convert_checkpoint").setLevel(logging.WARNING if args.quiet else logging.INFO)
    t0 = time.perf_counter()
    try:
        infos = build(args.out, args.tiny, args.weights_dir, args.seed, args.force,
                      tuple(args.model or MODELS), finder=args.finder)
    except (cc.ConversionError, FileNotFoundError, RuntimeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    log.info("%d archive(s) ready in %s (%.1f s)", len(infos), args.out, time.perf_counter() - t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
