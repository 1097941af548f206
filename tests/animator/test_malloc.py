"""animator.malloc: a rendering process keeps the memory of the arrays it frees for the next ones."""
from __future__ import annotations

import subprocess
import sys

import pytest

#: Frees a 32 MiB array, then asks glibc (mallinfo2) how many bytes its heap holds free: kept for the
#: next array, or given back to the kernel (by default a block that large is mapped on its own and
#: unmapped when freed, and the next array's pages are new ones, zeroed by the kernel).
FREED = r"""
import ctypes, sys
import numpy as np
from animator.malloc import keep_freed_memory

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]

mallinfo2 = ctypes.CDLL(None).mallinfo2
mallinfo2.restype = MallInfo2
took = keep_freed_memory() if sys.argv[1] == "keep" else None
a = np.ones(4 << 20)
del a
print(took, mallinfo2().fordblks)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt and mallinfo2")
def test_a_freed_large_array_stays_in_the_heap():
    def free_bytes(mode: str) -> tuple[str, int]:
        out = subprocess.run([sys.executable, "-c", FREED, mode], capture_output=True, text=True, check=True).stdout
        took, count = out.split()
        return took, int(count)

    took, kept = free_bytes("keep")
    _, default = free_bytes("default")
    assert took == "True"
    assert kept >= 32 << 20 > default  # kept in the heap only after keep_freed_memory()
