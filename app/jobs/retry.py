"""The one retry rule of async jobs: what the worker does with a job whose attempt failed.

The error says whether the same job may succeed later (:attr:`app.errors.ApiError.retryable`, set per
error class and listed in docs/api.md's error table); nothing else is consulted. A deterministic
failure (a client error, ``render_failed``, ``deadline_exceeded``, ``internal_error``) ends the job
``failed`` at once; a retryable one (TorchServe or the storage down or answering wrongly, an edit
conflict) is requeued with a not-before time that doubles each attempt, until the attempts run out.
The worker never sleeps on a retry: the queue holds the job back (:meth:`app.jobs.queue.JobQueue.retry`).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ApiError, retry_after_s

#: Delay before the second attempt (seconds); each further attempt waits twice as long ...
FIRST_DELAY_S = 1.0
#: ... up to this.
MAX_DELAY_S = 30.0


@dataclass(frozen=True)
class Verdict:
    """``retry`` with ``delay_s``, or end ``failed`` (``dead_letter``: for operators to look at)."""

    retry: bool
    delay_s: float = 0.0
    dead_letter: bool = False


def decide(error: ApiError, attempt: int, max_attempts: int, first_delay_s: float = FIRST_DELAY_S) -> Verdict:
    """What to do after attempt number ``attempt`` (1-based) of at most ``max_attempts`` failed with ``error``."""
    if not error.retryable:
        return Verdict(False, dead_letter=error.status >= 500)  # a server-side failure is worth a look
    if attempt >= max_attempts:
        return Verdict(False, dead_letter=True)
    delay = min(MAX_DELAY_S, first_delay_s * 2 ** (attempt - 1))
    asked = retry_after_s(error.headers)
    if asked is not None:  # the neighbour said when to come back
        delay = max(delay, min(MAX_DELAY_S, asked))
    return Verdict(True, delay_s=delay)
