"""A webhook receiver on loopback (a client's server that render jobs call back)."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import wait


class CallbackReceiver:
    """Takes POSTed callbacks at :attr:`url` (on ``host``, loopback unless told): the first ``fail_first`` are answered 500, the rest 204 at once.
    Keeps ``received`` (headers, body) and ``arrived`` (``time.monotonic()`` at arrival, body) in order, and
    calls ``on_arrival(body)`` for each."""

    def __init__(self, fail_first: int = 0, on_arrival: Callable[[bytes], None] | None = None,
                 host: str = "127.0.0.1") -> None:
        self.received: list[tuple[dict, bytes]] = []
        self.arrived: list[tuple[float, bytes]] = []
        self.fail_first = fail_first
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                owner.arrived.append((time.monotonic(), body))
                owner.received.append((dict(self.headers), body))
                if on_arrival is not None:
                    on_arrival(body)
                self.send_response(500 if len(owner.received) <= owner.fail_first else 204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait(self, n: int, timeout: float = 60) -> None:
        """Until ``n`` callbacks arrived (fails after ``timeout`` seconds)."""
        wait.until(lambda: len(self.received) >= n, timeout, lambda: f"{n} callbacks ({len(self.received)} arrived)")

    def close(self) -> None:
        self.server.shutdown()
