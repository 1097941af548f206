"""A slow-header client: many connections that each send a request line, then one header line a
second, never finishing their headers (issue 41 S11)."""
from __future__ import annotations

import selectors
import socket
import threading
import time


class SlowHeaders:
    """``count`` connections from ``source`` that send a request line, then one header line a second,
    forever; one that is closed is opened again at the next second (not at once: a reconnect storm is
    a flood of its own, which a proxy or a firewall must stop). One thread, non-blocking sockets."""

    def __init__(self, port: int, source: str, count: int) -> None:
        self.port, self.source, self.count = port, source, count
        self.answers: list[bytes] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def open(self, sel: selectors.BaseSelector) -> None:
        s = socket.socket()
        s.bind((self.source, 0))
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", self.port))
        sel.register(s, selectors.EVENT_READ, {"sent": False})

    def run(self) -> None:
        sel = selectors.DefaultSelector()
        for _ in range(self.count):
            self.open(sel)
        next_line = time.monotonic()
        while not self.stop.is_set():
            for key, _ in sel.select(timeout=0.1):   # an answer (429) or a close: open another
                try:
                    data = key.fileobj.recv(4096)
                except OSError:
                    data = b""
                if data:
                    self.answers.append(data)
                sel.unregister(key.fileobj)
                key.fileobj.close()
            if time.monotonic() >= next_line:
                next_line += 1.0
                for _ in range(self.count - len(sel.get_map())):
                    self.open(sel)
                for key in list(sel.get_map().values()):
                    line = b"X-Slow: 1\r\n" if key.data["sent"] else b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
                    try:
                        key.fileobj.send(line)
                        key.data["sent"] = True
                    except OSError:
                        pass   # not connected yet, or gone: the select above sees it
        for key in list(sel.get_map().values()):
            key.fileobj.close()

    def __enter__(self) -> "SlowHeaders":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(30)
