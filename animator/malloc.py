"""How a short-lived rendering process asks the C heap to keep the memory it frees.

A render allocates and frees arrays of a few megabytes at every step (the ARAP operators, the
deformed meshes of every frame, each frame's scratch). glibc's malloc gives a block that large
pages of its own and returns them when it is freed, so the next array of that size takes new
pages again, each zeroed by the kernel on first touch: a CLI render spent about a fifth of its
time there (system time). :func:`keep_freed_memory` raises the thresholds: large blocks come from
the heap, and freed memory stays in the process for the next array until it exits.

Only for a process that renders and exits, or a worker that renders again and again: the process
holds at most the largest amount it ever used at once (which a render's peak needs anyway).
Elsewhere than glibc (musl, macOS) nothing changes.
"""
from __future__ import annotations

import ctypes

#: glibc's mallopt parameters (malloc.h) and the values set: blocks up to 64 MiB come from the heap;
#: it is trimmed only above 256 MiB free at its top, and grows 16 MiB at a time.
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
_SETTINGS = ((_M_MMAP_THRESHOLD, 64 << 20), (_M_TRIM_THRESHOLD, 256 << 20), (_M_TOP_PAD, 16 << 20))


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to serve large blocks from the heap and keep freed memory; True if it
    took the settings (False where the C library has no ``mallopt``)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the interpreter runs on
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return all(mallopt(param, value) == 1 for param, value in _SETTINGS)
