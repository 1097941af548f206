"""The app when its neighbours go away: S3 stopped -> 502 + /ping 503; TorchServe stopped -> 503.

Real gunicorn (gevent), real TorchServe serving the fake models (their weights cannot be downloaded
here; see test_app_e2e.py), moto's S3 server. Each neighbour is stopped for real during the test,
so this module has its own instances.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import requests

from tests.support import hold, stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def stack_up():
    workdir = stack.make_workdir("dp-outage-")
    (workdir / "ts").mkdir(parents=True, exist_ok=True)
    ts = stack.FakeTorchServe(workdir / "ts")
    s3 = stack.MotoS3()
    app = None
    try:
        ts.start()
        s3.start()
        app = stack.Gunicorn(workdir / "app", {
            **stack.S3_ENV, "DOODLEPOD_TORCHSERVE_URL": ts.inference_url,
            "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": ts.management_url, "DOODLEPOD_STORAGE": "s3",
            "DOODLEPOD_S3_BUCKET": s3.bucket, "DOODLEPOD_S3_ENDPOINT_URL": s3.endpoint,
            "DOODLEPOD_S3_REGION": "us-east-1", "DOODLEPOD_S3_RETRIES": "2", "DOODLEPOD_S3_TIMEOUT_S": "2",
            "DOODLEPOD_TORCHSERVE_RETRIES": "2", "DOODLEPOD_RENDER_SIZE": "160", "DOODLEPOD_RENDER_PROCESSES": "1"})
        app.start()
        yield ts, s3, app
    finally:
        if app is not None:
            app.stop()
        s3.stop()
        ts.stop()
        stack.remove(workdir)


def _components(app) -> tuple[int, dict]:
    t0 = time.monotonic()
    resp = requests.get(f"{app.url}/ping", timeout=10)
    assert time.monotonic() - t0 < 3.0, "/ping must answer within its check timeouts"
    return resp.status_code, resp.json()["components"]


def test_s3_stopped_gives_502_and_ping_503(stack_up) -> None:
    ts, s3, app = stack_up
    status, comps = _components(app)
    assert status == 200, comps
    page, joints = stack.page_with_character()
    s3.stop()
    status, comps = _components(app)
    assert status == 503
    assert comps["storage"]["ok"] is False and "unreachable" in comps["storage"]["detail"]
    assert comps["detector"]["ok"] and comps["pose_estimator"]["ok"] and comps["disk"]["ok"]
    resp = requests.post(f"{app.url}/animate", files={"image": ("p.png", stack.encode(page), "image/png")},
                         data={"motions": "dab", "joints": json.dumps({k: list(v) for k, v in joints.items()})},
                         timeout=300)
    assert resp.status_code == 502, resp.text
    assert resp.json()["error"] == "storage_error"
    assert "storage_error" in app.log_text()


def test_torchserve_stopped_gives_ping_503_and_the_apps_finder_answers_photos(stack_up) -> None:
    ts, s3, app = stack_up
    if not _components(app)[1]["storage"]["ok"]:
        s3.start()  # back from the previous test's outage: the animations are stored again
    ts.stop()
    status, comps = _components(app)
    assert status == 503
    for model in ("detector", "pose_estimator"):
        assert comps[model]["ok"] is False and "unreachable" in comps[model]["detail"]
    page, _ = stack.page_with_character()
    t0 = time.monotonic()
    resp = requests.post(f"{app.url}/animate", files={"image": ("p.png", stack.encode(page), "image/png")},
                         timeout=60)
    # the model server refuses connections: the app's own ink finder answers in its place, and says so
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert [w["code"] for w in body["warnings"]] == ["found_by_ink_finder_in_app"], body
    assert {"find", "fit"} <= set(body["timings_ms"])
    assert time.monotonic() - t0 < 60, "a stopped model server must not make the client wait long"
    assert requests.get(f"{app.url}/ping", timeout=10).json()["models"]["served_by"] == "ink_finder_in_app"
    # liveness is not readiness: the app itself is fine
    assert requests.get(f"{app.url}/healthz", timeout=5).status_code == 200


def test_sigterm_lets_in_flight_requests_finish(tmp_path: Path) -> None:
    """A rolling update sends SIGTERM: the request being rendered still gets its animations."""
    import os
    import signal
    import threading

    app = stack.Gunicorn(tmp_path / "app", {"DOODLEPOD_LOCAL_DIR": str(tmp_path / "files"),
                                            "DOODLEPOD_RENDER_SIZE": "160", "DOODLEPOD_RENDER_PROCESSES": "1"})
    try:
        app.start()
        page, joints = stack.page_with_character()
        result: dict = {}

        def post() -> None:
            result["resp"] = requests.post(
                f"{app.url}/animate", files={"image": ("p.png", stack.encode(page), "image/png")},
                data={"motions": "dab,jumping,zombie", "joints": json.dumps({k: list(v) for k, v in joints.items()})},
                timeout=120)

        # The render processes are stopped before the request comes and let go only once gunicorn has the
        # SIGTERM: the request is in flight at the signal on any machine (waiting for its log line, a fast
        # machine ended the three small renders before the signal, and the test proved nothing)
        with hold.paused(hold.app_render_processes(app.proc.pid)):
            client = threading.Thread(target=post)
            client.start()
            stack.wait_for(lambda: _gauge(app, "doodlepod_renders_in_flight") == 1, 30, "the request in flight")
            os.kill(app.proc.pid, signal.SIGTERM)
            stack.wait_for(lambda: "Handling signal: term" in app.log_text(), 30, "gunicorn taking the SIGTERM")
        client.join(120)
        resp = result["resp"]
        assert resp.status_code == 200, resp.text
        assert sorted(resp.json()["animations"]) == ["dab", "jumping", "zombie"]
        assert app.proc.wait(60) == 0
        files = sorted(p.name for p in (tmp_path / "files").rglob("*.gif"))
        assert files == ["dab.gif", "jumping.gif", "zombie.gif"]
    finally:
        app.stop()


def _gauge(server, name: str) -> float:
    text = requests.get(f"{server.url}/metrics", timeout=10).text
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith(name) and not line.startswith("#"))
