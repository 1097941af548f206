"""CPU work off the gevent loop, and the pod-wide bound on requests being animated.

:class:`RenderPool` is a ``ProcessPoolExecutor`` started with the ``spawn`` method (forking a
monkey-patched gevent process is what makes plain multiprocessing hang: gevent#936, gunicorn#1311).
A greenlet waits for a job by handing ``future.result`` to gevent's native thread pool
(``gevent.get_hub().threadpool.apply``), so the loop keeps serving other requests (and /ping) while
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
from pathlib import Path
from typing import Any, Callable

from .deadline import Deadline
from .errors import ApiError, DeadlineExceeded

log = logging.getLogger("doodlepod.render_pool")

#: Niceness added to render processes so the web workers (and health checks) win the CPU.
RENDER_NICENESS = 5


class RenderFailed(ApiError):
    """A render process died (e.g. killed for memory); the pool is restarted for the next request."""
    status, code = 500, "render_failed"


def _child_init(niceness: int) -> None:
    # One BLAS/OpenMP thread per process: the pool already has one process per CPU.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    try:
        os.nice(niceness)
    except OSError:
        pass


class RenderPool:
    """A lazily started process pool of ``processes`` spawn-started workers."""

    def __init__(self, processes: int = 0) -> None:
        self.processes = processes or os.cpu_count() or 1
        self._executor: cf.ProcessPoolExecutor | None = None

    def start(self) -> "RenderPool":
        if self._executor is None:
            self._executor = cf.ProcessPoolExecutor(
                max_workers=self.processes, mp_context=multiprocessing.get_context("spawn"),
                initializer=_child_init, initargs=(RENDER_NICENESS,))
        return self

    def submit(self, fn: Callable[..., Any], *args: Any) -> cf.Future:
        self.start()
        try:
            return self._executor.submit(fn, *args)  # type: ignore[union-attr]
        except cf.process.BrokenProcessPool:
            self._restart()
            return self._executor.submit(fn, *args)  # type: ignore[union-attr]

    def wait(self, future: cf.Future, deadline: Deadline, stage: str) -> Any:
        """The job's result, waited for without blocking the gevent loop; raises past the deadline."""
        timeout = deadline.check(stage)
        try:
            return _blocking(future.result, timeout)
        except cf.TimeoutError:
            future.cancel()
            raise DeadlineExceeded(f"request deadline of {deadline.seconds:g} s passed during {stage}") from None
        except cf.process.BrokenProcessPool:
            self._restart()
            raise RenderFailed(f"a render process died during {stage}; please retry") from None

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


def _blocking(fn: Callable[..., Any], *args: Any) -> Any:
    """Run a blocking call in gevent's native thread pool when under gevent, else directly."""
    try:
        from gevent import monkey
        patched = monkey.is_module_patched("socket")
    except ImportError:
        patched = False
    if not patched:
        return fn(*args)
    import gevent
    return gevent.get_hub().threadpool.apply(fn, args)


def ensure_threadpool_size(size: int) -> None:
    """Let gevent's native thread pool hold one waiter per request in flight (default max is 10)."""
    try:
        import gevent
        pool = gevent.get_hub().threadpool
        if pool.maxsize < size:
            pool.maxsize = size
    except ImportError:
        pass


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
