"""pod.yaml and deploy/ read for the deployment tests: the manifests, their pod specs and containers,
what each container's environment becomes, the app's settings and the images' Dockerfiles."""
from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import REPO

POD_FILE = REPO / "pod.yaml"
DEPLOY_DIR = REPO / "deploy"
MANIFESTS = [POD_FILE, *sorted(DEPLOY_DIR.rglob("*.yaml"))]
#: API groups of custom resources (opt-in examples): no schema ships with kubernetes-validate; their
#: fields are checked by their own tests (tests/deploy/test_jobs_manifests.py for KEDA).
CUSTOM_GROUPS = ("keda.sh",)
#: Native sidecars (beta, on by default) since 1.29; HPA ContainerResource and the preStop sleep action
#: are on by default since 1.30. docs/deployment.md "Deploying with kubectl" states the same floor.
OLDEST_KUBERNETES = "1.30.0"
GPU = "nvidia.com/gpu"
MODEL_NAMES = ("drawn_humanoid_detector", "drawn_humanoid_pose_estimator")


def load_docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def find(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = find(docs, kind)
    assert len(found) == 1, f"expected exactly one {kind}, found {len(found)}"
    return found[0]


@lru_cache(maxsize=None)
def pod_docs() -> tuple[dict[str, Any], ...]:
    return tuple(load_docs(POD_FILE))


@lru_cache(maxsize=None)
def deploy_docs() -> tuple[dict[str, Any], ...]:
    """What `kubectl apply -f deploy/` applies (top level only; deploy/examples/ is opt-in)."""
    docs: list[dict[str, Any]] = []
    for path in sorted(DEPLOY_DIR.glob("*.yaml")):
        docs += load_docs(path)
    return tuple(docs)


def pod_spec() -> dict[str, Any]:
    return one(list(pod_docs()), "Pod")["spec"]


def deployment() -> dict[str, Any]:
    return one(list(deploy_docs()), "Deployment")


def pod_specs() -> list[tuple[str, dict[str, Any], tuple[dict[str, Any], ...]]]:
    """(label, pod spec, the documents it is applied with) for pod.yaml and the Deployment."""
    return [("pod.yaml", pod_spec(), pod_docs()),
            ("deploy/deployment.yaml", deployment()["spec"]["template"]["spec"], deploy_docs())]


def containers(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every long-running container: regular ones and native sidecars (restartable init containers)."""
    found = {c["name"]: c for c in spec.get("containers", [])}
    for c in spec.get("initContainers", []):
        assert c.get("restartPolicy") == "Always", f"init container {c['name']} would block the pod"
        found[c["name"]] = c
    return found


DOCKERFILES = {"model": REPO / "Dockerfile.model", "app": REPO / "Dockerfile.app"}


def dockerfile_text(container: str) -> str:
    path = DOCKERFILES[container]
    assert path.is_file(), f"{path.name} is missing"
    return path.read_text()


def dockerfile_instructions(container: str, name: str) -> list[str]:
    """Arguments of every ``name`` instruction (continuation lines joined) of the container's image."""
    text = re.sub(r"\\\n", " ", dockerfile_text(container))
    return [m.group(1).strip() for m in re.finditer(rf"^\s*{name}\s+(.*)$", text, re.M | re.I)]


def image_env(container: str) -> dict[str, str]:
    """ENV of the image's last stage (``ENV A=1 B=2`` form), as the container starts with it."""
    text = dockerfile_text(container)
    last_stage = re.split(r"^FROM\s", text, flags=re.M)[-1]
    joined = re.sub(r"\\\n", " ", last_stage)
    env: dict[str, str] = {}
    for m in re.finditer(r"^\s*ENV\s+(.*)$", joined, re.M):
        for item in shlex.split(m.group(1)):
            if "=" in item:
                key, value = item.split("=", 1)
                env[key] = value
    return env


def effective_env(container: dict[str, Any], docs: tuple[dict[str, Any], ...]) -> dict[str, str]:
    """What the container sees: its image's ENV, then envFrom ConfigMaps (same manifests), then env."""
    config_maps = {d["metadata"]["name"]: d for d in find(list(docs), "ConfigMap")}
    image = "model" if container["image"].startswith("doodlepod-model:") else "app"  # the worker: the app's ENV too
    env: dict[str, str] = dict(image_env(image))
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            name = source["configMapRef"]["name"]
            assert name in config_maps or source["configMapRef"].get("optional"), (
                f"ConfigMap {name} is referenced but not shipped with these manifests")
            env.update({k: str(v) for k, v in config_maps.get(name, {}).get("data", {}).items()})
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = str(var["value"])
    return env


@lru_cache(maxsize=None)
def app_config():
    """app/config.py loaded by path (it is self-contained), so the test needs no package setup."""
    path = REPO / "app" / "config.py"
    assert path.is_file(), "app/config.py (the app's settings table, helper 'app') is missing"
    spec = importlib.util.spec_from_file_location("_doodlepod_app_config", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while the class is built
    spec.loader.exec_module(module)
    return module


def setting_names() -> set[str]:
    return {s.name for s in app_config().SETTINGS}


@lru_cache(maxsize=None)
def torchserve_properties() -> dict[str, str]:
    path = REPO / "handlers" / "config.properties"
    assert path.is_file(), "handlers/config.properties (TorchServe's config, helper 'model') is missing"
    props: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, value = line.split("=", 1)
            props[key.strip()] = value.strip()
    return props


def host_port(url: str) -> tuple[str, int]:
    m = re.match(r"^https?://([^:/]+):(\d+)", url)
    assert m, f"not a http://host:port address: {url!r}"
    return m.group(1), int(m.group(2))


def named_port(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    assert port in ports, f"{container['name']}: probe uses port name {port!r}, not declared"
    return ports[port]


def quantity(value: Any) -> float:
    """A Kubernetes CPU quantity ("500m", "2", 2) in cores."""
    text = str(value)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


# ----------------------------------------------------------------------------------------- schemas
def kubernetes_validate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kubernetes_validate", *args],
                          capture_output=True, text=True, timeout=300)


def newest_kubernetes() -> str:
    from kubernetes_validate.utils import latest_version
    return latest_version()


def on_mount(path: str, container: dict[str, Any]) -> bool:
    return any(path == m["mountPath"] or path.startswith(m["mountPath"].rstrip("/") + "/")
               for m in container.get("volumeMounts", []))
