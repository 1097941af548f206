"""The model server's side of the tests: a stand-in drawing to send it, and checks of the form and
ranges of its answers (the tiny models' weights are random, so not of what they see)."""
from __future__ import annotations

import io
import math

import numpy as np
import pytest
from PIL import Image, ImageDraw


def drawing(width: int, height: int, seed: int = 0) -> Image.Image:
    """A child's-drawing stand-in: a dark stick figure on off-white paper, in image pixels."""
    rng = np.random.default_rng(seed)
    img = Image.new("RGB", (width, height), (245, 242, 235))
    d = ImageDraw.Draw(img)
    cx, top, s = width / 2, height * 0.15, min(width, height) / 10
    d.ellipse([cx - s, top, cx + s, top + 2 * s], outline=(20, 20, 30), width=3)
    hip = (cx, top + 6 * s)
    d.line([(cx, top + 2 * s), hip], fill=(20, 20, 30), width=3)
    for dx in (-1, 1):
        d.line([(cx, top + 3 * s), (cx + dx * 2.5 * s, top + (2 + rng.random()) * s)], fill=(20, 20, 30), width=3)
        d.line([hip, (cx + dx * 1.5 * s, top + 8.5 * s)], fill=(20, 20, 30), width=3)
    return img


def encoded(img: Image.Image, fmt: str) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **({"quality": 92} if fmt == "JPEG" else {}))
    return buf.getvalue()


def assert_detections(answer: object, width: int, height: int) -> None:
    assert isinstance(answer, list) and 0 < len(answer) <= 10, answer   # tiny detector: biased to report boxes
    scores = [d["score"] for d in answer]
    assert scores == sorted(scores, reverse=True)
    for det in answer:
        assert set(det) == {"bbox", "score", "category"}
        l, t, r, b = det["bbox"]
        assert 0 <= l <= r <= width and 0 <= t <= b <= height, (det["bbox"], width, height)
        assert 0.5 <= det["score"] <= 1.0
        assert det["category"] == "drawn_humanoid"


def assert_pose(answer: object, width: int, height: int) -> None:
    assert isinstance(answer, list) and len(answer) == 1, answer
    person = answer[0]
    assert set(person) == {"keypoints", "bbox", "score"}
    assert person["bbox"] == [0.0, 0.0, float(width), float(height)]
    kps = person["keypoints"]
    assert len(kps) == 17 and all(len(k) == 3 for k in kps)
    for x, y, s in kps:
        assert 0 <= x <= width - 1 and 0 <= y <= height - 1, (x, y, width, height)
        assert math.isfinite(s)
    assert person["score"] == pytest.approx(float(np.mean([k[2] for k in kps])), abs=1e-4)
