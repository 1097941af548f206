"""scripts/convert_checkpoint.py on checkpoints in the old (mmdet 2.x / mmpose 0.x) layout.

AnimatedDrawings' real checkpoints cannot be downloaded here, so each test synthesises one the way
the old runners saved them, from a pinned tiny model with known weights: the old parameter names
(``keypoint_head.*``), a ``module.`` prefix, an optimizer state, a meta with the old class names,
epoch, mmcv version and a numpy scalar in ``hook_msgs`` (which torch >= 2.6 refuses to unpickle by
default), plus the old config file. The converted file must load into the pinned model with the
original weights, unpickle under ``weights_only=True`` (how mmengine loads it on torch 2.13), and
carry over the old preprocessing settings.
"""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from tests.conftest import REPO
from tests.support.legacy_checkpoints import LEGACY_DETECTOR_CONFIG, LEGACY_POSE_CONFIG, save_legacy

pytestmark = pytest.mark.model_stack

sys.path.insert(0, str(REPO / "scripts"))
import convert_checkpoint as cc  # noqa: E402

TINY = {"detector": REPO / "models" / "drawn_humanoid_detector_tiny.py",
        "pose": REPO / "models" / "drawn_humanoid_pose_estimator_tiny.py"}

def pinned_tiny(kind: str, seed: int = 1):
    from mmengine.config import Config

    torch.manual_seed(seed)
    model = cc.build_model(kind, Config.fromfile(str(TINY[kind])))
    model.init_weights()
    return {k: v.detach().clone() for k, v in model.state_dict().items()
            if not k.startswith("data_preprocessor.")}


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def test_legacy_file_needs_full_unpickling(tmp_path):
    # The situation the converter exists for: torch's default loader refuses the old file.
    src = save_legacy(tmp_path / "old.pth", pinned_tiny("pose"), "pose", None)
    with pytest.raises(Exception):
        torch.load(str(src), map_location="cpu")  # weights_only=True by default on torch >= 2.6


def test_pose_checkpoint_converts_to_the_pinned_layout(tmp_path):
    original = pinned_tiny("pose")
    legacy_cfg = tmp_path / "config.py"
    legacy_cfg.write_text(LEGACY_POSE_CONFIG)
    src = save_legacy(tmp_path / "best_AP_epoch_72.pth", original, "pose", None)
    dst, cfg_out = tmp_path / "new.pth", tmp_path / "new_config.py"
    summary = cc.convert("pose", src, dst, legacy_cfg, TINY["pose"], cfg_out)

    new = torch.load(str(dst), map_location="cpu", weights_only=True)  # how mmengine reads it
    assert set(new) == {"meta", "state_dict"}                           # optimizer state dropped
    assert set(new["state_dict"]) == set(original)
    assert not any(k.startswith(("module.", "keypoint_head.")) for k in new["state_dict"])
    for k, v in original.items():
        assert torch.equal(new["state_dict"][k], v), k
    assert new["meta"]["converted_from"]["epoch"] == 72
    assert summary["parameters"] == sum(v.numel() for v in original.values())

    from mmengine.config import Config

    cfg = Config.fromfile(str(cfg_out))
    assert cfg.model.data_preprocessor.mean == pytest.approx([127.5, 102.0, 76.5])
    assert cfg.model.data_preprocessor.std == pytest.approx([51.0, 63.75, 76.5])
    assert cfg.model.test_cfg.flip_test is False
    assert tuple(cfg.model.head.decoder.input_size) == (192, 256)
    assert tuple(cfg.model.head.decoder.heatmap_size) == (48, 64)


def test_converted_pose_model_answers_like_the_original(tmp_path):
    """Same weights in, same heatmaps out: the converted checkpoint drives the pinned model."""
    from mmengine.config import Config
    from mmengine.runner import load_checkpoint

    original = pinned_tiny("pose", seed=3)
    legacy_cfg = tmp_path / "config.py"
    legacy_cfg.write_text(LEGACY_POSE_CONFIG)
    src = save_legacy(tmp_path / "old.pth", original, "pose", None)
    cc.convert("pose", src, tmp_path / "new.pth", legacy_cfg, TINY["pose"], tmp_path / "cfg.py")
    cfg = Config.fromfile(str(TINY["pose"]))
    reference = cc.build_model("pose", cfg)
    reference.load_state_dict(original, strict=False)
    converted = cc.build_model("pose", cfg)
    load_checkpoint(converted, str(tmp_path / "new.pth"), map_location="cpu", strict=True)
    x = torch.randn(2, 3, 256, 192, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(reference(x, None, mode="tensor"), converted(x, None, mode="tensor"))


def test_detector_checkpoint_converts_and_carries_preprocessing(tmp_path):
    original = pinned_tiny("detector")
    # no --legacy-config: the config text stored in the checkpoint meta is used
    src = save_legacy(tmp_path / "old.pth", original, "detector", LEGACY_DETECTOR_CONFIG, ("humanoid",))
    dst, cfg_out = tmp_path / "new.pth", tmp_path / "new_config.py"
    cc.convert("detector", src, dst, None, TINY["detector"], cfg_out)
    new = torch.load(str(dst), map_location="cpu", weights_only=True)
    assert new["meta"]["dataset_meta"] == {"classes": ("humanoid",)}
    for k, v in original.items():
        assert torch.equal(new["state_dict"][k], v), k

    from mmengine.config import Config

    cfg = Config.fromfile(str(cfg_out))
    assert cfg.model.data_preprocessor.mean == [103.53, 116.28, 123.675]
    assert cfg.model.data_preprocessor.bgr_to_rgb is False      # caffe-style: BGR in
    resize = [s for s in cfg.test_dataloader.dataset.pipeline if s["type"] == "Resize"][0]
    assert tuple(resize["scale"]) == (1024, 640)
    assert tuple(cfg.test_dataloader.dataset.metainfo["classes"]) == ("humanoid",)


def test_wrong_architecture_is_refused(tmp_path):
    state = pinned_tiny("pose")
    bad = {k: (v[:16] if k.startswith("head.final_layer.") else v) for k, v in state.items()}  # 16 joints
    legacy_cfg = tmp_path / "config.py"
    legacy_cfg.write_text(LEGACY_POSE_CONFIG)
    src = save_legacy(tmp_path / "old.pth", bad, "pose", None)
    with pytest.raises(cc.ConversionError, match=r"shape mismatch: .*head.final_layer.weight: "
                                                 r"checkpoint \(16, 32, 1, 1\) vs model \(17, 32, 1, 1\)"):
        cc.convert("pose", src, tmp_path / "new.pth", legacy_cfg, TINY["pose"])
    assert not (tmp_path / "new.pth").exists()

    retina = LEGACY_DETECTOR_CONFIG.replace("type='MaskRCNN'", "type='RetinaNet'")
    src = save_legacy(tmp_path / "old_det.pth", pinned_tiny("detector"), "detector", retina)
    with pytest.raises(cc.ConversionError, match="not Mask R-CNN R50-FPN"):
        cc.convert("detector", src, tmp_path / "new_det.pth", None, TINY["detector"])


def test_cli_reports_errors_without_a_traceback(tmp_path):
    src = tmp_path / "junk.pth"
    torch.save({"state_dict": {"backbone.conv1.weight": torch.zeros(1)}}, str(src))
    res = subprocess.run([sys.executable, str(REPO / "scripts" / "convert_checkpoint.py"), "pose", str(src),
                          str(tmp_path / "out.pth"), "--config", str(TINY["pose"]), "-q"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 1
    assert res.stderr.startswith("error: ") and "Traceback" not in res.stderr
