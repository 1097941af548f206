"""Each process's scratch folder (render spill files, uploaded clips), and the leftovers of dead ones.

A process makes ``<temp>/doodlepod-scratch-<pid>-<random>`` at start and removes it at exit. A
process killed outright (SIGKILL, the OOM killer) cannot; so each new one first removes the scratch
folders whose process is gone: no process with that pid, or one that started after the folder was
made (the pid was reused, as it is in a restarted container). Files inside are named by the server
(:func:`secrets.token_hex` or :func:`tempfile.mkstemp`), never by anything a client sends.
"""
from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

log = logging.getLogger("doodlepod.scratch")

PREFIX = "doodlepod-scratch-"
_NAME = re.compile(rf"^{PREFIX}(\d+)-")


def make_scratch(temp_dir: str | None = None) -> Path:
    """A fresh scratch folder of this process (removed at exit), after sweeping dead processes' ones."""
    temp = Path(temp_dir or tempfile.gettempdir())
    removed = sweep_dead(temp)
    if removed:
        log.info("removed %d scratch folder(s) of stopped processes", removed)
    scratch = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=temp))
    atexit.register(shutil.rmtree, scratch, True)
    return scratch


def sweep_dead(temp: Path) -> int:
    """Remove the scratch folders under ``temp`` whose process is gone; returns how many."""
    removed = 0
    try:
        entries = list(os.scandir(temp))
    except OSError:
        return 0
    for entry in entries:
        match = _NAME.match(entry.name)
        if not match or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            made = entry.stat(follow_symlinks=False).st_mtime
        except FileNotFoundError:
            continue
        if process_alive_since(int(match.group(1)), made):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed += 1
    return removed


def process_alive_since(pid: int, since: float) -> bool:
    """Whether process ``pid`` is running and started no later than ``since`` (unix seconds)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: it exists
    started = _start_time(pid)
    return started is None or started <= since + 1.0


def _start_time(pid: int) -> float | None:
    """The process' start as unix seconds (from /proc), or None where /proc cannot tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None
