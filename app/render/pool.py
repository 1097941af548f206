"""CPU work off the gevent loop: a pool of render processes, and the tasks submitted to it.

:class:`RenderPool` is a ``ProcessPoolExecutor`` started with the ``spawn`` method (forking a
monkey-patched gevent process is what makes plain multiprocessing hang: gevent#936, gunicorn#1311).
A greenlet waits for a task on a gevent event that the task's done-callback fires through a loop
``async`` watcher (see :func:`app.loop.wait_future`), so the loop keeps serving other requests (and
/ping) while the render processes use the CPUs. Every wait is capped by the request's deadline.

What runs inside the render processes is :mod:`app.render.process`; how many requests may render
at once, pod-wide, is :mod:`app.render.admission`.

Progress: a task calls :func:`app.render.process.report_progress` in its render process (frames
done, frames total); the parent reads it with :meth:`PoolTask.progress` while it waits
(:meth:`RenderPool.wait`'s ``on_tick``).

Work never outlives its request: :meth:`PoolTask.cancel` stops a task that is queued (it never
starts) or running (its process gets ``SIGUSR1`` and the task raises
:class:`app.render.process.TaskCancelled`; the process stays in the pool). Render processes die with
the worker that started them, so a worker killed by SIGKILL, the OOM killer or a SIGBUS leaves
nothing behind.
"""
from __future__ import annotations

import concurrent.futures as cf
import logging
import multiprocessing
import os
import pickle
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..config import available_cpus
from ..deadline import Deadline
from ..errors import DeadlineExceeded, RenderFailed
from ..loop import wait_future
from .process import call_spilled, init_process

log = logging.getLogger("doodlepod.render_pool")

#: Niceness added to render processes so the web workers (and health checks) win the CPU.
RENDER_NICENESS = 10
#: Seconds an abandoned task gets to stop after its cancellation before its process is killed.
CANCEL_GRACE_S = 5.0


@dataclass
class PoolTask:
    """A submitted task: its future (which resolves to the result file) and its spill files."""

    future: cf.Future
    in_path: str
    out_path: str

    @property
    def stem(self) -> str:
        return self.in_path[:-3]

    def cancel(self) -> None:
        """Stop the task: dropped if still queued, else its process is told to abandon it. The spill
        files go once the future settles."""
        if self.future.cancel():
            self.remove_files()
            return
        if self.future.done():
            return
        with open(self.stem + ".cancel", "w"):
            pass
        self.future.add_done_callback(lambda _f: self.remove_files())
        pid = self.pid()
        if pid is not None:
            try:
                os.kill(pid, signal.SIGUSR1)
            except ProcessLookupError:
                pass

    def progress(self) -> tuple[int, int] | None:
        """(frames done, frames total) as the task last reported them
        (:func:`app.render.process.report_progress`), or None."""
        try:
            with open(self.stem + ".progress") as fh:
                done, total = (int(v) for v in fh.read().split())
        except (OSError, ValueError):
            return None
        return done, total

    def pid(self) -> int | None:
        """The render process running the task (None while it is queued)."""
        try:
            with open(self.stem + ".pid") as fh:
                return int(fh.read())
        except (FileNotFoundError, ValueError):
            return None

    def remove_files(self) -> None:
        _remove(self.in_path, self.out_path, self.stem + ".pid", self.stem + ".cancel", self.stem + ".progress")


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
    multi-MB task blocks the whole gevent loop in ``os.write`` until a child reads it, while the
    children are blocked writing their multi-MB results back to that same loop (measured: a
    3-motion request stalled until its deadline).

    ``warm_up(seconds)``: a task that imports what the tasks need, lingers ``seconds`` and returns
    its pid (:meth:`warm`); the services hand it in (:func:`app.render.steps.warm`).
    """

    def __init__(self, processes: int = 0, spill_dir: str | Path | None = None,
                 warm_up: Callable[[float], int] | None = None) -> None:
        self.processes = processes or available_cpus()
        self.warm_up = warm_up
        self._executor: cf.ProcessPoolExecutor | None = None
        self.spill_dir = Path(spill_dir) if spill_dir else Path(tempfile.mkdtemp(prefix="doodlepod-spill-"))
        self.spill_dir.mkdir(parents=True, exist_ok=True)

    def start(self) -> "RenderPool":
        if self._executor is None:
            self._executor = cf.ProcessPoolExecutor(
                max_workers=self.processes, mp_context=multiprocessing.get_context("spawn"),
                initializer=init_process, initargs=(RENDER_NICENESS, os.getpid()))
        return self

    def submit(self, fn: Callable[..., Any], *args: Any) -> PoolTask:
        self.start()
        fd, in_path = tempfile.mkstemp(dir=self.spill_dir, suffix=".in")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(args, fh, protocol=pickle.HIGHEST_PROTOCOL)
        out_path = in_path[:-3] + ".out"
        try:
            future = self._executor.submit(call_spilled, fn, in_path, out_path)  # type: ignore[union-attr]
        except cf.process.BrokenProcessPool:
            self._restart()
            future = self._executor.submit(call_spilled, fn, in_path, out_path)  # type: ignore[union-attr]
        return PoolTask(future, in_path, out_path)

    def wait(self, task: PoolTask, deadline: Deadline, stage: str, on_tick: Callable[[], None] | None = None,
             tick_s: float = 0.1) -> Any:
        """The task's result, waited for without blocking the gevent loop; past the deadline the task
        is cancelled and :class:`DeadlineExceeded` raised. ``on_tick()`` is called every ``tick_s``
        while the task runs (to report its progress, or to raise and so abandon it)."""
        try:
            while True:
                timeout = deadline.check(stage)
                if on_tick is None or timeout <= tick_s:
                    out_path = wait_future(task.future, timeout)
                    break
                try:
                    out_path = wait_future(task.future, tick_s)
                    break
                except cf.TimeoutError:
                    on_tick()
        except (cf.TimeoutError, DeadlineExceeded):
            self.abandon([task])
            raise deadline.exceeded(stage) from None
        except cf.process.BrokenProcessPool:
            task.remove_files()
            self._restart()
            raise RenderFailed(f"a render process died during {stage}; please retry") from None
        except BaseException:
            self.abandon([task])
            raise
        try:
            with open(out_path, "rb") as fh:
                return pickle.load(fh)
        finally:
            task.remove_files()

    def run(self, fn: Callable[..., Any], *args: Any, deadline: Deadline, stage: str) -> Any:
        return self.wait(self.submit(fn, *args), deadline, stage)

    def abandon(self, tasks: list[PoolTask], grace_s: float = CANCEL_GRACE_S) -> None:
        """Cancel ``tasks`` and return once none of them runs any more: the render processes are
        free again when this returns. A task still running ``grace_s`` after its cancellation
        (stuck in native code) has its process killed; the pool restarts for the next request."""
        live = [t for t in tasks if not t.future.done()]
        for task in live:
            task.cancel()
        end = time.monotonic() + grace_s
        for task in live:
            try:
                wait_future(task.future, max(0.0, end - time.monotonic()))
            except cf.TimeoutError:
                pid = task.pid()
                log.error("render task %s ignored its cancellation for %.0f s; killing process %s",
                          os.path.basename(task.stem), grace_s, pid)
                if pid is not None:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            except Exception:  # noqa: BLE001, S110 - TaskCancelled or the task's own error: it has ended
                pass

    def warm(self) -> None:
        """Start every process now, imports included (each runs the pool's ``warm_up`` task once),
        instead of on the first request."""
        if self.warm_up is None:
            self.start()
            return
        tasks = [self.submit(self.warm_up, 0.3) for _ in range(self.processes)]
        deadline = Deadline(300)
        pids = {self.wait(t, deadline, "warm-up") for t in tasks}
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
