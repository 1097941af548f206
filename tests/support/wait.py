"""Waiting on something a test can observe, instead of sleeping a guessed time."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def until(condition: Callable[[], T], timeout: float, what: str = "", every: float = 0.05) -> T:
    """Call ``condition`` until it answers something true (returned), or fail after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() >= end:
            raise AssertionError(f"not true after {timeout:g} s: {what or condition}")
        time.sleep(every)
