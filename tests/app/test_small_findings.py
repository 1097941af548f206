"""Smaller hardening findings, in process and over real HTTP (gunicorn with gevent workers on loopback,
no Redis, no model: requests send their own joints)."""
from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
import requests

from app import metrics_dir
from app.config import SettingsError, load_settings
from tests.support import stack


def test_metric_files_leave_a_runtime_folder_on_the_data_disk(tmp_path):
    settings = load_settings({}, local_dir=str(tmp_path / "files"))
    moved = metrics_dir(tmp_path / "run", settings)          # same filesystem as the storage
    assert moved.parent == Path("/dev/shm") and moved.name.startswith("doodlepod-metrics-")
    assert moved == metrics_dir(tmp_path / "run", settings)   # the pod's processes find the same folder
    assert metrics_dir("/dev/shm/x-run", settings) == Path("/dev/shm/x-run/metrics")   # apart: kept
    with pytest.raises(SettingsError, match="DOODLEPOD_RUNTIME_DIR"):
        metrics_dir(tmp_path / "run", settings, shm=str(tmp_path / "no-shm"))   # nowhere else: refuse
    assert metrics_dir(tmp_path / "run", load_settings({}, storage="s3")) == tmp_path / "run" / "metrics"


@pytest.fixture(scope="module")
def app():
    env = lambda w: {"DOODLEPOD_TORCHSERVE_URL": "http://127.0.0.1:9",  # noqa: E731
                     "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": "http://127.0.0.1:9",
                     "DOODLEPOD_LOCAL_DIR": str(w / "files"), "DOODLEPOD_RENDER_PROCESSES": "1",
                     "DOODLEPOD_FORWARDED_ALLOW_IPS": "127.0.0.1", "DOODLEPOD_CLIENT_RENDER_SLOTS": "1"}
    with stack.app_server("dp-lows-", env) as server:
        yield server


def _raw(server, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(request)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


@pytest.mark.e2e
def test_a_script_name_that_is_not_a_prefix_of_the_path_is_400_json(app):
    answer = _raw(app, b"GET /ping HTTP/1.1\r\nHost: x\r\nSCRIPT_NAME: /elsewhere\r\nConnection: close\r\n\r\n")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), head[:200]
    assert b"application/json" in head and b"bad_request" in body and b"SCRIPT_NAME" in body


@pytest.mark.e2e
def test_a_clients_own_motion_is_not_served_under_files(app):
    folder = Path(app.env["DOODLEPOD_LOCAL_DIR"]) / "motions" / "own" / "abc"
    folder.mkdir(parents=True)
    (folder / "video-0123456789ab.bvh").write_text("HIERARCHY\n")
    (Path(app.env["DOODLEPOD_LOCAL_DIR"]) / "ok.gif").write_bytes(os.urandom(10))
    assert requests.get(f"{app.url}/files/ok.gif", timeout=10).status_code == 200
    refused = requests.get(f"{app.url}/files/motions/own/abc/video-0123456789ab.bvh", timeout=10)
    assert refused.status_code == 404 and refused.json()["error"] == "not_found"


def _png(w: int, h: int) -> bytes:
    from PIL import Image

    return stack.encode(Image.new("RGB", (w, h), (255, 255, 255)))


@pytest.mark.e2e
def test_an_image_too_small_for_the_models_is_422_before_they_are_called(app):
    """The model server points at a closed port: a request that reached it would answer 503/502."""
    for w, h in ((1, 1), (31, 400)):
        r = requests.post(f"{app.url}/characters", files={"image": ("d.png", _png(w, h), "image/png")}, timeout=30)
        assert r.status_code == 422 and r.json()["error"] == "image_too_small", r.text[:300]
        r = requests.post(f"{app.url}/animate", files={"image": ("d.png", _png(w, h), "image/png")}, timeout=30)
        assert r.status_code == 422 and r.json()["error"] == "image_too_small", r.text[:300]
    raw = requests.post(f"{app.url}/characters", data=b"true", headers={"Content-Type": "image/png"}, timeout=30)
    assert raw.status_code == 400 and raw.json()["error"] == "unreadable_image", raw.text[:300]


@pytest.mark.e2e
def test_a_client_holding_its_render_slot_gets_429_at_once_not_another_slot(app):
    """The slot is held from this process, in the pod's slot files, for the test's own client (loopback)."""
    import json

    from app.clients import digest
    from app.render.admission import InflightSlots

    image, joints = stack.page_with_character("char1", (800, 700), (150, 50))
    form = {"files": {"image": ("d.png", stack.encode(image), "image/png")},
            "data": {"joints": json.dumps({k: list(v) for k, v in joints.items()})}}
    slots = InflightSlots(Path(app.env["DOODLEPOD_RUNTIME_DIR"]) / "slots", 1)
    held = slots.acquire(owner=digest("a-127.0.0.1"))
    try:
        r = requests.post(f"{app.url}/characters", timeout=30, **form)
        assert r.status_code == 429 and r.json()["error"] == "render_share_used", r.text[:300]
        assert int(r.headers["Retry-After"]) >= 1
    finally:
        held.release()
    assert requests.post(f"{app.url}/characters", timeout=60, **form).status_code == 201
