# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""Compiled scans of palette-index frames for the GIF encoder (:mod:`animator.encode`): the boxes
that bound what a frame draws and what must vanish before the next, found without the temporary
boolean arrays numpy would build for each.

Frames are (height, width) uint8 arrays whose rows are contiguous (a C-order array or a box cut
out of one). Boxes are ``(x0, y0, x1, y1)`` in pixels, exclusive at the far end, or None when no
pixel qualifies.
"""
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memset


def box_not(const unsigned char[:, :] frame, int value):
    """The box of the pixels of ``frame`` that are not ``value`` (0..255), or None."""
    cdef Py_ssize_t h = frame.shape[0], w = frame.shape[1], y, x, y0 = -1, y1 = -1, x0 = 0, x1 = 0
    cdef Py_ssize_t stride = frame.strides[0]
    cdef const unsigned char *row
    cdef unsigned char *plain
    if not 0 <= value <= 255:
        raise ValueError(f"value must be 0..255, got {value}")
    if h == 0 or w == 0:
        return None
    if frame.strides[1] != 1:
        raise ValueError("the frame's rows must be contiguous")
    plain = <unsigned char *>malloc(w)  # a row of nothing but ``value``: memcmp against it is vectorised
    if plain == NULL:
        raise MemoryError()
    memset(plain, value, w)
    with nogil:
        for y in range(h):
            if memcmp(&frame[y, 0], plain, w) != 0:
                y0 = y
                break
        if y0 >= 0:
            for y in range(h - 1, y0 - 1, -1):
                if memcmp(&frame[y, 0], plain, w) != 0:
                    y1 = y + 1
                    break
            x0, x1 = w, 0
            for y in range(y0, y1):
                row = &frame[y, 0]
                if x0 > 0 and memcmp(row, plain, x0) != 0:  # a pixel left of the box so far
                    for x in range(x0):
                        if row[x] != value:
                            x0 = x
                            break
                if x1 < w and memcmp(row + x1, plain, w - x1) != 0:  # right of it
                    for x in range(w - 1, x1 - 1, -1):
                        if row[x] != value:
                            x1 = x + 1
                            break
    free(plain)
    if y0 < 0:
        return None
    return int(x0), int(y0), int(x1), int(y1)


def box_vanishing(const unsigned char[:, :] shown, const unsigned char[:, :] following, int transparent):
    """The box of the pixels that are drawn (not ``transparent``) in ``shown`` and transparent in
    ``following`` (same shape): what only disposing ``shown`` can clear. None if there are none."""
    cdef Py_ssize_t h = shown.shape[0], w = shown.shape[1], y, x, y0 = h, y1 = 0, x0 = w, x1 = 0
    cdef unsigned char t = <unsigned char>transparent
    _check_pair(shown, following, transparent)
    with nogil:
        for y in range(h):
            if not _row_vanishes(&shown[y, 0], &following[y, 0], w, t):
                continue
            if y < y0:
                y0 = y
            y1 = y + 1
            for x in range(x0):
                if shown[y, x] != t and following[y, x] == t:
                    x0 = x
                    break
            for x in range(w - 1, x1 - 1, -1):
                if shown[y, x] != t and following[y, x] == t:
                    x1 = x + 1
                    break
    if y1 == 0:
        return None
    return int(x0), int(y0), int(x1), int(y1)


def any_vanishing(const unsigned char[:, :] shown, const unsigned char[:, :] following, int transparent):
    """Whether :func:`box_vanishing` would find a pixel (stops at the first row holding one)."""
    cdef Py_ssize_t h = shown.shape[0], w = shown.shape[1], y
    cdef unsigned char t = <unsigned char>transparent
    cdef bint found = False
    _check_pair(shown, following, transparent)
    with nogil:
        for y in range(h):
            if _row_vanishes(&shown[y, 0], &following[y, 0], w, t):
                found = True
                break
    return bool(found)


cdef _check_pair(const unsigned char[:, :] shown, const unsigned char[:, :] following, int transparent):
    if following.shape[0] != shown.shape[0] or following.shape[1] != shown.shape[1]:
        raise ValueError("both frames must have the same shape")
    if not 0 <= transparent <= 255:
        raise ValueError(f"transparent must be 0..255, got {transparent}")
    if shown.shape[1] > 1 and (shown.strides[1] != 1 or following.strides[1] != 1):
        raise ValueError("the frames' rows must be contiguous")


cdef inline bint _row_vanishes(const unsigned char *shown, const unsigned char *following, Py_ssize_t w,
                               unsigned char t) noexcept nogil:
    """Whether a pixel of the row is drawn in ``shown`` and transparent in ``following`` (a loop
    without an early exit, which the compiler vectorises)."""
    cdef Py_ssize_t x
    cdef unsigned char acc = 0
    for x in range(w):
        acc |= (shown[x] != t) & (following[x] == t)
    return acc != 0
