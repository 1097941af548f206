"""Per-frame joint positions as JSON: the ``joints`` format and what ``--dump-joints`` writes.

One document per character::

    {"joints": ["root", "hip", ...],                  # the character's joint names (skeleton order)
     "parents": [null, "root", ...],                  # each joint's parent name (null: the top joint)
     "frames": [[[x, y], ...], ...],                  # per output frame, per joint: drawing pixels
     "frame_time_s": 0.04,                            # seconds each frame is shown
     "source_frames": [0, 4, ...],                    # the BVH frame each output frame was posed from
     "coordinates": "drawing pixels: origin at the texture's top-left, x right, y down",
     "canvas": {"width": 500, "height": 500,          # where the rendered frames put each joint:
                "scale": 0.61,                        #   canvas = scale * [x, y] + offsets[frame]
                "offsets": [[dx, dy], ...]}}          # (absent when nothing was placed on a canvas)

Positions are rounded to 1/1000 of a pixel. ``frames[i][k]`` is joint ``joints[k]`` in output frame
``i``; the bones are (``parents[k]``, ``joints[k]``) for every joint with a parent. A scene's
``--dump-joints`` file holds ``{"characters": [{"character": char_cfg path, ...document...}, ...]}``.
"""
from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np

COORDINATES = "drawing pixels: origin at the texture's top-left, x right, y down"


def joints_document(motion: Any, skeleton: Sequence[Any], scale: float | None = None,
                    offsets: np.ndarray | None = None, width: int | None = None, height: int | None = None,
                    decimals: int = 3) -> dict[str, Any]:
    """The document above for ``motion`` (:class:`animator.retarget.Motion2D`) of a character with
    ``skeleton`` (its :class:`animator.character.Joint` list); the canvas part when ``offsets`` is given."""
    parent = {j.name: j.parent for j in skeleton}
    doc = motion.to_json(decimals)
    out: dict[str, Any] = {"joints": doc["joints"], "parents": [parent.get(n) for n in doc["joints"]]}
    out.update(doc)
    out["coordinates"] = COORDINATES
    if offsets is not None and scale is not None:
        out["canvas"] = {"width": width, "height": height, "scale": round(float(scale), 6),
                         "offsets": np.round(np.asarray(offsets, np.float64), decimals).tolist()}
    return out


def encode_joints(doc: dict[str, Any]) -> bytes:
    """The document as compact UTF-8 JSON."""
    return json.dumps(doc, separators=(",", ":")).encode()
