"""A character's coordinate frames, and the conversions between them (one owner for each); every
room may use them (the routes check client joints, the pipeline and the characters API convert).

- *image pixels*: the uploaded image after EXIF orientation, x right, y down; what the API speaks
  (client joints and boxes, the answers' ``bbox`` and ``joints``).
- *work pixels*: the image downsized for the models and the rig: ``work = image * scale``
  (``scale`` <= 1, :attr:`app.render.steps.PreparedImage.scale`, a character's ``work_scale``).
- *texture pixels* (crop pixels): work pixels minus the character box's top-left corner ``(l, t)``;
  the animator's character (texture, mask, skeleton) lives there:
  ``image = (texture + (l, t)) / scale``.

Boxes are ``[left, top, right, bottom]``.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .errors import ApiError, BoxOutsideImage, DegenerateSkeleton, InvalidCharacter


def clamp_box(box: Any, width: int, height: int) -> tuple[int, int, int, int] | None:
    """``[l, t, r, b]`` rounded and clipped to the image; None when nothing is left."""
    try:
        l, t, r, b = (float(v) for v in box)
    except (TypeError, ValueError):
        return None
    if not all(np.isfinite([l, t, r, b])):
        return None
    l, t = max(0, int(round(l))), max(0, int(round(t)))
    r, b = min(width, int(round(r))), min(height, int(round(b)))
    if r - l < 8 or b - t < 8:
        return None
    return l, t, r, b


def check_inside(joints: list, image_size: tuple[int, int], error: type[ApiError] = InvalidCharacter) -> None:
    """Client joints must lie on the uploaded image (image pixels): ``error`` names the first that
    does not (and how many more). (A joint far off the drawing made the render's work grow with its
    distance.) /animate answers ``invalid_character``; the characters API its own code."""
    width, height = image_size
    outside = [j for j in joints if not (0 <= j.loc[0] <= width and 0 <= j.loc[1] <= height)]
    if outside:
        j = outside[0]
        more = f" (and {len(outside) - 1} more)" if len(outside) > 1 else ""
        raise error(f"joint '{j.name}' at ({j.loc[0]:g}, {j.loc[1]:g}) lies outside the {width}x{height} "
                    f"image{more}; coordinates are image pixels, x right, y down")
    check_spread(joints)


#: A client skeleton must span at least this many image pixels (its joints' box, longer side) ...
MIN_SKELETON_EXTENT_PX = 16
#: ... and have at least this many joints at distinct spots (1 px apart; root and hip may share one).
MIN_DISTINCT_JOINTS = 8


def check_spread(joints: list) -> None:
    """422 ``degenerate_skeleton`` for client joints piled on (nearly) one spot: such a skeleton
    cannot bend a drawing, and its crop (the joints' box) is a few pixels blown up to the render size."""
    xs = [float(j.loc[0]) for j in joints]
    ys = [float(j.loc[1]) for j in joints]
    extent = max(max(xs) - min(xs), max(ys) - min(ys)) if joints else 0.0
    distinct = len({(round(x), round(y)) for x, y in zip(xs, ys)})
    if extent < MIN_SKELETON_EXTENT_PX or distinct < MIN_DISTINCT_JOINTS:
        raise DegenerateSkeleton(f"the joints span {extent:g} px at {distinct} distinct spots; a skeleton needs "
                                 f"at least {MIN_SKELETON_EXTENT_PX} px and {MIN_DISTINCT_JOINTS} distinct joints "
                                 "(image pixels)")


def joints_to_work(joints: list, scale: float) -> list:
    """Client joints (image pixels) -> work pixels."""
    from animator.skeleton import transform_skeleton

    return transform_skeleton(joints, scale=scale)


def joints_to_texture(joints: list, work_scale: float, box: Sequence[int]) -> list:
    """Client joints (image pixels) -> texture pixels of the crop ``box`` (work pixels)."""
    from animator.skeleton import transform_skeleton
    work = transform_skeleton(joints, scale=work_scale)
    return transform_skeleton(work, offset=(-box[0], -box[1]))


def box_for_client(bbox: Sequence[float] | None, joints: list, scale: float, width: int,
                   height: int) -> tuple[int, int, int, int]:
    """The crop for client joints: their box if given (image pixels), else the joints' extent padded.

    Joints sit inside the figure (the neck joint is on the nose, hands on the wrists), so the
    joints' bounding box is grown by 25% of its larger side on every side to take in the head,
    hands and feet, then clipped to the image.
    """
    if bbox is not None:
        box = clamp_box([v * scale for v in bbox], width, height)
        if box is None:
            raise InvalidCharacter("the bbox sent with the joints is empty or outside the image")
        return box
    xy = np.array([j.loc for j in joints], dtype=np.float64)
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    pad = 0.25 * float((hi - lo).max()) + 8
    box = clamp_box([lo[0] - pad, lo[1] - pad, hi[0] + pad, hi[1] + pad], width, height)
    if box is None:
        raise InvalidCharacter("the joints sent lie outside the image")
    return box


def client_box(bbox: Sequence[float], work_scale: float, width: int, height: int) -> tuple[int, int, int, int]:
    """A client box (image pixels) -> work pixels, clipped; ``bbox_outside_image`` when nothing is left."""
    box = clamp_box([v * work_scale for v in bbox], width, height)
    if box is None or bbox[2] <= bbox[0] or bbox[3] <= bbox[1]:
        raise BoxOutsideImage("the bbox is empty, smaller than 8 px, or outside the image "
                              "([left, top, right, bottom] in image pixels)")
    return box
