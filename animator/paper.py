"""What the page around a drawn figure is, and the figure's ink where the page is not plain paper.

AnimatedDrawings' segmentation (:mod:`animator.segment`) works on a drawing on plain paper. Where
the page is ruled, squared, coloured in with crayon (sky and grass around the figure) or crossed by
a shadow, its adaptive threshold marks the page too and the mask becomes the page. This module

* measures the page on a crop (:func:`check_page`): what share of the crop AnimatedDrawings' mask
  leaves as page, how many ruled lines cross the crop, how far the page's brightness spreads;
  :attr:`PageCheck.plain` says whether the crop takes AnimatedDrawings' exact path;
* finds the figure's ink on other pages (:func:`figure_ink`): the page's brightness is evened out
  where a shadow crosses it, the threshold's offset grows with the page's own texture, and pixels of
  the page's colours (sampled where the crop's border is paper, and the colour of ruled lines) are
  not ink; pieces near the figure (a stroke broken into dashes by the page) join it.

Arrays are in the crop's pixel grid (row = y, column = x); images are uint8 RGB.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

#: A crop is plain paper when AnimatedDrawings' mask leaves at least this share of it as page ...
MIN_PAGE_SHARE = 0.10
#: ... fewer than this many ruled lines (rows or columns at least LINE_COVER ink) cross it ...
MAX_LINES = 3
LINE_COVER = 0.8
#: ... and the page's brightness spreads over at most this many grey levels (2nd to 98th percentile).
MAX_SPREAD = 60.0

# Tuned on bench/masks.py's seeds 0-2, checked on seeds 3-5 (docs/animator.md).
_BIN = 16                  # page colours: RGB quantised to 16 levels, +-1 bin tolerance
_MIN_COLOUR_SHARE = 0.002  # a page colour holds at least this share of the border's paper samples
_LINE_TOL = 24             # a pixel within this (per channel) of a ruled line's colour is page
_RING = 0.04               # the border band where page colours are sampled (share of the shorter side)
_SHADE_SIZE = 25           # closing size (px) that estimates the page's brightness under a shadow
_TEXTURE_K = 2.5           # the threshold offset: this many robust deviations of the border paper
_NEAR = 10                 # pieces within this many px of the figure ...
_NEAR_SHARE = 0.01         # ... holding this share of its pixels join it,
_NEAR_ROUNDS = 16          # ... repeatedly, at most this many times


@dataclass(frozen=True)
class PageCheck:
    page_share: float   # share of the crop outside AnimatedDrawings' mask grown by 3 px (7x7 square)
    lines: int          # ruled lines crossing the crop (runs of rows/columns >= LINE_COVER ink)
    spread: float       # grey levels between the page's 2nd and 98th percentile brightness

    @property
    def plain(self) -> bool:
        return self.page_share >= MIN_PAGE_SHARE and self.lines < MAX_LINES and self.spread <= MAX_SPREAD

    @property
    def shadowed(self) -> bool:
        return self.spread > MAX_SPREAD


def _line_runs(ink: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """(axis, indices) of each run of rows (axis 0) or columns (axis 1) at least LINE_COVER ink."""
    runs = []
    for axis, cover in ((0, ink.mean(axis=1)), (1, ink.mean(axis=0))):
        labels, count = ndimage.label(cover >= LINE_COVER)
        runs += [(axis, np.nonzero(labels == i)[0]) for i in range(1, count + 1)]
    return runs


def check_page(gray: np.ndarray, ink: np.ndarray, mask: np.ndarray) -> PageCheck:
    """Measure the page of a crop from its grey image, AnimatedDrawings' raw ink (the adaptive
    threshold) and AnimatedDrawings' mask."""
    page = ~ndimage.maximum_filter(mask, size=7, mode="constant", cval=False)
    lines = len(_line_runs(ink))
    if page.sum() < 50:
        return PageCheck(float(page.mean()), lines, 0.0)
    lo, hi = np.percentile(gray[page], [2, 98])
    return PageCheck(float(page.mean()), lines, float(hi - lo))


def even_out_shadow(rgb: np.ndarray) -> np.ndarray:
    """``rgb`` divided by its page brightness (a per-channel closing that removes strokes narrower
    than 25 px, smoothed), so shadowed and lit paper have the same colour."""
    out = np.empty(rgb.shape[:2] + (3,), np.float32)
    for c in range(3):
        bright = ndimage.grey_closing(rgb[..., c], size=(_SHADE_SIZE, _SHADE_SIZE), mode="nearest")
        bright = ndimage.uniform_filter(bright.astype(np.float32), size=9, mode="nearest")
        out[..., c] = rgb[..., c] / np.maximum(bright, 1.0) * 240.0
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def _page_colour_table(rgb: np.ndarray, sample: np.ndarray) -> np.ndarray:
    """Bool table over quantised RGB: the colours of the ``sample`` pixels (seen twice or more),
    grown by one bin."""
    n = 256 // _BIN
    q = rgb[sample].astype(np.int32) // _BIN
    counts = np.bincount((q[:, 0] * n + q[:, 1]) * n + q[:, 2], minlength=n ** 3).reshape(n, n, n)
    return ndimage.binary_dilation(counts >= max(2.0, _MIN_COLOUR_SHARE * len(q)), structure=np.ones((3, 3, 3), bool))


def _ruled_line_colours(rgb: np.ndarray, ink: np.ndarray) -> list[np.ndarray]:
    """The colours of ruled lines: the median ink colour of each line run, kept when three or more
    runs share it (a figure's one long stroke is not a ruling), merged within the tolerance."""
    medians = []
    for axis, idx in _line_runs(ink):
        px, inked = (rgb[idx], ink[idx]) if axis == 0 else (rgb[:, idx], ink[:, idx])
        medians.append(np.median(px[inked].reshape(-1, 3), axis=0))
    if len(medians) < MAX_LINES:
        return []
    m = np.array(medians)
    close = np.abs(m[:, None, :] - m[None, :, :]).max(axis=2) <= _LINE_TOL
    colours: list[np.ndarray] = []
    for i in np.nonzero(close.sum(axis=1) >= MAX_LINES)[0]:
        if all(np.abs(m[i] - c).max() > _LINE_TOL for c in colours):
            colours.append(m[i])
    return colours


def figure_ink(rgb: np.ndarray, check: PageCheck, local_mean) -> np.ndarray:
    """Ink of the figure on a page that is not plain paper (bool (H, W)).

    ``local_mean(gray)`` is the adaptive threshold's local mean (:func:`animator.segment.local_mean`).
    """
    src = even_out_shadow(rgb) if check.shadowed else rgb
    gray = src.min(axis=2)
    diff = gray.astype(np.int16) - local_mean(gray)
    raw = diff <= -8
    h, w = gray.shape
    r = max(4, round(_RING * min(h, w)))
    ring = np.zeros((h, w), bool)
    ring[:r] = ring[-r:] = True
    ring[:, :r] = ring[:, -r:] = True
    sample = ring & ~raw                              # the border's paper (the figure's strokes are ink)
    dev = diff[sample].astype(np.float32) if sample.any() else np.zeros(1, np.float32)
    sigma = 1.4826 * float(np.median(np.abs(dev - np.median(dev))))
    offset = max(8.0, _TEXTURE_K * sigma)              # the page's own texture is not ink
    q = src.astype(np.int32) // _BIN
    page = _page_colour_table(src, sample)[q[..., 0], q[..., 1], q[..., 2]]
    for colour in _ruled_line_colours(src, raw):
        page |= (np.abs(src.astype(np.int16) - colour.astype(np.int16)).max(axis=2) <= _LINE_TOL)
    return (diff <= -np.ceil(offset)) & ~page


def with_near_pieces(character: np.ndarray, largest: np.ndarray) -> np.ndarray:
    """``largest`` joined with the pieces of ``character`` within _NEAR px of it that hold at least
    _NEAR_SHARE of its pixels, repeatedly (a head whose neck stroke broke on a busy page, a line
    broken into dashes), bridged and holes filled."""
    if not largest.any():
        return largest
    labels, count = ndimage.label(character & ~largest, structure=np.ones((3, 3), bool))
    if count == 0:
        return largest
    sizes = np.bincount(labels.ravel())
    big = sizes >= _NEAR_SHARE * largest.sum()
    big[0] = False
    joined = largest.copy()
    for _ in range(_NEAR_ROUNDS):
        near = ndimage.binary_dilation(joined, iterations=_NEAR)
        touched = np.unique(labels[near & (labels > 0)])
        new = touched[big[touched]]
        if not len(new):
            break
        big[new] = False                           # each piece joins once
        joined |= np.isin(labels, new)
    if (joined == largest).all():
        return largest
    half = _NEAR // 2
    bridged = ndimage.binary_closing(joined, structure=np.ones((3, 3), bool), iterations=half, border_value=1)
    return ndimage.binary_fill_holes(bridged & ndimage.binary_dilation(joined, iterations=half))
