"""The gunicorn worker of the app: gevent's, answering JSON where gunicorn itself refuses a request.

gunicorn parses the request line and headers before the app sees anything, and answers what it
cannot parse or will not take (a control character in a header, a header over
``limit_request_field_size``, too many headers, a request line over ``limit_request_line``) with an
HTML page of its own. This worker keeps gunicorn's decisions and statuses and writes them as the
app's errors are written: ``{"error": code, "message": text}``, ``Content-Type: application/json``.

It also caps the connections one client holds open (DOODLEPOD_CLIENT_CONNECTIONS,
:class:`app.clients.connections.ConnectionCap`): the one past the cap is answered ``429
too_many_connections`` and closed before its request is read, so no client fills the worker's pool.
"""
from __future__ import annotations

import json
import logging
import socket
import time

from gunicorn import util
from gunicorn.workers.ggevent import GeventWorker

from app.clients.connections import ConnectionCap
from app.config import load_settings
from app.errors import TooManyConnections

log = logging.getLogger("doodlepod.connections")

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


def refuse_connection(sock, cap: int, retry_after_s: int) -> None:
    """Answer a connection past its client's cap (429 too_many_connections) and close it, unread."""
    body = json.dumps({"error": TooManyConnections.code, "message": f"this client holds {cap} connections "
                       "open already (DOODLEPOD_CLIENT_CONNECTIONS): reuse or close one"}).encode()
    head = (f"HTTP/1.1 {TooManyConnections.status} Too Many Requests\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nRetry-After: {retry_after_s}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode("latin-1")
    try:
        sock.settimeout(1.0)
        sock.sendall(head + body)
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    finally:
        util.close(sock)


class JsonErrorWorker(GeventWorker):
    """gevent worker whose own error answers are JSON (see the module)."""

    def init_process(self) -> None:
        util.write_error = write_json_error   # what gunicorn's handle_error calls to answer
        settings = load_settings()
        self.connections = ConnectionCap(settings.client_connections, tuple(settings.trusted_proxies),
                                         settings.client_ipv6_prefix)
        self._refused_logged = 0.0
        super().init_process()

    def handle(self, listener, client, addr) -> None:  # noqa: ANN001 - gunicorn's signature
        """Serve the connection unless its client holds its cap of connections already."""
        key = self.connections.admit(addr)
        if key is None:
            now = time.monotonic()
            if now - self._refused_logged >= 10.0:  # one line per 10 s: a flood must not flood the log
                self._refused_logged = now
                log.warning("connection refused: client %s holds %d connections (DOODLEPOD_CLIENT_CONNECTIONS)",
                            addr[0], self.connections.cap)
            refuse_connection(client, self.connections.cap, max(1, int(self.cfg.keepalive)))
            return
        try:
            super().handle(listener, client, addr)
        finally:
            self.connections.release(key)

    def handle_error(self, req, client, addr, exc) -> None:  # noqa: ANN001 - gunicorn's signature
        """A ``SCRIPT_NAME`` (from a trusted proxy) that does not begin the request's path is the
        request's fault: 400, where gunicorn answers 500 (a ConfigurationProblem)."""
        from gunicorn.http.errors import ConfigurationProblem, InvalidHeader

        if isinstance(exc, ConfigurationProblem) and "SCRIPT_NAME" in str(exc):
            exc = InvalidHeader("SCRIPT_NAME (not a prefix of the request's path)", req)
        super().handle_error(req, client, addr, exc)
