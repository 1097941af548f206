"""How much the app has stored on its local storage, against DOODLEPOD_STORAGE_BUDGET_MB.

The kubelet evicts a pod whose emptyDir goes over its ``sizeLimit``, with every file on it; the
node's free space says nothing about that limit. So the app counts the bytes it has stored under
the local storage's folder and refuses new work (503 ``storage_full`` with Retry-After: the expiry
sweep frees room) once they reach the budget, which the manifests set well under the volume's size.
In the web app the queued jobs' storage reservations (their prices, app/jobs/price.py, held in Redis until
each job ends) count as stored: a job admitted under the budget finds its room when it runs.

Counting walks the folder (``os.scandir``: a few ms for thousands of files) at most every
:data:`RECOUNT_S` seconds per process; between counts the bytes this process wrote are added, so
one process cannot overshoot by more than what other processes write in that time. No lock: the
count is called from gevent's native threads (file writes run there), where a monkey-patched lock
must not be taken; a lost update between two threads only makes one count a little stale.
"""
from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from ..errors import StorageFull

log = logging.getLogger("doodlepod.storage")

#: Seconds a count is reused before the folder is walked again.
RECOUNT_S = 2.0


def folder_bytes(root: Path) -> int:
    """Bytes of the regular files under ``root`` (partial files and lock files included: they take room)."""
    total = 0
    stack = [str(root)]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        with entries:
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_blocks * 512
                except FileNotFoundError:  # swept or replaced meanwhile
                    continue
    return total


class StorageBudget:
    """The bytes stored under ``root`` against ``budget_mb`` (0: no budget)."""

    def __init__(self, root: Path, budget_mb: float) -> None:
        self.root = Path(root)
        self.budget_bytes = int(budget_mb * 2**20)
        self._counted_at = -RECOUNT_S
        self._bytes = 0
        #: The bytes admitted work has reserved and not stored yet (the queued jobs' prices: the web app's
        #: admissions count them, :meth:`count_reserved`); None: none counted (the render worker, whose jobs
        #: were admitted with their reservations already).
        self._reserved: Callable[[], int] | None = None

    def count_reserved(self, reserved: Callable[[], int]) -> None:
        """Count ``reserved()`` bytes as used (they will be stored by work already admitted)."""
        self._reserved = reserved

    def reserved_bytes(self) -> int:
        if self._reserved is None:
            return 0
        try:
            return max(0, int(self._reserved()))
        except Exception as exc:  # noqa: BLE001 - Redis down: the stored bytes alone still bound the pod
            log.warning("the storage reservations are not counted: %s: %s", type(exc).__name__, exc)
            return 0

    @property
    def enabled(self) -> bool:
        return self.budget_bytes > 0

    def used_bytes(self) -> int:
        """What the app has stored (a count at most :data:`RECOUNT_S` old plus this process's writes since)."""
        if time.monotonic() - self._counted_at >= RECOUNT_S:
            self._bytes, self._counted_at = folder_bytes(self.root), time.monotonic()
        return self._bytes

    def wrote(self, nbytes: int) -> None:
        """This process stored ``nbytes`` more (counted until the next walk)."""
        self._bytes += max(0, nbytes)

    def left_bytes(self, reserved: int | None = None) -> int | None:
        """Bytes left under the budget (negative when over), what is reserved counted as used (``reserved``:
        as the caller asked Redis on the event loop, since this runs off it); None without a budget."""
        if not self.enabled:
            return None
        return self.budget_bytes - self.used_bytes() - (self.reserved_bytes() if reserved is None else reserved)

    def refuse(self, sweep_interval_s: float, wanted: int = 0) -> StorageFull:
        """The 503 ``storage_full`` answer (``wanted``: the bytes the refused work would have reserved)."""
        wait = int(min(3600, max(60, sweep_interval_s)))
        need = f"; this work needs up to {wanted / 2**20:.1f} MiB" if wanted else ""
        return StorageFull(f"the stored files and the queued jobs' reservations reached the storage budget of "
                           f"{self.budget_bytes / 2**20:.0f} MiB (DOODLEPOD_STORAGE_BUDGET_MB){need}; expired "
                           f"files are swept every {sweep_interval_s:g} s: retry later", wait)
