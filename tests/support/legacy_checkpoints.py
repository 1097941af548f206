"""Checkpoints in the old (mmdet 2.x / mmpose 0.x) layout, as AnimatedDrawings' runners saved them,
synthesised from a state dict (the real ones cannot be downloaded here): old parameter names, a
``module.`` prefix, an optimizer state, a meta with the old class names and a numpy scalar, and the
old config files' text."""
from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import torch

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
