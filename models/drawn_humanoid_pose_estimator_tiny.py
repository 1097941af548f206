# Tiny variant of drawn_humanoid_pose_estimator.py for tests and offline runs: the same
# SimpleBaseline graph (ResNet-50 depth, 3 deconvolutions, 17 heatmaps, 192x256 input) at 1/8 of
# the channel widths. Weights are random (scripts/build_archives.py --tiny, fixed seed).
_base_ = ['./drawn_humanoid_pose_estimator.py']

model = dict(
    backbone=dict(stem_channels=8, base_channels=8),  # output 256 channels (full model: 2048)
    head=dict(in_channels=256, deconv_out_channels=(32, 32, 32)))
