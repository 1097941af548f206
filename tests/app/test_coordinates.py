"""A character's coordinate frames (app/coordinates.py)."""
from __future__ import annotations

from app import coordinates


def test_clamp_box() -> None:
    assert coordinates.clamp_box([-5, -5, 50.4, 60.6], 40, 100) == (0, 0, 40, 61)
    assert coordinates.clamp_box([10, 10, 12, 12], 100, 100) is None
    assert coordinates.clamp_box(["a", 0, 1, 1], 100, 100) is None
    assert coordinates.clamp_box([float("nan"), 0, 50, 50], 100, 100) is None
