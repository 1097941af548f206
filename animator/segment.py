"""Cut a drawn character out of a photo crop: a boolean mask of its pixels.

The recipe is AnimatedDrawings' ``segment()`` (``examples/image_to_annotations.py``), written with
numpy and ``scipy.ndimage`` instead of OpenCV and scikit-image, and equal to it pixel for pixel
(``tests/animator/test_segment_ad_reference.py`` checks it against masks made by AnimatedDrawings'
own code; docs/animator.md says how each step was matched):

1. darkness: the darkest channel per pixel (a coloured stroke counts as ink);
2. adaptive threshold (OpenCV's ``ADAPTIVE_THRESH_GAUSSIAN_C``, block 115, C 8): a pixel is ink when it
   is at least 8 grey levels darker than its Gaussian-weighted local mean rounded to a whole level;
3. morphology: a 3x3 closing twice, a 3x3 dilation twice (OpenCV's borders: outside the crop neither
   grows nor erodes ink);
4. fill: paper is what a 4-connected flood fill reaches from seeds every 10 pixels along the crop's
   four sides; everything else (ink, paper enclosed by ink, and paper pockets at the border that no
   seed reaches) is character; the one-pixel border is paper;
5. keep the piece whose outline encloses the most pixels, holes filled. Pieces are 4-connected plus
   corner contacts that run up-right/down-left, which is how scikit-image's ``find_contours`` traces
   the outline AnimatedDrawings fills (see :func:`largest_outline`).

All arrays are in the crop's pixel grid, row = y (down), column = x (right).
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import ndimage

from animator.paper import PageCheck, check_page, figure_ink, with_near_pieces

_SQUARE = np.ones((3, 3), dtype=bool)
_CROSS = ndimage.generate_binary_structure(2, 1)
#: 4-connected plus the up-right / down-left corner (see :func:`largest_outline`).
_OUTLINE = np.array([[0, 1, 1], [1, 1, 1], [1, 1, 0]], dtype=bool)
#: AnimatedDrawings' morphology: 3x3 rectangle, 2 iterations = a 5x5 square.
_MORPH = 5
#: AnimatedDrawings' flood-fill seeds: every this many pixels along each side.
_SEED_STEP = 10


@lru_cache(maxsize=8)
def gaussian_kernel(n: int) -> np.ndarray:
    """OpenCV's ``getGaussianKernel(n, 0, CV_32F)`` (sigma from the size), as float64 values."""
    sigma = n * 0.15 + 0.35                       # OpenCV: ((n - 1) * 0.5 - 1) * 0.3 + 0.8
    scale = -0.125 / (sigma * sigma)              # x below is twice the offset from the centre
    half = [math.exp(float(x * x) * scale) for x in range(1 - n, 0, 2)]
    norm = 1.0 / (2.0 * sum(half) + 1.0)
    values = [v * norm for v in half]
    kernel = np.array(values + [norm] + values[::-1], dtype=np.float32).astype(np.float64)
    kernel.setflags(write=False)
    return kernel


def to_gray8(img: np.ndarray) -> np.ndarray:
    """The darkest channel of an (H, W, 3|4) image (alpha ignored), or a grey (H, W) image, as uint8."""
    img = np.asarray(img)
    if img.ndim == 3:
        img = img[..., :3].min(axis=2)
    elif img.ndim != 2:
        raise ValueError(f"expected an (H, W[, C]) image, got shape {img.shape}")
    if img.dtype != np.uint8:
        img = np.clip(np.rint(img.astype(np.float64)), 0, 255).astype(np.uint8)
    return img


def local_mean(gray: np.ndarray, block_size: int = 115) -> np.ndarray:
    """The Gaussian-weighted local mean OpenCV's ``adaptiveThreshold`` compares with (edges
    replicated), rounded to whole grey levels (int16)."""
    k = gaussian_kernel(block_size)
    m = ndimage.correlate1d(np.asarray(gray, dtype=np.float64), k, axis=1, mode="nearest")
    m = ndimage.correlate1d(m, k, axis=0, mode="nearest")
    return np.rint(m).astype(np.int16)


def adaptive_threshold(gray: np.ndarray, block_size: int = 115, offset: float = 8.0) -> np.ndarray:
    """Ink mask of a grey image (uint8, or float rounded to uint8; 0 = black): True where the pixel
    is at least ``ceil(offset)`` levels darker than :func:`local_mean` — what
    ``cv2.adaptiveThreshold(g, 255, ADAPTIVE_THRESH_GAUSSIAN_C, THRESH_BINARY, block_size, offset)``
    sets to 0."""
    if block_size < 3 or block_size % 2 == 0:
        raise ValueError(f"block_size must be an odd number >= 3, got {block_size}")
    g = to_gray8(gray)
    return g.astype(np.int16) <= local_mean(g, block_size) - math.ceil(offset)


def close_and_thicken(ink: np.ndarray) -> np.ndarray:
    """AnimatedDrawings' morphology: closing then dilation, each a 3x3 rectangle twice. Outside the
    crop counts as paper for dilation and as ink for erosion (OpenCV's default borders)."""
    u = ink.astype(np.uint8)
    u = ndimage.maximum_filter(u, size=_MORPH, mode="constant", cval=0)
    u = ndimage.minimum_filter(u, size=_MORPH, mode="constant", cval=1)
    u = ndimage.maximum_filter(u, size=_MORPH, mode="constant", cval=0)
    return u.astype(bool)


def unreached_by_paper(ink: np.ndarray) -> np.ndarray:
    """Everything a 4-connected flood fill of the paper from AnimatedDrawings' border seeds (every
    10th pixel along each side, from the top-left corner) does not reach; the border is False."""
    h, w = ink.shape
    labels, _ = ndimage.label(~ink, structure=_CROSS)
    xs = np.arange(0, w - 1, _SEED_STEP)
    ys = np.arange(0, h - 1, _SEED_STEP)
    seeds = np.concatenate([labels[0, xs], labels[h - 1, xs], labels[ys, 0], labels[ys, w - 1]])
    reached = np.zeros(labels.max() + 1, dtype=bool)
    reached[seeds] = True
    reached[0] = True                              # label 0 is ink: never paper
    character = ~reached[labels] | ink
    character[0, :] = character[-1, :] = False
    character[:, 0] = character[:, -1] = False
    return character


def largest_outline(character: np.ndarray) -> np.ndarray:
    """The piece of ``character`` whose outline encloses the most pixels, holes filled.

    AnimatedDrawings traces outlines with ``skimage.measure.find_contours(mask, 0.0)`` on the paper
    (255) / character (0) picture, fills each with ``cv2.fillPoly`` and keeps the largest. At level
    0.0 every vertex lies on a character pixel, so where two pieces meet only at a corner the traced
    outline passes through it for an up-right/down-left contact and stops at an up-left/down-right
    one (measured against its code on 300 random stroke crops: this rule reproduces all of them).
    Of pieces that enclose equally many pixels the one with the larger bounding box is kept
    (AnimatedDrawings keeps the first contour scikit-image returns)."""
    labels, count = ndimage.label(character, structure=_OUTLINE)
    if count == 0:
        return np.zeros(character.shape, dtype=bool)
    boxes = ndimage.find_objects(labels)
    order = sorted(range(count), key=lambda i: -_area(boxes[i]))
    best_size, best = 0, None
    for i in order:
        if _area(boxes[i]) <= best_size:          # a piece fills at most its bounding box
            break
        filled = ndimage.binary_fill_holes(labels[boxes[i]] == i + 1)
        size = int(filled.sum())
        if size > best_size:
            best_size, best = size, (boxes[i], filled)
    mask = np.zeros(character.shape, dtype=bool)
    box, filled = best
    mask[box] = filled
    return mask


def _area(box: tuple[slice, slice]) -> int:
    return (box[0].stop - box[0].start) * (box[1].stop - box[1].start)


def largest_component(mask: np.ndarray) -> np.ndarray:
    """The largest 8-connected component of a boolean mask (all False if the mask is empty)."""
    labels, count = ndimage.label(mask, structure=_SQUARE)
    if count == 0:
        return np.zeros_like(mask, dtype=bool)
    sizes = np.bincount(labels.ravel())
    sizes[0] = 0
    return labels == int(np.argmax(sizes))


def segment_drawing_ad(rgb: np.ndarray, block_size: int = 115, offset: float = 8.0) -> np.ndarray:
    """AnimatedDrawings' ``segment()`` of a crop, pixel for pixel (whatever the page).

    Args:
        rgb: uint8 array (H, W, 3) or (H, W, 4) (alpha ignored) or (H, W) grey; the crop around the
            character, drawn dark on light paper.
        block_size, offset: adaptive-threshold window (pixels, odd) and offset (grey levels).

    Returns:
        bool array (H, W): True on the character, False on the paper. All False if nothing was found
        (where AnimatedDrawings stops with "Found no contours within image").
    """
    gray = to_gray8(rgb)
    if gray.shape[0] < 3 or gray.shape[1] < 3:
        return np.zeros(gray.shape, dtype=bool)
    ink = close_and_thicken(adaptive_threshold(gray, block_size=block_size, offset=offset))
    return largest_outline(unreached_by_paper(ink))


def segment_with_check(rgb: np.ndarray) -> tuple[np.ndarray, PageCheck]:
    """:func:`segment_drawing`'s mask and the page check that chose its path."""
    img = np.asarray(rgb)
    gray = to_gray8(img)
    if gray.shape[0] < 3 or gray.shape[1] < 3:
        return np.zeros(gray.shape, dtype=bool), PageCheck(1.0, 0, 0.0)
    raw = adaptive_threshold(gray)
    mask = largest_outline(unreached_by_paper(close_and_thicken(raw)))
    check = check_page(gray, raw, mask)
    if check.plain or img.ndim != 3:
        return mask, check
    ink = figure_ink(np.ascontiguousarray(img[..., :3]), check, local_mean)
    # a busy page breaks thin strokes more than paper does: bridge gaps up to 6 px first
    ink = ndimage.binary_closing(ink, structure=np.ones((7, 7), bool), border_value=1)
    character = unreached_by_paper(close_and_thicken(ink))
    return with_near_pieces(character, largest_outline(character)), check


def segment_drawing(rgb: np.ndarray) -> np.ndarray:
    """Mask of the character in a crop of a photographed drawing.

    On plain paper (:attr:`animator.paper.PageCheck.plain`) it is AnimatedDrawings' ``segment()``
    exactly (:func:`segment_drawing_ad`); on a ruled or squared sheet, a page coloured in around the
    figure or a shadowed page, the same steps run on :func:`animator.paper.figure_ink` (the figure's
    ink without the page's lines, texture and shadow edge).

    Args:
        rgb: uint8 array (H, W, 3) or (H, W, 4) (alpha ignored), or (H, W) grey (always the plain
            path: a grey crop has no page colours to tell apart).

    Returns:
        bool array (H, W): True on the character. All False if nothing was found.
    """
    return segment_with_check(rgb)[0]
