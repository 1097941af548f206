"""Waiting on something a test can observe, instead of sleeping a guessed time."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def until(condition: Callable[[], T], timeout: float, what: str | Callable[[], str] = "", every: float = 0.05) -> T:
    """Call ``condition`` until it answers something true (returned), or fail after ``timeout`` seconds.

    ``what`` names what is awaited in the failure's message; a function is called then, so the
    message can show the last state seen. What ``condition`` raises propagates at once."""
    end = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() >= end:
            said = what() if callable(what) else what
            raise AssertionError(f"not true after {timeout:g} s: {said or condition}")
        time.sleep(every)
