# Drawn-humanoid pose estimator: top-down heatmap SimpleBaseline (ResNet-50 + 3 deconvolution
# layers + 1x1 conv to 17 COCO keypoint heatmaps), 192x256 input, 48x64 heatmaps, for mmpose 1.3.2.
#
# The same architecture as AnimatedDrawings' released drawn_humanoid_pose_estimator (an mmpose 0.x
# TopDown ResNet-50 / TopdownHeatmapSimpleHead model trained on drawn figures), written for the
# pinned mmpose 1.x API. The handler treats the whole posted image (AnimatedDrawings posts the
# detector's crop) as the person box; GetBBoxCenterScale pads it by 1.25 as mmpose 0.x did.
#
# Coordinates: keypoints come out as [x, y] in the input image's pixels (x right, y down).
default_scope = 'mmpose'

codec = dict(type='MSRAHeatmap', input_size=(192, 256), heatmap_size=(48, 64), sigma=2)

model = dict(
    type='TopdownPoseEstimator',
    data_preprocessor=dict(
        type='PoseDataPreprocessor',
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375],
        bgr_to_rgb=True),
    backbone=dict(type='ResNet', depth=50, init_cfg=None),
    head=dict(
        type='HeatmapHead',
        in_channels=2048,
        out_channels=17,
        deconv_out_channels=(256, 256, 256),
        deconv_kernel_sizes=(4, 4, 4),
        loss=dict(type='KeypointMSELoss', use_target_weight=True),
        decoder=codec),
    test_cfg=dict(flip_test=True, flip_mode='heatmap', shift_heatmap=True))

# The handler swaps LoadImage's input for the decoded array (LoadImage accepts data['img']).
test_pipeline = [
    dict(type='LoadImage'),
    dict(type='GetBBoxCenterScale', padding=1.25),
    dict(type='TopdownAffine', input_size=codec['input_size']),
    dict(type='PackPoseInputs'),
]
dataset_meta_file = 'configs/_base_/datasets/coco.py'  # 17 COCO keypoints, flip pairs
test_dataloader = dict(
    batch_size=1,
    dataset=dict(
        type='CocoDataset',
        data_mode='topdown',
        metainfo=dict(from_file=dataset_meta_file),
        test_mode=True,
        pipeline=test_pipeline))
train_dataloader = test_dataloader  # mmpose.apis.init_model reads dataset_meta from here
