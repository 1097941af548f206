"""pod.yaml and deploy/: schema validation plus the checks a schema cannot make.

Schemas: ``kubernetes-validate --strict`` (offline schemas shipped in the PyPI package) against the newest
Kubernetes version the package ships and against the oldest one the manifests claim to support.
Cross-checks against the rest of the repo: the app's settings table (app/config.py), TorchServe's
config (handlers/config.properties), the Dockerfiles and the docs, so none of them can drift apart.
No cluster is needed (none is available here).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.support.manifests import (
    CUSTOM_GROUPS,
    DEPLOY_DIR,
    DOCKERFILES,
    GPU,
    MANIFESTS,
    MODEL_NAMES,
    OLDEST_KUBERNETES,
    POD_FILE,
    app_config,
    containers,
    deploy_docs,
    deployment,
    dockerfile_instructions,
    dockerfile_text,
    effective_env,
    find,
    host_port,
    kubernetes_validate,
    load_docs,
    named_port,
    newest_kubernetes,
    on_mount,
    one,
    pod_spec,
    pod_specs,
    quantity,
    setting_names,
    torchserve_properties,
)


def test_manifests_pass_strict_schema_validation():
    versions = [newest_kubernetes(), OLDEST_KUBERNETES]
    assert tuple(int(p) for p in versions[0].split(".")[:2]) >= (1, 37), versions
    checked = [p for p in MANIFESTS if not any(d["apiVersion"].split("/")[0] in CUSTOM_GROUPS for d in load_docs(p))]
    args = ["--strict"] + [a for v in versions for a in ("-k", v)] + [str(p) for p in checked]
    result = kubernetes_validate(*args)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    # A kind or apiVersion without a schema is only a WARN with exit code 0: treat it as a failure.
    lines = [line for line in out.splitlines() if line.strip()]
    assert all(line.startswith("INFO ") and " passed " in line for line in lines), out
    n_docs = sum(len(load_docs(p)) for p in checked)
    assert len(lines) == n_docs * len(versions), out


def test_strict_validation_rejects_an_unknown_field(tmp_path):
    """The validator really is strict (so the test above can fail): a misspelt field is an error."""
    bad = tmp_path / "pod.yaml"
    bad.write_text(POD_FILE.read_text().replace("readOnlyRootFilesystem", "readOnlyRootFileSystem", 1))
    result = kubernetes_validate("--strict", "-k", newest_kubernetes(), str(bad))
    assert result.returncode != 0 and "readOnlyRootFileSystem" in result.stdout, result.stdout


# ----------------------------------------------------------------------------------------- pod shape
@pytest.mark.parametrize("label,spec,docs", [pytest.param(*s, id=s[0]) for s in pod_specs()])
def test_both_containers_and_start_order(label, spec, docs):
    found = containers(spec)
    assert set(found) == {"model", "app", "worker"}, f"{label}: {sorted(found)}"
    # The model server is a native sidecar: started first, the app only after its startupProbe passed,
    # and stopped after the app on shutdown.
    init = {c["name"]: c for c in spec.get("initContainers", [])}
    assert "model" in init and init["model"]["restartPolicy"] == "Always", label
    assert "startupProbe" in init["model"], label
    assert [c["name"] for c in spec["containers"]] == ["app", "worker"], label
    assert found["model"]["image"].startswith("doodlepod-model:"), label
    assert found["app"]["image"].startswith("doodlepod-app:"), label
    # The worker runs the app's code from the app image plus the video pose model (Dockerfile.app
    # ROLE=worker), built from the same checkout: the same tag.
    assert found["worker"]["image"] == found["app"]["image"].replace("doodlepod-app:", "doodlepod-worker:"), (
        f"{label}: the worker is the app's worker image of the same tag")


@pytest.mark.parametrize("label,spec,docs", [pytest.param(*s, id=s[0]) for s in pod_specs()])
def test_gpu_limit_on_model_container_only(label, spec, docs):
    every = [*spec.get("initContainers", []), *spec["containers"]]
    for c in every:
        resources = c.get("resources", {})
        if c["name"] == "model":
            assert int(resources["limits"][GPU]) == 1, label
            assert int(resources.get("requests", {}).get(GPU, 1)) == 1, label
        else:
            assert GPU not in resources.get("limits", {}) and GPU not in resources.get("requests", {}), (
                f"{label}: {c['name']} must not ask for a GPU")
        # Memory is bounded everywhere; CPU is requested (HPA and scheduling need it).
        assert "memory" in resources.get("limits", {}), f"{label}: {c['name']} has no memory limit"
        assert "cpu" in resources.get("requests", {}), f"{label}: {c['name']} has no cpu request"


def bytes_of(value: Any) -> float:
    """A Kubernetes memory/storage quantity ("6Gi", "512Mi", "1G", 1024) in bytes."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGTE]i?)?", str(value))
    assert m, f"not a quantity: {value!r}"
    units = {None: 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
             "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
    return float(m.group(1)) * units[m.group(2)]


@pytest.mark.parametrize("label,spec,docs", [pytest.param(*s, id=s[0]) for s in pod_specs()])
def test_what_the_api_server_would_reject_beyond_the_schema(label, spec, docs):
    """Rules the JSON schemas do not encode but the API server enforces."""
    for c in containers(spec).values():
        requests, limits = c["resources"].get("requests", {}), c["resources"].get("limits", {})
        for key in set(requests) & set(limits):
            measure = quantity if key == "cpu" else bytes_of
            assert measure(requests[key]) <= measure(limits[key]), f"{c['name']}: {key} request > limit"
        # Extended resources (the GPU) cannot be overcommitted: a request must equal the limit.
        for key in limits:
            if "/" in key and key in requests:
                assert str(requests[key]) == str(limits[key]), (c["name"], key)
        for port in c.get("ports", []):
            assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", port["name"]) and len(port["name"]) <= 15
    # Probes and lifecycle hooks are allowed on init containers only when they are sidecars.
    for c in spec.get("initContainers", []):
        if c.get("restartPolicy") != "Always":
            assert not {"startupProbe", "readinessProbe", "livenessProbe", "lifecycle"} & set(c), c["name"]
    grace = spec["terminationGracePeriodSeconds"]
    for c in containers(spec).values():
        sleep = c.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
        assert 0 <= sleep < grace
    for v in spec["volumes"]:
        assert bytes_of(v["emptyDir"]["sizeLimit"]) > 0


@pytest.mark.parametrize("label,spec,docs", [pytest.param(*s, id=s[0]) for s in pod_specs()])
def test_probes(label, spec, docs):
    found = containers(spec)
    model, app = found["model"], found["app"]
    for c in (model, app):
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert probe in c, f"{label}: {c['name']} has no {probe}"

    # Model: readiness asks the management API whether both models have READY workers (an exec of the
    # image's readiness script, shipped in the repo); startup allows minutes for weight loading;
    # liveness is lenient (TorchServe restarts crashed workers itself).
    for probe in ("startupProbe", "readinessProbe"):
        command = model[probe]["exec"]["command"]
        assert Path(command[0]).is_absolute(), command
    startup = model["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 300, "too short for weight loading"
    live = model["livenessProbe"]
    assert live["periodSeconds"] * live["failureThreshold"] >= 120, "model liveness is not lenient"
    assert live.get("timeoutSeconds", 1) >= 5

    # App: readiness is /ping (200 only with READY models); liveness and startup a cheap endpoint.
    ready = app["readinessProbe"]["httpGet"]
    assert ready["path"] == "/ping"
    assert named_port(app, ready["port"]) == named_port(app, "http")
    cheap = app["livenessProbe"]["httpGet"]
    assert cheap["path"] != "/ping", "liveness must not depend on the models (a restart would not help)"
    assert app["startupProbe"]["httpGet"]["path"] == cheap["path"]
    assert named_port(app, cheap["port"]) == named_port(app, "http")


def readiness_script_path() -> str:
    return pod_spec()["initContainers"][0]["readinessProbe"]["exec"]["command"][0]


def test_model_probe_commands_exist_in_the_image():
    model = containers(pod_spec())["model"]
    path = readiness_script_path()
    assert model["startupProbe"]["exec"]["command"] == model["readinessProbe"]["exec"]["command"]
    copies = [c.split() for c in dockerfile_instructions("model", "COPY")]
    sources = [c[-2] for c in copies if c[-1] == path]
    assert sources, f"Dockerfile.model does not COPY anything to the probe's {path}"
    assert (REPO / sources[0]).is_file(), f"{sources[0]} (installed as {path}) is not in the repo"
    # The readiness script asks about both models by default, with the standard library only.
    script = (REPO / sources[0]).read_text()
    assert all(name in script for name in MODEL_NAMES)
    assert not re.search(r"^\s*(import|from)\s+(requests|torch|ts)\b", script, re.M)
    # Liveness runs the image's python3 (the venv on PATH in the image).
    live = model["livenessProbe"]["exec"]["command"]
    assert live[0] == "python3" and "python3" in dockerfile_text("model")


def test_app_liveness_endpoint_is_served_by_the_app():
    path = containers(pod_spec())["app"]["livenessProbe"]["httpGet"]["path"]
    sources = "\n".join(p.read_text() for p in (REPO / "app").rglob("*.py"))
    assert re.search(r"""route\(\s*["']%s["']|get\(\s*["']%s["']""" % (re.escape(path), re.escape(path)),
                     sources), f"no route {path} in app/"
    assert re.search(r"""route\(\s*["']/ping["']|get\(\s*["']/ping["']""", sources), "no /ping route in app/"


# ----------------------------------------------------------------------------------------- ports
@pytest.mark.parametrize("label,spec,docs", [pytest.param(*s, id=s[0]) for s in pod_specs()])
def test_app_port_matches_its_settings(label, spec, docs):
    app = containers(spec)["app"]
    settings = app_config().load_settings(environ=effective_env(app, docs))
    assert named_port(app, "http") == settings.port == int(app_config()._BY_NAME["DOODLEPOD_PORT"].default)


@pytest.mark.parametrize("label,spec,docs", [pytest.param(*s, id=s[0]) for s in pod_specs()])
def test_torchserve_addresses_match_the_app_and_the_model_container(label, spec, docs):
    props = torchserve_properties()
    found = containers(spec)
    settings = app_config().load_settings(environ=effective_env(found["app"], docs))
    ts_host, ts_port = host_port(settings.torchserve_url)
    mgmt_host, mgmt_port = host_port(settings.torchserve_management_url)
    _, inference = host_port(props["inference_address"])
    _, management = host_port(props["management_address"])
    assert (ts_host, ts_port) == ("127.0.0.1", inference), "app must call TorchServe over localhost"
    assert (mgmt_host, mgmt_port) == ("127.0.0.1", management)
    # Token auth off is only safe because the management API is not reachable from outside the pod.
    assert host_port(props["management_address"])[0] == "127.0.0.1", props["management_address"]
    declared = {p["containerPort"] for p in found["model"].get("ports", [])}
    listening = {host_port(props[k])[1] for k in ("inference_address", "management_address",
                                                   "metrics_address") if k in props}
    assert declared <= listening, f"model container declares ports TorchServe does not use: {declared}"
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        http = found["model"][probe].get("httpGet")
        if http:
            port = named_port(found["model"], http["port"])
            assert port in listening, f"{probe} probes port {port}, TorchServe does not listen there"
            # kubelet probes the pod IP: a loopback-only listener would fail the probe forever.
            bound = [host_port(props[k])[0] for k in props
                     if k.endswith("_address") and host_port(props[k])[1] == port]
            assert bound and bound[0] != "127.0.0.1", f"{probe} on {port}, which listens on loopback only"


# ----------------------------------------------------------------------------------------- env vars
def manifest_variables() -> dict[str, set[str]]:
    """Variable name -> manifests setting it (container env and ConfigMap data, examples included)."""
    found: dict[str, set[str]] = {}
    for path in MANIFESTS:
        for doc in load_docs(path):
            names: list[str] = []
            if doc["kind"] in ("ConfigMap", "Secret"):
                names += list(doc.get("data", {})) + list(doc.get("stringData", {}))
            spec = doc.get("spec", {})
            spec = spec.get("template", {}).get("spec", spec)
            for c in [*spec.get("initContainers", []), *spec.get("containers", [])]:
                names += [v["name"] for v in c.get("env", [])]
            for name in names:
                found.setdefault(name, set()).add(str(path.relative_to(REPO)))
    return found


def test_every_doodlepod_variable_in_the_manifests_is_a_setting_of_the_app():
    unknown = {n: sorted(p) for n, p in manifest_variables().items()
               if n.startswith("DOODLEPOD_") and n not in setting_names()}
    assert not unknown, f"set in manifests but not declared in app/config.py: {unknown}"


def docs_text() -> str:
    """The README and every docs/ page: where a variable counts as documented."""
    return "\n".join(p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))])


def test_every_variable_in_the_manifests_is_documented():
    docs = docs_text()
    missing = sorted(n for n in manifest_variables() if f"`{n}`" not in docs)
    assert not missing, f"neither README.md nor docs/ document: {missing}"


def test_docs_configuration_table_is_the_apps_table():
    page = (REPO / "docs" / "configuration.md").read_text()
    m = re.search(r"<!-- settings-table:start[^>]*-->\n(.*?)\n<!-- settings-table:end -->", page, re.S)
    assert m, "docs/configuration.md has no settings table block"
    assert m.group(1).strip() == app_config().markdown_table().strip(), (
        "docs/configuration.md's settings table is stale: paste the output of `python -m app.config --markdown`")


def test_no_undocumented_doodlepod_variable_is_read_anywhere():
    declared = setting_names() | set(app_config()._IGNORED)
    used: dict[str, set[str]] = {}
    for path in [*(REPO / "app").rglob("*.py"), *(REPO / "handlers").rglob("*.py"), *(REPO / "animator").rglob("*.py"),
                 *(REPO / "scripts").glob("*"), REPO / "Makefile", *DOCKERFILES.values()]:
        if path.is_file() and path.suffix in (".py", ".sh", ""):
            for name in re.findall(r"\bDOODLEPOD_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(errors="replace")):
                used.setdefault(name, set()).add(str(path.relative_to(REPO)))
    docs = docs_text()
    undocumented = {n: sorted(p) for n, p in used.items() if n not in declared and f"`{n}`" not in docs}
    assert not undocumented, f"read but neither in app/config.py nor in the docs: {undocumented}"


# ----------------------------------------------------------------------------------------- safety
@pytest.mark.parametrize("label,spec,docs", [pytest.param(*s, id=s[0]) for s in pod_specs()])
def test_security_contexts(label, spec, docs):
    pod = spec["securityContext"]
    assert pod["runAsNonRoot"] is True and pod["seccompProfile"]["type"] == "RuntimeDefault", label
    assert pod.get("runAsUser", 1) != 0
    assert spec.get("automountServiceAccountToken") is False, "the pod never talks to the API server"
    # A Service named doodlepod would inject DOODLEPOD_PORT=tcp://... (service links) into the app.
    assert spec.get("enableServiceLinks") is False, label
    for name, c in containers(spec).items():
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False, name
        assert sc["readOnlyRootFilesystem"] is True, name
        assert sc["capabilities"]["drop"] == ["ALL"] and not sc["capabilities"].get("add"), name
        assert sc.get("privileged") is not True and sc.get("runAsUser", 1) != 0, name


@pytest.mark.parametrize("label,spec,docs", [pytest.param(*s, id=s[0]) for s in pod_specs()])
def test_every_writable_path_is_a_size_limited_volume(label, spec, docs):
    """Read-only root filesystems: whatever the processes write must land on a mounted emptyDir."""
    volumes = {v["name"]: v for v in spec["volumes"]}
    for name, v in volumes.items():
        assert "emptyDir" in v and v["emptyDir"].get("sizeLimit"), f"{label}: volume {name}"
    found = containers(spec)
    mounted = {m["name"] for c in found.values() for m in c.get("volumeMounts", [])}
    assert mounted == set(volumes), f"{label}: unused or undeclared volumes"

    app = found["app"]
    settings = app_config().load_settings(environ=effective_env(app, docs))
    assert on_mount("/tmp", app), "gunicorn heartbeats, upload parsing and tempfile need /tmp"
    assert settings.runtime_dir and on_mount(settings.runtime_dir, app), (
        f"{label}: DOODLEPOD_RUNTIME_DIR={settings.runtime_dir!r} is not on a writable volume")
    if settings.storage == "local":
        assert on_mount(str(Path(settings.local_dir)), app), (
            f"{label}: DOODLEPOD_LOCAL_DIR={settings.local_dir} is not on a writable volume")

    model = found["model"]
    env = effective_env(model, docs)
    assert on_mount("/tmp", model), "TorchServe unpacks archives and keeps worker sockets in /tmp"
    for var in ("LOG_LOCATION", "METRICS_LOCATION"):
        assert var in env and on_mount(env[var], model), f"{label}: TorchServe's {var} is not writable"
    if "MPLCONFIGDIR" in env:
        assert on_mount(env["MPLCONFIGDIR"], model)


@pytest.mark.parametrize("label,spec,docs", [pytest.param(*s, id=s[0]) for s in pod_specs()])
def test_render_processes_fit_the_cpu_request(label, spec, docs):
    """0 would mean one render process per *node* CPU (os.cpu_count() ignores the pod's share)."""
    app = containers(spec)["app"]
    settings = app_config().load_settings(environ=effective_env(app, docs))
    cpus = quantity(app["resources"]["requests"]["cpu"])
    assert 1 <= settings.render_processes * settings.workers <= cpus, (settings.render_processes, cpus)
    # as many requests in flight as those CPUs can run, one motion per CPU (app/config.py's rule)
    assert settings.max_inflight == app_config().default_max_inflight(
        len(settings.default_motions), cpus=settings.render_processes * settings.workers)


@pytest.mark.parametrize("label,spec,docs", [pytest.param(*s, id=s[0]) for s in pod_specs()])
def test_termination_grace_covers_gunicorns_graceful_timeout(label, spec, docs):
    app = containers(spec)["app"]
    settings = app_config().load_settings(environ=effective_env(app, docs))
    graceful = settings.graceful_timeout_s or settings.request_deadline_s + 5  # as app/config.py documents
    pre_stop = app.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
    grace = spec["terminationGracePeriodSeconds"]
    # preStop (endpoints forget the pod) + gunicorn draining + a margin for TorchServe to stop after.
    assert grace >= pre_stop + graceful + 10, (grace, pre_stop, graceful)
    assert grace <= pre_stop + graceful + 60, "so long that node drains stall for no reason"


@pytest.mark.parametrize("container", ["model", "app"])
def test_run_as_user_matches_the_image(container):
    users = dockerfile_instructions(container, "USER")
    assert users, f"{DOCKERFILES[container].name} sets no USER"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0"), f"{DOCKERFILES[container].name} must end as a non-root USER"
    spec = pod_spec()
    uid = containers(spec)[container].get("securityContext", {}).get("runAsUser",
                                                                       spec["securityContext"]["runAsUser"])
    if user.isdigit():
        assert int(user) == uid, f"{DOCKERFILES[container].name} USER {user} but the pod runs as {uid}"
    else:  # a named user: its uid must be the one the pod runs as (useradd -u / --uid)
        assert re.search(rf"(-u|--uid)\s+{uid}\b", dockerfile_text(container)), (
            f"{DOCKERFILES[container].name} creates no user with uid {uid}")


# ----------------------------------------------------------------------------------------- deploy/
def strip_deployment_only(spec: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in spec.items() if k not in ("topologySpreadConstraints",)}


def test_deployment_runs_the_same_pod_as_pod_yaml():
    assert strip_deployment_only(deployment()["spec"]["template"]["spec"]) == pod_spec()


def test_deploy_objects_point_at_each_other():
    docs = list(deploy_docs())
    dep = deployment()
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert "replicas" not in dep["spec"], "the HPA owns replicas; re-applying must not reset them"

    service = next(d for d in find(docs, "Service") if d["metadata"]["name"] == dep["metadata"]["name"])
    assert service["spec"]["selector"].items() <= labels.items()
    app = containers(dep["spec"]["template"]["spec"])["app"]
    assert all(named_port(app, p["targetPort"]) for p in service["spec"]["ports"])

    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()

    hpa = one(docs, "HorizontalPodAutoscaler")
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", dep["metadata"]["name"])
    assert 2 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
    for metric in hpa["spec"]["metrics"]:
        if metric["type"] == "ContainerResource":
            name = metric["containerResource"]["container"]
            res = metric["containerResource"]["name"]
            assert res in containers(dep["spec"]["template"]["spec"])[name]["resources"]["requests"]
    # PDB must leave room for at least one disruption at minReplicas.
    assert pdb["spec"].get("maxUnavailable", 0) >= 1 or pdb["spec"]["minAvailable"] < hpa["spec"]["minReplicas"]


def test_scaled_deployment_uses_shared_storage():
    """Several pods behind one Service: local disk would hand out URLs that only one pod can serve."""
    app = containers(deployment()["spec"]["template"]["spec"])["app"]
    settings = app_config().load_settings(environ=effective_env(app, deploy_docs()))
    assert settings.storage == "s3" and settings.s3_bucket
    secret_refs = [s["secretRef"] for s in app.get("envFrom", []) if "secretRef" in s]
    assert secret_refs and all(s.get("optional") for s in secret_refs), (
        "credentials may come from workload identity instead of a Secret")
    example = load_docs(DEPLOY_DIR / "examples" / "secret.example.yaml")
    assert {d["metadata"]["name"] for d in example} == {s["name"] for s in secret_refs}


def test_kubectl_apply_of_deploy_does_not_ship_placeholder_credentials():
    assert not find(list(deploy_docs()), "Secret"), "Secrets belong in deploy/examples/, not deploy/"


def volume_of(path: str, container: dict[str, Any]) -> str | None:
    """The volume mounted at ``path`` (the deepest mount that holds it), or None."""
    best = None
    for m in container.get("volumeMounts", []):
        mp = m["mountPath"].rstrip("/") or "/"
        if path == mp or path.startswith(mp + "/"):
            if best is None or len(mp) > len(best[0]):
                best = (mp, m["name"])
    return best[1] if best else None


@pytest.mark.parametrize("label,spec,docs", [pytest.param(*s, id=s[0]) for s in pod_specs()])
def test_runtime_folder_has_a_small_volume_of_its_own(label, spec, docs):
    """The metric files are memory-mapped, and writing to a mapped file on a full
    disk kills the worker with SIGBUS. With them on the data volume a full disk crash-looped the
    workers instead of answering 503; on a small in-memory volume of their own, it cannot."""
    app = containers(spec)["app"]
    settings = app_config().load_settings(environ=effective_env(app, docs))
    volumes = {v["name"]: v for v in spec["volumes"]}
    runtime = volume_of(settings.runtime_dir, app)
    assert runtime is not None, f"{label}: DOODLEPOD_RUNTIME_DIR is on no volume"
    shared = {volume_of("/tmp", app)}
    if settings.storage == "local":
        shared.add(volume_of(str(Path(settings.local_dir)), app))
    assert runtime not in shared, f"{label}: the runtime folder shares volume {runtime} with data or /tmp"
    empty_dir = volumes[runtime]["emptyDir"]
    assert empty_dir.get("medium") == "Memory", f"{label}: the runtime volume should be in memory"
    assert bytes_of(empty_dir["sizeLimit"]) <= 256 * 2**20, f"{label}: the runtime volume should be small"


@pytest.mark.parametrize("label,spec,docs", [pytest.param(*s, id=s[0]) for s in pod_specs()])
def test_the_storage_budget_is_set_well_under_the_data_volume(label, spec, docs):
    """The kubelet evicts a pod whose emptyDir passes its sizeLimit: every container that stores files
    must refuse work (DOODLEPOD_STORAGE_BUDGET_MB) at no more than 80% of the volume holding them."""
    volumes = {v["name"]: v for v in spec["volumes"]}
    checked = 0
    for name, container in containers(spec).items():
        env = effective_env(container, docs)
        local_dir = env.get("DOODLEPOD_LOCAL_DIR", "")
        if not local_dir or env.get("DOODLEPOD_STORAGE", "local") not in ("local", "s3"):
            continue
        mounts = [m for m in container.get("volumeMounts", [])
                  if (local_dir + "/").startswith(m["mountPath"].rstrip("/") + "/")]
        if not mounts:
            continue
        volume = volumes[max(mounts, key=lambda m: len(m["mountPath"]))["name"]]
        limit = volume.get("emptyDir", {}).get("sizeLimit")
        assert limit, f"{label} {name}: the volume holding {local_dir} has no sizeLimit"
        budget_mb = float(env.get("DOODLEPOD_STORAGE_BUDGET_MB", "0"))
        assert 0 < budget_mb * 2**20 <= 0.8 * bytes_of(limit), (label, name, budget_mb, limit)
        checked += 1
    assert checked >= 1, f"{label}: no container stores local files"


@pytest.mark.parametrize("label,spec,docs", [pytest.param(*s, id=s[0]) for s in pod_specs()])
def test_each_client_has_one_render_slot(label, spec, docs):
    """Issue 41 S5: the render share on (1) where the pod runs, so one client firing requests back to
    back cannot hold every slot while another client waits."""
    app = containers(spec)["app"]
    assert app_config().load_settings(environ=effective_env(app, docs)).client_render_slots == 1


def test_make_run_sets_no_per_client_render_share():
    """make run is one person's machine: the studio's previews and a phone on the same loopback
    address are one client, so a share of 1 refused the phone while the studio previewed (429
    render_share_used, tests/app/render/test_one_slot_shared.py with it set). The pod sets it."""
    script = (REPO / "scripts" / "run_local.sh").read_text()
    assert "DOODLEPOD_CLIENT_RENDER_SLOTS" not in script
