"""Callback names looked up when a job is submitted, one at a time per client: the DNS counter.

A request's ``callback_url`` names a host the server looks up before the job is queued (the address
must pass the egress rules, :mod:`app.jobs.egress`). A name server that answers slowly must not hold
the request, gevent's shared resolver pool or more than one lookup thread per client, so the lookups
run on :class:`BoundedResolver`'s own threads, each within its bound, and count per owner (a client,
:mod:`.identity`) until the C library really answers or gives up. :func:`submit_resolver` is this
process's one counter for the lookups made at submit (the render worker builds its own for delivery).
"""
from __future__ import annotations

import _socket
import socket
from collections.abc import Callable, Sequence
from typing import Any

#: A lookup: host and port -> the addresses, as text.
Resolver = Callable[[str, int], Sequence[str]]


def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (TCP), as the operating system's resolver answers (the C
    library's lookup itself, never gevent's resolver: :class:`BoundedResolver` runs it on its own threads)."""
    infos = _socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))


class ResolveTimeout(TimeoutError):
    """A callback's name did not resolve within the bound."""


class ResolverBusy(OSError):
    """A lookup refused before it started: every lookup thread is busy (``reason`` ``threads``), or
    its owner has one running already (``owner``)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class _Lookup:
    """One lookup on a resolver thread, from its start until the C library answers or gives up."""

    __slots__ = ("owner",)

    def __init__(self, owner: str) -> None:
        self.owner = owner


class BoundedResolver:
    """Callback names looked up on ``threads`` native threads of its own, each lookup bounded by
    ``timeout_s`` (or the time left to a callback attempt): a name that answers slowly holds one of
    these threads, never gevent's shared resolver pool (the app's other lookups, Redis by name) and
    never a request or a callback lane past the bound. A lookup that is not answered in time raises
    :class:`ResolveTimeout`; its thread stays busy until the C library gives up, and so does its
    ``owner``'s turn: an owner (a client) has one lookup running at a time, counted until the lookup
    really ends, not until its caller stopped waiting. When every thread is busy a lookup is refused
    at once (:class:`ResolverBusy`) instead of queueing behind slow names until its bound runs out."""

    def __init__(self, threads: int = 8, timeout_s: float = 2.0, lookup: Resolver = system_resolver) -> None:
        self.threads = max(1, threads)
        self.timeout_s = timeout_s
        self.lookup = lookup
        self._pool: Any = None
        self._gevent = False
        #: Lookups on the threads now; a thread removes its own when the lookup ends (set.add and
        #: set.discard are atomic under the GIL, whichever thread or greenlet calls them).
        self._running: set[_Lookup] = set()

    def _start(self) -> None:
        from ..loop import under_gevent

        self._gevent = under_gevent()
        if self._gevent:
            from gevent.threadpool import ThreadPool
            self._pool = ThreadPool(self.threads)
        else:
            from concurrent.futures import ThreadPoolExecutor
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="callback-dns")

    def running(self, owner: str | None = None) -> int:
        """Lookups running now (of ``owner`` only, when given)."""
        now = list(self._running)
        return len(now) if owner is None else sum(1 for lookup in now if lookup.owner == owner)

    def __call__(self, host: str, port: int, timeout_s: float | None = None, owner: str = "") -> list[str]:
        if self._pool is None:
            self._start()
        if owner and self.running(owner):
            raise ResolverBusy("owner", "a lookup of this client's is still running")
        if self.running() >= self.threads:
            raise ResolverBusy("threads", f"all {self.threads} lookup threads are busy")
        limit = self.timeout_s if timeout_s is None else max(0.0, min(self.timeout_s, timeout_s))
        lookup = _Lookup(owner)
        self._running.add(lookup)

        def run() -> list[str]:
            try:
                return self.lookup(host, port)
            finally:
                self._running.discard(lookup)

        if self._gevent:
            import gevent
            try:
                return list(self._pool.spawn(run).get(timeout=limit))
            except gevent.Timeout:
                raise ResolveTimeout(f"{host!r} did not resolve within {limit:g} s") from None
        from concurrent.futures import TimeoutError as FutureTimeout
        future = self._pool.submit(run)
        try:
            return list(future.result(timeout=limit))
        except FutureTimeout:
            if future.cancel():  # never started: nothing holds a thread for it
                self._running.discard(lookup)
            raise ResolveTimeout(f"{host!r} did not resolve within {limit:g} s") from None


_SUBMIT_RESOLVER: BoundedResolver | None = None


def submit_resolver(settings: Any) -> BoundedResolver:
    """This process's resolver for callback URLs given with requests (DOODLEPOD_WEBHOOK_DNS_THREADS
    threads of its own, each lookup within DOODLEPOD_WEBHOOK_DNS_TIMEOUT_S), made on first use."""
    global _SUBMIT_RESOLVER
    if _SUBMIT_RESOLVER is None:
        _SUBMIT_RESOLVER = BoundedResolver(settings.webhook_dns_threads, settings.webhook_dns_timeout_s)
    return _SUBMIT_RESOLVER
