"""The render processes' side of the pool: what runs inside each spawned process.

Each process is started by :class:`app.render.pool.RenderPool` with :func:`init_process`: it runs
niced, dies with the worker that started it (``PR_SET_PDEATHSIG``), and a
``SIGUSR1`` makes its running task raise :class:`TaskCancelled`. Each task goes through
:func:`call_spilled` (arguments and result in files), and may tell how far it got with
:func:`report_progress`, which the pool's side reads (:meth:`app.render.pool.PoolTask.progress`).

This module imports neither Flask, gevent nor the metrics: it runs where they do not.
"""
from __future__ import annotations

import os
import pickle
import resource
import signal
import time
from typing import Any, Callable

from animator.files import write_atomic
from animator.processes import die_with_parent


class TaskCancelled(Exception):
    """Raised inside a render process when its request abandoned the task
    (see :meth:`app.render.pool.PoolTask.cancel`)."""


#: The cancel-marker path of the task running now (None between tasks).
_running_task: list[str | None] = [None]
#: The progress file of the task running now, and when it was last written.
_progress: list[Any] = [None, 0.0]
#: Seconds between two writes of a task's progress file (the last frame is always written).
PROGRESS_EVERY_S = 0.1


def report_progress(done: int, total: int) -> None:
    """In a render process: the running task has made ``done`` of ``total`` frames (throttled to
    :data:`PROGRESS_EVERY_S`; outside a pool task, nothing). An ``animator.render`` progress callback."""
    path = _progress[0]
    if path is None:
        return
    now = time.monotonic()
    if done < total and done and now - _progress[1] < PROGRESS_EVERY_S:
        return
    _progress[1] = now
    tmp = f"{path}.{os.getpid()}"
    try:
        with open(tmp, "w") as fh:
            fh.write(f"{int(done)} {int(total)}")
        os.replace(tmp, path)
    except OSError:  # progress is a courtesy: a full disk must not fail the render
        pass


def init_process(niceness: int, parent_pid: int | None = None, memory_limit: int = 0) -> None:
    """The initializer of each render process: one BLAS thread, ``niceness`` added, death with
    ``parent_pid`` (the worker), SIGUSR1 cancelling the running task, and at most ``memory_limit``
    bytes of data (0: no limit of its own).

    The limit is ``RLIMIT_DATA``: the heap and every private writable mapping (numpy's large arrays
    are anonymous mmaps), not the shared libraries or the reservations of malloc's arenas, so it
    bounds what the process can commit. Past it an allocation fails with ``MemoryError`` in the
    task that asked, while the process (and the pod's cgroup) stays well."""
    if memory_limit > 0:
        resource.setrlimit(resource.RLIMIT_DATA, (memory_limit, memory_limit))
    # one BLAS/OpenMP thread per process: the pool already has one process per CPU
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    try:
        os.nice(niceness)
    except OSError:
        pass
    if parent_pid is not None:
        die_with_parent(parent_pid)
    signal.signal(signal.SIGUSR1, _on_cancel_signal)


def _on_cancel_signal(signum: int, frame: Any) -> None:
    marker = _running_task[0]
    if marker is not None and os.path.exists(marker):  # a late signal for a finished task is ignored
        raise TaskCancelled("the request abandoned this task")


def call_spilled(fn: Callable[..., Any], in_path: str, out_path: str) -> str:
    """The process side of :meth:`app.render.pool.RenderPool.submit`: read the arguments from a
    file, write the result to one.

    The task first publishes its pid (``<task>.pid``) so that :meth:`app.render.pool.PoolTask.cancel`
    can signal it, then checks its cancel marker (``<task>.cancel``): a task cancelled while queued
    never starts.
    """
    stem = in_path[:-3]
    write_atomic(stem + ".pid", str(os.getpid()).encode(), mode=0o600)
    _running_task[0] = stem + ".cancel"
    _progress[:] = [stem + ".progress", 0.0]
    try:
        if os.path.exists(stem + ".cancel"):
            raise TaskCancelled("the request abandoned this task before it started")
        with open(in_path, "rb") as fh:
            args = pickle.load(fh)
        os.unlink(in_path)
        result = fn(*args)
    finally:
        _running_task[0] = None
        _progress[0] = None
    # No temporary name needed: the parent opens the file only after this function has returned,
    # and removes it, complete or not, whatever happened.
    with open(out_path, "wb") as fh:
        pickle.dump(result, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return out_path
