"""Cut a drawn character out of a photo crop: a boolean mask of its pixels.

The recipe is the one AnimatedDrawings' ``image_to_annotations`` uses for photos of drawings on
paper, written with numpy and ``scipy.ndimage`` instead of OpenCV:

1. darkness: the darkest channel per pixel (a coloured stroke counts as ink);
2. adaptive threshold: a pixel is ink when it is darker than a Gaussian-weighted local mean minus an
   offset (robust to uneven lighting across a phone photo);
3. morphology: a 3x3 closing (twice) joins broken strokes, a 3x3 dilation (twice) thickens them;
4. fill: everything not reachable from the crop's border through paper becomes character, so the
   inside of an outlined figure is filled;
5. keep the largest connected component (stray marks, shadows and paper edges are dropped).

All arrays are in the crop's pixel grid, row = y (down), column = x (right).
"""
from __future__ import annotations

import numpy as np
from scipy import ndimage

_SQUARE = np.ones((3, 3), dtype=bool)


def adaptive_threshold(gray: np.ndarray, block_size: int = 115, offset: float = 8.0) -> np.ndarray:
    """Ink mask of a grey image (uint8 or float, 0 = black): True where ``gray <= local mean - offset``.

    The local mean is Gaussian-weighted over ``block_size`` pixels (odd), with the sigma OpenCV uses
    for that block size and the image edges replicated.
    """
    if block_size < 3 or block_size % 2 == 0:
        raise ValueError(f"block_size must be an odd number >= 3, got {block_size}")
    g = np.asarray(gray, dtype=np.float32)
    sigma = 0.3 * ((block_size - 1) * 0.5 - 1) + 0.8
    radius = block_size // 2
    local_mean = ndimage.gaussian_filter(g, sigma=sigma, mode="nearest", truncate=radius / sigma)
    return g <= local_mean - offset


def largest_component(mask: np.ndarray) -> np.ndarray:
    """The largest 8-connected component of a boolean mask (all False if the mask is empty)."""
    labels, count = ndimage.label(mask, structure=_SQUARE)
    if count == 0:
        return np.zeros_like(mask, dtype=bool)
    sizes = np.bincount(labels.ravel())
    sizes[0] = 0
    return labels == int(np.argmax(sizes))


def segment_drawing(rgb: np.ndarray, block_size: int = 115, offset: float = 8.0) -> np.ndarray:
    """Mask of the character in a crop of a photographed drawing.

    Args:
        rgb: uint8 array (H, W, 3) or (H, W, 4) (alpha ignored) or (H, W) grey; the crop around the
            character, drawn dark on light paper.
        block_size, offset: adaptive-threshold window (pixels, odd) and offset (grey levels).

    Returns:
        bool array (H, W): True on the character, False on the paper. All False if nothing was found;
        the one-pixel border is always False (so the outline is closed, as in AnimatedDrawings).
    """
    img = np.asarray(rgb)
    if img.ndim == 3:
        gray = img[..., :3].min(axis=2)
    elif img.ndim == 2:
        gray = img
    else:
        raise ValueError(f"expected an (H, W[, C]) image, got shape {img.shape}")
    if gray.shape[0] < 3 or gray.shape[1] < 3:
        return np.zeros(gray.shape, dtype=bool)
    ink = adaptive_threshold(gray, block_size=min(block_size, _odd_at_most(max(gray.shape))), offset=offset)
    ink = ndimage.binary_closing(ink, structure=_SQUARE, iterations=2, border_value=0)
    ink = ndimage.binary_dilation(ink, structure=_SQUARE, iterations=2)
    ink[0, :] = ink[-1, :] = False
    ink[:, 0] = ink[:, -1] = False
    filled = ndimage.binary_fill_holes(ink)
    mask = largest_component(filled)
    mask[0, :] = mask[-1, :] = False
    mask[:, 0] = mask[:, -1] = False
    return mask


def _odd_at_most(n: int) -> int:
    n = max(3, int(n))
    return n if n % 2 else n - 1
