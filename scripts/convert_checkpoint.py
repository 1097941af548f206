#!/usr/bin/env python3
"""Convert AnimatedDrawings' released checkpoints (mmdet 2.x / mmpose 0.x) to the pinned stack.

AnimatedDrawings' ``drawn_humanoid_detector.mar`` and ``drawn_humanoid_pose_estimator.mar`` each
hold an OpenMMLab 1.x-era checkpoint (mmcv-full 1.7, mmdet 2.27, mmpose 0.29) and its ``config.py``.
The pinned stack (mmcv 2.1.0, mmdet 3.3.0, mmpose 1.3.2) builds the same networks, but:

- checkpoints: the pose head moved from ``keypoint_head.*`` (TopdownHeatmapSimpleHead) to
  ``head.*`` (HeatmapHead); Mask R-CNN R50-FPN kept its parameter names (mmdet 3.x's own model zoo
  still serves the 2.x Mask R-CNN weights). Training state (optimizer, EMA, hook messages holding
  numpy scalars that torch >= 2.6 refuses to unpickle by default) is dropped, ``module.`` prefixes
  from DataParallel are removed, and the class names / dataset info move to the 3.x meta layout;
- configs: the old ``img_norm_cfg``/pipeline/``data_cfg`` settings (normalisation, colour order,
  test scale, input and heatmap sizes, flip test) are carried over into our pinned config
  (``models/*.py``), written out as one flat config file.

The converted weights are then loaded into the pinned model with ``strict=True``: any missing,
unexpected or mis-shaped parameter fails the conversion with the list, instead of a model that
loads "with warnings" and answers garbage.

Usage::

    scripts/convert_checkpoint.py detector OLD.pth NEW.pth --legacy-config old_config.py \
        --config models/drawn_humanoid_detector.py --config-out config.py
    scripts/convert_checkpoint.py pose OLD.pth NEW.pth --legacy-config old_config.py \
        --config models/drawn_humanoid_pose_estimator.py --config-out config.py

The legacy checkpoint is unpickled with ``weights_only=False`` (it holds more than tensors): only
convert files you trust, such as AnimatedDrawings' releases checked against their SHA-256
(scripts/fetch_weights.sh does that).
"""
from __future__ import annotations

import argparse
import hashlib
import logging
import os
import re
import runpy
import sys
import tempfile
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
KINDS = ("detector", "pose")
DEFAULT_CONFIGS = {
    "detector": REPO / "models" / "drawn_humanoid_detector.py",
    "pose": REPO / "models" / "drawn_humanoid_pose_estimator.py",
}
CONVERTER_VERSION = 1

log = logging.getLogger("convert_checkpoint")


class ConversionError(Exception):
    """The legacy checkpoint or config does not match the pinned architecture."""


# -- reading the legacy files -----------------------------------------------------------------------
def load_legacy_checkpoint(path: Path) -> dict[str, Any]:
    """Load an old OpenMMLab checkpoint: ``{'state_dict': ..., 'meta': ..., 'optimizer': ...}``
    or a bare state dict. Trusted files only (full unpickling)."""
    import torch

    obj = torch.load(str(path), map_location="cpu", weights_only=False)
    if not isinstance(obj, dict):
        raise ConversionError(f"{path}: expected a checkpoint dict, got {type(obj).__name__}")
    if "state_dict" in obj and isinstance(obj["state_dict"], dict):
        return obj
    if all(hasattr(v, "shape") for v in obj.values()):
        return {"state_dict": obj, "meta": {}}
    raise ConversionError(f"{path}: no 'state_dict' in the checkpoint (keys: {sorted(obj)[:10]})")


def load_legacy_config(path: Path | None, checkpoint_meta: dict[str, Any]) -> dict[str, Any]:
    """The old config as plain dicts: from ``path`` (a 1.x-era config.py) or else from the
    ``config`` text old runners stored in the checkpoint meta. Empty dict if neither exists."""
    if path is not None:
        try:
            from mmengine.config import Config

            return Config.fromfile(str(path)).to_dict()
        except Exception as exc:  # noqa: BLE001 - old dumps may trip mmengine's checks
            log.info("mmengine could not parse %s (%s); reading it as plain Python", path, exc)
            return {k: v for k, v in runpy.run_path(str(path)).items() if not k.startswith("__")}
    text = checkpoint_meta.get("config")
    if isinstance(text, str) and text.strip():
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(text)
        try:
            return load_legacy_config(Path(f.name), {})
        finally:
            os.unlink(f.name)
    return {}


# -- state dict conversion ----------------------------------------------------------------------------
def _tensors_only(state: dict[str, Any]) -> "OrderedDict[str, Any]":
    out: OrderedDict[str, Any] = OrderedDict()
    for key, value in state.items():
        if not hasattr(value, "shape"):
            continue
        key = key[len("module."):] if key.startswith("module.") else key
        if key.startswith("data_preprocessor."):
            continue  # mean/std buffers: set from the config instead
        out[key] = value.detach().clone().contiguous()
    return out


def convert_detector_state(state: dict[str, Any]) -> "OrderedDict[str, Any]":
    """mmdet 2.x Mask R-CNN -> mmdet 3.x: same parameter names; keep tensors, strip wrappers."""
    out = _tensors_only(state)
    if not any(k.startswith("roi_head.mask_head.") for k in out):
        raise ConversionError("no roi_head.mask_head.* parameters: this is not a Mask R-CNN checkpoint")
    return out


_OLD_FINAL = re.compile(r"^head\.final_layer\.(\d+)\.(.+)$")


def convert_pose_state(state: dict[str, Any]) -> "OrderedDict[str, Any]":
    """mmpose 0.x TopDown + TopdownHeatmapSimpleHead -> mmpose 1.x TopdownPoseEstimator + HeatmapHead."""
    out: OrderedDict[str, Any] = OrderedDict()
    for key, value in _tensors_only(state).items():
        if key.startswith("keypoint_head."):
            key = "head." + key[len("keypoint_head."):]
        if _OLD_FINAL.match(key):
            # 0.x put extra convs before the final 1x1 conv into final_layer.N; the pinned head has none.
            raise ConversionError(
                f"{key}: the legacy head has extra conv layers before the output layer; "
                "the pinned SimpleBaseline head (models/drawn_humanoid_pose_estimator.py) has none")
        out[key] = value
    if "head.final_layer.weight" not in out:
        raise ConversionError("no keypoint_head.final_layer.weight: not a top-down heatmap pose checkpoint")
    return out


# -- config conversion ------------------------------------------------------------------------------------
def _get(d: Any, *path: str, default: Any = None) -> Any:
    for p in path:
        if not isinstance(d, dict) or p not in d:
            return default
        d = d[p]
    return d


def _find_step(pipeline: Any, type_name: str) -> dict[str, Any] | None:
    """Depth-first search for a pipeline step (old test pipelines nest steps in MultiScaleFlipAug)."""
    for step in pipeline or []:
        if not isinstance(step, dict):
            continue
        if step.get("type") == type_name:
            return step
        found = _find_step(step.get("transforms"), type_name)
        if found is not None:
            return found
    return None


def detector_overrides(legacy: dict[str, Any], meta: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...] | None]:
    """Settings of an mmdet 2.x config to carry into the pinned config, and the class names."""
    model = legacy.get("model") or {}
    if model:
        problems = []
        if model.get("type") != "MaskRCNN":
            problems.append(f"model.type is {model.get('type')!r}, not 'MaskRCNN'")
        if _get(model, "backbone", "type") != "ResNet" or _get(model, "backbone", "depth") != 50:
            backbone = f"{_get(model, 'backbone', 'type')}-{_get(model, 'backbone', 'depth')}"
            problems.append(f"backbone is {backbone}, not ResNet-50")
        if _get(model, "neck", "type") != "FPN":
            problems.append(f"neck is {_get(model, 'neck', 'type')!r}, not 'FPN'")
        if problems:
            raise ConversionError("the legacy detector is not Mask R-CNN R50-FPN: " + "; ".join(problems))
    overrides: dict[str, Any] = {}
    norm = legacy.get("img_norm_cfg") or (_find_step(_get(legacy, "data", "test", "pipeline"), "Normalize") or {})
    if norm.get("mean") is not None:
        overrides["model.data_preprocessor.mean"] = [float(v) for v in norm["mean"]]
        overrides["model.data_preprocessor.std"] = [float(v) for v in norm["std"]]
        overrides["model.data_preprocessor.bgr_to_rgb"] = bool(norm.get("to_rgb", True))
    aug = _find_step(_get(legacy, "data", "test", "pipeline") or legacy.get("test_pipeline"), "MultiScaleFlipAug")
    scale = (aug or {}).get("img_scale")
    if isinstance(scale, list) and scale and isinstance(scale[0], (list, tuple)):
        scale = scale[0]
    if scale is not None:
        overrides["test_scale"] = tuple(int(v) for v in scale)
    num_classes = _get(model, "roi_head", "bbox_head", "num_classes")
    if num_classes is not None:
        overrides["model.roi_head.bbox_head.num_classes"] = int(num_classes)
        overrides["model.roi_head.mask_head.num_classes"] = int(num_classes)
    classes = meta.get("CLASSES") or legacy.get("classes") or _get(legacy, "data", "test", "classes")
    if isinstance(classes, str):
        classes = (classes,)
    return overrides, (tuple(str(c) for c in classes) if classes else None)


def pose_overrides(legacy: dict[str, Any]) -> dict[str, Any]:
    """Settings of an mmpose 0.x top-down config to carry into the pinned config."""
    model = legacy.get("model") or {}
    if model:
        problems = []
        if model.get("type") != "TopDown":
            problems.append(f"model.type is {model.get('type')!r}, not 'TopDown'")
        if _get(model, "backbone", "type") != "ResNet" or _get(model, "backbone", "depth") != 50:
            backbone = f"{_get(model, 'backbone', 'type')}-{_get(model, 'backbone', 'depth')}"
            problems.append(f"backbone is {backbone}, not ResNet-50")
        if _get(model, "keypoint_head", "type") != "TopdownHeatmapSimpleHead":
            problems.append(f"head is {_get(model, 'keypoint_head', 'type')!r}, not 'TopdownHeatmapSimpleHead'")
        if _get(model, "keypoint_head", "out_channels", default=17) != 17:
            problems.append(f"{_get(model, 'keypoint_head', 'out_channels')} keypoints, not 17")
        if problems:
            raise ConversionError("the legacy pose model is not a SimpleBaseline ResNet-50: " + "; ".join(problems))
    overrides: dict[str, Any] = {}
    data_cfg = legacy.get("data_cfg") or {}
    if data_cfg.get("image_size") is not None:
        overrides["codec.input_size"] = tuple(int(v) for v in data_cfg["image_size"])
    if data_cfg.get("heatmap_size") is not None:
        overrides["codec.heatmap_size"] = tuple(int(v) for v in data_cfg["heatmap_size"])
    sigma = _find_step(legacy.get("train_pipeline"), "TopDownGenerateTarget")
    if sigma and sigma.get("sigma") is not None:
        overrides["codec.sigma"] = float(sigma["sigma"])
    test_cfg = model.get("test_cfg") or {}
    if "flip_test" in test_cfg:
        overrides["model.test_cfg.flip_test"] = bool(test_cfg["flip_test"])
    if "shift_heatmap" in test_cfg:
        overrides["model.test_cfg.shift_heatmap"] = bool(test_cfg["shift_heatmap"])
    norm = _find_step(legacy.get("test_pipeline") or legacy.get("val_pipeline")
                      or _get(legacy, "data", "test", "pipeline"), "NormalizeTensor")
    if norm and norm.get("mean") is not None:
        # 0.x normalised RGB tensors in [0, 1]; 1.x normalises 0..255 BGR arrays after bgr_to_rgb.
        overrides["model.data_preprocessor.mean"] = [round(float(v) * 255.0, 4) for v in norm["mean"]]
        overrides["model.data_preprocessor.std"] = [round(float(v) * 255.0, 4) for v in norm["std"]]
        overrides["model.data_preprocessor.bgr_to_rgb"] = True
    return overrides


def build_config(kind: str, base_config: Path, overrides: dict[str, Any],
                 classes: tuple[str, ...] | None = None):
    """The pinned config with the legacy settings applied (an ``mmengine.Config``)."""
    from mmengine.config import Config

    cfg = Config.fromfile(str(base_config))
    dotted = {k: v for k, v in overrides.items() if "." in k and not k.startswith("codec.")}
    if dotted:
        cfg.merge_from_dict(dotted)
    if kind == "detector":
        if "test_scale" in overrides:
            for step in cfg.test_dataloader.dataset.pipeline:
                if step["type"] == "Resize":
                    step["scale"] = overrides["test_scale"]
            cfg.test_scale = overrides["test_scale"]
        if classes:
            cfg.classes = classes
            cfg.test_dataloader.dataset.metainfo = dict(classes=classes)
    else:
        codec = dict(cfg.model.head.decoder)
        for key in ("input_size", "heatmap_size", "sigma"):
            if f"codec.{key}" in overrides:
                codec[key] = overrides[f"codec.{key}"]
        cfg.codec = codec
        cfg.model.head.decoder = codec
        for step in cfg.test_dataloader.dataset.pipeline:
            if step["type"] == "TopdownAffine":
                step["input_size"] = codec["input_size"]
        cfg.train_dataloader = cfg.test_dataloader
    return cfg


def build_model(kind: str, cfg):
    """Instantiate the pinned model of ``cfg`` on CPU, weights left at their initialisation."""
    from mmengine.registry import init_default_scope

    if kind == "detector":
        from mmdet.registry import MODELS
        from mmdet.utils import register_all_modules
    else:
        from mmpose.registry import MODELS
        from mmpose.utils import register_all_modules
    from mmengine.logging import MMLogger

    register_all_modules(init_default_scope=False)
    init_default_scope("mmdet" if kind == "detector" else "mmpose")
    # init_weights() logs every parameter's initialiser at INFO: keep conversions readable.
    MMLogger.get_current_instance().setLevel(logging.WARNING)
    model_cfg = cfg.model.copy()
    model_cfg.pop("init_cfg", None)
    model = MODELS.build(model_cfg)
    model.eval()
    return model


def check_loads(kind: str, cfg, state: "OrderedDict[str, Any]") -> int:
    """Load ``state`` into the pinned model with strict=True; return the parameter count."""
    model = build_model(kind, cfg)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    shapes = [f"{k}: checkpoint {tuple(state[k].shape)} vs model {tuple(expected[k].shape)}"
              for k in sorted(set(state) & set(expected)) if tuple(state[k].shape) != tuple(expected[k].shape)]
    if missing or unexpected or shapes:
        def _few(items: list[str]) -> str:
            return ", ".join(items[:8]) + (f" ... ({len(items)} in all)" if len(items) > 8 else "")
        parts = []
        if missing:
            parts.append(f"missing: {_few(missing)}")
        if unexpected:
            parts.append(f"unexpected: {_few(unexpected)}")
        if shapes:
            parts.append(f"shape mismatch: {_few(shapes)}")
        raise ConversionError("the converted weights do not fit the pinned model; " + "; ".join(parts))
    model.load_state_dict(state, strict=True)
    return sum(int(v.numel()) for v in state.values())


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def save_atomically(obj: Any, path: Path) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    torch.save(obj, str(tmp))
    os.replace(tmp, path)


def convert(kind: str, src: Path, dst: Path, legacy_config: Path | None = None,
            base_config: Path | None = None, config_out: Path | None = None) -> dict[str, Any]:
    """Convert ``src`` (legacy layout) to ``dst`` (pinned layout); optionally write the config.

    Returns a summary dict (parameter count, carried-over settings, class names).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}")
    t0 = time.perf_counter()
    base_config = Path(base_config or DEFAULT_CONFIGS[kind])
    legacy = load_legacy_checkpoint(src)
    meta = legacy.get("meta") or {}
    legacy_cfg = load_legacy_config(legacy_config, meta)
    if kind == "detector":
        state = convert_detector_state(legacy["state_dict"])
        overrides, classes = detector_overrides(legacy_cfg, meta)
    else:
        state = convert_pose_state(legacy["state_dict"])
        overrides, classes = pose_overrides(legacy_cfg), None
    cfg = build_config(kind, base_config, overrides, classes)
    params = check_loads(kind, cfg, state)
    new_meta: dict[str, Any] = {
        "converted_from": {
            "file": src.name,
            "sha256": sha256(src),
            "mmcv_version": str(meta.get("mmcv_version", "")),
            "epoch": int(meta["epoch"]) if isinstance(meta.get("epoch"), (int, float)) else None,
        },
        "doodlepod_converter": CONVERTER_VERSION,
        "carried_over": {k: (list(v) if isinstance(v, tuple) else v) for k, v in overrides.items()},
    }
    if kind == "detector":
        new_meta["dataset_meta"] = {"classes": tuple(cfg.classes)}
    save_atomically({"meta": new_meta, "state_dict": state}, dst)
    if config_out is not None:
        config_out.parent.mkdir(parents=True, exist_ok=True)
        cfg.dump(str(config_out))
    summary = {"kind": kind, "parameters": params, "tensors": len(state), "overrides": overrides,
               "classes": tuple(cfg.classes) if kind == "detector" else None,
               "seconds": round(time.perf_counter() - t0, 2)}
    log.info("converted %s %s -> %s: %d tensors, %.1f M parameters, carried over %s (%.1f s)",
             kind, src, dst, len(state), params / 1e6, sorted(overrides) or "nothing", summary["seconds"])
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Convert an AnimatedDrawings (mmdet 2.x / mmpose 0.x) checkpoint to the pinned "
                    "mmdet 3.3 / mmpose 1.3 layout, checked by a strict load into the pinned model.",
        epilog="Only convert trusted files: the legacy checkpoint is fully unpickled.")
    parser.add_argument("kind", choices=KINDS, help="which model the checkpoint holds")
    parser.add_argument("src", type=Path, help="legacy checkpoint (.pth)")
    parser.add_argument("dst", type=Path, help="converted checkpoint to write (.pth)")
    parser.add_argument("--legacy-config", type=Path,
                        help="the legacy config.py shipped with the checkpoint (default: the copy in "
                             "the checkpoint's meta, if any)")
    parser.add_argument("--config", type=Path, help="pinned base config (default: models/drawn_humanoid_*.py)")
    parser.add_argument("--config-out", type=Path, help="write the resulting flat config here")
    parser.add_argument("-q", "--quiet", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="[convert %(asctime)s] %(message)s", datefmt="%H:%M:%S")
    try:
        convert(args.kind, args.src, args.dst, args.legacy_config, args.config, args.config_out)
    except (ConversionError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
