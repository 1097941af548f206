"""Issue 8 end to end: what a careless or hostile client, or a failing neighbour, can do to a pod.

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

import pytest
import requests

from tests.fixtures.torchserve_fake import stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


class BadModelServer:
    """A TorchServe stand-in on loopback whose answers misbehave: ``mode`` is 'cut' (a 200 whose
    body stops half way and the connection closes) or 'trickle' (one byte every 2 s)."""

    def __init__(self) -> None:
        self.mode = "cut"
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.stopped = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

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

    def stop(self) -> None:
        self.stopped.set()
        self.sock.close()


@pytest.fixture(scope="module")
def bad_model_server():
    server = BadModelServer()
    yield server
    server.stop()


def _env(bad_model_server, workdir: Path, **extra: str) -> dict[str, str]:
    return {"DOODLEPOD_TORCHSERVE_URL": bad_model_server.url, "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": bad_model_server.url,
            "DOODLEPOD_TORCHSERVE_RETRIES": "1", "DOODLEPOD_LOCAL_DIR": str(workdir / "files"),
            "DOODLEPOD_RENDER_PROCESSES": "1", "DOODLEPOD_RENDER_SIZE": "120", "DOODLEPOD_RENDER_MAX_FRAMES": "8",
            **extra}


@pytest.fixture(scope="module")
def app(bad_model_server):
    """Fast renders (120 px, 8 frames), local storage, one render process."""
    workdir = stack.make_workdir("dp-harden-")
    server = stack.Gunicorn(workdir, _env(bad_model_server, workdir))
    try:
        yield server.start()
    finally:
        server.stop()
        stack.remove(workdir)


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


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry))
    return out


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _worker(server) -> int:
    workers = _children(server.proc.pid)
    assert len(workers) == 1, workers
    return workers[0]


# --- finding 6: storage keys ---------------------------------------------------------------------

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


# --- finding 7: abandoned renders stop ----------------------------------------------------------

@pytest.fixture(scope="module")
def slow_app(bad_model_server):
    """Renders that take seconds: 400 px, every BVH frame, one render process."""
    workdir = stack.make_workdir("dp-harden-slow-")
    server = stack.Gunicorn(workdir, _env(bad_model_server, workdir, DOODLEPOD_RENDER_SIZE="400",
                                          DOODLEPOD_RENDER_FPS="native", DOODLEPOD_RENDER_MAX_FRAMES="0"))
    try:
        yield server.start()
    finally:
        server.stop()
        stack.remove(workdir)


def _busy_samples(pids: list[int], seconds: float = 2.0, every: float = 0.1) -> int:
    """How many of the samples taken over ``seconds`` found one of ``pids`` running or runnable."""
    busy = 0
    for _ in range(int(seconds / every)):
        busy += any(_state(p) == "R" for p in pids)
        time.sleep(every)
    return busy


def test_a_request_past_its_deadline_leaves_no_render_running(slow_app, page) -> None:
    renders = _children(_worker(slow_app))
    t0 = time.monotonic()
    resp = _post(slow_app, page, headers={"X-Deadline-Seconds": "3"}, motions="dab,jumping,zombie,wave_hello")
    elapsed = time.monotonic() - t0
    assert resp.status_code == 504 and resp.json()["error"] == "deadline_exceeded", resp.text
    assert elapsed < 3 + 6, elapsed  # the deadline, plus at most the grace a render gets to stop
    # the renders of the abandoned request were stopped, not left to run on without a slot
    assert _busy_samples(renders) <= 3
    metrics = requests.get(f"{slow_app.url}/metrics", timeout=10).text
    assert "doodlepod_renders_in_flight 0.0" in metrics
    # and the pool still works
    ok = _post(slow_app, page, motions="dab", timeout=300)
    assert ok.status_code == 200, ok.text


# --- finding 10: render processes die with their worker -----------------------------------------

def test_render_processes_die_with_a_killed_worker(app, page) -> None:
    assert _post(app, page).status_code == 200  # the pool has run work
    worker = _worker(app)
    renders = _children(worker)
    assert renders, "the worker has no render processes"
    os.kill(worker, signal.SIGKILL)
    try:
        end = time.monotonic() + 10
        while time.monotonic() < end and any(_state(p) not in ("gone", "Z") for p in renders):
            time.sleep(0.2)
        left = [p for p in renders if _state(p) not in ("gone", "Z")]
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


# --- finding 11: TorchServe's answers under the deadline ----------------------------------------

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
