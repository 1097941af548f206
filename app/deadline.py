"""A per-request deadline: every blocking call of a request waits at most :meth:`Deadline.remaining`."""
from __future__ import annotations

import time

from .errors import DeadlineExceeded


class Deadline:
    """Monotonic-clock deadline ``seconds`` from now."""

    def __init__(self, seconds: float) -> None:
        self.seconds = float(seconds)
        self.expires_at = time.monotonic() + self.seconds

    def remaining(self) -> float:
        """Seconds left (may be negative)."""
        return self.expires_at - time.monotonic()

    def check(self, stage: str) -> float:
        """Seconds left; raise :class:`DeadlineExceeded` naming ``stage`` if none are."""
        left = self.remaining()
        if left <= 0:
            raise self.exceeded(stage)
        return left

    def exceeded(self, stage: str, detail: str = "") -> DeadlineExceeded:
        """The error for this deadline passing during ``stage`` (``detail``: what was going on)."""
        return DeadlineExceeded(f"request deadline of {self.seconds:g} s passed during {stage}"
                                + (f" ({detail})" if detail else ""))

    def cap(self, timeout: float, stage: str) -> float:
        """``timeout`` shortened to the time left; raises if none is left."""
        return min(timeout, self.check(stage))
