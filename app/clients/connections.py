"""How many connections one client may hold open in one gunicorn worker.

A gevent worker serves at most DOODLEPOD_WORKER_CONNECTIONS connections; past them it stops accepting,
and every new connection (a neighbour's request, the kubelet's /healthz) waits in the kernel's backlog
until one ends. A connection that sends its headers slowly holds its place until gunicorn's header
timeout (the keep-alive, 5 s), so one client opening a few hundred of them kept every other
connection waiting about 4 s (issue 41 S11: measured, the worker at 1% CPU: the pool, not the CPU).
This count caps what one client (its address folded as :mod:`.identity` folds it: an IPv6 /56) holds,
so it can never fill the pool alone; the connection past the cap is answered at once and closed.

Peers that are trusted proxies (DOODLEPOD_TRUSTED_PROXIES) are not capped: they carry many clients,
and a proxy reads each request's headers itself before it forwards it. Counted per worker process
(each has its own pool), on its one event loop: no lock.
"""
from __future__ import annotations

from .addresses import trusted_peer
from .identity import IPV6_PREFIX, fold_address


class ConnectionCap:
    """Open connections per client address, at most ``cap`` each (0: no cap)."""

    def __init__(self, cap: int, trusted: tuple[str, ...] = (), ipv6_prefix: int = IPV6_PREFIX) -> None:
        self.cap = cap
        self.trusted = tuple(t for t in trusted if t != "*")
        self.ipv6_prefix = ipv6_prefix
        self.open: dict[str, int] = {}

    def admit(self, peer: object) -> str | None:
        """The key to :meth:`release` when the connection from ``peer`` (gunicorn's ``addr``: a
        ``(host, port, ...)`` tuple for TCP) may go on, ``""`` when it is not counted (no cap, a UNIX
        socket, a trusted proxy), None when its client holds ``cap`` connections already."""
        if self.cap <= 0 or not isinstance(peer, tuple) or not peer or not isinstance(peer[0], str):
            return ""
        if self.trusted and trusted_peer(peer[0], self.trusted):
            return ""
        client = fold_address(peer[0], self.ipv6_prefix)
        held = self.open.get(client, 0)
        if held >= self.cap:
            return None
        self.open[client] = held + 1
        return client

    def release(self, key: str | None) -> None:
        """The connection admitted under ``key`` ended."""
        if not key:
            return
        left = self.open.get(key, 0) - 1
        if left > 0:
            self.open[key] = left
        else:
            self.open.pop(key, None)
