"""Thin a boolean mask to a one-pixel skeleton, and classify its pixels (ends, junctions).

Zhang & Suen's parallel thinning (1984), written with numpy: each pass codes every pixel's
8 neighbours as a byte (shifted copies OR-ed together) and looks the byte up in a table of 256
entries that says whether the pixel may go. It stops when a pass removes nothing.

Neighbour bits, clockwise from north: N=1, NE=2, E=4, SE=8, S=16, SW=32, W=64, NW=128.
"""
from __future__ import annotations

import numpy as np


def _bits(code: int) -> list[int]:
    return [(code >> k) & 1 for k in range(8)]  # N, NE, E, SE, S, SW, W, NW


def _crossings(code: int) -> int:
    """Number of 0 -> 1 steps walking once round the 8 neighbours (the crossing number)."""
    b = _bits(code)
    return sum(1 for k in range(8) if b[k] == 0 and b[(k + 1) % 8] == 1)


def _tables() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    first = np.zeros(256, bool)
    second = np.zeros(256, bool)
    crossings = np.zeros(256, np.int8)
    count = np.zeros(256, np.int8)
    for code in range(256):
        n, ne, e, se, s, sw, w, nw = _bits(code)
        b = n + ne + e + se + s + sw + w + nw
        a = _crossings(code)
        crossings[code] = a
        count[code] = b
        if 2 <= b <= 6 and a == 1:
            first[code] = (n * e * s == 0) and (e * s * w == 0)
            second[code] = (n * e * w == 0) and (n * s * w == 0)
    return first, second, crossings, count


_FIRST, _SECOND, CROSSINGS, COUNT = _tables()


def neighbour_code(img: np.ndarray) -> np.ndarray:
    """Per pixel, the byte of its 8 neighbours (outside the image counts as background)."""
    a = np.asarray(img)
    h, w = a.shape
    p = np.zeros((h + 2, w + 2), np.uint8)
    p[1:-1, 1:-1] = a
    code = p[0:h, 1:w + 1].copy()                 # N
    code |= p[0:h, 2:w + 2] << 1                  # NE
    code |= p[1:h + 1, 2:w + 2] << 2              # E
    code |= p[2:h + 2, 2:w + 2] << 3              # SE
    code |= p[2:h + 2, 1:w + 1] << 4              # S
    code |= p[2:h + 2, 0:w] << 5                  # SW
    code |= p[1:h + 1, 0:w] << 6                  # W
    code |= p[0:h, 0:w] << 7                      # NW
    return code


def thin(mask: np.ndarray, max_passes: int = 500) -> np.ndarray:
    """A one-pixel-wide, 8-connected skeleton of a boolean mask (same shape)."""
    img = np.asarray(mask, dtype=bool).copy()
    for _ in range(max_passes):
        changed = False
        for table in (_FIRST, _SECOND):
            drop = img & table[neighbour_code(img)]
            if drop.any():
                img &= ~drop
                changed = True
        if not changed:
            break
    # Zhang-Suen leaves 4-connected corners on diagonal runs (a pixel whose two neighbours touch
    # each other): drop those whose removal keeps the run connected, so ends and junctions read
    # cleanly. A pixel goes when it has exactly two neighbours, N/S and E/W adjacent (an "L").
    corner = img & _IS_L[neighbour_code(img)]
    if corner.any():
        img &= ~corner
    return img


def _l_codes() -> np.ndarray:
    codes = []
    for n_bit, e_bit in ((1, 4), (4, 16), (16, 64), (64, 1)):
        codes.append(n_bit | e_bit)
    return np.array(codes, dtype=np.int32)


_IS_L = np.zeros(256, bool)
_IS_L[_l_codes()] = True


def ends_and_junctions(skeleton: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Boolean maps of the skeleton's ends (one run of neighbours, at most two of them, adjacent)
    and junctions (three or more separate runs of neighbours)."""
    code = neighbour_code(skeleton)
    cn = CROSSINGS[code]
    cnt = COUNT[code]
    ends = skeleton & (((cn == 1) & (cnt <= 2)) | (cnt == 0))
    junctions = skeleton & (cn >= 3)
    return ends, junctions
