"""What the benches share: the repository's root, the test stack they start (one import of it), the
percentiles and load average they print, and a burst of client threads."""
from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as `python bench/NAME.py`: the app, the animator and tests/ import from here
    sys.path.insert(0, str(REPO))

# The loopback test stack the benches start: fake-model TorchServe, gunicorn, moto, fixture photos.
from tests.support import stack  # noqa: E402

__all__ = ["REPO", "load_avg", "pct", "run_clients", "shares", "stack"]


def pct(values: list[float], q: float) -> float:
    """The ``q``-th percentile of ``values``, linearly interpolated between the nearest ranks (the
    median for q=50, as ``numpy.percentile`` computes it); NaN when there are none."""
    if not values:
        return float("nan")
    values = sorted(values)
    k = q / 100 * (len(values) - 1)
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def load_avg() -> str:
    """The 1, 5 and 15 minute load averages, as ``uptime`` prints them."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def shares(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` whole shares differing by at most one (the first ones larger)."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def run_clients(client: Callable[[int], None], counts: list[int]) -> float:
    """Run ``client(n)`` for each ``n`` of ``counts`` on its own thread, all released at once; returns
    the wall seconds until the last one has returned."""
    go = threading.Barrier(len(counts))

    def released(n: int) -> None:
        go.wait()
        client(n)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=released, args=(n,), daemon=True) for n in counts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0
