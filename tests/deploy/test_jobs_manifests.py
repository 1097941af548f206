"""The async-jobs parts of the manifests: the worker container, Redis (deploy/redis.yaml) and the
opt-in KEDA ScaledObject, cross-checked against the app's settings and queue names."""
from __future__ import annotations

import re

import pytest

from tests.conftest import REPO
from tests.support.manifests import (
    DEPLOY_DIR,
    app_config,
    containers,
    deploy_docs,
    deployment,
    effective_env,
    find,
    load_docs,
    on_mount,
    pod_specs,
)


def _settings(container, docs):
    return app_config().load_settings(environ=effective_env(container, docs))


@pytest.mark.parametrize("label,spec,docs", [pytest.param(*s, id=s[0]) for s in pod_specs()])
def test_the_worker_runs_the_module_and_shares_the_apps_slots_and_folders(label, spec, docs):
    found = containers(spec)
    app, worker = found["app"], found["worker"]
    assert worker["command"] == ["python", "-m", "app.worker"], label
    assert (REPO / "app" / "worker.py").is_file()
    a, w = _settings(app, docs), _settings(worker, docs)
    # One pod-wide bound on renders: the same slot folder and count in both containers.
    assert a.runtime_dir and a.runtime_dir == w.runtime_dir and on_mount(w.runtime_dir, worker), label
    assert a.max_inflight == w.max_inflight, label
    assert a.redis_url == w.redis_url and a.redis_prefix == w.redis_prefix, label
    assert (a.torchserve_url, a.torchserve_management_url) == (w.torchserve_url, w.torchserve_management_url)
    assert a.storage == w.storage and (a.storage != "local" or on_mount(w.local_dir, worker)), label
    assert on_mount("/tmp", worker), label
    assert 1 <= w.worker_concurrency <= w.max_inflight
    # Liveness: the worker's own heartbeat file (python -m app.worker --alive), never the models.
    assert worker["livenessProbe"]["exec"]["command"] == ["python", "-m", "app.worker", "--alive"]
    assert "--alive" in (REPO / "app" / "worker.py").read_text()
    assert "ports" not in worker and "readinessProbe" not in worker, "the worker serves no traffic"


def test_the_deployments_redis_url_points_at_the_redis_service():
    docs = list(deploy_docs())
    app = containers(deployment()["spec"]["template"]["spec"])["app"]
    url = _settings(app, tuple(docs)).redis_url
    m = re.fullmatch(r"redis://([a-z0-9-]+):(\d+)/\d+", url)
    assert m, url
    service = next(d for d in find(docs, "Service") if d["metadata"]["name"] == m.group(1))
    (port,) = service["spec"]["ports"]
    assert port["port"] == int(m.group(2))
    sts = next(d for d in find(docs, "StatefulSet") if d["metadata"]["name"] == service["metadata"]["name"])
    assert service["spec"]["selector"].items() <= sts["spec"]["template"]["metadata"]["labels"].items()
    # The API's Service and PDB must not select the Redis pod, nor Redis' Service the app's pods.
    api_labels = deployment()["spec"]["template"]["metadata"]["labels"]
    assert not service["spec"]["selector"].items() <= api_labels.items()
    redis_labels = sts["spec"]["template"]["metadata"]["labels"]
    for other in find(docs, "Service") + find(docs, "PodDisruptionBudget"):
        if other is not service:
            selector = other["spec"]["selector"]
            selector = selector.get("matchLabels", selector)
            assert not selector.items() <= redis_labels.items(), other["metadata"]["name"]


def test_redis_keeps_its_data_and_never_evicts_jobs():
    docs = load_docs(DEPLOY_DIR / "redis.yaml")
    (sts,) = find(docs, "StatefulSet")
    (config,) = find(docs, "ConfigMap")
    conf = dict(line.split(None, 1) for line in config["data"]["valkey.conf"].splitlines()
                if line.strip() and not line.startswith("#"))
    assert conf["appendonly"] == "yes" and conf["appendfsync"] in ("everysec", "always")
    assert conf["maxmemory-policy"] == "noeviction"
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    data = next(m for m in container["volumeMounts"] if m["name"] == "data")
    assert data["mountPath"] == conf["dir"]
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data" and claim["spec"]["resources"]["requests"]["storage"]
    # maxmemory leaves headroom below the container's limit (AOF rewrite forks, buffers).
    limit_mi = int(container["resources"]["limits"]["memory"].removesuffix("Gi")) * 1024
    assert int(conf["maxmemory"].removesuffix("mb")) <= 0.8 * limit_mi
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sts["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    (policy,) = find(docs, "NetworkPolicy")
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= sts["spec"]["template"]["metadata"]["labels"].items()


def test_keda_example_scales_the_deployment_on_the_apps_queue():
    (scaled,) = load_docs(DEPLOY_DIR / "examples" / "keda-scaledobject.yaml")
    assert scaled["apiVersion"] == "keda.sh/v1alpha1" and scaled["kind"] == "ScaledObject"
    target = scaled["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment()["metadata"]["name"])
    hpa = next(d for d in deploy_docs() if d["kind"] == "HorizontalPodAutoscaler")
    # KEDA owns an HPA of its own: same bounds as deploy/hpa.yaml (which it replaces).
    assert scaled["spec"]["minReplicaCount"] == hpa["spec"]["minReplicas"]
    assert scaled["spec"]["maxReplicaCount"] == hpa["spec"]["maxReplicas"]
    (streams,) = [t for t in scaled["spec"]["triggers"] if t["type"] == "redis-streams"]
    meta = streams["metadata"]
    app = containers(deployment()["spec"]["template"]["spec"])["app"]
    settings = _settings(app, deploy_docs())
    from app.jobs.queue import WORKERS_GROUP, JobQueue

    queue = JobQueue(settings.redis_url, settings.redis_prefix)
    assert meta["stream"] == queue.stream and meta["consumerGroup"] == WORKERS_GROUP
    host, port = meta["address"].split(":")
    assert settings.redis_url.startswith(f"redis://{host}:{port}/")
    worker = _settings(containers(deployment()["spec"]["template"]["spec"])["worker"], deploy_docs())
    assert int(meta["streamLength"]) >= worker.worker_concurrency   # scale out only past what one pod renders
    cpu = [t for t in scaled["spec"]["triggers"] if t["type"] == "cpu"]
    assert cpu and cpu[0]["metadata"]["containerName"] in containers(deployment()["spec"]["template"]["spec"])
