"""The gunicorn worker of the app: gevent's, answering JSON where gunicorn itself refuses a request.

gunicorn parses the request line and headers before the app sees anything, and answers what it
cannot parse or will not take (a control character in a header, a header over
``limit_request_field_size``, too many headers, a request line over ``limit_request_line``) with an
HTML page of its own. This worker keeps gunicorn's decisions and statuses and writes them as the
app's errors are written: ``{"error": code, "message": text}``, ``Content-Type: application/json``.
"""
from __future__ import annotations

import json

from gunicorn import util
from gunicorn.workers.ggevent import GeventWorker

#: gunicorn's statuses for requests it refuses -> the app's error codes.
CODES = {400: "bad_request", 403: "forbidden", 414: "request_line_too_long", 417: "expectation_failed",
         431: "headers_too_large", 500: "internal_error", 501: "not_implemented"}


def write_json_error(sock, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn's ``util.write_error`` with a JSON body instead of an HTML page."""
    message = mesg or reason
    if status_int == 431:
        message = f"request headers over the server's limits (count or size): {mesg}"
    body = json.dumps({"error": CODES.get(status_int, "bad_request"), "message": message[:500]}).encode()
    head = (f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode("latin-1")
    util.write_nonblock(sock, head + body)


class JsonErrorWorker(GeventWorker):
    """gevent worker whose own error answers are JSON (see the module)."""

    def init_process(self) -> None:
        util.write_error = write_json_error   # what gunicorn's handle_error calls to answer
        super().init_process()

    def handle_error(self, req, client, addr, exc) -> None:  # noqa: ANN001 - gunicorn's signature
        """A ``SCRIPT_NAME`` (from a trusted proxy) that does not begin the request's path is the
        request's fault: 400, where gunicorn answers 500 (a ConfigurationProblem)."""
        from gunicorn.http.errors import ConfigurationProblem, InvalidHeader

        if isinstance(exc, ConfigurationProblem) and "SCRIPT_NAME" in str(exc):
            exc = InvalidHeader("SCRIPT_NAME (not a prefix of the request's path)", req)
        super().handle_error(req, client, addr, exc)
