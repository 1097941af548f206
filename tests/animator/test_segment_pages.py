"""animator.segment on pages other than plain paper: the mask is the figure, not the page.

The cases come from ``tests/fixtures/mask_drawings.py`` (figures with a known mask composited on
generated pages); the truth is AnimatedDrawings' segmentation of the same figure on clean white paper.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from animator.paper import PageCheck, check_page
from animator.segment import adaptive_threshold, segment_drawing, segment_drawing_ad, segment_with_check, to_gray8
from tests.fixtures.mask_drawings import clean_crop, draw_figure, photo

#: the least IoU with the figure per page kind (bench/masks.py reports the full set)
MIN_IOU = {"lined": 0.9, "squared": 0.9, "shadow": 0.9, "sky_grass": 0.8}


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / max(1, (a | b).sum()))


def _case(figure: str, page: str, seed: int, margin: int):
    fig = draw_figure(figure, seed=seed)
    return photo(fig, page, seed=seed, margin=margin), segment_drawing_ad(clean_crop(fig, margin))


@pytest.mark.parametrize("page", ["lined", "squared", "shadow", "sky_grass"])
@pytest.mark.parametrize("figure, seed, margin", [("stick_figure", 0, 12), ("triangle_dress", 1, 0),
                                                  ("crayon_filled", 2, 12)])
def test_mask_is_the_figure_where_animated_drawings_takes_the_page(page, figure, seed, margin) -> None:
    crop, truth = _case(figure, page, seed, margin)
    mask, check = segment_with_check(crop)
    assert not check.plain, check
    ad = _iou(segment_drawing_ad(crop), truth)
    ours = _iou(mask, truth)
    assert ours >= MIN_IOU[page], f"IoU {ours:.3f} with the figure (AnimatedDrawings' segmentation: {ad:.3f})"


@pytest.mark.parametrize("page", ["lined", "squared", "sky_grass"])
def test_animated_drawings_alone_takes_the_page_there(page) -> None:
    # what the previous test guards against: without the page check the mask is mostly page
    crop, truth = _case("stick_figure", page, 0, 12)
    assert _iou(segment_drawing_ad(crop), truth) < 0.7


@pytest.mark.parametrize("page", ["plain", "coloured_sheet"])
@pytest.mark.parametrize("figure", ["triangle_dress", "curly_pencil_hair", "pen_sketch", "crayon_filled"])
def test_plain_and_uniform_pages_keep_animated_drawings_mask_exactly(page, figure) -> None:
    crop, truth = _case(figure, page, 1, 0)
    mask, check = segment_with_check(crop)
    assert check.plain, check
    assert (mask == segment_drawing_ad(crop)).all()
    assert _iou(mask, truth) > 0.94


def test_page_check_counts_ruled_lines_and_shadow_spread() -> None:
    lined, _ = _case("stick_figure", "lined", 0, 12)
    g = to_gray8(lined)
    raw = adaptive_threshold(g)
    check = check_page(g, raw, segment_drawing_ad(lined))
    assert check.lines >= 8 and not check.plain
    shadow, _ = _case("stick_figure", "shadow", 0, 12)
    g = to_gray8(shadow)
    check = check_page(g, adaptive_threshold(g), segment_drawing_ad(shadow))
    assert check.spread > 60 and check.shadowed and not check.plain
    assert PageCheck(0.5, 0, 20.0).plain and not PageCheck(0.05, 0, 20.0).plain


def test_grey_crops_and_blank_pages_stay_on_the_plain_path() -> None:
    crop, _ = _case("triangle_dress", "lined", 0, 0)
    grey = crop.min(axis=2)
    assert (segment_drawing(grey) == segment_drawing_ad(grey)).all()
    assert not segment_drawing(np.full((64, 48, 3), 240, np.uint8)).any()


def test_a_hostile_page_of_one_pixel_stripes_finishes_quickly() -> None:
    # worst case for the ruling search: a line run every other row and column (a hostile crop)
    page = np.full((600, 600, 3), 235, np.uint8)
    page[::2] = (120, 150, 210)
    page[:, ::2] = (120, 150, 210)
    page[200:400, 290:310] = 20
    t0 = time.perf_counter()
    mask, check = segment_with_check(page)
    assert check.lines >= 3 and not check.plain
    assert time.perf_counter() - t0 < 10.0
    assert mask.shape == (600, 600)
