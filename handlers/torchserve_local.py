"""Start and stop a TorchServe on this machine: the one launcher of the kit.

``make run`` (scripts/run_local.sh), ``make serve-models``, the handler tests (real models) and the
app's end-to-end tests and load bench (fake models, tests/fixtures/torchserve_fake) all start
TorchServe through :class:`LocalTorchServe`::

    python -m handlers.torchserve_local --model-store build/model-store            # 8080/8081/8082
    python -m handlers.torchserve_local --model-store build/model-store --free-ports

It copies ``handlers/config.properties`` into a work directory, changing only the listen
addresses/ports (and ``model_store``), starts ``torchserve --foreground --ncs
--disable-token-auth`` in its own process group (TMPDIR, java.io.tmpdir, logs and metrics in the work directory, so
several instances never share TorchServe's pid file or worker sockets), waits until every model has a READY worker on
the management API, and stops the whole process group on exit, even after a failure.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

try:
    from handlers.readiness import DEFAULT_MODELS, model_problems
except ImportError:  # run as a plain script from handlers/
    from readiness import DEFAULT_MODELS, model_problems  # type: ignore[no-redef]

HANDLERS_DIR = Path(__file__).resolve().parent
CONFIG_TEMPLATE = HANDLERS_DIR / "config.properties"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass
class Ports:
    """TorchServe's five listening ports; the defaults are the pod's."""

    inference: int = 8080
    management: int = 8081
    metrics: int = 8082
    grpc_inference: int = 7070
    grpc_management: int = 7071

    @classmethod
    def free(cls) -> "Ports":
        ports: set[int] = set()
        while len(ports) < 5:
            ports.add(free_port())
        return cls(*sorted(ports))


def java_tmpdir(preferred: Path) -> Path:
    """A private folder for TorchServe's ``java.io.tmpdir``, where it puts its worker sockets.

    TorchServe names them ``<java.io.tmpdir>/.ts.sock.<9000+n>`` and Java ignores TMPDIR, so two
    TorchServes on one machine with the default tmpdir steal each other's workers. ``preferred`` is
    used when the socket paths stay under the 108-byte limit of unix sockets, else a new folder in /tmp.
    """
    if len(str(preferred)) + len("/.ts.sock.65535") < 100:
        preferred.mkdir(parents=True, exist_ok=True)
        return preferred
    return Path(tempfile.mkdtemp(prefix="doodlepod-ts-"))


def write_config(dest: Path, ports: Ports, host: str = "127.0.0.1", model_store: Path | None = None,
                 overrides: dict[str, str] | None = None, template: Path = CONFIG_TEMPLATE,
                 tmpdir: Path | None = None) -> Path:
    """Write ``template`` to ``dest`` with the listen addresses/ports (and optional keys) replaced.

    ``tmpdir`` (see :func:`java_tmpdir`) is appended to the template's ``vmargs`` as
    ``-Djava.io.tmpdir``.
    """
    values = {
        "inference_address": f"http://{host}:{ports.inference}",
        "management_address": f"http://{host}:{ports.management}",
        "metrics_address": f"http://{host}:{ports.metrics}",
        "grpc_inference_address": host,
        "grpc_management_address": host,
        "grpc_inference_port": str(ports.grpc_inference),
        "grpc_management_port": str(ports.grpc_management),
    }
    if model_store is not None:
        values["model_store"] = str(model_store)
    text = template.read_text()
    if tmpdir is not None:
        vmargs = next((line.split("=", 1)[1].strip() for line in text.splitlines() if line.startswith("vmargs=")), "")
        values["vmargs"] = f"{vmargs} -Djava.io.tmpdir={tmpdir}".strip()
    values.update(overrides or {})
    for key, value in values.items():
        pattern = re.compile(rf"^{re.escape(key)}=.*$", re.M)
        if pattern.search(text):
            text = pattern.sub(lambda _m: f"{key}={value}", text)
        else:
            text += f"\n{key}={value}\n"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text)
    return dest


@dataclass
class LocalTorchServe:
    """A TorchServe process serving ``model_store``; use as a context manager or start()/stop()."""

    model_store: Path
    workdir: Path | None = None
    ports: Ports = field(default_factory=Ports.free)
    host: str = "127.0.0.1"
    models: tuple[str, ...] = DEFAULT_MODELS
    overrides: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    #: the config to start from (its listen addresses, model store and tmpdir are replaced)
    template: Path = CONFIG_TEMPLATE
    #: seconds :meth:`stop` waits after SIGTERM before SIGKILL
    stop_timeout: float = 60.0
    proc: subprocess.Popen | None = None

    @property
    def inference_url(self) -> str:
        return f"http://{self.host}:{self.ports.inference}"

    @property
    def management_url(self) -> str:
        return f"http://{self.host}:{self.ports.management}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.host}:{self.ports.metrics}"

    @property
    def log_dir(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "logs"

    def start(self, timeout: float = 300.0) -> "LocalTorchServe":
        """Start TorchServe and wait until every model has a READY worker (or raise, stopped)."""
        self.model_store = Path(self.model_store).resolve()
        missing = [m for m in self.models if not (self.model_store / f"{m}.mar").is_file()]
        if missing:
            raise FileNotFoundError(
                f"{self.model_store} lacks {', '.join(m + '.mar' for m in missing)}: "
                "build them with `make archives` (tiny) or scripts/build_archives.py")
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="doodlepod-torchserve-"))
        self.workdir = Path(self.workdir).resolve()
        (self.workdir / "tmp").mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        overrides = {"load_models": ",".join(f"{m}.mar" for m in self.models), **self.overrides}
        config = write_config(self.workdir / "config.properties", self.ports, self.host,
                              self.model_store, overrides, template=self.template,
                              tmpdir=java_tmpdir(self.workdir / "tmp"))
        search = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        torchserve = shutil.which("torchserve", path=search)
        if torchserve is None:
            raise FileNotFoundError("torchserve is not installed (pip install torchserve==0.12.0)")
        env = {**os.environ, "TMPDIR": str(self.workdir / "tmp"), "LOG_LOCATION": str(self.log_dir),
               "METRICS_LOCATION": str(self.log_dir), **self.env}
        # The model workers are Python processes TorchServe starts with its own interpreter: make
        # sure it is this venv's (torchserve passes --python sys.executable to the frontend).
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        cmd = [torchserve, "--foreground", "--ncs", "--disable-token-auth",
               "--ts-config", str(config), "--model-store", str(self.model_store)]
        out = open(self.log_dir / "torchserve.out", "ab")
        self.proc = subprocess.Popen(cmd, cwd=self.workdir, env=env, stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        out.close()
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_ready(self, timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        problems: list[str] = ["not asked yet"]
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"TorchServe exited with status {self.proc.returncode} before its "
                                   f"models were ready\n{self.log_tail()}")
            problems = model_problems(self.management_url, self.models, timeout=2.0)
            if not problems:
                return
            time.sleep(0.5)
        raise TimeoutError(f"models not READY after {timeout:.0f} s: {'; '.join(problems)}\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        chunks = []
        for name in ("torchserve.out", "model_log.log", "ts_log.log"):
            path = self.log_dir / name
            if path.is_file():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                chunks.append(f"--- {path} (last {len(tail)} lines) ---\n" + "\n".join(tail))
        return "\n".join(chunks)

    def stop(self, timeout: float | None = None) -> None:
        """Stop TorchServe's whole process group: SIGTERM, then SIGKILL after ``timeout`` (default
        :attr:`stop_timeout`); return once its ports are closed (the Java frontend can outlive the
        ``torchserve`` command)."""
        timeout = self.stop_timeout if timeout is None else timeout
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        # The frontend and the Python workers share the group; make sure none outlives us.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        end = time.monotonic() + 20
        while time.monotonic() < end and (_listening(self.host, self.ports.management)
                                          or _listening(self.host, self.ports.inference)):
            time.sleep(0.2)

    def __enter__(self) -> "LocalTorchServe":
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _listening(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m handlers.torchserve_local",
        description="Run TorchServe with doodlepod's config on this machine until interrupted.")
    parser.add_argument("--model-store", required=True, type=Path,
                        help="folder with drawn_humanoid_detector.mar and drawn_humanoid_pose_estimator.mar")
    parser.add_argument("--workdir", type=Path, help="config, logs and TMPDIR go here (default: a new temp dir)")
    parser.add_argument("--host", default="127.0.0.1", help="listen address (default %(default)s)")
    parser.add_argument("--inference-port", type=int, default=8080)
    parser.add_argument("--management-port", type=int, default=8081)
    parser.add_argument("--metrics-port", type=int, default=8082)
    parser.add_argument("--grpc-port", type=int, default=7070,
                        help="gRPC inference port; gRPC management is the next one (default %(default)s)")
    parser.add_argument("--free-ports", action="store_true", help="pick free ports instead")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for READY workers")
    parser.add_argument("--stop-timeout", type=float, default=10.0,
                        help="seconds TorchServe gets to stop on SIGTERM/Ctrl-C before it is killed")
    args = parser.parse_args(argv)
    ports = Ports.free() if args.free_ports else Ports(
        args.inference_port, args.management_port, args.metrics_port, args.grpc_port, args.grpc_port + 1)
    server = LocalTorchServe(args.model_store, args.workdir, ports, args.host, stop_timeout=args.stop_timeout)
    t0 = time.monotonic()
    print(f"starting TorchServe on {server.host} (inference {ports.inference}, management "
          f"{ports.management}, metrics {ports.metrics}) with {args.model_store}", flush=True)
    stop = {"now": False, "ready": False}

    class _Stopped(BaseException):
        """A signal while the models load: start() stops TorchServe on the way out."""

    def _on_signal(signum: int, _frame: object) -> None:
        stop["now"] = True
        if not stop["ready"]:
            raise _Stopped()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        server.start(args.timeout)
        stop["ready"] = True
    except (RuntimeError, TimeoutError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except BaseException:  # e.g. Ctrl-C while the models load: start() has stopped TorchServe
        print("TorchServe stopped before it was ready", file=sys.stderr)
        return 1
    print(f"ready in {time.monotonic() - t0:.1f} s: {server.inference_url}/predictions/<model>, "
          f"management {server.management_url}, logs {server.log_dir}", flush=True)
    try:
        while not stop["now"]:
            if server.proc is not None and server.proc.poll() is not None:
                print(f"TorchServe exited ({server.proc.returncode})\n{server.log_tail()}", file=sys.stderr)
                return 1
            time.sleep(0.5)
    finally:
        server.stop()
    print("TorchServe stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
