"""Which detections of one photo become a scene's characters: non-maximum suppression, then a bound."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def iou(a: Sequence[float], b: Sequence[float]) -> float:
    """Intersection over union of two [left, top, right, bottom] boxes."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def keep(detections: Sequence[Any], max_iou: float, limit: int) -> tuple[list[Any], list[tuple[Any, str]]]:
    """(kept, dropped): ``detections`` (each with ``box`` and ``score``) best first, without those that
    overlap a better one by more than ``max_iou`` (non-maximum suppression: dropped as "overlap"), at
    most ``limit`` kept (the best; the others dropped as "limit")."""
    kept: list[Any] = []
    dropped: list[tuple[Any, str]] = []
    for d in sorted(detections, key=lambda d: -float(d.score)):
        if any(iou(d.box, k.box) > max_iou for k in kept):
            dropped.append((d, "overlap"))
        elif len(kept) >= limit:
            dropped.append((d, "limit"))
        else:
            kept.append(d)
    return kept, dropped
