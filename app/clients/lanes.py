"""The callback lanes: how many callbacks one render worker delivers at once, in all, to one receiver
and for one client (DOODLEPOD_WEBHOOK_CONCURRENCY, :data:`PER_RECEIVER`, DOODLEPOD_CLIENT_WEBHOOK_LANES),
so a receiver that answers slowly, or a client naming many of them, holds back only its own callbacks.
The worker (app/worker.py) takes a lane before each delivery and gives it up between attempts."""
from __future__ import annotations

import threading
from urllib.parse import urlsplit

#: Callbacks one worker delivers to one receiver (scheme, host, port) at once.
PER_RECEIVER = 2


def receiver_of(url: str) -> str:
    """Whose lane a callback takes: its URL's scheme, host and port."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port or ''}"


class Lanes:
    """Counts deliveries in flight: in all (at most ``total``), per receiver (at most ``each``) and per
    client (at most ``per_client``, DOODLEPOD_CLIENT_WEBHOOK_LANES: a client that names many slow
    receivers on many ports still holds only its own lanes). A lane is ``(receiver, client)``."""

    def __init__(self, total: int, each: int, per_client: int | None = None) -> None:
        self.total, self.each = total, each
        self.per_client = per_client or total
        self._lock = threading.Lock()
        self._busy: dict[str, int] = {}
        self._clients: dict[str, int] = {}

    def has_room(self) -> bool:
        with self._lock:
            return sum(self._busy.values()) < self.total

    def try_start(self, lane: tuple[str, str] | str) -> bool:
        receiver, client = (lane, "") if isinstance(lane, str) else lane
        with self._lock:
            if (sum(self._busy.values()) >= self.total or self._busy.get(receiver, 0) >= self.each
                    or self._clients.get(client, 0) >= self.per_client):
                return False
            self._busy[receiver] = self._busy.get(receiver, 0) + 1
            self._clients[client] = self._clients.get(client, 0) + 1
            return True

    def end(self, lane: tuple[str, str] | str) -> None:
        receiver, client = (lane, "") if isinstance(lane, str) else lane
        with self._lock:
            for counts, key in ((self._busy, receiver), (self._clients, client)):
                left = counts.get(key, 0) - 1
                if left > 0:
                    counts[key] = left
                else:
                    counts.pop(key, None)
