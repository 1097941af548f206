"""A motion from a video of a person (the optional ``pose`` extra: requirements/pose.txt):
frames (:mod:`.decode`) -> landmarks per frame (:mod:`.pose_model`) -> smoothing and gaps
(:mod:`.landmarks`) -> a BVH clip (:mod:`.pose_bvh`); :mod:`.motion` runs them in turn, and is the
``motion-from-video`` command.

Nothing is imported here: ``mediapipe`` and OpenCV load only when a video is read for a pose.
"""
