#!/usr/bin/env python3
"""pod.yaml, and deploy/redis.yaml's Redis, as `podman play kube` (4.3) runs them on a machine without a
GPU: what `make pod` plays (scripts/pod.sh).

The manifests are read as they are; this overlay changes only what must differ, each for the reason
written beside it, and prints the result (multi-document YAML) on stdout:

pod.yaml (``--what pod``)
  * images: the CPU model image ``doodlepod-model:TAG-cpu`` (`make images`) instead of the GPU one;
    the app image's tag is TAG.
  * the model container leaves ``initContainers`` for ``containers``: podman runs init containers to
    completion before the others and does not know native sidecars (``restartPolicy: Always``), so
    TorchServe, which never exits, would hold the app back for ever. docs/deployment.md names the same
    change for clusters without sidecar support. (The app's /ping still waits for READY models.)
  * no ``nvidia.com/gpu`` limit and no GPU toleration: there is no GPU.
  * the probes' named port (``port: http``) becomes its number: podman 4.3 turns a named probe port
    into port 0.
  * the app's port is published on the host's loopback (``hostPort``/``hostIP``; Kubernetes would
    use a Service or port-forward).
  * the ConfigMap gains deploy/configmap.yaml's ``DOODLEPOD_REDIS_URL``, so the worker takes jobs
    from the Redis below, as in deploy/ (pod.yaml alone runs without Redis).
  * with ``--name``, the pod is named NAME (its containers NAME-app, ...), so the tests' pod and an
    operator's `make pod` do not meet.
  * volumes are named NAME-<volume>: podman 4.3 makes each emptyDir a named volume of the machine
    under the volume's own name, which two pods would share; ``scripts/pod.sh down`` removes them.
  * ``--set KEY=VALUE`` adds settings to the ConfigMap (the tests' webhook secret and allowed
    receiver network; in a cluster a secret belongs in the Secret ``doodlepod-s3``).

deploy/redis.yaml (``--what redis``)
  * the StatefulSet's pod template becomes a Pod named after its Service (``doodlepod-redis``, or
    NAME-redis), so the app reaches it by that name on the pod network; its volume claim becomes a
    podman volume named NAME-<claim> and its ConfigMap NAME-config (podman turns both into named volumes
    of the machine, removed by ``scripts/pod.sh down``); ``--redis-image`` replaces the image when the pinned one
    cannot be pulled here (scripts/pod.sh builds a local equivalent).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
GPU = "nvidia.com/gpu"


def load(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    if len(found) != 1:
        raise SystemExit(f"pod_overlay: expected one {kind}{' ' + name if name else ''}, found {len(found)}")
    return found[0]


def named_ports(container: dict[str, Any]) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in container.get("ports", []) if "name" in p}


def numeric_probe_ports(container: dict[str, Any]) -> None:
    ports = named_ports(container)
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        for action in ("httpGet", "tcpSocket"):
            target = container.get(probe, {}).get(action)
            if target and isinstance(target.get("port"), str):
                target["port"] = ports[target["port"]]


def redis_url(name: str) -> str:
    """deploy/configmap.yaml's DOODLEPOD_REDIS_URL, with the host renamed to the Redis pod's name."""
    url = one(load(REPO / "deploy" / "configmap.yaml"), "ConfigMap")["data"]["DOODLEPOD_REDIS_URL"]
    return url.replace("//doodlepod-redis:", f"//{name}:")


def pod_overlay(tag: str, name: str, host_port: int, redis_name: str | None,
                settings: dict[str, str] | None = None) -> list[dict[str, Any]]:
    docs = load(REPO / "pod.yaml")
    config = one(docs, "ConfigMap")
    pod = one(docs, "Pod")
    spec = pod["spec"]
    pod["metadata"]["name"] = name
    if redis_name:
        config["data"]["DOODLEPOD_REDIS_URL"] = redis_url(redis_name)
    config["data"].update(settings or {})
    sidecars = [c for c in spec.pop("initContainers", []) if c.get("restartPolicy") == "Always"]
    for c in sidecars:
        del c["restartPolicy"]
    spec["containers"] = sidecars + spec["containers"]
    spec["tolerations"] = [t for t in spec.get("tolerations", []) if t.get("key") != GPU]
    if not spec["tolerations"]:
        del spec["tolerations"]
    for volume in spec.get("volumes", []):
        volume["name"] = f"{name}-{volume['name']}"
    for c in spec["containers"]:
        for mount in c.get("volumeMounts", []):
            mount["name"] = f"{name}-{mount['name']}"
        limits = c.get("resources", {}).get("limits", {})
        limits.pop(GPU, None)
        repo, _, _ = c["image"].partition(":")
        c["image"] = f"{repo}:{tag}-cpu" if repo == "doodlepod-model" else f"{repo}:{tag}"
        numeric_probe_ports(c)
        for p in c.get("ports", []):
            if p.get("name") == "http":
                p["hostPort"] = host_port
                p["hostIP"] = "127.0.0.1"
    return docs


def redis_overlay(name: str, image: str | None) -> list[dict[str, Any]]:
    docs = load(REPO / "deploy" / "redis.yaml")
    config = one(docs, "ConfigMap")
    sts = one(docs, "StatefulSet")
    template = sts["spec"]["template"]
    spec = template["spec"]
    for c in spec["containers"]:
        if image:
            c["image"] = image
        numeric_probe_ports(c)
    # podman materialises a configMap volume as a named volume of the ConfigMap's name: NAME-config.
    old_config, config["metadata"]["name"] = config["metadata"]["name"], f"{name}-config"
    for volume in spec.get("volumes", []):
        if volume.get("configMap", {}).get("name") == old_config:
            volume["configMap"]["name"] = config["metadata"]["name"]
    for claim in sts["spec"].get("volumeClaimTemplates", []):
        spec.setdefault("volumes", []).append(
            {"name": claim["metadata"]["name"],
             "persistentVolumeClaim": {"claimName": f"{name}-{claim['metadata']['name']}"}})
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "labels": template["metadata"]["labels"]}, "spec": spec}
    return [config, pod]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--what", choices=("pod", "redis"), required=True)
    ap.add_argument("--tag", default="0.1.0", help="image tag (default 0.1.0)")
    ap.add_argument("--name", default="doodlepod", help="the pod's name (default doodlepod)")
    ap.add_argument("--port", type=int, default=8000, help="host port of the app on 127.0.0.1 (default 8000)")
    ap.add_argument("--redis-name", default=None,
                    help="--what pod: the Redis pod's name, for DOODLEPOD_REDIS_URL (none: no Redis); "
                         "--what redis: the name of the Redis pod (default NAME-redis)")
    ap.add_argument("--redis-image", default=None, help="--what redis: image instead of deploy/redis.yaml's")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="--what pod: a setting added to the ConfigMap (repeatable)")
    args = ap.parse_args(argv)
    if args.what == "pod":
        settings = dict(item.split("=", 1) for item in args.set)
        docs = pod_overlay(args.tag, args.name, args.port, args.redis_name, settings)
    else:
        docs = redis_overlay(args.redis_name or f"{args.name}-redis", args.redis_image)
    yaml.safe_dump_all(docs, sys.stdout, sort_keys=False, width=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
