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
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.conftest import REPO

pytestmark = pytest.mark.model_stack

sys.path.insert(0, str(REPO / "scripts"))
import convert_checkpoint as cc  # noqa: E402

TINY = {"detector": REPO / "models" / "drawn_humanoid_detector_tiny.py",
        "pose": REPO / "models" / "drawn_humanoid_pose_estimator_tiny.py"}

LEGACY_POSE_CONFIG = textwrap.dedent("""\
    # an mmpose 0.x top-down config, as dumped next to AnimatedDrawings' pose checkpoint
    channel_cfg = dict(num_output_channels=17, dataset_joints=17)
    model = dict(
        type='TopDown',
        pretrained='torchvision://resnet50',
        backbone=dict(type='ResNet', depth=50),
        keypoint_head=dict(
            type='TopdownHeatmapSimpleHead', in_channels=256, out_channels=17,
            num_deconv_layers=3, num_deconv_filters=(32, 32, 32), num_deconv_kernels=(4, 4, 4),
            extra=dict(final_conv_kernel=1), loss_keypoint=dict(type='JointsMSELoss', use_target_weight=True)),
        train_cfg=dict(),
        test_cfg=dict(flip_test=False, post_process='default', shift_heatmap=True, modulate_kernel=11))
    data_cfg = dict(image_size=[192, 256], heatmap_size=[48, 64], num_output_channels=17, num_joints=17)
    train_pipeline = [
        dict(type='LoadImageFromFile'),
        dict(type='TopDownAffine'),
        dict(type='TopDownGenerateTarget', sigma=2),
    ]
    test_pipeline = [
        dict(type='LoadImageFromFile'),
        dict(type='TopDownAffine'),
        dict(type='ToTensor'),
        dict(type='NormalizeTensor', mean=[0.5, 0.4, 0.3], std=[0.2, 0.25, 0.3]),
        dict(type='Collect', keys=['img'], meta_keys=['image_file', 'center', 'scale']),
    ]
    """)

LEGACY_DETECTOR_CONFIG = textwrap.dedent("""\
    # an mmdet 2.x config, as dumped next to AnimatedDrawings' detector checkpoint
    model = dict(
        type='MaskRCNN',
        backbone=dict(type='ResNet', depth=50, num_stages=4, out_indices=(0, 1, 2, 3), style='pytorch'),
        neck=dict(type='FPN', in_channels=[32, 64, 128, 256], out_channels=32, num_outs=5),
        rpn_head=dict(type='RPNHead', in_channels=32, feat_channels=32),
        roi_head=dict(type='StandardRoIHead',
                      bbox_head=dict(type='Shared2FCBBoxHead', in_channels=32, num_classes=1),
                      mask_head=dict(type='FCNMaskHead', in_channels=32, num_classes=1)))
    img_norm_cfg = dict(mean=[103.53, 116.28, 123.675], std=[1.0, 1.0, 1.0], to_rgb=False)
    data = dict(test=dict(
        type='CocoDataset',
        pipeline=[
            dict(type='LoadImageFromFile'),
            dict(type='MultiScaleFlipAug', img_scale=(1024, 640), flip=False, transforms=[
                dict(type='Resize', keep_ratio=True),
                dict(type='Normalize', **img_norm_cfg),
                dict(type='Pad', size_divisor=32),
                dict(type='ImageToTensor', keys=['img']),
                dict(type='Collect', keys=['img']),
            ]),
        ]))
    """)


def pinned_tiny(kind: str, seed: int = 1):
    from mmengine.config import Config

    torch.manual_seed(seed)
    model = cc.build_model(kind, Config.fromfile(str(TINY[kind])))
    model.init_weights()
    return {k: v.detach().clone() for k, v in model.state_dict().items()
            if not k.startswith("data_preprocessor.")}


def legacy_layout(state: dict, kind: str) -> dict:
    """The pinned names -> the old names (mmpose 0.x head; DataParallel prefix on a few keys)."""
    old = {}
    for i, (k, v) in enumerate(state.items()):
        if kind == "pose" and k.startswith("head."):
            k = "keypoint_head." + k[len("head."):]
        old[("module." if i % 7 == 0 else "") + k] = v.clone()
    return old


def save_legacy(path: Path, state: dict, kind: str, config_text: str | None, classes=("humanoid",)) -> Path:
    meta = {"mmcv_version": "1.7.0", "epoch": 72, "iter": 1234,
            "hook_msgs": {"best_score": np.float64(0.71), "best_ckpt": "best_AP_epoch_72.pth"},
            "env_info": "sys.platform: linux"}
    if kind == "detector":
        meta["CLASSES"] = classes
    if config_text is not None:
        meta["config"] = config_text
    first = next(iter(state.values()))
    torch.save({"meta": meta, "state_dict": legacy_layout(state, kind),
                "optimizer": {"state": {0: {"exp_avg": torch.zeros_like(first)}}, "param_groups": [{"lr": 5e-4}]}},
               str(path))
    return path


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
