"""The released-weights path, end to end and offline, at full size.

AnimatedDrawings' real archives cannot be downloaded here, so the test writes archives shaped like
them: a zip per model holding an mmdet 2.x / mmpose 0.x ``config.py``, a checkpoint in the old
layout (old parameter names, optimizer state, numpy scalars in the meta) of the full-size pinned
architectures with random weights, and a handler file. Then it runs
``scripts/build_archives.py --weights-dir`` (as ``make archives-released`` and the image build do)
and loads the resulting archives with our handlers in-process on CPU, through the same
``initialize``/``handle`` calls TorchServe makes. This is the only test that instantiates the
full-size configs the GPU image serves (models/drawn_humanoid_*.py).
"""
from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
import yaml

from handlers.drawn_humanoid_detector import DrawnHumanoidDetectorHandler
from handlers.drawn_humanoid_pose_estimator import DrawnHumanoidPoseEstimatorHandler
from tests.conftest import REPO
from tests.support.legacy_checkpoints import LEGACY_DETECTOR_CONFIG, LEGACY_POSE_CONFIG, save_legacy
from tests.support.model_answers import assert_detections, assert_pose, drawing, encoded

pytestmark = pytest.mark.model_stack

sys.path.insert(0, str(REPO / "scripts"))
import convert_checkpoint as cc  # noqa: E402

FULL = {"detector": REPO / "models" / "drawn_humanoid_detector.py",
        "pose": REPO / "models" / "drawn_humanoid_pose_estimator.py"}
RELEASES = {"drawn_humanoid_detector": ("detector", "epoch_20.pth", LEGACY_DETECTOR_CONFIG),
            "drawn_humanoid_pose_estimator": ("pose", "best_AP_epoch_72.pth", LEGACY_POSE_CONFIG)}


class FakeContext:
    """The parts of TorchServe's Context the handlers use; records per-request statuses."""

    def __init__(self, model_dir: Path) -> None:
        self.system_properties = {"model_dir": str(model_dir), "gpu_id": None}
        self.manifest = json.loads((model_dir / "MAR-INF" / "MANIFEST.json").read_text())
        self.model_yaml_config = yaml.safe_load((model_dir / "model-config.yaml").read_text())
        self.statuses: dict[int, int] = {}
        self.content_types: dict[int, str] = {}

    def set_response_status(self, code: int, phrase: str = "", idx: int = 0) -> None:
        self.statuses[idx] = code

    def set_response_content_type(self, idx: int, value: str) -> None:
        self.content_types[idx] = value


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> Path:
    """A folder like scripts/fetch_weights.sh leaves: <model>.mar zips in the old layout."""
    from mmengine.config import Config

    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("released")
    for name, (kind, ckpt_name, legacy_config) in RELEASES.items():
        torch.manual_seed(5)
        model = cc.build_model(kind, Config.fromfile(str(FULL[kind])))
        model.init_weights()
        if kind == "detector":  # make the random detector report boxes, as a trained one would
            with torch.no_grad():
                model.roi_head.bbox_head.fc_cls.bias[:-1] += 4.0
        state = {k: v for k, v in model.state_dict().items() if not k.startswith("data_preprocessor.")}
        scratch = tmp_path_factory.mktemp(name)
        save_legacy(scratch / ckpt_name, state, kind, None, ("drawn_humanoid",))
        with zipfile.ZipFile(folder / f"{name}.mar", "w") as zf:
            # the pose archive names its config config.py; the detector's has another name
            zf.writestr("config.py" if kind == "pose" else "mask_rcnn_r50_fpn_drawn.py", legacy_config)
            zf.write(scratch / ckpt_name, ckpt_name)
            zf.writestr("mmdet_handler.py" if kind == "detector" else "mmpose_handler.py", "# old handler\n")
            zf.writestr("MAR-INF/MANIFEST.json", json.dumps({"model": {"modelName": name}}))
        (scratch / ckpt_name).unlink()
    return folder


@pytest.fixture(scope="module")
def store(released, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("store")
    res = subprocess.run([sys.executable, str(REPO / "scripts" / "build_archives.py"), "--weights-dir", str(released),
                          "--out", str(out)], capture_output=True, text=True, timeout=900, cwd=REPO)
    assert res.returncode == 0, res.stdout + res.stderr
    return out


def unpack(store: Path, name: str, dest: Path) -> Path:
    with zipfile.ZipFile(store / f"{name}.mar") as zf:
        zf.extractall(dest)
    return dest


def test_archives_are_built_from_the_released_files(store, released):
    for name in RELEASES:
        stamp = json.loads((store / f"{name}.mar.json").read_text())
        assert stamp["source"]["weights"] == "released"
        assert stamp["source"]["file"] == f"{name}.mar" and len(stamp["source"]["sha256"]) == 64
        with zipfile.ZipFile(store / f"{name}.mar") as zf:
            names = set(zf.namelist())
        assert {"config.py", "handler_base.py", f"{name}.py", "model-config.yaml", f"{name}.pth",
                "MAR-INF/MANIFEST.json"} <= names
    res = subprocess.run([sys.executable, str(REPO / "scripts" / "build_archives.py"), "--weights-dir", str(released),
                          "--out", str(store)], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert res.returncode == 0 and res.stderr.count("up to date") == 2, res.stderr


def test_converted_detector_serves_through_the_handler(store, tmp_path):
    model_dir = unpack(store, "drawn_humanoid_detector", tmp_path / "det")
    ctx = FakeContext(model_dir)
    handler = DrawnHumanoidDetectorHandler()
    handler.initialize(ctx)
    assert handler.device == "cpu"
    cfg_text = (model_dir / "config.py").read_text()
    assert "103.53" in cfg_text and "1024" in cfg_text   # caffe-style mean and test scale carried over
    answers = handler.handle([{"body": bytearray(encoded(drawing(200, 150), "PNG"))}, {"data": b"not an image"}], ctx)
    assert_detections(answers[0], 200, 150)
    assert answers[1]["error"] == "unsupported_format" and ctx.statuses == {1: 415}
    assert ctx.content_types == {0: "application/json", 1: "application/json"}


def test_converted_pose_estimator_serves_through_the_handler(store, tmp_path):
    model_dir = unpack(store, "drawn_humanoid_pose_estimator", tmp_path / "pose")
    ctx = FakeContext(model_dir)
    handler = DrawnHumanoidPoseEstimatorHandler()
    handler.initialize(ctx)
    buf = io.BytesIO()
    drawing(120, 200).save(buf, format="JPEG")
    answers = handler.handle([{"data": bytearray(buf.getvalue())}, {"body": encoded(drawing(90, 90), "PNG")}], ctx)
    assert_pose(answers[0], 120, 200)
    assert_pose(answers[1], 90, 90)
    assert ctx.statuses == {}
    assert handler.model.head.final_layer.out_channels == 17
    assert sum(p.numel() for p in handler.model.parameters()) > 30e6      # the full-size network
