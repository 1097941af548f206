"""End to end: what a careless or hostile client, or a failing neighbour, can do to a pod.

Real gunicorn with gevent workers and render process pools, real HTTP on loopback. Every request
here sends its own joints, so the app calls no model (TorchServe plays no part in what is tested;
where its answers matter, :class:`BadModelServer` stands in for it, because a real TorchServe cannot
be made to cut or trickle an answer on cue).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import requests

from tests.support import hold, procs, stack, wait
from tests.support.rawhttp import RawServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


class BadModelServer(RawServer):
    """A TorchServe stand-in on loopback whose answers misbehave: ``mode`` is 'cut' (a 200 whose
    body stops half way and the connection closes) or 'trickle' (one byte every 2 s)."""

    def __init__(self) -> None:
        self.mode = "cut"
        super().__init__(self._answer, backlog=16)

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(body) < length:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                body += chunk
            answer = json.dumps([{"bbox": [0, 0, 10, 10], "score": 0.9}] * 20).encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         + f"Content-Length: {len(answer)}\r\n\r\n".encode())
            try:
                if self.mode == "cut":
                    conn.sendall(answer[: len(answer) // 2])
                    return
                for i in range(len(answer)):
                    if self.stopped.wait(2.0):
                        return
                    conn.sendall(answer[i:i + 1])
            except OSError:
                return


@pytest.fixture(scope="module")
def bad_model_server():
    server = BadModelServer()
    yield server
    server.close()


def _env(bad_model_server, workdir: Path, **extra: str) -> dict[str, str]:
    return {"DOODLEPOD_TORCHSERVE_URL": bad_model_server.url, "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": bad_model_server.url,
            "DOODLEPOD_TORCHSERVE_RETRIES": "1", "DOODLEPOD_LOCAL_DIR": str(workdir / "files"),
            "DOODLEPOD_RENDER_PROCESSES": "1", "DOODLEPOD_RENDER_SIZE": "120", "DOODLEPOD_RENDER_MAX_FRAMES": "8",
            **extra}


@pytest.fixture(scope="module")
def app(bad_model_server):
    """Fast renders (120 px, 8 frames), local storage, one render process."""
    with stack.app_server("dp-harden-", lambda workdir: _env(bad_model_server, workdir)) as server:
        yield server


@pytest.fixture(scope="module")
def page():
    image, joints = stack.page_with_character("char1", (800, 700), (150, 50))
    return stack.encode(image), {k: list(v) for k, v in joints.items()}


def _post(server, page, headers=None, timeout=120, **form) -> requests.Response:
    data, joints = page
    form.setdefault("joints", json.dumps(joints))
    form.setdefault("motions", "dab")
    return requests.post(f"{server.url}/animate", files={"image": ("drawing.png", data, "image/png")},
                         data=form, headers=headers or {}, timeout=timeout)


def _worker(server) -> int:
    workers = procs.children(server.proc.pid)
    assert len(workers) == 1, workers
    return workers[0]


# --- storage keys ---------------------------------------------------------------------------------

def test_storage_keys_are_made_by_the_server_not_taken_from_x_request_id(app, page) -> None:
    first = _post(app, page, headers={"X-Request-ID": "same-id"})
    second = _post(app, page, headers={"X-Request-ID": "same-id"}, motions="dab", format="webp")
    assert first.status_code == 200 and second.status_code == 200, (first.text, second.text)
    assert first.headers["X-Request-ID"] == second.headers["X-Request-ID"] == "same-id"  # logs, headers
    url1, url2 = first.json()["animations"]["dab"], second.json()["animations"]["dab"]
    assert first.json()["id"] != second.json()["id"] and "same-id" not in url1 + url2
    # the first URL still serves the first file: nothing was overwritten
    got1, got2 = requests.get(url1, timeout=30), requests.get(url2, timeout=30)
    assert got1.headers["Content-Type"] == "image/gif" and got2.headers["Content-Type"] == "image/webp"
    for rid in (".", "..", ".partial-1"):  # were 500 after rendering, or 200 with URLs that 404
        resp = _post(app, page, headers={"X-Request-ID": rid})
        assert resp.status_code == 200, (rid, resp.text)
        assert requests.get(resp.json()["animations"]["dab"], timeout=30).status_code == 200


# --- abandoned renders stop -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def slow_app(bad_model_server):
    """Renders that take seconds: the largest size a client may ask (1024 px), every BVH frame, one
    render process."""
    def env(workdir: Path) -> dict[str, str]:
        return _env(bad_model_server, workdir, DOODLEPOD_RENDER_SIZE="1024", DOODLEPOD_RENDER_FPS="native",
                    DOODLEPOD_RENDER_MAX_FRAMES="0")

    with stack.app_server("dp-harden-slow-", env) as server:
        yield server


def _busy_samples(pids: list[int], seconds: float = 2.0, every: float = 0.1) -> int:
    """How many of the samples taken over ``seconds`` found one of ``pids`` running or runnable."""
    busy = 0
    for _ in range(int(seconds / every)):
        busy += any(procs.state(p) == "R" for p in pids)
        time.sleep(every)
    return busy


def test_a_request_past_its_deadline_leaves_no_render_running(slow_app, page) -> None:
    renders = procs.children(_worker(slow_app))
    motions = "dab,jumping,zombie,wave_hello"
    # how long this work takes on this machine now (a fixed deadline was met on an idle machine): the
    # request under test gets half of it, so its deadline falls while its renders run
    t0 = time.monotonic()
    assert _post(slow_app, page, motions=motions, timeout=300).status_code == 200
    deadline = max(0.5, (time.monotonic() - t0) / 2)
    t0 = time.monotonic()
    resp = _post(slow_app, page, headers={"X-Deadline-Seconds": f"{deadline:.2f}"}, motions=motions)
    elapsed = time.monotonic() - t0
    assert resp.status_code == 504 and resp.json()["error"] == "deadline_exceeded", (deadline, resp.text)
    assert elapsed < deadline + 6, elapsed  # the deadline, plus at most the grace a render gets to stop
    # the renders of the abandoned request were stopped, not left to run on without a slot
    assert _busy_samples(renders) <= 3
    metrics = requests.get(f"{slow_app.url}/metrics", timeout=10).text
    assert "doodlepod_renders_in_flight 0.0" in metrics
    # and the pool still works
    ok = _post(slow_app, page, motions="dab", timeout=300)
    assert ok.status_code == 200, ok.text


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: a render is never split over processes")
def test_a_render_split_over_processes_stops_whole_past_its_deadline(slow_app) -> None:
    """A one-motion request is given the CPUs the admitted requests leave idle: its render forks
    (animator.parallel). Past the deadline, the render and every process it forked stop.

    Once the render has forked, its forks are stopped (SIGSTOP) until the app has answered: the render
    waits for their frames, so it cannot end inside the deadline on any machine (a deadline calibrated on a probe render was
    beaten once when the probe ran beside other work, and the caches of the module's earlier renders
    make any uncached-looking render faster than it seems). The deadline leaves the render time to
    fork on a loaded machine."""
    renders = procs.children(_worker(slow_app))
    image, page_joints = stack.page_with_character("char3", (800, 700), (120, 80))
    data, joints = stack.encode(image), {k: list(v) for k, v in page_joints.items()}
    created = requests.post(f"{slow_app.url}/characters", files={"image": ("drawing.png", data, "image/png")},
                            data={"joints": json.dumps(joints)}, timeout=120)
    assert created.status_code == 201, created.text
    url = f"{slow_app.url}/characters/{created.json()['id']}/animations"
    deadline = 4.0
    seen: set[int] = set()
    box: dict[str, requests.Response] = {}

    def ask() -> None:
        box["resp"] = requests.post(url, json={"motions": ["zombie"], "size": 1024},
                                    headers={"X-Deadline-Seconds": f"{deadline:.2f}"}, timeout=60)

    t = threading.Thread(target=ask)
    t0 = time.monotonic()
    t.start()
    while t.is_alive() and not seen:
        seen.update(procs.descendants(*renders))  # what a render process forked
        time.sleep(0.02)
    with hold.paused(sorted(seen)):  # the forks: the render waits for their frames, and stops them itself
        t.join(60)
    elapsed = time.monotonic() - t0
    resp = box["resp"]
    assert seen, "the render was not split over processes"
    assert resp.status_code == 504 and resp.json()["error"] == "deadline_exceeded", resp.text
    # the forked processes are killed, not waited for: their runs of 1024 px frames would take seconds
    assert elapsed < deadline + 1.5, elapsed
    assert not procs.wait_gone(seen, 10), "forked render processes outlived the request"
    assert _busy_samples(renders) <= 3


# --- render processes die with their worker -------------------------------------------------------

def test_render_processes_die_with_a_killed_worker(app, page) -> None:
    assert _post(app, page).status_code == 200  # the pool has run work
    worker = _worker(app)
    renders = procs.children(worker)
    assert renders, "the worker has no render processes"
    os.kill(worker, signal.SIGKILL)
    try:
        left = procs.wait_gone(renders, 10)
        assert not left, f"render processes outlived their worker: {left}"
    finally:
        for p in renders:  # on failure, leave nothing behind
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
    # gunicorn starts a new worker with a new pool, which serves
    stack.wait_for(lambda: requests.get(f"{app.url}/healthz", timeout=2).status_code == 200, 60, "new worker")
    assert _post(app, page).status_code == 200


# --- TorchServe's answers under the deadline ------------------------------------------------------

def test_a_model_answer_cut_mid_body_is_a_json_502(app, page, bad_model_server) -> None:
    bad_model_server.mode = "cut"
    resp = _post(app, page, joints="")  # no joints: the app asks the detector
    assert resp.status_code == 502, resp.text
    assert resp.json()["error"] == "model_server_error"


def test_a_trickled_model_answer_cannot_outlast_the_deadline(app, page, bad_model_server) -> None:
    bad_model_server.mode = "trickle"
    t0 = time.monotonic()
    try:
        resp = _post(app, page, joints="", headers={"X-Deadline-Seconds": "4"}, timeout=30)
    except requests.ReadTimeout:
        pytest.fail("the app held the request open far past its 4 s deadline")
    elapsed = time.monotonic() - t0
    assert resp.status_code in (503, 504) and resp.json()["error"] in ("deadline_exceeded", "model_server_unavailable")
    assert elapsed < 8, elapsed


# --- admission after the body, trusted proxies, chunked bodies ------------------------------------

@pytest.fixture(scope="module")
def strict_app(bad_model_server):
    """Two render slots, a 4 s body timeout, a 2 MiB body limit, and a trusted proxy that is not
    the test (so the test's own forwarded headers must be ignored)."""
    def env(workdir: Path) -> dict[str, str]:
        return _env(bad_model_server, workdir, DOODLEPOD_MAX_INFLIGHT="2", DOODLEPOD_BODY_TIMEOUT_S="4",
                    DOODLEPOD_MAX_UPLOAD_MB="2", DOODLEPOD_FORWARDED_ALLOW_IPS="192.0.2.1")

    with stack.app_server("dp-harden-strict-", env) as server:
        yield server


def test_idle_uploads_hold_no_render_slot_and_time_out(strict_app, page) -> None:
    # connections that send headers and no body must not hold the render slots (nor wait for ever)
    idle = []
    for _ in range(4):
        s = socket.create_connection(("127.0.0.1", strict_app.port), timeout=20)
        s.sendall(b"POST /animate HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\n"
                  b"Content-Length: 50000\r\n\r\n--b\r\n")
        idle.append(s)
    try:
        time.sleep(0.5)
        t0 = time.monotonic()
        resp = _post(strict_app, page)
        assert resp.status_code == 200, resp.text
        for s in idle:
            answer = b""
            while b"}" not in answer:  # headers, then the JSON body
                chunk = s.recv(4096)
                if not chunk:
                    break
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
            assert b'"request_timeout"' in answer
        assert time.monotonic() - t0 < 4 + 30  # the body timeout (plus the render above)
    finally:
        for s in idle:
            s.close()


def test_a_chunked_upload_over_the_limit_is_413(strict_app, page) -> None:
    # a chunked body is refused past the limit, not cut there with the rest processed
    data, _ = page

    def chunks():
        yield data
        for _ in range(3 * 16):  # 3 MiB more, past the 2 MiB limit
            yield b"\0" * 65536

    resp = requests.post(f"{strict_app.url}/animate", data=chunks(), headers={"Content-Type": "image/png"},
                         timeout=60)
    assert resp.status_code == 413 and resp.json()["error"] == "too_large", resp.text


def test_forwarded_headers_and_host_from_an_untrusted_peer_are_ignored(strict_app, page) -> None:
    # a client that is not a trusted proxy cannot set the scheme, SCRIPT_NAME or Host of the URLs answered
    resp = _post(strict_app, page, headers={"X-Forwarded-Proto": "https", "SCRIPT_NAME": "/evil",
                                            "Host": "evil.example"})
    assert resp.status_code == 200, resp.text
    url = resp.json()["animations"]["dab"]
    assert "evil" not in url and not url.startswith("https")
    assert url.startswith("/files/")  # relative to wherever the client reached the server
    assert requests.get(strict_app.url + url, timeout=30).status_code == 200


# --- bad input is a 4xx, never a 500, and never a forged log line ---------------------------------

def test_bad_input_is_answered_4xx_never_500(app, page) -> None:
    data, joints = page
    far = {**joints, "left_hand": [1e9, 1e9]}
    cases = {
        "joint outside the image": (_post(app, page, joints=json.dumps(far)), 422),
        "all joints on one point": (_post(app, page, joints=json.dumps({k: [400, 300] for k in joints})), None),
        "joints on blank paper": (_post(app, page, joints=json.dumps({k: [760 + i, 660 - i] for i, k in enumerate(joints)}),
                                        bbox=json.dumps([700, 600, 800, 700])), 422),
        "400-digit integer in joints": (_post(app, page, joints=json.dumps(joints).replace("[", "[" + "9" * 400 + ", ", 1)), 400),
        "400-digit integer in bbox": (_post(app, page, bbox="[0, 0, " + "9" * 400 + ", 10]"), 400),
        "JSON nested 10k deep": (_post(app, page, joints="[" * 10000 + "]" * 10000), 400),
        "JSON nested 100k deep": (_post(app, page, joints="[" * 100000 + "]" * 100000), 413),  # a 200 KB field
        "8000 extra joints": (_post(app, page, joints=json.dumps(
            [{"name": k, "loc": v, "parent": None} for k, v in joints.items()]
            + [{"name": f"x{i}", "loc": [300, 300], "parent": "torso"} for i in range(8000)])), None),
        "legacy body nested deep": (requests.post(f"{app.url}/", data="[" * 100000 + "]" * 100000,
                                                  headers={"Content-Type": "application/json"}, timeout=60), 400),
        "NUL in a /files path": (requests.get(f"{app.url}/files/abc%00def/dab.gif", timeout=30), 404),
    }
    for name, (resp, status) in cases.items():
        assert resp.status_code != 500, (name, resp.text)
        assert resp.headers["Content-Type"].startswith("application/json"), name
        if status is None:
            assert resp.status_code in (200, 400, 413, 422), (name, resp.text)
        else:
            assert resp.status_code == status, (name, resp.text)


def test_a_newline_in_a_field_cannot_forge_a_log_line(app, page) -> None:
    forged = "2026-01-01 00:00:00.000 INFO [1] [forged] doodlepod.http: POST /animate -> 200"
    resp = _post(app, page, motions=f"dab\n{forged}")
    assert resp.status_code == 400 and resp.json()["error"] == "unknown_motion"
    resp = requests.get(f"{app.url}/nothing%0A{quote(forged)}", timeout=30)  # the path is logged too
    assert resp.status_code == 404
    wait.until(lambda: app.log_text().count("2026-01-01 00:00:00.000 INFO") >= 2, 10, "both requests logged")
    lines = app.log_text().splitlines()
    assert not [line for line in lines if line.startswith("2026-01-01")]
    assert sum("2026-01-01 00:00:00.000 INFO" in line for line in lines) >= 2  # logged, on its own line
