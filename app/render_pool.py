"""CPU work off the gevent loop, and the pod-wide bound on requests being animated.

:class:`RenderPool` is a ``ProcessPoolExecutor`` started with the ``spawn`` method (forking a
monkey-patched gevent process is what makes plain multiprocessing hang: gevent#936, gunicorn#1311).
A greenlet waits for a job on a gevent event that the job's done-callback fires through a loop
``async`` watcher (see :func:`_result`), so the loop keeps serving other requests (and /ping) while
the render processes use the CPUs. Every wait is capped by the request's deadline.

:class:`InflightSlots` bounds the requests being animated across *all* gunicorn workers of a pod:
N lock files in the shared runtime folder, each held with ``flock`` by the request that owns it.
Taking a slot never waits: when all are held the caller answers 503 + Retry-After at once. The
kernel drops a dead process's locks, so a crashed worker cannot leak slots.
"""
from __future__ import annotations

import concurrent.futures as cf
import fcntl
import logging
import multiprocessing
import os
import pickle
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .deadline import Deadline
from .errors import RenderFailed
from .loop import wait_future

log = logging.getLogger("doodlepod.render_pool")

#: Niceness added to render processes so the web workers (and health checks) win the CPU.
RENDER_NICENESS = 10


def _child_init(niceness: int) -> None:
    # One BLAS/OpenMP thread per process: the pool already has one process per CPU.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    try:
        os.nice(niceness)
    except OSError:
        pass


def _call_spilled(fn: Callable[..., Any], in_path: str, out_path: str) -> str:
    """Child side of :meth:`RenderPool.submit`: read the arguments from a file, write the result to one."""
    with open(in_path, "rb") as fh:
        args = pickle.load(fh)
    os.unlink(in_path)
    result = fn(*args)
    # No temporary name needed: the parent opens the file only after this function has returned,
    # and removes it, complete or not, whatever happened.
    with open(out_path, "wb") as fh:
        pickle.dump(result, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return out_path


@dataclass
class PoolJob:
    """A submitted job: its future (which resolves to the result file) and its spill files."""

    future: cf.Future
    in_path: str
    out_path: str

    def cancel(self) -> None:
        self.future.cancel()


def _remove(*paths: str) -> None:
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


class RenderPool:
    """A lazily started process pool of ``processes`` spawn-started workers.

    Arguments and results travel through files in ``spill_dir``, and only their paths through the
    executor's pipes. A monkey-patched process must never make a large blocking pipe write: a
    multi-MB job blocks the whole gevent loop in ``os.write`` until a child reads it, while the
    children are blocked writing their multi-MB results back to that same loop (measured: a
    3-motion request stalled until its deadline).
    """

    def __init__(self, processes: int = 0, spill_dir: str | Path | None = None) -> None:
        self.processes = processes or os.cpu_count() or 1
        self._executor: cf.ProcessPoolExecutor | None = None
        self.spill_dir = Path(spill_dir) if spill_dir else Path(tempfile.mkdtemp(prefix="doodlepod-spill-"))
        self.spill_dir.mkdir(parents=True, exist_ok=True)

    def start(self) -> "RenderPool":
        if self._executor is None:
            self._executor = cf.ProcessPoolExecutor(
                max_workers=self.processes, mp_context=multiprocessing.get_context("spawn"),
                initializer=_child_init, initargs=(RENDER_NICENESS,))
        return self

    def submit(self, fn: Callable[..., Any], *args: Any) -> PoolJob:
        self.start()
        fd, in_path = tempfile.mkstemp(dir=self.spill_dir, suffix=".in")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(args, fh, protocol=pickle.HIGHEST_PROTOCOL)
        out_path = in_path[:-3] + ".out"
        try:
            future = self._executor.submit(_call_spilled, fn, in_path, out_path)  # type: ignore[union-attr]
        except cf.process.BrokenProcessPool:
            self._restart()
            future = self._executor.submit(_call_spilled, fn, in_path, out_path)  # type: ignore[union-attr]
        return PoolJob(future, in_path, out_path)

    def wait(self, job: PoolJob, deadline: Deadline, stage: str) -> Any:
        """The job's result, waited for without blocking the gevent loop; raises past the deadline."""
        timeout = deadline.check(stage)
        try:
            out_path = wait_future(job.future, timeout)
        except cf.TimeoutError:
            if not job.future.cancel():  # running: clean its files up when it finishes
                job.future.add_done_callback(lambda _f: _remove(job.in_path, job.out_path))
            else:
                _remove(job.in_path, job.out_path)
            raise deadline.exceeded(stage) from None
        except cf.process.BrokenProcessPool:
            _remove(job.in_path, job.out_path)
            self._restart()
            raise RenderFailed(f"a render process died during {stage}; please retry") from None
        except BaseException:
            _remove(job.in_path, job.out_path)
            raise
        try:
            with open(out_path, "rb") as fh:
                return pickle.load(fh)
        finally:
            _remove(job.in_path, job.out_path)

    def run(self, fn: Callable[..., Any], *args: Any, deadline: Deadline, stage: str) -> Any:
        return self.wait(self.submit(fn, *args), deadline, stage)

    def warm(self) -> None:
        """Start every process now (imports included) instead of on the first request."""
        from .jobs import warm
        futures = [self.submit(warm, 0.3) for _ in range(self.processes)]
        deadline = Deadline(300)
        pids = {self.wait(f, deadline, "warm-up") for f in futures}
        log.info("render pool ready: %d processes %s", len(pids), sorted(pids))

    def _restart(self) -> None:
        old, self._executor = self._executor, None
        if old is not None:
            old.shutdown(wait=False, cancel_futures=True)
        self.start()

    def shutdown(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


class InflightSlots:
    """``count`` non-blocking slots shared by every process that uses the same ``folder``."""

    def __init__(self, folder: str | Path, count: int) -> None:
        self.folder = Path(folder)
        self.count = count
        self.folder.mkdir(parents=True, exist_ok=True)
        for i in range(count):
            (self.folder / f"slot-{i}").touch(exist_ok=True)

    def try_acquire(self) -> "Slot | None":
        """A held slot, or None at once when all ``count`` are taken."""
        start = os.getpid() % max(1, self.count)  # spread workers' first tries
        for j in range(self.count):
            path = self.folder / f"slot-{(start + j) % self.count}"
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return Slot(fd)
        return None


class Slot:
    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the file drops its flock
            self._fd = None

    def __enter__(self) -> "Slot":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()
