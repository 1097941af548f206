"""pod.yaml running under podman (`make pod`): the README's curls answered by the pod, an async job through
the pod's worker and Redis with a callback, and pod.yaml's promises checked on the running containers."""
from __future__ import annotations

import hashlib
import hmac
import io
import json
import os
import re
import signal
import subprocess
import time
import urllib.parse

import pytest
import yaml

from tests.conftest import REPO
from tests.deploy.test_make_run import README_BASE, client_joints_command, default_motions, get
from tests.deploy.test_make_run_finder import photo_command
from tests.support.receiver import CallbackReceiver

pytestmark = [pytest.mark.pod, pytest.mark.timeout(3600)]

CONTAINERS = ("model", "app", "worker")


def pod_spec() -> dict:
    return next(d for d in yaml.safe_load_all((REPO / "pod.yaml").read_text()) if d and d["kind"] == "Pod")["spec"]


def manifest_containers() -> dict[str, dict]:
    spec = pod_spec()
    return {c["name"]: c for c in [*spec.get("initContainers", []), *spec["containers"]]}


def wait_ping(pod, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        try:
            status, body = get(pod.url + "/ping", timeout=10)
        except OSError:
            status, body = 0, b""
        if status == 200:
            return json.loads(body)
        assert time.monotonic() < deadline, f"/ping {status} after {timeout} s: {body[:500]!r}"
        time.sleep(1)


def test_make_pod_says_ready_and_prints_make_runs_curl_lines(pod):
    assert "/ping 200 with both models READY" in pod.output, pod.output[-3000:]
    command = client_joints_command().replace(README_BASE, pod.url)
    assert command in re.sub(r"\\\n\s*", " ", pod.output), "make pod does not print the README's curl line"
    # it says what serves the models: tiny random weights (loudly), the ink finder, or the released weights
    assert any(say in pod.output for say in ("MEANINGLESS", "the ink finder: no trained weights", "released weights"))
    print(f"\n[pod] play kube -> /ping 200 with both models READY: {pod.ready_s:.0f} s")


def test_ping_200_with_both_models_ready_and_redis(pod):
    body = wait_ping(pod)
    components = body["components"]
    assert components["detector"]["ok"] and components["pose_estimator"]["ok"], components
    assert components["jobs"]["ok"], components["jobs"]


def test_readme_client_joints_curl_returns_three_gifs_from_the_pod(pod):
    from PIL import Image

    command = client_joints_command().replace(README_BASE, pod.url)
    result = subprocess.run(["bash", "-c", command], cwd=pod.checkout, capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    answer = json.loads(result.stdout)
    assert "animations" in answer, answer          # an error answer says why (status, code, message)
    animations = answer["animations"]
    assert set(animations) == set(default_motions()) and len(animations) == 3, answer
    for motion, url in animations.items():
        # Relative to the server: the pod's client is the podman network's gateway, not a trusted proxy,
        # so the app puts no Host header into its URLs (app/http/api.py base_url).
        url = urllib.parse.urljoin(pod.url + "/", url)
        assert url.startswith(pod.url + "/files/"), url
        status, data = get(url)
        assert status == 200 and data[:6] in (b"GIF89a", b"GIF87a"), (motion, status, data[:20])
        with Image.open(io.BytesIO(data)) as gif:
            assert gif.format == "GIF" and gif.n_frames > 10, (motion, gif.size)
    # The files live in the pod's app-data volume, written by the app container.
    name = next(iter(animations.values())).rsplit("/", 1)[-1]
    found = pod.engine.exec(pod.container("app"), "find", "/var/lib/doodlepod/files", "-name", name)
    assert name in found.stdout, found.stdout + found.stderr


def torchserve_predictions(pod) -> list[str]:
    """TorchServe's access log lines for predictions, read inside the model container."""
    res = pod.engine.exec(pod.container("model"), "sh", "-c", "cat /home/model-server/logs/access_log.log 2>/dev/null")
    return [line for line in res.stdout.splitlines() if "/predictions/" in line]


def test_photo_curl_reaches_the_model_container_over_localhost(pod):
    # The app is told http://127.0.0.1:8080 (pod.yaml), and TorchServe listens on 127.0.0.1 only
    # (handlers/config.properties): a prediction in its log came through the pod's own loopback.
    env = {c["name"]: c["value"] for c in manifest_containers()["app"]["env"] if "value" in c}
    assert env["DOODLEPOD_TORCHSERVE_URL"].startswith("http://127.0.0.1:")
    before = len(torchserve_predictions(pod))
    command = photo_command().replace(README_BASE, pod.url)  # the README's photo line (char4)
    result = subprocess.run(["bash", "-c", command + " -w '\\n%{http_code}'"], cwd=pod.checkout,
                            capture_output=True, text=True, timeout=300)
    body, _, code = result.stdout.rpartition("\n")
    # The ink finder or tiny random models: a character (200) or nonsense refused with a clear error
    # (422); never a model outage (503) or a 500.
    assert code in ("200", "422"), result.stdout[-2000:]
    if code == "422":
        assert json.loads(body)["error"] in ("no_character", "invalid_character", "no_skeleton"), body
    after = torchserve_predictions(pod)
    assert len(after) > before and any("drawn_humanoid_detector" in line for line in after[before:]), after[-5:]
    # Inside the pod the inference port answers on loopback only.
    addr = pod.engine.exec(pod.container("model"), "python3", "-c",
                           "import socket; s=socket.socket(); s.settimeout(3); print(s.connect_ex(('127.0.0.1', 8080)))")
    assert addr.stdout.strip() == "0", addr.stdout + addr.stderr


def test_async_job_through_the_pods_worker_and_redis_calls_back(pod):
    receiver = CallbackReceiver(host=pod.gateway)
    try:
        command = client_joints_command().replace(README_BASE, pod.url)
        command = command.replace("curl ", f"curl -si -H 'Prefer: respond-async' -F 'callback_url={receiver.url}' ", 1)
        result = subprocess.run(["bash", "-c", command], cwd=pod.checkout, capture_output=True, timeout=60)
        head = result.stdout.decode(errors="replace")
        assert head.startswith("HTTP/1.1 202"), head[:1500]
        location = re.search(r"^Location: (/jobs/[0-9a-f]{32})\s*$", head, re.M | re.I).group(1)
        receiver.wait(1, timeout=300)
        headers, body = receiver.received[0]
        event = json.loads(body)
        assert event["event"] == "job.succeeded" and event["job"]["id"] == location.rsplit("/", 1)[-1], event
        # Signed with the pod's secret.
        signature = {k.lower(): v for k, v in headers.items()}["x-doodlepod-signature"]
        expected = hmac.new(b"pod-test-secret", body, hashlib.sha256).hexdigest()
        assert expected in signature, (signature, expected)
        job = json.loads(get(pod.url + location)[1])
        assert job["status"] == "succeeded" and set(job["animations"]) == set(default_motions()), job
        for url in job["animations"].values():
            status, data = get(urllib.parse.urljoin(pod.url + "/", url))
            assert status == 200 and data[:3] == b"GIF", (url, status)
    finally:
        receiver.close()
    # The worker container rendered it (not the app): its log names the job.
    logs = pod.engine.run("logs", pod.container("worker"), timeout=60)
    assert location.rsplit("/", 1)[-1] in logs.stdout + logs.stderr


@pytest.mark.parametrize("short", CONTAINERS)
def test_containers_run_as_the_manifests_non_root_user_on_a_read_only_root(pod, short):
    spec = pod_spec()
    uid = manifest_containers()[short].get("securityContext", {}).get("runAsUser", spec["securityContext"]["runAsUser"])
    assert uid != 0
    name = pod.container(short)
    ids = pod.engine.exec(name, "id", "-u")
    assert ids.returncode == 0 and ids.stdout.strip() == str(uid), ids.stdout + ids.stderr
    info = pod.engine.inspect(name)
    assert info["HostConfig"]["ReadonlyRootfs"] is True
    write = pod.engine.exec(name, "sh", "-c", "echo x > /usr/doodlepod-write-test")
    assert write.returncode != 0 and "Read-only file system" in write.stderr, write.stderr
    caps = pod.engine.exec(name, "sh", "-c", "grep CapEff /proc/self/status")
    assert caps.stdout.split()[-1] == "0000000000000000", caps.stdout


@pytest.mark.parametrize("short", CONTAINERS)
def test_probes_answer_as_declared(pod, short):
    container = manifest_containers()[short]
    probes = {p: container[p] for p in ("startupProbe", "readinessProbe", "livenessProbe") if p in container}
    assert probes, short
    for kind, probe in probes.items():
        if "httpGet" in probe:
            status, body = get(pod.url + probe["httpGet"]["path"], timeout=probe.get("timeoutSeconds", 1) + 5)
            assert status == 200, (short, kind, status, body[:300])
        else:
            res = pod.engine.exec(pod.container(short), *probe["exec"]["command"], timeout=probe["timeoutSeconds"] + 30)
            assert res.returncode == 0, (short, kind, res.stdout, res.stderr)


def test_app_container_killed_is_restarted_and_ping_recovers(pod):
    # SIGKILL to the container's main process from the host, as the kernel's OOM killer or a crash would
    # end it (`podman kill` counts as stopping it on purpose, and podman does not restart those).
    name = pod.container("app")
    before = pod.engine.inspect(name)
    os.kill(before["State"]["Pid"], signal.SIGKILL)
    deadline = time.monotonic() + 120
    while True:
        info = pod.engine.inspect(name)
        if info["State"]["Status"] == "running" and info["State"]["Pid"] != before["State"]["Pid"]:
            break
        assert time.monotonic() < deadline, f"not restarted: {info['State']}"
        time.sleep(0.5)
    assert info["RestartCount"] > before["RestartCount"], (before["RestartCount"], info["RestartCount"])
    t0 = time.monotonic()
    body = wait_ping(pod, timeout=180)
    print(f"\n[pod] app killed -> restarted -> /ping 200 in {time.monotonic() - t0:.1f} s after the restart")
    assert body["components"]["detector"]["ok"]
