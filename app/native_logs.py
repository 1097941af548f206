"""The pose model's native log lines kept out of a process's log (the render worker's).

MediaPipe and the LiteRT runtime under it write straight to file descriptor 2, past Python's logging:
about 150 lines per video job ("WARNING: [model_load.cc:402] Sparsity tensors may not yet be fully
supported." once per tensor, LiteRT's "INFO: [environment.cc:36] ..." lines, absl's "W0000 ..." lines),
and their minimum level is not settable from outside (GLOG_minloglevel no longer reaches them).
:func:`drop_native_noise` points file descriptor 2 at a pipe whose reader thread forwards every line to
the original stderr except those (:data:`NOISE`): the worker's own log lines, tracebacks and any native
ERROR line still show. The animator's command line hides them its own way (animator.video.motion).
"""
from __future__ import annotations

import atexit
import os
import re
import sys
import threading

#: Native INFO and WARNING lines of MediaPipe, LiteRT and absl (ERROR and FATAL lines are kept).
NOISE = re.compile(rb"^(?:INFO: |WARNING: \[[\w.]+:\d+\]"
                   rb"|[IW]\d{4} \d\d:\d\d:[\d.]+ +\d+ [\w.]+:\d+\]"
                   rb"|WARNING: Logging before InitGoogle\(\))")

_installed = False


def _forward(read_fd: int, out_fd: int) -> None:
    with os.fdopen(read_fd, "rb", buffering=0) as pipe:
        rest = b""
        while True:
            chunk = pipe.read(65536)
            if not chunk:
                break
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            kept = b"".join(line + b"\n" for line in lines if not NOISE.match(line))
            if kept:
                os.write(out_fd, kept)
        if rest and not NOISE.match(rest):
            os.write(out_fd, rest)


def drop_native_noise() -> None:
    """From now on, this process's (and its children's) file descriptor 2 loses :data:`NOISE` lines. Once
    per process; a no-op where stderr cannot be replaced."""
    global _installed
    if _installed:
        return
    try:
        sys.stderr.flush()
        original = os.dup(2)
        read_fd, write_fd = os.pipe()
        os.dup2(write_fd, 2)
        os.close(write_fd)
    except OSError:
        return
    _installed = True
    reader = threading.Thread(target=_forward, args=(read_fd, original), name="native-log-filter", daemon=True)
    reader.start()

    def restore() -> None:  # the last lines out before the process ends
        try:
            sys.stderr.flush()
            os.dup2(original, 2)       # closes the pipe's last writer here: the reader drains and stops
            reader.join(timeout=2)
        except OSError:
            pass

    atexit.register(restore)
