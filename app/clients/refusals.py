"""How fast one client may be refused: a client refused again and again waits for its next refusal.

A refusal (a 4xx answer: too large, too many motions, its render share used, rate limited) costs the
gunicorn worker's one event loop a millisecond or two of CPU (routing, the answer, the log line, the
metrics) and costs the client nothing, so a client that sends again at once, in a few threads, can keep
the loop busy with refusals alone: measured, some 500 refusals a second from one address took most of
a worker's CPU and a neighbour's sound requests took 2 s where they took 0.3 s alone (issue 41, the
hostile-neighbour test). Each client has a bucket of ``per_s`` free refusals a second (as many at
once); past it, each refusal is held back before it is sent, as long as the bucket needs to hold one
more (at most ``max_hold_s``). A held answer sleeps on the event loop (a gevent sleep costs no CPU)
and holds one of the client's own connections (:mod:`.connections` caps those), so the client's
refusals come no faster than its connections can wait for them, and other clients are not slowed.

Counted per worker process, on its one event loop: no lock. A sound client is refused a few times a
minute, never a hundred times a second; the studio's retries wait for Retry-After.
"""
from __future__ import annotations

import time


class RefusalPacer:
    """Free refusals per client: ``per_s`` a second, as many at once (0: no pacing)."""

    def __init__(self, per_s: float, max_hold_s: float = 1.0, clock=time.monotonic, max_clients: int = 10_000) -> None:
        self.per_s = per_s
        self.max_hold_s = max_hold_s
        self.clock = clock
        self.max_clients = max_clients
        self._buckets: dict[str, tuple[float, float]] = {}  # client -> (tokens, when counted)

    def hold_s(self, client: str) -> float:
        """Count one refusal of ``client`` and say how long to hold it back before it is sent (0: send now)."""
        if self.per_s <= 0:
            return 0.0
        now = self.clock()
        tokens, then = self._buckets.get(client, (self.per_s, now))
        tokens = min(self.per_s, tokens + (now - then) * self.per_s) - 1.0
        if len(self._buckets) >= self.max_clients and client not in self._buckets:
            self._forget_full(now)
        # a held refusal is counted as sent when its hold ends: the bucket never goes below one hold
        tokens = max(tokens, -self.max_hold_s * self.per_s)
        self._buckets[client] = (tokens, now)
        return 0.0 if tokens >= 0 else min(self.max_hold_s, -tokens / self.per_s)

    def _forget_full(self, now: float) -> None:
        """Drop the buckets that are full again (their clients are owed nothing), so the table stays bounded."""
        for key, (tokens, then) in list(self._buckets.items()):
            if tokens + (now - then) * self.per_s >= self.per_s:
                del self._buckets[key]
        while len(self._buckets) >= self.max_clients:  # all in debt: the oldest goes
            del self._buckets[next(iter(self._buckets))]
