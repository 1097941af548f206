"""The app's log format: one line per record, stamped with the request id (``-`` outside requests)."""
from __future__ import annotations

import logging
import sys

LOG_FORMAT = "%(asctime)s %(levelname)s [%(process)d] [%(request_id)s] %(name)s: %(message)s"


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
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        handler.addFilter(RequestIdFilter())
        logger.addHandler(handler)
    logger.propagate = False
