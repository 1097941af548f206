"""CPU work off the gevent loop, and the pod-wide bound on requests being animated.

:class:`RenderPool` is a ``ProcessPoolExecutor`` started with the ``spawn`` method (forking a
monkey-patched gevent process is what makes plain multiprocessing hang: gevent#936, gunicorn#1311).
A greenlet waits for a job on a gevent event that the job's done-callback fires through a loop
``async`` watcher (see :func:`app.loop.wait_future`), so the loop keeps serving other requests (and /ping) while
the render processes use the CPUs. Every wait is capped by the request's deadline.

:class:`InflightSlots` bounds the requests being animated across *all* gunicorn workers of a pod:
N lock files in the shared runtime folder, each held with ``flock`` by the request that owns it.
When all are held, one request per slot may wait a bounded few seconds for one (when one is
expected to be free within that time); the others answer 503 + Retry-After at once. Background
work (the studio's previews) never waits, takes a slot only while no one else wants one, and gives
it back when a request wants it. The kernel drops a dead process's locks, so a crashed worker
cannot leak slots.

Progress: a job calls :func:`report_progress` in its render process (frames done, frames total);
the parent reads it with :meth:`PoolJob.progress` while it waits (:meth:`RenderPool.wait`'s
``on_tick``).

Work never outlives its request: :meth:`PoolJob.cancel` stops a job that is queued (it never
starts) or running (its process gets ``SIGUSR1`` and the job raises :class:`JobCancelled`; the
process stays in the pool). Render processes die with the worker that started them
(``PR_SET_PDEATHSIG`` plus a watchdog thread), so a worker killed by SIGKILL, the OOM killer or a
SIGBUS leaves nothing behind.
"""
from __future__ import annotations

import collections
import concurrent.futures as cf
import fcntl
import logging
import math
import multiprocessing
import os
import pickle
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from animator.files import write_atomic

from ..deadline import Deadline
from ..errors import DeadlineExceeded, RenderFailed
from ..loop import wait_future

log = logging.getLogger("doodlepod.render_pool")

#: Niceness added to render processes so the web workers (and health checks) win the CPU.
RENDER_NICENESS = 10


#: Seconds an abandoned job gets to stop after its cancellation before its process is killed.
CANCEL_GRACE_S = 5.0
#: Seconds between a render process's checks that the worker that started it is still alive.
WATCHDOG_PERIOD_S = 1.0
_PR_SET_PDEATHSIG = 1


class JobCancelled(Exception):
    """Raised inside a render process when its request abandoned the job (see :meth:`PoolJob.cancel`)."""


#: In a render process: the cancel-marker path of the job running now (None between jobs).
_running_job: list[str | None] = [None]
#: In a render process: the progress file of the job running now, and when it was last written.
_progress: list[Any] = [None, 0.0]
#: Seconds between two writes of a job's progress file (the last frame is always written).
PROGRESS_EVERY_S = 0.1


def report_progress(done: int, total: int) -> None:
    """In a render process: the running job has made ``done`` of ``total`` frames (throttled to
    :data:`PROGRESS_EVERY_S`; outside a pool job, nothing). An ``animator.render`` progress callback."""
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


def _child_init(niceness: int, parent_pid: int | None = None) -> None:
    # One BLAS/OpenMP thread per process: the pool already has one process per CPU.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    try:
        os.nice(niceness)
    except OSError:
        pass
    if parent_pid is not None:
        _die_with(parent_pid)
    signal.signal(signal.SIGUSR1, _on_cancel_signal)


def _die_with(parent_pid: int) -> None:
    """End this process when ``parent_pid`` (the worker) dies, however it dies.

    The kernel sends SIGKILL on the parent's death (``PR_SET_PDEATHSIG``, Linux); a watchdog thread
    covers what that misses (the parent dying before the call, other kernels).
    """
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:  # the parent died before prctl
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(WATCHDOG_PERIOD_S)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="doodlepod-parent-watchdog", daemon=True).start()


def _on_cancel_signal(signum: int, frame: Any) -> None:
    marker = _running_job[0]
    if marker is not None and os.path.exists(marker):  # a late signal for a finished job is ignored
        raise JobCancelled("the request abandoned this job")


def _call_spilled(fn: Callable[..., Any], in_path: str, out_path: str) -> str:
    """Child side of :meth:`RenderPool.submit`: read the arguments from a file, write the result to one.

    The job first publishes its pid (``<job>.pid``) so that :meth:`PoolJob.cancel` can signal it,
    then checks its cancel marker (``<job>.cancel``): a job cancelled while queued never starts.
    """
    stem = in_path[:-3]
    write_atomic(stem + ".pid", str(os.getpid()).encode(), mode=0o600)
    _running_job[0] = stem + ".cancel"
    _progress[:] = [stem + ".progress", 0.0]
    try:
        if os.path.exists(stem + ".cancel"):
            raise JobCancelled("the request abandoned this job before it started")
        with open(in_path, "rb") as fh:
            args = pickle.load(fh)
        os.unlink(in_path)
        result = fn(*args)
    finally:
        _running_job[0] = None
        _progress[0] = None
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

    @property
    def stem(self) -> str:
        return self.in_path[:-3]

    def cancel(self) -> None:
        """Stop the job: dropped if still queued, else its process is told to abandon it. The spill
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
        """(frames done, frames total) as the job last reported them (:func:`report_progress`), or None."""
        try:
            with open(self.stem + ".progress") as fh:
                done, total = (int(v) for v in fh.read().split())
        except (OSError, ValueError):
            return None
        return done, total

    def pid(self) -> int | None:
        """The render process running the job (None while it is queued)."""
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
    multi-MB job blocks the whole gevent loop in ``os.write`` until a child reads it, while the
    children are blocked writing their multi-MB results back to that same loop (measured: a
    3-motion request stalled until its deadline).
    """

    def __init__(self, processes: int = 0, spill_dir: str | Path | None = None) -> None:
        self.processes = processes or available_cpus()
        self._executor: cf.ProcessPoolExecutor | None = None
        self.spill_dir = Path(spill_dir) if spill_dir else Path(tempfile.mkdtemp(prefix="doodlepod-spill-"))
        self.spill_dir.mkdir(parents=True, exist_ok=True)

    def start(self) -> "RenderPool":
        if self._executor is None:
            self._executor = cf.ProcessPoolExecutor(
                max_workers=self.processes, mp_context=multiprocessing.get_context("spawn"),
                initializer=_child_init, initargs=(RENDER_NICENESS, os.getpid()))
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

    def wait(self, job: PoolJob, deadline: Deadline, stage: str, on_tick: Callable[[], None] | None = None,
             tick_s: float = 0.1) -> Any:
        """The job's result, waited for without blocking the gevent loop; past the deadline the job
        is cancelled and :class:`DeadlineExceeded` raised. ``on_tick()`` is called every ``tick_s``
        while the job runs (to report its progress, or to raise and so abandon it)."""
        try:
            while True:
                timeout = deadline.check(stage)
                if on_tick is None or timeout <= tick_s:
                    out_path = wait_future(job.future, timeout)
                    break
                try:
                    out_path = wait_future(job.future, tick_s)
                    break
                except cf.TimeoutError:
                    on_tick()
        except (cf.TimeoutError, DeadlineExceeded):
            self.abandon([job])
            raise deadline.exceeded(stage) from None
        except cf.process.BrokenProcessPool:
            job.remove_files()
            self._restart()
            raise RenderFailed(f"a render process died during {stage}; please retry") from None
        except BaseException:
            self.abandon([job])
            raise
        try:
            with open(out_path, "rb") as fh:
                return pickle.load(fh)
        finally:
            job.remove_files()

    def run(self, fn: Callable[..., Any], *args: Any, deadline: Deadline, stage: str) -> Any:
        return self.wait(self.submit(fn, *args), deadline, stage)

    def abandon(self, jobs: list[PoolJob], grace_s: float = CANCEL_GRACE_S) -> None:
        """Cancel ``jobs`` and return once none of them runs any more: the render processes are
        free again when this returns. A job still running ``grace_s`` after its cancellation
        (stuck in native code) has its process killed; the pool restarts for the next request."""
        live = [j for j in jobs if not j.future.done()]
        for job in live:
            job.cancel()
        end = time.monotonic() + grace_s
        for job in live:
            try:
                wait_future(job.future, max(0.0, end - time.monotonic()))
            except cf.TimeoutError:
                pid = job.pid()
                log.error("render job %s ignored its cancellation for %.0f s; killing process %s",
                          os.path.basename(job.stem), grace_s, pid)
                if pid is not None:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            except Exception:  # noqa: BLE001, S110 - JobCancelled or the job's own error: it has ended
                pass

    def warm(self) -> None:
        """Start every process now (imports included) instead of on the first request."""
        from .steps import warm
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


def available_cpus(cpu_max: str | Path = "/sys/fs/cgroup/cpu.max") -> int:
    """CPUs this process may use: its affinity mask, capped by a cgroup v2 CPU quota (``cpu_max``,
    "QUOTA PERIOD" in microseconds, what a Kubernetes CPU limit sets), rounded up; at least 1."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    try:
        quota, period = Path(cpu_max).read_text().split()[:2]
        if quota != "max" and float(period) > 0:
            n = min(n, max(1, math.ceil(float(quota) / float(period))))
    except (OSError, ValueError):
        pass
    return max(1, n)


#: Priority of a person's own work (a render, a save, an upload): it may wait for a slot, and takes
#: one back from background work.
RENDER = "render"
#: Priority of background work (the studio's motion previews): it never waits, takes a slot only
#: while no request wants one, and gives its slot up (answering 503) when one does.
BACKGROUND = "background"


class InflightSlots:
    """``count`` slots shared by every process that uses the same ``folder``, and a waiting room of
    ``waiters`` places (default: one per slot).

    :meth:`acquire` takes a free slot at once; when all are held, a :data:`RENDER` request asks the
    :data:`BACKGROUND` holders to give theirs up and may wait for one in the waiting room: at most
    ``wait_s``, only when a slot is expected to be free by then and the pod has turned nobody away
    lately (:meth:`overloaded`); else, and when the room is full, it is refused at once: the caller
    answers 503 with :meth:`retry_after`.

    The folder also keeps what an honest Retry-After needs: each held slot's file holds the time it
    was taken and its priority, each taken waiting place the waiter's pid, and ``durations`` the
    moving average of how long a slot is held by a request that completes (:meth:`Slot.release`
    with ``completed=True``; background work is not counted). :meth:`retry_after` is then the time
    until the first held slot is expected to be free, plus a slot time per slot for each request
    waiting, plus half a slot time per slot for each client this process turned away shortly before
    (they queue for the same slots).

    Signals between processes are files: ``wanted`` (its modification time: a request wanted a slot
    that recently, so background work stays away) and ``slot-N.yield`` (the background holder of
    slot N is asked to give it up; it checks while it waits for its renders, :meth:`Slot.check`).
    """

    #: weight of the newest duration in the moving average
    SMOOTHING = 0.3
    #: Seconds a request's want keeps background work away after it last said so.
    WANT_S = 1.0
    #: Seconds between a waiting request's tries.
    POLL_S = 0.05

    def __init__(self, folder: str | Path, count: int, waiters: int | None = None) -> None:
        self.folder = Path(folder)
        self.count = count
        self.waiters = count if waiters is None else waiters
        self._refused: collections.deque[float] = collections.deque()  # this process's recent 503s
        self.folder.mkdir(parents=True, exist_ok=True)
        for i in range(count):
            (self.folder / f"slot-{i}").touch(exist_ok=True)
        for i in range(self.waiters):
            (self.folder / f"wait-{i}").touch(exist_ok=True)

    def try_acquire(self, priority: str = RENDER) -> "Slot | None":
        """A held slot, or None at once when all ``count`` are taken (or, for background work,
        while a request wants one)."""
        if priority == BACKGROUND and self.wanted():
            return None
        start = os.getpid() % max(1, self.count)  # spread workers' first tries
        for j in range(self.count):
            index = (start + j) % self.count
            fd = _lock_nowait(self.folder / f"slot-{index}")
            if fd is not None:
                return Slot(fd, self, index, priority)
        return None

    def acquire(self, priority: str = RENDER, wait_s: float = 0.0) -> "Slot | None":
        """A held slot: at once, or (a :data:`RENDER` request) after waiting at most ``wait_s`` in
        the waiting room while background holders give theirs up; None when refused. A request
        does not pass those already waiting: while the room is not empty, a freed slot is theirs."""
        if priority == BACKGROUND:
            return self.try_acquire(priority)
        slot = None if self.waiting() else self.try_acquire(priority)
        if slot is not None:
            return slot
        self.want()
        if wait_s <= 0 or self.overloaded() or self.expected_wait() > wait_s:
            return None
        place = self._take_place()
        if place is None:
            return None
        try:
            end = time.monotonic() + wait_s
            while time.monotonic() < end:
                time.sleep(self.POLL_S)  # gevent's sleep in the web workers: the loop goes on
                slot = self.try_acquire(priority)
                if slot is not None:
                    return slot
                self.want()
            return None
        finally:
            os.ftruncate(place, 0)
            os.close(place)

    def want(self) -> None:
        """Say that a request wants a slot now: background work takes none for :data:`WANT_S`, and
        the background holders are asked to give theirs up."""
        try:
            (self.folder / "wanted").touch()
            for index, (_, priority) in self._holders().items():
                if priority == BACKGROUND:
                    (self.folder / f"slot-{index}.yield").touch()
        except OSError as exc:
            log.warning("cannot signal a wanted render slot: %s", exc)

    def overloaded(self) -> bool:
        """Whether the pod turned a request away within the last mean slot time (:meth:`retry_after`
        marks each refusal). Then nobody waits: under overload a waiting room adds a slot time to
        every admitted request and not one animation per second (the slot is never idle anyway);
        its use is a neighbour's few seconds on a pod that is busy, not overloaded."""
        try:
            age = time.time() - (self.folder / "refused").stat().st_mtime
        except OSError:
            return False
        return age < max(self.mean_duration() or 2.0, 2.0)

    def wanted(self) -> bool:
        try:
            return time.time() - (self.folder / "wanted").stat().st_mtime < self.WANT_S
        except OSError:
            return False

    def waiting(self) -> int:
        """Requests in the waiting room now (places whose file names a pid)."""
        return sum(1 for i in range(self.waiters) if _read(self.folder / f"wait-{i}").strip())

    def expected_wait(self) -> float:
        """Seconds until a slot is expected to be free for a request: 0 when one is free or held by
        background work, else the mean slot time less the oldest holder's age, plus a slot time per
        slot for each request already waiting."""
        holders = self._holders()
        if len(holders) < self.count or any(p == BACKGROUND for _, p in holders.values()):
            return 0.0
        mean = self.mean_duration() or 2.0
        now = time.time()
        remaining = min((max(0.0, mean - (now - taken)) for taken, _ in holders.values()), default=0.0)
        return remaining + mean * self.waiting() / max(1, self.count)

    def _holders(self) -> dict[int, tuple[float, str]]:
        """Held slots: index -> (taken, priority), as their files say."""
        held = {}
        for i in range(self.count):
            parts = _read(self.folder / f"slot-{i}").split()
            try:
                taken = float(parts[0]) if parts else math.nan
            except ValueError:
                continue
            if math.isfinite(taken):
                held[i] = (taken, parts[1] if len(parts) > 1 else RENDER)
        return held

    def _take_place(self) -> int | None:
        for i in range(self.waiters):
            fd = _lock_nowait(self.folder / f"wait-{i}")
            if fd is not None:
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(os.getpid()).encode(), 0)
                return fd
        return None

    def mean_duration(self) -> float | None:
        """Moving average of the seconds a completed request held its slot, or None before the first."""
        try:
            value = float((self.folder / "durations").read_text())
        except (OSError, ValueError):
            return None
        return value if math.isfinite(value) and value >= 0 else None

    def record(self, seconds: float) -> None:
        """Fold one completed request's slot time into the moving average (a lost race between two
        workers loses one sample, which an average shrugs off)."""
        old = self.mean_duration()
        value = seconds if old is None else (1 - self.SMOOTHING) * old + self.SMOOTHING * seconds
        tmp = self.folder / f"durations.{os.getpid()}"
        tmp.write_text(f"{value:.4f}")
        os.replace(tmp, self.folder / "durations")

    def retry_after(self, fallback: float = 2.0, longest: int = 60) -> int:
        """Whole seconds until a slot is likely free for this client: the mean slot time minus how
        long the oldest holder has had its slot, plus a mean slot time per slot for each request in
        the waiting room, plus half a mean slot time per slot for each client turned away before it
        within the last mean slot time. They are waiting too: telling them all the same moment
        would bring them back at once, to be turned away again; spread over their turns (half
        turns: they come back a little faster than slots free, so a freed slot seldom waits for a
        sleeping client). ``fallback`` is the mean before any request completed; 1 .. ``longest``.
        Call it once per refused request."""
        mean = self.mean_duration() or fallback
        now = time.time()
        remaining = mean
        for taken, _ in self._holders().values():
            remaining = min(remaining, mean - (now - taken))
        try:
            (self.folder / "refused").touch()  # see overloaded()
        except OSError as exc:
            log.warning("cannot mark a refused request: %s", exc)
        refused = self._refused
        while refused and refused[0] < now - mean:
            refused.popleft()
        ahead = len(refused)
        refused.append(now)
        slots = max(1, self.count)
        wait = max(remaining, 0.0) + mean * self.waiting() / slots + mean * ahead / (2 * slots)
        return int(min(longest, max(1, math.ceil(wait))))


def _lock_nowait(path: Path) -> int | None:
    """An open descriptor of ``path`` holding its exclusive flock, or None when another holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


class Slot:
    def __init__(self, fd: int, slots: InflightSlots | None = None, index: int = 0,
                 priority: str = RENDER) -> None:
        self._fd: int | None = fd
        self._slots = slots
        self.index = index
        self.priority = priority
        self.taken = time.time()
        self._yield = slots.folder / f"slot-{index}.yield" if slots is not None else None
        if self._yield is not None:
            _remove(str(self._yield))  # a request for the previous holder
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{self.taken:.3f} {priority}".encode(), 0)  # read by InflightSlots

    def asked_to_yield(self) -> bool:
        """Background work: whether a request asked for this slot (see :meth:`InflightSlots.want`)."""
        return self.priority == BACKGROUND and self._yield is not None and self._yield.exists()

    def check(self) -> None:
        """Raise :class:`Overloaded` (503) when this background work must give its slot up: called
        while it waits for its renders, which the error then cancels."""
        if self.asked_to_yield():
            from ..errors import Overloaded

            mean = (self._slots.mean_duration() if self._slots is not None else None) or 2.0
            wait = int(max(1, math.ceil(mean)))
            raise Overloaded(f"a render took this background request's slot; retry in {wait} s", wait)

    def release(self, completed: bool = False) -> None:
        """Give the slot back; ``completed``: the request rendered, so its time joins the average
        (a person's work only: background work is shorter and would make the estimate lie)."""
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing the file drops its flock
            self._fd = None
            if completed and self._slots is not None and self.priority == RENDER:
                try:
                    self._slots.record(time.time() - self.taken)
                except OSError as exc:
                    log.warning("cannot record the render time for Retry-After: %s", exc)

    def __enter__(self) -> "Slot":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.release(completed=exc_type is None)
