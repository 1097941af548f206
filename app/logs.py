"""The app's log format: one line per record, stamped with the request id (``-`` outside requests).

A record's message often quotes what a client sent (a motion name, a header): :class:`SafeFormatter`
escapes control characters in it (a newline becomes ``\\n``), so no client text can start a line
that reads as a record of its own. Tracebacks keep their lines, each after the first indented.
"""
from __future__ import annotations

import logging
import re
import sys

LOG_FORMAT = "%(asctime)s %(levelname)s [%(process)d] [%(request_id)s] %(name)s: %(message)s"


#: C0 and C1 control characters, DEL, and the Unicode line and paragraph separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def escape_controls(text: str) -> str:
    """``text`` with every control character written as a Python escape (``\\n``, ``\\x1b``...)."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


class SafeFormatter(logging.Formatter):
    """A Formatter whose records each take one line (plus an indented traceback, if any)."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        record.message = escape_controls(record.message)
        return super().formatMessage(record)

    def formatException(self, ei) -> str:  # noqa: N802, ANN001 - logging's name and signature
        return _indent(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:  # noqa: N802 - logging's name
        return _indent(super().formatStack(stack_info))


def _indent(text: str) -> str:
    lines = [escape_controls(line) for line in text.splitlines()]
    return "\n".join(lines[:1] + ["    " + line for line in lines[1:]])


class RequestIdFilter(logging.Filter):
    """Adds ``request_id`` (the current request's id, or ``-``) to every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = "-"
            try:
                from flask import g, has_request_context
                if has_request_context():
                    record.request_id = g.get("request_id", "-")
            except Exception:
                pass
        return True


def configure_logging(level: str) -> None:
    """Send the ``doodlepod`` loggers to stderr in :data:`LOG_FORMAT` at ``level`` (once per process)."""
    logger = logging.getLogger("doodlepod")
    logger.setLevel(level.upper())
    if not any(getattr(h, "_doodlepod", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler._doodlepod = True  # type: ignore[attr-defined]
        handler.setFormatter(SafeFormatter(LOG_FORMAT))
        handler.addFilter(RequestIdFilter())
        logger.addHandler(handler)
    logger.propagate = False
