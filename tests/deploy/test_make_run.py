"""`make run` as the README describes it, end to end, then Ctrl-C.

Starts ``make run`` in the background (its own process group, like a terminal), waits until it says
the stack is ready, runs the README's client-joints curl line (parsed out of README.md, so the docs
and this test cannot drift), fetches every returned animation URL and checks it is a GIF, then sends
SIGINT (what Ctrl-C sends) and checks that every process the run started is gone and its ports are
free.

Everything is real: TorchServe on CPU with the real handlers, gunicorn with gevent workers, local
storage. What differs from a user's first run, and why:
- DOODLEPOD_RUN_WEIGHTS=tiny: this machine cannot download AnimatedDrawings' weights (and a test
  should not download hundreds of MB); the tiny archives run the same handlers, and the curl line
  under test sends the joints, so its answer does not depend on what the models detect.
- free ports instead of 8000/8080-8082/7070-7071 and a temporary run folder, so the test can run
  next to other servers; the README's URL is rewritten to the chosen app port.
"""
from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.support import procs

README = REPO / "README.md"
README_BASE = "http://127.0.0.1:8000"
READY_LINE = "doodlepod is running at"
READY_TIMEOUT_S = float(os.environ.get("DOODLEPOD_TEST_RUN_TIMEOUT_S", "900"))

pytestmark = [pytest.mark.e2e, pytest.mark.model_stack, pytest.mark.timeout(READY_TIMEOUT_S + 300)]


def client_joints_command() -> str:
    """The shell command of the README block marked ``client-joints-curl``, continuations joined."""
    text = README.read_text()
    m = re.search(r"<!-- client-joints-curl[^>]*-->\s*```sh\n(.*?)```", text, re.S)
    assert m, "README.md has no block marked <!-- client-joints-curl -->"
    command = re.sub(r"\\\n\s*", " ", m.group(1)).strip()
    assert "\n" not in command, "the marked block must hold exactly one command"
    assert command.startswith("curl ") and "joints=" in command and README_BASE in command, command
    return command


def default_motions() -> list[str]:
    """DOODLEPOD_DEFAULT_MOTIONS' default, from the app's settings table (app/config.py)."""
    spec = importlib.util.spec_from_file_location("_doodlepod_app_config_run", REPO / "app" / "config.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    default = next(s.default for s in module.SETTINGS if s.name == "DOODLEPOD_DEFAULT_MOTIONS")
    return [m.strip() for m in default.split(",") if m.strip()]


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port_pair(exclude: set[int]) -> int:
    """A port p such that p and p + 1 are both free (TorchServe's gRPC inference and management)."""
    for _ in range(100):
        (p,) = free_ports(1)
        if p in exclude or p + 1 in exclude or p + 1 > 65535:
            continue
        with socket.socket() as a, socket.socket() as b:
            try:
                a.bind(("127.0.0.1", p))
                b.bind(("127.0.0.1", p + 1))
            except OSError:
                continue
        return p
    raise RuntimeError("no two consecutive free ports")


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def processes_with(marker: str) -> list[int]:
    """Pids of live processes whose environment holds ``marker`` (everything the run started)."""
    return procs.matching("environ", marker.encode())


def processes_running(text: str) -> list[int]:
    """Pids of live processes whose command line holds ``text``. Valkey (like Redis) rewrites its
    environment's memory with its process title, so the run's marker cannot find it: its title
    ("valkey-server 127.0.0.1:PORT") can."""
    return procs.matching("cmdline", text.encode())


def get(url: str, timeout: float = 30) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class MakeRun:
    def __init__(self, tmp: Path):
        self.marker = f"MAKE_RUN_TEST_ID={uuid.uuid4().hex}"
        self.app, self.ts, self.mgmt, self.metrics, self.redis = free_ports(5)
        self.grpc = free_port_pair(exclude={self.app, self.ts, self.mgmt, self.metrics, self.redis})
        self.log_path = tmp / "make-run.log"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("DOODLEPOD_") or
                    k in ("DOODLEPOD_CACHE", "DOODLEPOD_VENV")}
        self.env.update({
            "MAKE_RUN_TEST_ID": self.marker.split("=", 1)[1],
            "DOODLEPOD_PORT": str(self.app),
            "DOODLEPOD_TORCHSERVE_URL": f"http://127.0.0.1:{self.ts}",
            "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": f"http://127.0.0.1:{self.mgmt}",
            "DOODLEPOD_RUN_TS_METRICS_PORT": str(self.metrics),
            "DOODLEPOD_RUN_TS_GRPC_PORT": str(self.grpc),
            "DOODLEPOD_RUN_REDIS_PORT": str(self.redis),
            "DOODLEPOD_RUN_DIR": str(tmp / "run"),
            "DOODLEPOD_RUN_WEIGHTS": "tiny",
            "DOODLEPOD_RUN_READY_TIMEOUT_S": str(int(READY_TIMEOUT_S)),
        })
        self.proc: subprocess.Popen | None = None

    @property
    def ports(self) -> list[int]:
        return [self.app, self.ts, self.mgmt, self.metrics, self.grpc, self.grpc + 1, self.redis]

    def start(self) -> None:
        self.log = open(self.log_path, "wb")
        # A terminal's Ctrl-C always reaches its foreground job; a test runner started in the
        # background may run with SIGINT ignored, which children inherit: give make the default.
        self.proc = subprocess.Popen(["make", "run"], cwd=REPO, env=self.env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S + 60
        while READY_LINE not in self.output():
            assert self.proc.poll() is None, f"make run exited ({self.proc.returncode}):\n{self.output()[-5000:]}"
            assert time.monotonic() < deadline, f"make run not ready in time:\n{self.output()[-5000:]}"
            time.sleep(1)

    def interrupt(self, timeout: float = 90) -> int:
        """Ctrl-C: SIGINT to the foreground process group (make and the script)."""
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"make run still running {timeout:.0f} s after SIGINT:\n"
                                 f"{self.output()[-3000:]}") from None

    def leftovers(self) -> list[int]:
        """Live processes the run started: by its environment marker, and Valkey by its title."""
        return processes_with(self.marker) + processes_running(f"127.0.0.1:{self.redis}")

    def kill_leftovers(self) -> None:
        """Finaliser: whatever the run left behind, by process group and by environment marker."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=30)
        for pid in self.leftovers():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if hasattr(self, "log"):
            self.log.close()


@pytest.fixture
def make_run(tmp_path):
    run = MakeRun(tmp_path)
    yield run
    run.kill_leftovers()


def test_readme_client_joints_line_is_well_formed():
    args = shlex.split(client_joints_command())
    joints = next(a for a in args if a.startswith("joints="))
    parsed = json.loads(joints.split("=", 1)[1])
    # The joints are char1's own (its char_cfg.yaml), so the demo renders a known character.
    cfg = yaml.safe_load((REPO / "tests/fixtures/animated_drawings/examples/characters/char1/char_cfg.yaml")
                         .read_text())
    assert parsed == {j["name"]: j["loc"] for j in cfg["skeleton"]}
    image = next(a for a in args if a.startswith("image=@")).split("@", 1)[1]
    assert (REPO / image).is_file(), image


def test_make_run_serves_the_readme_curl_line_and_stops_cleanly(make_run):
    from PIL import Image

    make_run.start()
    make_run.wait_ready()
    out = make_run.output()
    base = f"http://127.0.0.1:{make_run.app}"
    command = client_joints_command().replace(README_BASE, base)
    assert command in re.sub(r"\\\n\s*", " ", out), "make run does not print the README's curl line"
    # two phases: the app's block (studio URL, client-joints line) comes first, the models' READY after
    app_up = out.index("the app is up at")
    assert app_up < out.index(READY_LINE) and "/studio" in out[app_up:out.index(READY_LINE)], out[-5000:]
    assert "MEANINGLESS" in out, "the tiny models must come with a loud warning"

    # The probes the pod uses answer on the running stack.
    pod = next(d for d in yaml.safe_load_all((REPO / "pod.yaml").read_text()) if d and d["kind"] == "Pod")
    app = next(c for c in pod["spec"]["containers"] if c["name"] == "app")
    for probe in ("readinessProbe", "livenessProbe"):
        status, body = get(base + app[probe]["httpGet"]["path"])
        assert status == 200, (probe, status, body[:500])

    result = subprocess.run(["bash", "-c", command], cwd=REPO, capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    answer = json.loads(result.stdout)
    assert "animations" in answer, f"{answer}\n--- make run output ---\n{make_run.output()[-3000:]}"
    animations = answer["animations"]
    assert animations and set(animations) == set(default_motions()), answer
    for motion, url in animations.items():
        assert url.startswith(base + "/"), url
        status, data = get(url)
        assert status == 200 and data[:6] in (b"GIF89a", b"GIF87a"), (motion, status, data[:20])
        with Image.open(io.BytesIO(data)) as gif:
            assert gif.format == "GIF" and getattr(gif, "n_frames", 1) > 10, (motion, gif.size)

    # The same drawing as an async job: make run started Redis and a render worker on its own.
    async_command = command.replace("curl ", "curl -si -H 'Prefer: respond-async' ", 1)
    result = subprocess.run(["bash", "-c", async_command], cwd=REPO, capture_output=True, timeout=60)
    head = result.stdout.decode(errors="replace")
    assert head.startswith("HTTP/1.1 202"), f"{head[:800]}\n--- make run output ---\n{make_run.output()[-3000:]}"
    location = re.search(r"^Location: (/jobs/[0-9a-f]{32})\s*$", head, re.M | re.I).group(1)
    deadline = time.monotonic() + 240
    while True:
        job = json.loads(get(base + location)[1])
        if job["status"] in ("succeeded", "failed") or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert job["status"] == "succeeded" and set(job["animations"]) == set(default_motions()), job
    assert json.loads(get(base + "/ping")[1])["components"]["jobs"]["ok"] is True

    rc = make_run.interrupt()
    log = make_run.output()
    # make waits for the script's clean-up, then dies of the same SIGINT (as it does in a terminal).
    assert rc in (0, -signal.SIGINT), f"make run exited {rc} after Ctrl-C:\n{log[-3000:]}"
    assert re.search(r"\] stopped$", log, re.M), f"the script did not finish its clean-up:\n{log[-2000:]}"
    deadline = time.monotonic() + 10
    while make_run.leftovers() and time.monotonic() < deadline:
        time.sleep(0.2)
    left = make_run.leftovers()
    details = {pid: Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:200] for pid in left
               if Path(f"/proc/{pid}").exists()}
    assert not left, f"processes left running after Ctrl-C: {details}"
    assert not [p for p in make_run.ports if port_open(p)], "a port is still open after Ctrl-C"


def test_make_run_stops_the_app_and_fails_when_torchserve_dies(make_run):
    """No `sleep infinity`: a crashed model server ends the run loudly, with nothing left behind."""
    make_run.start()
    make_run.wait_ready()
    java = [pid for pid in processes_with(make_run.marker)
            if b"org.pytorch.serve.ModelServer" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert len(java) == 1, java
    os.kill(java[0], signal.SIGKILL)
    rc = make_run.proc.wait(timeout=90)
    log = make_run.output()
    assert rc != 0, log[-2000:]
    assert "TorchServe exited unexpectedly" in log, log[-2000:]
    assert re.search(r"\] stopped$", log, re.M), log[-2000:]
    deadline = time.monotonic() + 10
    while make_run.leftovers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not make_run.leftovers(), "the app or Redis outlived the crashed TorchServe"


def test_make_run_refuses_a_busy_port_before_starting_anything(make_run):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", make_run.app))
        busy.listen()
        make_run.start()
        rc = make_run.proc.wait(timeout=120)
    log = make_run.output()
    assert rc != 0 and f"port {make_run.app} is already in use" in log, log[-2000:]
    assert "starting TorchServe" not in log
    assert not make_run.leftovers()
