"""The API's error codes, made from the error classes: one list, printed in three places.

A code's status, whether a client may retry it and when it is answered are its class's ``status``,
``retryable`` and the first paragraph of its docstring (written for clients). :func:`codes` collects
every :class:`app.errors.ApiError` class of :data:`MODULES` (the families' bases left out) and the few
codes no class of the app raises (:data:`OTHERS`). From that list come:

- the OpenAPI document's ``ErrorCode`` and ``Error<status>`` schemas (:func:`schemas`, merged into
  ``openapi.yaml`` by :mod:`app.http.reference`, as the request schemas generated from the models are);
- docs/api.md's error table (``python -m app.http.codes --errors``);
- docs/operations.md's table of a client's shares (``python -m app.http.codes --shares``, from
  :data:`app.shares.SHARES`, with each share's default from app/config.py).

tests/app/http/test_openapi_contract.py holds the list to every ApiError class the app defines, and
tests/app/http/test_api.py holds the two pages' tables to what this module prints.
"""
from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .. import config, errors, shares
from ..clients import ratelimit
from ..jobs import egress, idempotency, queue


@dataclass(frozen=True)
class Code:
    """One error code of the API."""

    code: str
    status: int
    retryable: bool
    when: str


#: The modules that define the API's error classes.
MODULES: tuple[ModuleType, ...] = (errors, shares, ratelimit, idempotency, queue, egress)
#: Bases of a family of errors, never raised themselves: their codes are no answer of the API.
FAMILIES: tuple[type[errors.ApiError], ...] = (errors.ApiError, errors.ClientError, errors.UpstreamError,
                                               errors.Unavailable, shares.ShareUsed)
#: Codes no class of the app raises: werkzeug's own errors on the app's routes (app/http/answers.py
#: names them after werkzeug's), any unexpected exception's, and gunicorn's refusal of oversized
#: headers (app/gunicorn_worker.py).
OTHERS: tuple[Code, ...] = (
    Code("method_not_allowed", 405, False, "The path does not take this method (`Allow` lists those it takes)."),
    Code("requested_range_not_satisfiable", 416, False, "A `Range` outside the file."),
    Code("headers_too_large", 431, False,
         "Request headers over gunicorn's limits (an `If-Match` of thousands of tags); gunicorn's other "
         "refusals (a control character in a header) are `400 bad_request`, in JSON too."),
    Code("internal_error", 500, False,
         "A bug, logged with its traceback under the request id (`X-Request-ID`)."),
)


def when(cls: type) -> str:
    """The first paragraph of a class's docstring, on one line."""
    return " ".join((inspect.getdoc(cls) or "").split("\n\n", 1)[0].split())


def _classes(module: ModuleType) -> list[type[errors.ApiError]]:
    return [value for value in vars(module).values()
            if isinstance(value, type) and issubclass(value, errors.ApiError)
            and value.__module__ == module.__name__ and value not in FAMILIES]


def codes() -> tuple[Code, ...]:
    """Every code of the API, by status (in the order the classes are written within one status)."""
    found: dict[str, Code] = {}
    for module in MODULES:
        for cls in _classes(module):
            if cls.code in found:
                raise ValueError(f"two classes answer {cls.code}")
            found[cls.code] = Code(cls.code, cls.status, cls.retryable, when(cls))
    for other in OTHERS:
        if other.code in found:
            raise ValueError(f"{other.code} is a class's code and in OTHERS")
        found[other.code] = other
    return tuple(sorted(found.values(), key=lambda c: c.status))


def schemas() -> dict[str, Any]:
    """The OpenAPI schemas ``ErrorCode`` (every code with its status) and ``Error<status>`` (the codes
    of one status) for ``components.schemas``."""
    listed = codes()
    out: dict[str, Any] = {"ErrorCode": {
        "description": "The stable code clients switch on. `x-status` is the HTTP status each comes with.",
        "oneOf": [{"const": c.code, "x-status": c.status, "description": c.when} for c in listed]}}
    for status in sorted({c.status for c in listed}):
        out[f"Error{status}"] = {"$ref": "#/components/schemas/Error",
                                 "properties": {"error": {"enum": [c.code for c in listed if c.status == status]}}}
    return out


def errors_table() -> str:
    """docs/api.md's error table."""
    lines = ["| Status | `error` | Retryable | When |", "|---|---|---|---|"]
    lines += [f"| {c.status} | `{c.code}` | {'yes' if c.retryable else 'no'} | {c.when} |" for c in codes()]
    return "\n".join(lines)


def shares_table() -> str:
    """docs/operations.md's table of a client's shares (:data:`app.shares.SHARES`)."""
    lines = ["| Past it | Setting (default) | What it counts | Where it is enforced |", "|---|---|---|---|"]
    for share in shares.SHARES:
        answer = share.answer if isinstance(share.answer, str) else f"{share.answer.status} `{share.answer.code}`"
        own = next((s.default for s in config.SETTINGS if s.name == share.setting), "")
        default = share.default.format(own) if share.default else own
        setting = f"`{share.setting}` ({default})" if share.setting else default
        lines.append(f"| {answer} | {setting} | {share.counts} | {share.enforced} |")
    return "\n".join(lines)


if __name__ == "__main__":
    tables = {"--errors": errors_table, "--shares": shares_table}
    chosen = [tables[arg] for arg in sys.argv[1:] if arg in tables]
    if not chosen:
        print("usage: python -m app.http.codes --errors | --shares   (docs/api.md's or docs/operations.md's table)")
        sys.exit(2)
    for table in chosen:
        print(table())
