"""animator.segment against masks made by AnimatedDrawings' own ``segment()`` on the same crops.

``tests/fixtures/ad_segment/`` holds crops of drawings made by ``tests/fixtures/mask_drawings.py``
(an outlined triangle dress whose box ends on the hem, light curly pencil hair cut by the box, a
thin pen sketch, and two controls) and the masks AnimatedDrawings' ``image_to_annotations.segment``
made of them (its commit and library versions are in ``references.json``; ``make_references.py``
made them). AnimatedDrawings is not needed to run these tests.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from animator.segment import segment_drawing
from tests.conftest import FIXTURES

FOLDER = FIXTURES / "ad_segment"
META = json.loads((FOLDER / "references.json").read_text())


@pytest.mark.parametrize("name", sorted(META["cases"]))
def test_mask_equals_animated_drawings_segment(name: str) -> None:
    crop = np.asarray(Image.open(FOLDER / f"{name}.png").convert("RGB"))
    expected = np.asarray(Image.open(FOLDER / f"{name}.mask.png").convert("L")) > 127
    mask = segment_drawing(crop)
    assert mask.shape == expected.shape
    assert expected.sum() == META["cases"][name]["mask_pixels"]
    wrong = int((mask != expected).sum())
    iou = (mask & expected).sum() / (mask | expected).sum()
    assert wrong == 0, f"{wrong} pixels differ from AnimatedDrawings' mask (IoU {iou:.3f})"
