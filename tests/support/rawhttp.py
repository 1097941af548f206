"""Servers on loopback that answer HTTP the way no HTTP library would: cut short, or a byte at a time."""
from __future__ import annotations

import socket
import threading
from collections.abc import Callable


class RawServer:
    """A TCP server on ``host`` (loopback unless told) that hands each connection to ``answer(conn)`` on its
    own thread."""

    def __init__(self, answer: Callable[[socket.socket], None], backlog: int = 64, host: str = "127.0.0.1") -> None:
        self.host = host
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(backlog)
        self.port = self.sock.getsockname()[1]
        self.stopped = threading.Event()
        self.connections = 0
        self._answer = answer
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def close(self) -> None:
        self.stopped.set()
        self.sock.close()


class Tarpit(RawServer):
    """A receiver that reads the request, then answers ``200`` one byte every ``every`` seconds."""

    def __init__(self, every: float = 2.0, host: str = "127.0.0.1") -> None:
        self.every = every
        super().__init__(self._drip, host=host)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/slow"

    def _drip(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n":
                    if self.stopped.wait(self.every):
                        return
                    conn.sendall(bytes([byte]))
            except OSError:
                return
