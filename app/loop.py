"""The gevent loop of gunicorn's gevent workers: whether this process runs on it, and how to wait
for blocking work without stalling it. Outside gevent (tests, scripts) everything here runs plainly.
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
from collections.abc import Callable, Iterator
from typing import Any


def under_gevent() -> bool:
    """True in a process gevent has monkey-patched (gunicorn's gevent workers)."""
    try:
        from gevent import monkey
    except ImportError:
        return False
    return monkey.is_anything_patched()


@contextlib.contextmanager
def time_limit(seconds: float, error: BaseException) -> Iterator[None]:
    """Raise ``error`` if the block runs longer than ``seconds``, whatever it waits on (a socket read
    that trickles, a connect), under gevent. Outside gevent nothing interrupts the block: the
    callers' own per-call timeouts are the only bound there."""
    if not under_gevent():
        yield
        return
    import gevent
    with gevent.Timeout(max(seconds, 0.001), error):
        yield


def off_loop(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a native thread of gevent's pool when under gevent, so slow plain I/O (a file
    write and fsync) does not block the loop; called directly otherwise. ``fn`` must not touch
    monkey-patched locks."""
    if under_gevent():
        import gevent
        return gevent.get_hub().threadpool.apply(fn, args)
    return fn(*args)


def wait_future(future: cf.Future, timeout: float) -> Any:
    """``future.result(timeout)`` without blocking the gevent loop when running under gevent.

    The future's done-callback (run by the executor's result thread, whichever kind of thread that
    is) wakes this greenlet through a loop ``async`` watcher, the thread-safe way to signal a gevent
    hub. (Waiting in ``hub.threadpool.apply(future.result)`` works for one job at a time but was
    measured to stall for tens of seconds with several jobs in flight: a native thread blocking on
    monkey-patched locks.)
    """
    if not under_gevent() or future.done():
        return future.result(timeout)
    import gevent
    from gevent.event import Event

    hub = gevent.get_hub()
    done = Event()
    watcher = hub.loop.async_()
    watcher.start(done.set)
    live = [True]

    def wake(_: cf.Future) -> None:
        if live[0]:
            watcher.send()

    try:
        future.add_done_callback(wake)
        if not done.wait(timeout):
            raise cf.TimeoutError()
        return future.result(0)
    finally:
        live[0] = False
        watcher.stop()
        watcher.close()
