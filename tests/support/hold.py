"""Holding a process's work so that a test sees a state that fast work skips.

A test that looks for "still rendering", "waiting for the slot" or frames moving while a render runs
passes on this machine only because the work takes long enough here; a machine two or three times
faster ends it before the test looks. These helpers make the work wait for the test instead: the
processes are stopped (SIGSTOP; the kernel holds them wherever they are) and let go (SIGCONT) when the
test has seen what it wanted. A stopped process keeps its sockets and pipes: a peer that writes to
it waits or buffers, as with a busy process.
"""
from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from tests.support import procs

T = TypeVar("T")


def app_render_processes(master_pid: int) -> list[int]:
    """The render processes of the app whose gunicorn master is ``master_pid`` (every process below its
    workers): stopped, they hold the renders in flight while the workers still answer HTTP."""
    return sorted(procs.descendants(*procs.children(master_pid)))


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _signal_each(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


@contextmanager
def paused_group(pgid: int) -> Iterator[None]:
    """Every process of the group ``pgid`` (a render worker and its render processes) stopped while
    the block runs, let go after it, whatever happens in it."""
    _signal_group(pgid, signal.SIGSTOP)
    try:
        yield
    finally:
        _signal_group(pgid, signal.SIGCONT)


@contextmanager
def paused(pids: Iterable[int]) -> Iterator[None]:
    """The processes ``pids`` (an app's render processes, not the server that answers HTTP) stopped
    while the block runs, let go after it."""
    pids = list(pids)
    _signal_each(pids, signal.SIGSTOP)
    try:
        yield
    finally:
        _signal_each(pids, signal.SIGCONT)


def stepped(pgid: int, look: Callable[[], T | None], timeout: float, burst: float = 0.02) -> T:
    """Run the process group ``pgid`` in bursts of ``burst`` seconds, calling ``look`` while it is
    stopped between two bursts, until ``look`` answers something (returned) or ``timeout`` seconds.

    A job's progress polled this way is seen at many points of the work however fast the machine:
    each look sees the work where the last burst left it, and a faster machine only takes fewer
    bursts (a render of a few tenths of a second still gives several looks). The group is running
    when this returns or raises."""
    with stepping(lambda sig: _signal_group(pgid, sig)) as until:
        return until(look, timeout, burst)


def processes(pids: Callable[[], Iterable[int]]) -> Callable[[int], None]:
    """What :func:`stepping` signals: the processes ``pids()`` names at each stop (asked again each
    time: a render process may have forked helpers meanwhile), the same ones at the next let-go."""
    stopped: list[int] = []

    def send(sig: int) -> None:
        if sig == signal.SIGSTOP:
            stopped[:] = list(pids())
        _signal_each(stopped, sig)

    return send


@contextmanager
def stepping(send: Callable[[int], None]) -> Iterator[Callable[..., Any]]:
    """Yields ``until(look, timeout, burst=0.02)``: the processes ``send`` signals (``processes(...)``,
    or a group) run in bursts of ``burst`` seconds with ``look`` called while they are stopped, until
    it answers something; they are left STOPPED then, so the test acts while the work is where the
    look saw it. All are let go when the block ends."""
    def until(look: Callable[[], T | None], timeout: float, burst: float = 0.02) -> T:
        end = time.monotonic() + timeout
        while True:
            send(signal.SIGSTOP)
            found = look()
            if found:
                return found
            if time.monotonic() >= end:
                raise AssertionError(f"not true after {timeout:g} s of stepped work: {look}")
            send(signal.SIGCONT)
            time.sleep(burst)

    try:
        yield until
    finally:
        send(signal.SIGCONT)
