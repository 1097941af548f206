"""doodlepod's TorchServe side: model handlers, the archive builder's helpers, a local launcher.

``drawn_humanoid_detector`` and ``drawn_humanoid_pose_estimator`` are TorchServe handler modules
(copied into the .mar archives together with ``handler_base``); ``torchserve_local`` starts and
stops a TorchServe on this machine (tests, ``make run``); ``readiness`` is the image's readiness
check.
"""
