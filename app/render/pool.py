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
import threading
import time
from collections import deque
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable

from ..config import available_cpus
from ..deadline import Deadline
from ..errors import DeadlineExceeded, RenderFailed, RenderTooLarge
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


class ProcessDied(Exception):
    """Set on a task whose render process died under it (the OOM killer, a crash in native code, a
    kill after an ignored cancellation): that task fails, no other."""


@dataclass
class _Lane:
    """One render process: a one-process executor and the task it runs now (None: idle)."""

    executor: cf.ProcessPoolExecutor
    task: PoolTask | None = None


class RenderPool:
    """A lazily started pool of ``processes`` spawn-started render processes.

    Each process is a lane of its own (a one-process ``ProcessPoolExecutor``) that runs one task at a
    time, handed to it from this pool's queue when it is idle. A process that dies (the OOM killer,
    a SIGSEGV) fails only the task it ran: its lane gets a fresh process, and the tasks running in
    the other lanes, other clients' renders among them, go on. (One ``ProcessPoolExecutor`` for all
    processes marks itself broken when any of its processes dies and fails every task in flight.)

    Each process runs under a hard memory limit (``memory_limit_mb``, ``RLIMIT_DATA``: its heap and
    private mappings, see :func:`app.render.process.init_process`): a task that asks for more gets
    ``MemoryError`` in its own process, answered as :class:`RenderTooLarge`, before the pod's
    cgroup is full and the OOM killer picks a process.

    Arguments and results travel through files in ``spill_dir``, and only their paths through the
    executor's pipes. A monkey-patched process must never make a large blocking pipe write: a
    multi-MB task blocks the whole gevent loop in ``os.write`` until a child reads it, while the
    children are blocked writing their multi-MB results back to that same loop (measured: a
    3-motion request stalled until its deadline).

    ``warm_up(seconds)``: a task that imports what the tasks need, lingers ``seconds`` and returns
    its pid (:meth:`warm`); the services hand it in (:func:`app.render.steps.warm`).
    """

    def __init__(self, processes: int = 0, spill_dir: str | Path | None = None,
                 warm_up: Callable[[float], int] | None = None, memory_limit_mb: float = 0) -> None:
        self.processes = processes or available_cpus()
        self.warm_up = warm_up
        self.memory_limit_mb = memory_limit_mb
        self._lanes: list[_Lane] | None = None
        self._queue: deque[tuple[PoolTask, Callable[..., Any]]] = deque()
        self._lock = threading.RLock()
        self.spill_dir = Path(spill_dir) if spill_dir else Path(tempfile.mkdtemp(prefix="doodlepod-spill-"))
        self.spill_dir.mkdir(parents=True, exist_ok=True)

    def _executor(self) -> cf.ProcessPoolExecutor:
        limit = int(self.memory_limit_mb * 2**20)
        return cf.ProcessPoolExecutor(
            max_workers=1, mp_context=multiprocessing.get_context("spawn"),
            initializer=init_process, initargs=(RENDER_NICENESS, os.getpid(), limit))

    def start(self) -> "RenderPool":
        with self._lock:
            if self._lanes is None:
                self._lanes = [_Lane(self._executor()) for _ in range(self.processes)]
        return self

    def submit(self, fn: Callable[..., Any], *args: Any) -> PoolTask:
        self.start()
        fd, in_path = tempfile.mkstemp(dir=self.spill_dir, suffix=".in")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(args, fh, protocol=pickle.HIGHEST_PROTOCOL)
        task = PoolTask(cf.Future(), in_path, in_path[:-3] + ".out")
        with self._lock:
            self._queue.append((task, fn))
        self._dispatch()
        return task

    def _dispatch(self) -> None:
        """Hand queued tasks to idle lanes (a task cancelled while queued is dropped)."""
        started: list[tuple[cf.Future, Callable[[cf.Future], None]]] = []
        with self._lock:
            lanes = self._lanes or []
            for lane in lanes:
                while lane.task is None and self._queue:
                    task, fn = self._queue.popleft()
                    if not task.future.set_running_or_notify_cancel():
                        continue  # cancelled while queued: PoolTask.cancel removed its files
                    lane.task = task
                    inner = lane.executor.submit(call_spilled, fn, task.in_path, task.out_path)
                    started.append((inner, partial(self._settle, lane, lane.executor, task)))
        for inner, settle in started:  # outside the lock: a callback may run at once
            inner.add_done_callback(settle)

    def _settle(self, lane: _Lane, executor: cf.ProcessPoolExecutor, task: PoolTask, inner: cf.Future) -> None:
        """A lane's task ended: pass its outcome on, replace the lane's process if it died, and
        hand the lane the next queued task."""
        try:
            if inner.cancelled():
                task.future.cancel() or task.future.set_exception(ProcessDied("the render pool shut down"))
            elif isinstance(inner.exception(), cf.process.BrokenProcessPool):
                log.error("render process of task %s died (exit by a signal or the OOM killer); "
                          "its lane gets a fresh process, other tasks go on", os.path.basename(task.stem))
                with self._lock:
                    if lane.executor is executor and self._lanes is not None:
                        lane.executor = self._executor()
                task.future.set_exception(ProcessDied("the render process died"))
            elif inner.exception() is not None:
                task.future.set_exception(inner.exception())  # type: ignore[arg-type]
            else:
                task.future.set_result(inner.result())
        finally:
            with self._lock:
                if lane.task is task:
                    lane.task = None
            self._dispatch()

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
        except ProcessDied:
            task.remove_files()
            raise RenderFailed(f"a render process died during {stage}; please retry") from None
        except MemoryError:
            task.remove_files()
            raise RenderTooLarge(f"{stage} needs more memory than a render process may use "
                                 f"(DOODLEPOD_RENDER_PROCESS_MEMORY_MB={self.memory_limit_mb:.0f})") from None
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
        (stuck in native code) has its process killed; its lane gets a fresh process."""
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

    def shutdown(self) -> None:
        with self._lock:
            lanes, self._lanes = self._lanes or [], None
            queued, self._queue = list(self._queue), deque()
        for task, _fn in queued:
            task.cancel()
        for lane in lanes:
            lane.executor.shutdown(wait=False, cancel_futures=True)
