"""The app while the models are not there: `make run`'s first minutes on a fresh machine.

A real gunicorn (gevent workers) with the app's own ink finder off (DOODLEPOD_FINDER_FALLBACK=false;
tests/app/test_finder_fallback_e2e.py has it on) and no model server at all (TorchServe's ports closed), first with
no preparation state (a pod whose model container is down), then with the state file `make run`
writes while the model stack builds (scripts/run_local.sh, DOODLEPOD_MODELS_STATE_FILE). Checks what
a client sees: /ping's ``models`` object (the contract the studio reads), a photo request answered
503 with ``Retry-After`` at once (never a hang), and a drawing sent with its joints still animated.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import requests

from app.characters.preparation import MAX_RETRY_AFTER_S, ModelPreparation, models_summary
from tests.conftest import CHAR1
from tests.support import stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

JOINTS = {"root": [264, 397], "hip": [264, 397], "torso": [247, 232], "neck": [231, 119],
          "right_shoulder": [151, 245], "right_elbow": [99, 278], "right_hand": [46, 311],
          "left_shoulder": [343, 218], "left_elbow": [396, 245], "left_hand": [449, 278],
          "right_hip": [191, 404], "right_knee": [165, 476], "right_foot": [138, 556],
          "left_hip": [337, 390], "left_knee": [376, 456], "left_foot": [409, 549]}


def write_state(path: Path, state: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, path)


@pytest.fixture(scope="module")
def app_without_models():
    workdir = stack.make_workdir("dp-nomodels-")
    closed = stack.free_port()  # nothing listens: no model server at all
    state_file = workdir / "models-state.json"
    app = stack.Gunicorn(workdir / "app", {
        "DOODLEPOD_TORCHSERVE_URL": f"http://127.0.0.1:{closed}",
        "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": f"http://127.0.0.1:{closed}",
        "DOODLEPOD_MODELS_STATE_FILE": str(state_file), "DOODLEPOD_LOCAL_DIR": str(workdir / "files"),
        # the 503 path: the app's own ink finder off (tests/app/test_finder_fallback_e2e.py has it on)
        "DOODLEPOD_FINDER_FALLBACK": "false",
        "DOODLEPOD_RENDER_SIZE": "160", "DOODLEPOD_RENDER_PROCESSES": "1", "DOODLEPOD_DEFAULT_MOTIONS": "dab"})
    try:
        app.start()
        yield app, state_file
    finally:
        app.stop()
        stack.remove(workdir)


def photo(app) -> requests.Response:
    page, _ = stack.page_with_character()
    return requests.post(f"{app.url}/animate", files={"image": ("p.png", stack.encode(page), "image/png")},
                         timeout=60)


def ping(app) -> tuple[int, dict]:
    resp = requests.get(f"{app.url}/ping", timeout=10)
    return resp.status_code, resp.json()


def test_absent_model_server(app_without_models) -> None:
    app, state_file = app_without_models
    state_file.unlink(missing_ok=True)
    status, body = ping(app)
    assert status == 503 and body["status"] == "unavailable"
    models = body["models"]
    assert models["state"] == "absent" and models["progress"] is None and models["retry_after_s"] is None
    assert "does not answer" in models["detail"] and "by hand" in models["detail"], models
    assert models["served_by"] == "none", models
    t0 = time.monotonic()
    resp = photo(app)
    assert resp.status_code == 503 and resp.json()["error"] == "model_server_unavailable", resp.text
    assert int(resp.headers["Retry-After"]) >= 1
    assert time.monotonic() - t0 < 10


def test_models_being_prepared(app_without_models) -> None:
    app, state_file = app_without_models
    write_state(state_file, {"state": "preparing", "detail": "Compiling mmcv's C++ ops for the model server.",
                             "progress": {"step": "step 4 of 8, compiling mmcv", "done": 38, "total": 77},
                             "retry_after_s": 420})
    status, body = ping(app)
    assert status == 503
    assert body["models"] == {"state": "preparing", "detail": "Compiling mmcv's C++ ops for the model server.",
                              "progress": {"step": "step 4 of 8, compiling mmcv", "done": 38, "total": 77},
                              "retry_after_s": MAX_RETRY_AFTER_S, "served_by": "none"}
    t0 = time.monotonic()
    resp = photo(app)
    took = time.monotonic() - t0
    assert resp.status_code == 503, resp.text
    assert resp.json()["error"] == "models_unavailable" and "mmcv" in resp.json()["message"]
    assert resp.headers["Retry-After"] == str(MAX_RETRY_AFTER_S)
    assert took < 5, f"the answer must come at once, took {took:.1f} s"

    write_state(state_file, {"state": "starting", "detail": "TorchServe is loading the models.",
                             "progress": {"step": "loading models", "done": 1, "total": 2}, "retry_after_s": 20})
    status, body = ping(app)
    assert body["models"]["state"] == "starting" and body["models"]["retry_after_s"] == 20
    resp = photo(app)
    assert resp.status_code == 503 and resp.json()["error"] == "models_unavailable"
    assert resp.headers["Retry-After"] == "20"

    # a drawing sent with its joints needs no model: it is animated meanwhile
    resp = requests.post(f"{app.url}/animate", files={"image": ("t.png", (CHAR1 / "texture.png").read_bytes(),
                                                                   "image/png")},
                         data={"joints": json.dumps(JOINTS)}, timeout=240)
    assert resp.status_code == 200, resp.text
    url = resp.json()["animations"]["dab"]
    gif = requests.get(url if url.startswith("http") else app.url + url, timeout=30)
    assert gif.status_code == 200 and gif.content[:6] in (b"GIF89a", b"GIF87a")

    write_state(state_file, {"state": "failed", "detail": "Building the model stack failed: see /x/model-stack.log.",
                             "progress": None, "retry_after_s": None})
    status, body = ping(app)
    assert body["models"]["state"] == "absent" and "/x/model-stack.log" in body["models"]["detail"]
    resp = photo(app)
    assert resp.status_code == 503 and resp.json()["error"] == "models_unavailable"
    assert int(resp.headers["Retry-After"]) >= 1


def test_state_file_read_defensively(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    prep = ModelPreparation(str(path))
    assert prep.read() is None
    prep.check()  # no file: nothing known, TorchServe decides
    for junk in ("", "{", "[]", '{"state": "bogus"}', "x" * 100_000):
        path.write_text(junk)
        assert prep.read() is None and prep.check() is None
    path.write_text(json.dumps({"state": "preparing", "detail": 7, "progress": {"step": "s", "done": -3, "total": "9"},
                                "retry_after_s": True}))
    assert prep.read() == {"state": "preparing", "detail": "7", "progress": {"step": "s", "done": 0, "total": 0},
                           "retry_after_s": None, "weights": None}
    assert ModelPreparation("").read() is None


def test_ready_models_win_over_a_stale_state_file() -> None:
    ready = {"detector": {"ok": True}, "pose_estimator": {"ok": True}}
    stale = {"state": "preparing", "detail": "x", "progress": None, "retry_after_s": 5}
    assert models_summary(ready, stale, "http://m")["state"] == "ready"
    loading = {"detector": {"ok": True}, "pose_estimator": {"ok": False, "detail": "no READY worker"}}
    summary = models_summary(loading, None, "http://m")
    assert summary["state"] == "starting" and summary["progress"] == {"step": "loading models", "done": 1, "total": 2}
