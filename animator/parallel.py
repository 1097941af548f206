"""A transparent GIF's frames made in several processes: each rasterises and compresses one run of
consecutive frames, and the runs are joined into one file.

Threads cannot share all of this work: Pillow's LZW encoder holds the GIL (the frame kernel does not). So the
process that has built the sprite and the deformed meshes forks, and each child inherits them
(copy-on-write) and writes its run's GIF records into an unnamed temporary file
(:func:`tempfile.TemporaryFile`). The parent makes the first run itself.

The file is byte for byte the one a single process writes (:class:`animator.formats.gif.GifWriter`): a
run starts on a clear screen, which is where the single-process encoder stands too whenever the
previous run's last frame was disposed (a moving character's frames always are). When a run does
not end on a clear screen, or a child fails, :func:`gif_in_processes` answers None and the caller
renders in one process (a child's error is then raised there, as usual).

Children never outlive the render: they are killed when the parent leaves, by an exception or a
signal, and on Linux the kernel kills them if the parent dies (:func:`animator.processes.die_with_parent`).
A process that runs other threads does not fork (a child would inherit the locks they hold, held
for ever): it renders in one process.
"""
from __future__ import annotations

import logging
import os
import signal
import tempfile
import threading
from typing import Callable, Iterator

import numpy as np

from .formats.gif import GifWriter
from .processes import die_with_parent

log = logging.getLogger("animator")

#: Fewest frames a process is given: below this, forking costs more than it saves.
MIN_FRAMES_PER_PROCESS = 24


def runs(n_frames: int, processes: int) -> list[tuple[int, int]]:
    """Split frames ``0..n_frames-1`` into at most ``processes`` runs of consecutive frames, as
    near equal as whole frames allow, each of at least :data:`MIN_FRAMES_PER_PROCESS` (one run
    when the clip is too short)."""
    n = max(1, min(int(processes), n_frames // MIN_FRAMES_PER_PROCESS))
    edges = np.linspace(0, n_frames, n + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def gif_in_processes(gif: GifWriter, frames_of: Callable[[int, int], Iterator[np.ndarray]], n_frames: int,
                     processes: int, on_frames: Callable[[int], None] | None = None) -> bytes | None:
    """The GIF of frames ``0..n_frames-1``, made in up to ``processes`` processes.

    Args:
        gif: the file's palette, delays and settings.
        frames_of: ``frames_of(a, b)`` yields frames ``a..b-1`` as palette-index arrays.
        n_frames: frames in the clip.
        processes: most processes to use, this one included.
        on_frames: ``on_frames(n)``, in this process only: n more frames are made (each of its own
            frames as it is made, a child's whole run when it is joined).
    Returns:
        The file's bytes, or None when it cannot be made this way (see the module's doc).
    """
    parts = runs(n_frames, processes)
    if len(parts) < 2 or not hasattr(os, "fork"):
        return None
    if threading.active_count() > 1:  # a forked child gets only this thread: locks others hold stay held
        log.info("frames in one process instead: this process runs %d threads", threading.active_count())
        return None

    def records(a: int, b: int, counted: bool = False) -> tuple[bytes, bool, tuple[int, int]]:
        after = next(frames_of(b, b + 1)) if b < n_frames else None
        frames = frames_of(a, b)
        if counted and on_frames is not None:
            frames = _counted(frames, on_frames)
        return gif.frames(frames, start=a, after=after, threads=1)

    parent = os.getpid()
    children: list[tuple[int, object]] = []
    try:
        for a, b in parts[1:]:
            out = tempfile.TemporaryFile(prefix="animator-run-")
            pid = os.fork()
            if pid == 0:  # the child: its run's records into the file, then leave at once
                code = 1
                try:
                    die_with_parent(parent)
                    data, clear, _ = records(a, b)
                    out.write(b"\x01" if clear else b"\x00")
                    out.write(data)
                    out.flush()
                    code = 0
                finally:
                    os._exit(code)
            children.append((pid, out))
        first, clear, (height, width) = records(*parts[0], counted=True)
        pieces = [first]
        for a, b in parts[1:]:
            pid, out = children[0]
            _, status = os.waitpid(pid, 0)
            children.pop(0)
            with out:
                code = os.waitstatus_to_exitcode(status)
                if code != 0 or not clear:
                    log.info("frames in one process instead: %s", f"a child process ended with {code}" if code
                             else "a run of frames does not end on a clear screen")
                    return None
                out.seek(0)
                clear = out.read(1) == b"\x01"
                pieces.append(out.read())
            if on_frames is not None:
                on_frames(b - a)
        return gif.head(width, height) + b"".join(pieces) + GifWriter.TRAILER
    finally:
        for pid, out in children:  # left early: an error, a signal, or a run that cannot be joined
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ChildProcessError, ProcessLookupError):
                pass
            out.close()


def _counted(frames: Iterator[np.ndarray], on_frames: Callable[[int], None]) -> Iterator[np.ndarray]:
    for frame in frames:
        yield frame
        on_frames(1)
