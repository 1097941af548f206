"""Take the characters out of a photo of a drawn page and fill the paper in where they stood.

:func:`remove` fills the masked pixels from the paper around them; :func:`trace` measures what is left
of a character inside its mask: the mean colour distance (RGB, 0..442) from each masked pixel to the
paper around the mask (the median colour of a ring a few pixels outside it, other characters left
out). Before inpainting that is the drawing's contrast with the paper (tens); after, it should be
down at the paper's own grain (:func:`paper_grain`, the same distance measured on the ring itself).

Methods (measured by ``bench/inpaint.py`` on the scene fixture photo; figures in docs/speed.md):

``ns``          OpenCV's Navier-Stokes method: the default. The cleanest of the three on paper (what
                is left inside a mask is below the paper's own grain: the fill is smooth) and, at a
                500-pixel canvas, the fastest (152 ms for four characters against Telea's 244 ms).
``telea``       OpenCV's fast marching (Telea 2004): faster on large canvases, slightly less clean
                (up to 1.5x the grain: faint smears of the pencil line).
``biharmonic``  scikit-image's biharmonic inpainting: blotches of colour where a hole is wide (up to
                2.5x the grain) and 4-6x slower; scikit-image is not in the app image.

Masks are grown by ``grow`` pixels first: a segmentation stops at the pencil line's middle, and the
outer half of the line would otherwise be smeared into the paper.
"""
from __future__ import annotations

import numpy as np

from .errors import ConfigError, RenderError

METHODS = ("ns", "telea", "biharmonic")
DEFAULT_METHOD = "ns"
#: Pixels the masks grow before inpainting, and the ring's inner gap in :func:`trace`.
GROW = 3
#: OpenCV's inpainting radius, pixels.
RADIUS = 5


def grow(mask: np.ndarray, pixels: int) -> np.ndarray:
    """``mask`` dilated by a (2 pixels + 1)-wide square."""
    from scipy.ndimage import binary_dilation

    if pixels <= 0:
        return mask.astype(bool)
    return binary_dilation(mask.astype(bool), np.ones((2 * pixels + 1,) * 2, bool))


def remove(photo: np.ndarray, mask: np.ndarray, method: str = DEFAULT_METHOD, pad: int = GROW) -> np.ndarray:
    """``photo`` ((H, W, 3) uint8) with the pixels under ``mask`` ((H, W) bool, grown by ``pad``)
    filled in from the paper around them."""
    if method not in METHODS:
        raise ConfigError("options", "inpaint", f"must be one of {', '.join(METHODS)}, got {method!r}")
    img = np.ascontiguousarray(photo[..., :3], np.uint8)
    if mask.shape != img.shape[:2]:
        raise ValueError(f"mask {mask.shape} and photo {img.shape[:2]} differ in size")
    hole = grow(mask, pad)
    if not hole.any():
        return img.copy()
    if method == "biharmonic":
        try:
            from skimage.restoration import inpaint_biharmonic
        except ImportError:
            raise RenderError("the biharmonic inpainting needs scikit-image, which is not installed") from None
        out = inpaint_biharmonic(img, hole, channel_axis=-1)
        return np.clip(np.round(out * 255), 0, 255).astype(np.uint8)
    try:
        import cv2
    except ImportError:
        raise RenderError("inpainting the photo needs OpenCV (opencv-python-headless), which is not installed; "
                          "choose a plain colour or an image background") from None
    flag = cv2.INPAINT_TELEA if method == "telea" else cv2.INPAINT_NS
    return cv2.inpaint(img, hole.astype(np.uint8) * 255, RADIUS, flag)


def _ring(mask: np.ndarray, others: np.ndarray | None, gap: int, width: int) -> np.ndarray:
    ring = grow(mask, gap + width) & ~grow(mask, gap)
    if others is not None:
        ring &= ~grow(others, gap)
    return ring


def trace(image: np.ndarray, mask: np.ndarray, others: np.ndarray | None = None, gap: int = GROW + 1,
          width: int = 8) -> float:
    """Mean RGB distance from ``image``'s pixels under ``mask`` to the paper around it (the median colour
    of the ring ``gap`` to ``gap + width`` pixels outside the mask, minus ``others``: other characters)."""
    ring = _ring(mask, others, gap, width)
    if not ring.any() or not mask.any():
        raise ValueError("no paper around the mask, or an empty mask")
    img = image[..., :3].astype(np.float64)
    paper = np.median(img[ring], axis=0)
    return float(np.linalg.norm(img[mask.astype(bool)] - paper, axis=1).mean())


def paper_grain(image: np.ndarray, mask: np.ndarray, others: np.ndarray | None = None, gap: int = GROW + 1,
                width: int = 8) -> float:
    """The same distance as :func:`trace` measured on the ring itself: the paper's own grain and light."""
    ring = _ring(mask, others, gap, width)
    img = image[..., :3].astype(np.float64)
    paper = np.median(img[ring], axis=0)
    return float(np.linalg.norm(img[ring] - paper, axis=1).mean())


__all__ = ["DEFAULT_METHOD", "METHODS", "grow", "paper_grain", "remove", "trace"]
