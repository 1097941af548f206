"""Admission: the pod-wide bound on requests being animated.

:class:`InflightSlots` bounds the requests being animated across *all* gunicorn workers of a pod:
N lock files in the shared runtime folder, each held with ``flock`` by the request that owns it.
When all are held, one request per slot may wait a bounded few seconds for one (when one is
expected to be free within that time); the others answer 503 + Retry-After at once. Background
work (the studio's previews) never waits, takes a slot only while no one else wants one, and gives
it back when a request wants it. The kernel drops a dead process's locks, so a crashed worker
cannot leak slots.
"""
from __future__ import annotations

import fcntl
import logging
import math
import os
import time
from collections import Counter, deque
from pathlib import Path
from typing import Any

log = logging.getLogger("doodlepod.render_pool")


#: Priority of a person's own work (a render, a save, an upload): it may wait for a slot, and takes
#: one back from background work.
RENDER = "render"
#: Priority of background work (the studio's motion previews): it never waits, takes a slot only
#: while no request wants one, and gives its slot up (answering 503) when one does.
BACKGROUND = "background"


class InflightSlots:
    """``count`` slots shared by every process that uses the same ``folder``, and a waiting room of
    ``waiters`` places (default: one per slot, or :data:`SHARED_ROOM_PER_SLOT` with per-client
    render ``shares``). The room is ordered: a freed slot goes to the waiting client holding fewest
    slots, then to the one waiting longest (:meth:`_turn`), never to whoever polls first.

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
    #: Seconds after which a waiter tries for a slot out of its turn (see :meth:`acquire`).
    UNTURNED_TRY_S = 1.0
    #: Seconds between a waiting request's tries.
    POLL_S = 0.02

    #: Waiting places per slot when clients have render shares: each client waits in at most its
    #: share's places, so many clients' requests must find room beside each other.
    SHARED_ROOM_PER_SLOT = 4

    def __init__(self, folder: str | Path, count: int, waiters: int | None = None, shares: bool = False) -> None:
        self.folder = Path(folder)
        self.count = count
        if waiters is None:
            waiters = count * (self.SHARED_ROOM_PER_SLOT if shares else 1)
        self.waiters = waiters
        self._refused: deque[float] = deque()  # this process's recent 503s
        self.folder.mkdir(parents=True, exist_ok=True)
        for i in range(count):
            (self.folder / f"slot-{i}").touch(exist_ok=True)
        for i in range(self.waiters):
            (self.folder / f"wait-{i}").touch(exist_ok=True)

    def try_acquire(self, priority: str = RENDER, owner: str = "") -> "Slot | None":
        """A held slot, or None at once when all ``count`` are taken (or, for background work,
        while a request wants one). ``owner``: the client it is held for (:meth:`held_by`)."""
        if priority == BACKGROUND and self.wanted():
            return None
        start = os.getpid() % max(1, self.count)  # spread workers' first tries
        for j in range(self.count):
            index = (start + j) % self.count
            fd = _lock_nowait(self.folder / f"slot-{index}")
            if fd is not None:
                return Slot(fd, self, index, priority, owner)
        return None

    def held_by(self, owner: str) -> int:
        """Slots held now for ``owner`` (a client's digest), across the pod's processes."""
        if not owner:
            return 0
        return sum(1 for _, _, who in self._holders().values() if who == owner)

    def claims(self, owner: str) -> int:
        """Slots held and waiting places taken now for ``owner``: what a client's render share bounds."""
        if not owner:
            return 0
        return self.held_by(owner) + sum(1 for _, _, who in self._waiters() if who == owner)

    def acquire(self, priority: str = RENDER, wait_s: float = 0.0, owner: str = "",
                share: int = 0) -> "Slot | None":
        """A held slot: at once, or (a :data:`RENDER` request) after waiting at most ``wait_s`` in
        the waiting room while background holders give theirs up; None when refused. A request
        does not pass those already waiting: while the room is not empty, a freed slot is theirs,
        and among them it goes first to the clients holding fewest slots, then to the longest waiting
        (:meth:`_turn`). ``share``: the client's render share (0: none): it may hold and wait for at
        most that many slots together (None past it: :meth:`claims` then says why), and it may wait
        even on a pod that turned others away, where the room's order, not the speed of retries,
        decides who renders next."""
        if priority == BACKGROUND:
            return self.try_acquire(priority, owner)
        slot = None if self.waiting() else self.try_acquire(priority, owner)
        if slot is not None:
            return slot
        self.want()
        if wait_s <= 0 or (self.overloaded() and not share) or self.expected_wait() > wait_s:
            return None
        place = self._take_place(owner)
        if place is None:
            return None
        fd, index = place
        try:
            if share and self.claims(owner) > share:  # a racing request of the same client came first
                return None
            end = time.monotonic() + wait_s
            tried = time.monotonic()
            while time.monotonic() < end:
                time.sleep(self.POLL_S)  # gevent's sleep in the web workers: the loop goes on
                # now and then out of turn: the locks, not the files' words, say whether a slot is free
                # (a crashed holder's file still names it)
                if self._turn(index) or time.monotonic() - tried > self.UNTURNED_TRY_S:
                    tried = time.monotonic()
                    slot = self.try_acquire(priority, owner)
                    if slot is not None:
                        return slot
                self.want()
            return None
        finally:
            os.ftruncate(fd, 0)
            os.close(fd)

    def _turn(self, index: int) -> bool:
        """Whether the waiter in place ``index`` may try for a slot now: a slot is free (as the files
        say) and its rank in the room is below the slots free. Rank: fewest slots held by its client
        first (a client rendering already waits behind one that is not), then the longest waiting."""
        holders = self._holders()
        free = self.count - len(holders)
        if free <= 0:
            return False
        waiters = self._waiters()
        held = Counter(who for _, _, who in holders.values())
        order = sorted(waiters, key=lambda w: (held[w[2]], w[1]))
        return next((n for n, w in enumerate(order) if w[0] == index), 0) < free

    def _waiters(self) -> list[tuple[int, float, str]]:
        """Taken waiting places: (index, when the waiter came, its owner), as their files say."""
        out = []
        for i in range(self.waiters):
            parts = _read(self.folder / f"wait-{i}").split()
            if parts:
                try:
                    entered = float(parts[1]) if len(parts) > 1 else 0.0
                except ValueError:
                    entered = 0.0
                out.append((i, entered, parts[2] if len(parts) > 2 else ""))
        return out

    def want(self) -> None:
        """Say that a request wants a slot now: background work takes none for :data:`WANT_S`, and
        the background holders are asked to give theirs up."""
        try:
            (self.folder / "wanted").touch()
            for index, (_, priority, _) in self._holders().items():
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
        if len(holders) < self.count or any(p == BACKGROUND for _, p, _ in holders.values()):
            return 0.0
        mean = self.mean_duration() or 2.0
        now = time.time()
        remaining = min((max(0.0, mean - (now - taken)) for taken, _, _ in holders.values()), default=0.0)
        return remaining + mean * self.waiting() / max(1, self.count)

    def _holders(self) -> dict[int, tuple[float, str, str]]:
        """Held slots: index -> (taken, priority, owner), as their files say."""
        held = {}
        for i in range(self.count):
            parts = _read(self.folder / f"slot-{i}").split()
            try:
                taken = float(parts[0]) if parts else math.nan
            except ValueError:
                continue
            if math.isfinite(taken):
                held[i] = (taken, parts[1] if len(parts) > 1 else RENDER, parts[2] if len(parts) > 2 else "")
        return held

    def _take_place(self, owner: str = "") -> tuple[int, int] | None:
        """A waiting place (its locked descriptor and index), its file saying who waits since when."""
        for i in range(self.waiters):
            fd = _lock_nowait(self.folder / f"wait-{i}")
            if fd is not None:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()} {time.time():.6f} {owner}".strip().encode(), 0)
                return fd, i
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
        for taken, _, _ in self._holders().values():
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
                 priority: str = RENDER, owner: str = "") -> None:
        self._fd: int | None = fd
        self._slots = slots
        self.index = index
        self.priority = priority
        self.taken = time.time()
        self._yield = slots.folder / f"slot-{index}.yield" if slots is not None else None
        if self._yield is not None:
            self._yield.unlink(missing_ok=True)  # a request for the previous holder
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{self.taken:.3f} {priority} {owner}".strip().encode(), 0)  # read by InflightSlots

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
