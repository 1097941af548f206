"""A client's own BVH clip over real HTTP: gunicorn with gevent workers and its render processes.

The client sends the joints, so no model is called (TorchServe points at a closed port: a model call
would fail the request). What is checked: the clip renders with configs derived from it, a bad clip
is a 422 naming the line, and the clip's file is gone from the pod's runtime folder afterwards.
"""
from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest
import requests
from PIL import Image

from tests.conftest import BVH_DIR
from tests.support import stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

JJ = (BVH_DIR / "cmu1" / "jumping_jacks.bvh").read_bytes()


@pytest.fixture(scope="module")
def server():
    def env(workdir: Path) -> dict[str, str]:
        return {"DOODLEPOD_TORCHSERVE_URL": "http://127.0.0.1:9", "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": "http://127.0.0.1:9",
                "DOODLEPOD_TORCHSERVE_RETRIES": "0", "DOODLEPOD_RENDER_SIZE": "200",
                "DOODLEPOD_RENDER_PROCESSES": "1", "DOODLEPOD_LOCAL_DIR": str(workdir / "files"),
                "DOODLEPOD_BVH_MAX_FRAMES": "1000"}

    with stack.app_server("dp-e2e-bvh-", env) as app:
        yield app


def _post(server, bvh: bytes, **form) -> requests.Response:
    page, joints = stack.page_with_character("char1", (700, 700), (60, 40))
    files = {"image": ("drawing.png", stack.encode(page), "image/png"), "bvh": ("jj.bvh", bvh, "text/plain")}
    return requests.post(f"{server.url}/animate", files=files,
                         data={"joints": json.dumps({k: list(v) for k, v in joints.items()}), **form}, timeout=300)


def test_a_client_clip_renders_and_a_bad_one_is_422_naming_the_line(server):
    resp = _post(server, JJ, start_frame="0", end_frame="60")
    assert resp.status_code == 200, resp.text
    gif = requests.get(resp.json()["animations"]["upload"], timeout=30)
    assert gif.status_code == 200 and gif.headers["Content-Type"] == "image/gif"
    with Image.open(io.BytesIO(gif.content)) as im:
        assert im.size == (200, 200) and im.n_frames > 10
    lines = JJ.decode().splitlines()
    lines[190] = "1.0 2.0 oops"
    resp = _post(server, "\n".join(lines).encode())
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"] == "invalid_motion"
    assert "line 191" in resp.json()["message"] and "'bvh' (jj.bvh)" in resp.json()["message"]
    resp = _post(server, JJ.replace(b"Frames: 125", b"Frames: 5000"))
    assert resp.status_code == 422 and "at most 1000 frames" in resp.json()["message"]
    assert list((server.workdir / "runtime").rglob("upload-*")) == []


def test_two_uploads_with_the_same_request_id_each_render_their_own_clip(server):
    from concurrent.futures import ThreadPoolExecutor

    def post(end: str) -> requests.Response:
        page, joints = stack.page_with_character("char1", (700, 700), (60, 40))
        files = {"image": ("drawing.png", stack.encode(page), "image/png"), "bvh": ("jj.bvh", JJ, "text/plain")}
        for _ in range(60):   # the clips are written and checked at once; one render slot: 503s are retried
            resp = requests.post(f"{server.url}/animate", files=files, headers={"X-Request-ID": "same-id"},
                                 data={"joints": json.dumps({k: list(v) for k, v in joints.items()}),
                                       "start_frame": "0", "end_frame": end}, timeout=300)
            if resp.status_code != 503:
                return resp
            time.sleep(0.5)
        return resp

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(post, ["30", "120", "30", "120"]))
    assert [r.status_code for r in answers] == [200] * 4, [r.text[:200] for r in answers]
    frames = []
    for resp in answers:
        with Image.open(io.BytesIO(requests.get(resp.json()["animations"]["upload"], timeout=30).content)) as im:
            frames.append(im.n_frames)
    short, long = answers[0].json()["animations"]["upload"], answers[1].json()["animations"]["upload"]
    assert short != long and frames[0] == frames[2] and frames[1] == frames[3] and frames[0] < frames[1], frames
    assert list((server.workdir / "runtime").rglob("upload-*")) == []
