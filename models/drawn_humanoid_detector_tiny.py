# Tiny variant of drawn_humanoid_detector.py for tests and offline runs: the same Mask R-CNN
# ResNet-50 + FPN graph (same depth, same heads, same ops) at 1/8 of the channel widths and a small
# test scale, so a CPU forward pass takes well under a second. Weights are random
# (scripts/build_archives.py --tiny, fixed seed); its answers are well-formed, not meaningful.
_base_ = ['./drawn_humanoid_detector.py']

test_scale = (512, 320)

model = dict(
    backbone=dict(base_channels=8),  # stage outputs 32, 64, 128, 256 (full model: 256 .. 2048)
    neck=dict(in_channels=[32, 64, 128, 256], out_channels=32),
    rpn_head=dict(in_channels=32, feat_channels=32),
    roi_head=dict(
        bbox_roi_extractor=dict(out_channels=32),
        bbox_head=dict(in_channels=32, fc_out_channels=64),
        mask_roi_extractor=dict(out_channels=32),
        mask_head=dict(in_channels=32, conv_out_channels=32)),
    test_cfg=dict(rpn=dict(nms_pre=300, max_per_img=100)))

test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=test_scale, keep_ratio=True),
    dict(
        type='PackDetInputs',
        meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
