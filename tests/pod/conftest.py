"""The images built and pod.yaml run by a real container engine, as an operator runs them.

``images`` builds both images with ``scripts/images.sh`` (what ``make images`` runs) from a clean copy of
this checkout: the files git tracks or would add, none of the checkout's build outputs (compiled kernels,
var/, build/). ``pod`` starts pod.yaml with ``scripts/pod.sh up --detach`` (what ``make pod`` runs: podman
play kube, the CPU overlay, deploy/redis.yaml's Redis) under a name and port of its own, and removes it
after the module with ``scripts/pod.sh down``.

What differs from an operator's machine, and why: the model image carries the tiny random-initialised
models where AnimatedDrawings' weights cannot be downloaded (scripts/images.sh decides, as ``make images``
does), so a photo finds nothing meaningful; the curls under test send the joints. The test pod's
ConfigMap gains a webhook secret and lets callbacks reach the podman network's gateway, where the test's
receiver listens (the app refuses private addresses unless DOODLEPOD_WEBHOOK_ALLOW lists them).

Where no engine can run (no podman or docker, or no root to install one) the tests skip, and a red banner
at the end of the run says so, as the browser tests do.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import REPO

#: How long building both images may take (cold, on 2 busy cores: minutes; mmcv is never compiled here).
BUILD_TIMEOUT_S = float(os.environ.get("DOODLEPOD_TEST_IMAGES_TIMEOUT_S", "2400"))
POD_TIMEOUT_S = float(os.environ.get("DOODLEPOD_TEST_POD_TIMEOUT_S", "900"))
TAG = "0.1.0"
APP_IMAGE, WORKER_IMAGE, MODEL_IMAGE = f"doodlepod-app:{TAG}", f"doodlepod-worker:{TAG}", f"doodlepod-model:{TAG}-cpu"

_skipped: list[str] = []


def _skip(reason: str) -> None:
    _skipped.append(reason)
    pytest.skip(reason)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if _skipped:
        terminalreporter.write_sep("!", "images and pod NOT tested with a container engine", red=True, bold=True)
        for reason in dict.fromkeys(_skipped):
            terminalreporter.write_line(reason, red=True)


@dataclass
class Engine:
    """The engine ``make images`` picks, with the CONTAINERS_CONF it chose (scripts/engine.sh)."""

    name: str
    env: dict[str, str]

    def run(self, *args: str, timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess:
        res = subprocess.run([self.name, *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        if check:
            assert res.returncode == 0, f"{self.name} {' '.join(args)}: {res.stdout}\n{res.stderr}"
        return res

    def exec(self, container: str, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return self.run("exec", container, *argv, timeout=timeout)

    def inspect(self, container: str) -> dict:
        return json.loads(self.run("container", "inspect", container, check=True).stdout)[0]


def _probe(script: str, env: dict[str, str]) -> tuple[int, str]:
    res = subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    return res.returncode, (res.stdout + res.stderr).strip()


def _podman_smoke_result() -> str:
    """What scripts/install_podman.sh's smoke test found ("ok", "skip: REASON"), or "" when it has not run."""
    cache = Path(os.environ.get("DOODLEPOD_CACHE") or Path.home() / ".cache" / "doodlepod")
    try:
        return (cache / "smoke" / "podman").read_text().splitlines()[1]
    except (OSError, IndexError):
        return ""


@pytest.fixture(scope="session")
def engine() -> Engine:
    if not (shutil.which("podman") or shutil.which("docker")):
        _skip("POD TESTS SKIPPED: no podman or docker here; as root run scripts/install_podman.sh "
              "(apt-get install -y podman runc mmdebstrap)")
    smoke = _podman_smoke_result()
    if smoke.startswith("skip: "):
        _skip(f"POD TESTS SKIPPED: {smoke.removeprefix('skip: ')} (scripts/install_podman.sh's smoke test)")
    env = dict(os.environ)
    rc, out = _probe("source scripts/engine.sh && engine_detect && echo ENGINE=$ENGINE", env)
    if rc != 0:
        _skip(f"POD TESTS SKIPPED: no container engine answers here: {out[-300:]}")
    name = out.rsplit("ENGINE=", 1)[1].split()[0]
    return Engine(name, env)


def clean_copy(dest: Path) -> Path:
    """The files a fresh clone of this checkout holds (tracked, or new and not ignored), nothing else."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


@dataclass
class Built:
    engine: Engine
    checkout: Path
    output: str
    seconds: float
    env: dict[str, str] = field(default_factory=dict)


@pytest.fixture(scope="session")
def images(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Built:
    """Both images, built by scripts/images.sh from a clean copy of the checkout (once per session)."""
    checkout = clean_copy(tmp_path_factory.mktemp("clean-checkout"))
    env = dict(engine.env, DOODLEPOD_ENGINE=engine.name, DOODLEPOD_IMAGE_TAG=TAG)
    t0 = time.monotonic()
    res = subprocess.run(["scripts/images.sh"], cwd=checkout, env=env, capture_output=True, text=True,
                         timeout=BUILD_TIMEOUT_S)
    seconds = time.monotonic() - t0
    out = res.stdout + res.stderr
    assert res.returncode == 0, f"scripts/images.sh failed after {seconds:.0f} s:\n{out[-6000:]}"
    print(f"\n[images] built in {seconds:.0f} s:\n" + "\n".join(out.strip().splitlines()[-3:]))
    # Every later engine command must see the same configuration (CONTAINERS_CONF) the build chose.
    rc, conf = _probe("source scripts/engine.sh && engine_detect && engine_configure "
                      f"{APP_IMAGE} 2>/dev/null; echo CONF=${{CONTAINERS_CONF:-}}", env)
    conf = conf.rsplit("CONF=", 1)[1].strip()
    if conf:
        env["CONTAINERS_CONF"] = conf
        engine.env["CONTAINERS_CONF"] = conf
    return Built(engine, checkout, out, seconds, env)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Pod:
    """A running pod: ``name`` (containers ``name-app``, ``name-model``, ``name-worker``), ``url`` on the
    host's loopback, ``gateway`` (the podman network's address on this host, reachable from the pod)."""

    name: str
    url: str
    gateway: str
    engine: Engine
    checkout: Path
    output: str
    ready_s: float
    receiver_port: int

    def container(self, short: str) -> str:
        return f"{self.name}-{short}"


@pytest.fixture(scope="module")
def pod(images: Built) -> Iterator[Pod]:
    if images.engine.name != "podman":
        _skip("POD TESTS SKIPPED: the pod runs with podman's play kube; this machine has only docker")
    name = f"dp-test-{os.getpid()}"
    port, receiver_port = free_port(), free_port()
    env = dict(images.env, DOODLEPOD_POD_NAME=name, DOODLEPOD_POD_PORT=str(port))
    # Callbacks: signed with a secret, and allowed to the podman networks' private range, where the
    # receiver listens on the network's gateway (the host side of the pod's network).
    args = ["scripts/pod.sh", "up", "--detach", "--set", "DOODLEPOD_WEBHOOK_SECRET=pod-test-secret",
            "--set", "DOODLEPOD_WEBHOOK_ALLOW=10.0.0.0/8"]
    t0 = time.monotonic()
    res = subprocess.run(args, cwd=images.checkout, env=env, capture_output=True, text=True,
                         timeout=POD_TIMEOUT_S + 120)
    out = res.stdout + res.stderr
    try:
        assert res.returncode == 0, f"scripts/pod.sh up failed after {time.monotonic() - t0:.0f} s:\n{out[-6000:]}"
        ready_s = float((images.checkout / "build" / "pod" / name / "ready_s").read_text())
        net = json.loads(images.engine.run("network", "inspect", name, check=True).stdout)[0]
        gateway = net["subnets"][0]["gateway"]
        yield Pod(name, f"http://127.0.0.1:{port}", gateway, images.engine, images.checkout, out, ready_s,
                  receiver_port)
    finally:
        down = subprocess.run(["scripts/pod.sh", "down"], cwd=images.checkout, env=env, capture_output=True,
                              text=True, timeout=180)
        assert down.returncode == 0, down.stdout + down.stderr
        # `make pod-down` leaves nothing of the pod: no pod, volume or network of its name.
        listings = {"pod": ("pod", "ls", "--format", "{{.Name}}"), "volume": ("volume", "ls", "--quiet"),
                    "network": ("network", "ls", "--quiet")}
        left = {what: [n for n in images.engine.run(*argv).stdout.split() if n.startswith(name)]
                for what, argv in listings.items()}
        assert not any(left.values()), f"left behind by scripts/pod.sh down: {left}"
