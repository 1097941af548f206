"""This machine's processes, read from /proc (Linux).

A zombie (state ``Z``: exited, its parent has not reaped it yet) counts as gone everywhere here: it runs
nothing and holds nothing but its table entry. So :func:`alive`, :func:`children`, :func:`descendants`
and :func:`matching` see only live processes, and :func:`wait_gone` waits for exit, not for the reaping.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

PROC = Path("/proc")


def _stat(pid: int | str) -> tuple[str, int] | None:
    """(state letter, parent pid) of ``pid``, or None when it is gone."""
    try:
        fields = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1])


def state(pid: int) -> str:
    """The state letter of ``pid`` (``R`` running, ``S`` sleeping, ``Z`` zombie, ...), '' when gone."""
    found = _stat(pid)
    return found[0] if found else ""


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    return state(pid) not in ("", "Z")


def _live() -> dict[int, int]:
    """pid -> parent pid of every live process."""
    out = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            found = _stat(entry.name)
            if found and found[0] != "Z":
                out[int(entry.name)] = found[1]
    return out


def children(pid: int) -> list[int]:
    """Live processes whose parent is ``pid``."""
    return sorted(child for child, parent in _live().items() if parent == pid)


def descendants(*pids: int) -> set[int]:
    """Every live process below ``pids`` (children, their children, ...)."""
    below: dict[int, list[int]] = defaultdict(list)
    for child, parent in _live().items():
        below[parent].append(child)
    out: set[int] = set()
    todo = list(pids)
    while todo:
        for child in below.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def matching(proc_file: str, needle: bytes) -> list[int]:
    """Live processes whose /proc/PID/``proc_file`` (``environ``, ``cmdline``) holds ``needle``."""
    found = []
    for pid in _live():
        try:
            if needle in (PROC / str(pid) / proc_file).read_bytes():
                found.append(pid)
        except OSError:
            continue
    return sorted(p for p in found if alive(p))


def wait_gone(pids: Iterable[int], timeout: float, every: float = 0.05) -> list[int]:
    """Wait up to ``timeout`` seconds for ``pids`` to exit; the ones still alive then."""
    pids = list(pids)
    end = time.monotonic() + timeout
    left = [p for p in pids if alive(p)]
    while left and time.monotonic() < end:
        time.sleep(every)
        left = [p for p in left if alive(p)]
    return left


def stop_group(proc: subprocess.Popen | None, grace: float = 10.0) -> None:
    """Stop the process group ``proc`` leads: SIGTERM, then SIGKILL after ``grace`` seconds."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(grace)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(5)


def chain(*preexecs):
    """One ``preexec_fn`` running each of ``preexecs`` that is not None, in order (None if none is)."""
    steps = [p for p in preexecs if p is not None]
    if not steps:
        return None

    def run() -> None:
        for step in steps:
            step()

    return run
