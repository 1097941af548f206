"""schemathesis checks of tests/app/http/test_openapi_fuzz.py (loaded through SCHEMATHESIS_HOOKS).

``no_unexpected_server_error`` replaces schemathesis' ``not_a_server_error``: a 5xx fails the run
unless it is one the app is meant to answer on a healthy stack: 503 ``overloaded`` or ``queue_full``
with ``Retry-After`` (capacity, by design), or 504 ``deadline_exceeded`` when the client itself asked
for a deadline shorter than the server's (``X-Deadline-Seconds``).
"""
from __future__ import annotations

import os

import schemathesis

#: 503 codes a healthy stack may answer under the fuzzer's load; the others (model server down, low
#: disk, Redis unreachable) mean the stack under test broke.
CAPACITY_503 = {"overloaded", "queue_full"}


def _deadline_s() -> float:
    return float(os.environ.get("DOODLEPOD_FUZZ_DEADLINE_S", "120"))


@schemathesis.check
def no_unexpected_server_error(ctx, response, case):
    status = response.status_code
    if status < 500:
        return None
    try:
        body = response.json()
    except Exception:
        body = None
    code = body.get("error") if isinstance(body, dict) else None
    if status == 503 and code in CAPACITY_503 and response.headers.get("retry-after"):  # lower-case keys
        return None
    if status == 504 and code == "deadline_exceeded":
        asked = {k.lower(): v for k, v in (case.headers or {}).items()}.get("x-deadline-seconds")
        try:
            if asked is not None and float(asked) < _deadline_s():
                return None
        except ValueError:
            pass
    raise AssertionError(f"unexpected server error {status} {code!r}: {str(body)[:300]}")
