"""Child processes that end with their parent, whoever starts them (the GIF's forked runs, the
app's render processes)."""
from __future__ import annotations

import os
import signal
import sys

#: prctl's option that has the kernel signal a process when its parent dies (linux/prctl.h).
PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """Have Linux kill this process (SIGKILL) when its parent dies (``PR_SET_PDEATHSIG``; nothing
    elsewhere), and leave at once if the parent, ``parent_pid``, died already."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:
        os._exit(1)  # no cleanup: what this process would clean up belongs to its parent
