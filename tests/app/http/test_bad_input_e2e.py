"""Odd and hostile input over real HTTP (gunicorn with gevent workers): every answer is a JSON 4xx
with a precise code, never a 500 or an HTML page, whether the app or gunicorn itself refuses it.
The client sends its joints, so no model is called (TorchServe points at a closed port)."""
from __future__ import annotations

import io
import json
import socket
from pathlib import Path

import numpy as np
import pytest
import requests
from PIL import Image

from tests.conftest import BVH_DIR
from tests.support import stack
from tests.support.answers import assert_error

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

JJ = (BVH_DIR / "cmu1" / "jumping_jacks.bvh").read_text()


@pytest.fixture(scope="module")
def server():
    def env(workdir: Path) -> dict[str, str]:
        return {"DOODLEPOD_TORCHSERVE_URL": "http://127.0.0.1:9", "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": "http://127.0.0.1:9",
                "DOODLEPOD_TORCHSERVE_RETRIES": "0", "DOODLEPOD_RENDER_PROCESSES": "1",
                "DOODLEPOD_RENDER_SIZE": "96", "DOODLEPOD_RENDER_MAX_FRAMES": "6",
                "DOODLEPOD_LOCAL_DIR": str(workdir / "files")}

    with stack.app_server("dp-bad-input-", env) as app:
        yield app


@pytest.fixture(scope="module")
def page():
    image, joints = stack.page_with_character("char1", (700, 700), (60, 40))
    return stack.encode(image), {k: list(v) for k, v in joints.items()}


def _raw(server, request: bytes) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(request)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def test_headers_gunicorn_refuses_are_answered_in_json(server):
    status, headers, body = _raw(server, b"POST /animate HTTP/1.1\r\nHost: x\r\nIdempotency-Key: a\x7fb\r\n"
                                         b"Content-Length: 0\r\n\r\n")
    assert status == 400 and headers["content-type"] == "application/json", (status, headers, body[:200])
    assert json.loads(body)["error"] == "bad_request"
    tags = ", ".join(f'"{i}"' for i in range(2000))
    status, headers, body = _raw(server, f"PATCH /characters/{'0' * 32} HTTP/1.1\r\nHost: x\r\nIf-Match: {tags}\r\n"
                                         "Content-Length: 0\r\n\r\n".encode())
    assert status == 431 and headers["content-type"] == "application/json", (status, body[:200])
    assert json.loads(body)["error"] == "headers_too_large"


def test_a_form_with_too_many_fields_says_so(server, page):
    fields = {f"f{i}": "x" for i in range(1500)}
    resp = requests.post(f"{server.url}/animate", data=fields, files={"image": ("d.png", page[0], "image/png")},
                         timeout=60)
    message = assert_error(resp, 413, "too_many_fields")["message"]
    assert "more than 1000 parts" in message and "20 MiB" not in message


def test_joints_given_as_strings_or_booleans_are_refused(server, page):
    data, joints = page
    for bad in ("12", True, [True, 5], ["3", "4"], [1, 2, 3]):
        sent = {**joints, "neck": bad}
        resp = requests.post(f"{server.url}/animate", files={"image": ("d.png", data, "image/png")},
                             data={"joints": json.dumps(sent), "motions": "dab"}, timeout=60)
        # the animator's CharacterError, as every route maps it: invalid_character
        assert "expected [x, y] numbers" in assert_error(resp, 422, "invalid_character")["message"], bad


def test_joints_piled_on_one_point_are_a_degenerate_skeleton(server, page):
    data, joints = page
    for piled in ({k: [300, 300] for k in joints}, {k: [300 + i % 2, 300] for i, k in enumerate(joints)}):
        for path in ("/animate", "/characters"):
            resp = requests.post(f"{server.url}{path}", files={"image": ("d.png", data, "image/png")},
                                 data={"joints": json.dumps(piled), "motions": "dab"}, timeout=60)
            assert_error(resp, 422, "degenerate_skeleton")


def test_a_clip_with_huge_offsets_is_422_naming_the_line(server, page):
    data, joints = page
    lines = JJ.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.strip().startswith("OFFSET"))
    lines[at] = "OFFSET 1e308 1e308 1e308"
    resp = requests.post(f"{server.url}/animate", files={"image": ("d.png", data, "image/png"),
                                                         "bvh": ("x.bvh", "\n".join(lines), "text/plain")},
                         data={"joints": json.dumps(joints)}, timeout=60)
    assert f"line {at + 1}" in assert_error(resp, 422, "invalid_motion")["message"]


def test_a_16_bit_mask_is_read_by_its_values_not_as_white(server, page):
    data, joints = page
    created = requests.post(f"{server.url}/characters", files={"image": ("d.png", data, "image/png")},
                            data={"joints": json.dumps(joints)}, timeout=120)
    assert created.status_code == 201, created.text
    doc = created.json()
    w, h = doc["texture"]["width"], doc["texture"]["height"]
    mask16 = np.zeros((h, w), np.uint16)
    mask16[:, : w // 2] = 65535                     # the left half is the character
    buf = io.BytesIO()
    Image.fromarray(mask16).save(buf, format="PNG")
    resp = requests.patch(f"{server.url}/characters/{doc['id']}", files={"mask": ("m.png", buf.getvalue(), "image/png")},
                          timeout=120)
    if resp.status_code != 200:     # the half mask may cut a joint off the character: a 422 naming it is fine
        assert_error(resp, 422, resp.json()["error"])
        assert resp.json()["error"] != "internal_error"
        return
    stored = requests.get(resp.json()["urls"]["mask"], timeout=30)
    got = np.asarray(Image.open(io.BytesIO(stored.content)).convert("L")) > 127
    assert 0.4 < got.mean() < 0.6 and got[:, : w // 2].all() and not got[:, w // 2 + 1:].any()


def _wide(size: int) -> bytes:
    """JSON of shallow nested lists, ``size`` bytes: what json.loads takes seconds to build."""
    return b"[" + b"[[]]," * (size // 5 - 1) + b"[[]]]"


def test_wide_json_is_refused_before_it_is_decoded_and_the_app_answers_meanwhile(server):
    """Issue 41 S1: a 19 MiB body of shallow nested lists froze the one event loop for 16 s. A JSON
    route takes DOODLEPOD_MAX_JSON_KB (413 from its Content-Length); POST /, whose JSON carries a
    base64 image, takes megabytes but not millions of tokens."""
    import threading
    import time

    base = f"http://127.0.0.1:{server.port}"
    pings: list[float] = []
    done = threading.Event()

    def ping() -> None:
        while not done.is_set():
            t0 = time.perf_counter()
            requests.get(base + "/healthz", timeout=30)
            pings.append(time.perf_counter() - t0)
            time.sleep(0.05)

    pinger = threading.Thread(target=ping, daemon=True)
    pinger.start()
    try:
        t0 = time.perf_counter()
        r = requests.patch(base + "/characters/abc", data=_wide(19 * 2**20),  # under DOODLEPOD_MAX_UPLOAD_MB
                           headers={"Content-Type": "application/json"}, timeout=60)
        assert_error(r, 413, "too_large")
        assert "256 KiB" in r.json()["message"]
        assert time.perf_counter() - t0 < 5
        t0 = time.perf_counter()
        r = requests.post(base + "/", data=_wide(5 * 2**20), headers={"Content-Type": "application/json"}, timeout=60)
        assert_error(r, 413, "too_large")
        assert "tokens" in r.json()["message"]
        assert time.perf_counter() - t0 < 5
    finally:
        done.set()
        pinger.join(30)
    assert pings and max(pings) < 2.0, f"/healthz took up to {max(pings):.1f} s while the wide JSON was refused"


def test_a_body_refused_from_its_length_is_not_drained_on_the_event_loop(server):
    """Issue 41 (found by the hostile-neighbour suite): after answering 413 from a 19 MiB
    Content-Length, gunicorn read and discarded the whole body on the worker's event loop, and such
    bodies back to back held another client's requests 40-55 s. The app stops reading: the answer
    comes and the connection closes without the body being sent."""
    import time

    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(b"PATCH /characters/abc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 19922941\r\n\r\n" + b"[[]]," * 1000)
        t0 = time.monotonic()
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            data += chunk
        closed_in = time.monotonic() - t0
    assert data.startswith(b"HTTP/1.1 413"), data[:200]
    assert closed_in < 5, f"the connection stayed open {closed_in:.1f} s waiting for the refused body"
