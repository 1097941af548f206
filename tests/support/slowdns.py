"""Slow DNS on loopback: a name server that answers names under one suffix late, and a way to start a
process whose /etc/resolv.conf points at it.

This machine's resolver answers at once, and changing /etc/resolv.conf would change it for every
program here. So a process that should meet slow DNS is started with ``preexec_fn=`` :func:`resolved_by`:
in a mount namespace of its own, its /etc/resolv.conf is a bind mount of a file naming
:class:`SlowDns`. That needs root (CAP_SYS_ADMIN); :func:`unavailable` says why not where it cannot.
"""
from __future__ import annotations

import ctypes
import os
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

_CLONE_NEWNS = 0x00020000
_MS_BIND, _MS_REC, _MS_PRIVATE = 0x1000, 0x4000, 0x40000


class SlowDns:
    """A UDP name server on ``host``:53 answering names under ``suffix`` after ``delay_s`` (an A
    record of 127.0.0.1; no AAAA record), names under ``late_suffix`` at once the first time each
    is asked and after ``delay_s`` from then on (a name that turns slow between a job's submission
    and its callback), and any other name at once with NXDOMAIN."""

    def __init__(self, delay_s: float = 15.0, suffix: str = ".slow.soak.test", host: str = "127.0.0.153",
                 late_suffix: str = ".late.soak.test") -> None:
        self.delay_s, self.suffix, self.host = delay_s, suffix.lower(), host
        self.late_suffix = late_suffix.lower()
        self._seen: set[tuple[str, int]] = set()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, 53))
        self.asked = 0
        self._closed = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def resolv_conf(self, folder: Path) -> Path:
        """A resolv.conf naming this server, the resolver patient enough to wait for its answers."""
        path = Path(folder) / "resolv.conf"
        path.write_text(f"nameserver {self.host}\noptions timeout:30 attempts:1\n")
        return path

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                query, peer = self.sock.recvfrom(4096)
            except OSError:
                return
            name, qtype, end = _question(query)
            if name is None:
                continue
            self.asked += 1
            first = (name, qtype) not in self._seen
            self._seen.add((name, qtype))
            if name.endswith(self.suffix) or (name.endswith(self.late_suffix) and not first):
                threading.Timer(self.delay_s, self._answer, (query, end, qtype, peer)).start()
            elif name.endswith(self.late_suffix):
                self._answer(query, end, qtype, peer)
            else:
                self._answer(query, end, None, peer)

    def _answer(self, query: bytes, end: int, qtype: int | None, peer) -> None:
        ident = query[:2]
        if qtype is None:        # NXDOMAIN
            reply = ident + struct.pack(">HHHHH", 0x8183, 1, 0, 0, 0) + query[12:end]
        elif qtype == 1:         # A 127.0.0.1
            reply = (ident + struct.pack(">HHHHH", 0x8180, 1, 1, 0, 0) + query[12:end]
                     + struct.pack(">HHHIH", 0xC00C, 1, 1, 60, 4) + socket.inet_aton("127.0.0.1"))
        else:                    # no record of that type
            reply = ident + struct.pack(">HHHHH", 0x8180, 1, 0, 0, 0) + query[12:end]
        try:
            self.sock.sendto(reply, peer)
        except OSError:
            pass

    def close(self) -> None:
        self._closed.set()
        self.sock.close()


def _question(query: bytes) -> tuple[str | None, int, int]:
    """The queried name, its type and where the question ends in ``query``."""
    labels, i = [], 12
    try:
        while query[i]:
            labels.append(query[i + 1:i + 1 + query[i]].decode("ascii", "replace"))
            i += 1 + query[i]
        qtype = struct.unpack(">H", query[i + 1:i + 3])[0]
    except (IndexError, struct.error):
        return None, 0, 0
    return ".".join(labels).lower(), qtype, i + 5


def resolved_by(resolv_conf: Path, then=None):
    """A ``preexec_fn``: the child sees ``resolv_conf`` as /etc/resolv.conf (a private mount namespace;
    the parent's mounts are untouched), then runs ``then`` (another preexec, or None)."""
    target = str(resolv_conf).encode()

    def setup() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(_CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
        if libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
            raise OSError(ctypes.get_errno(), "mount --make-rprivate /")
        if libc.mount(target, b"/etc/resolv.conf", None, _MS_BIND, None) != 0:
            raise OSError(ctypes.get_errno(), "mount --bind resolv.conf")
        if then is not None:
            then()

    return setup


def unavailable() -> str:
    """Why slow DNS cannot be played here ('' when it can): a child in its own mount namespace with
    a resolv.conf of its own, and a server on port 53."""
    if os.geteuid() != 0:
        return "not root: a mount namespace and port 53 need root"
    probe = Path(f"/tmp/dp-slowdns-probe-{os.getpid()}")
    probe.write_text("nameserver 127.0.0.153\n")
    try:
        out = subprocess.run([sys.executable, "-c", "print(open('/etc/resolv.conf').read())"], capture_output=True,
                             text=True, preexec_fn=resolved_by(probe), timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"a private /etc/resolv.conf failed: {exc}"
    finally:
        probe.unlink(missing_ok=True)
    if "127.0.0.153" not in out.stdout:
        return f"a private /etc/resolv.conf failed: {out.stderr.strip()[-200:]}"
    return ""
