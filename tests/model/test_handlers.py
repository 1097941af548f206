"""Both model handlers inside a real TorchServe 0.12 on 127.0.0.1, with the tiny archives.

One TorchServe for the module: scripts/build_archives.py --tiny builds the two archives into a temp
model store, handlers/torchserve_local.py starts ``torchserve --foreground --ncs
--disable-token-auth`` with handlers/config.properties on free ports (one worker per model, batch
size 4, as configured), waits for READY workers on the management API, and stops the process
group at the end even when a test fails.

What is not real: the weights (tiny random-initialised models of the same architectures; the
released ones cannot be downloaded here), so the tests check the answers' form and ranges, not
what the models see. No GPU on this machine: the handlers run on CPU; the same code picks
``cuda:<gpu_id>`` when TorchServe assigns a GPU (handlers/handler_base.py:select_device).
"""
from __future__ import annotations

import concurrent.futures as cf
import json
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from PIL import Image

from handlers import readiness
from handlers.torchserve_local import LocalTorchServe
from tests.conftest import REPO
from tests.support.model_answers import assert_detections, assert_pose, drawing, encoded

pytestmark = [pytest.mark.e2e, pytest.mark.model_stack]

DETECTOR = "drawn_humanoid_detector"
POSE = "drawn_humanoid_pose_estimator"


# -- fixtures ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def model_store(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("model-store")
    res = subprocess.run([sys.executable, str(REPO / "scripts" / "build_archives.py"), "--tiny", "--out", str(store)],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert res.returncode == 0, res.stdout + res.stderr
    return store


@pytest.fixture(scope="module")
def torchserve(model_store, tmp_path_factory):
    server = LocalTorchServe(model_store, tmp_path_factory.mktemp("torchserve"),
                             env={"DOODLEPOD_TORCH_THREADS": "1", "OMP_NUM_THREADS": "1"})
    server.start(timeout=600)   # stops the server itself if it does not get ready
    try:
        yield server
    finally:
        server.stop()


# -- helpers ------------------------------------------------------------------------------------------------
def post(url: str, data: bytes | None = None, content_type: str | None = None, multipart: bool = False,
         timeout: float = 120.0) -> tuple[int, object, dict]:
    """POST raw bytes or a multipart form with the bytes in field ``data``; return (status, json, headers)."""
    headers = {}
    body = data
    if multipart:
        boundary = uuid.uuid4().hex
        head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"data\"; filename=\"drawing\"\r\n"
                f"Content-Type: application/octet-stream\r\n\r\n").encode()
        body = head + (data or b"") + f"\r\n--{boundary}--\r\n".encode()
        headers["Content-Type"] = f"multipart/form-data; boundary={boundary}"
    elif content_type:
        headers["Content-Type"] = content_type
    req = urllib.request.Request(url, data=body if body is not None else b"", headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw, status, hdrs = resp.read(), resp.status, dict(resp.headers)
    except urllib.error.HTTPError as err:
        raw, status, hdrs = err.read(), err.code, dict(err.headers)
    try:
        return status, json.loads(raw.decode("utf-8")), hdrs
    except ValueError:
        return status, raw.decode("utf-8", "replace"), hdrs


def predict_url(server: LocalTorchServe, model: str) -> str:
    return f"{server.inference_url}/predictions/{model}"


# -- readiness and configuration ---------------------------------------------------------------------------
def test_both_models_ready_with_the_configured_workers_and_batching(torchserve):
    for model in (DETECTOR, POSE):
        with urllib.request.urlopen(f"{torchserve.management_url}/models/{model}", timeout=10) as resp:
            described = json.loads(resp.read())[0]
        assert [w["status"] for w in described["workers"]] == ["READY"]      # one worker, not one per CPU
        assert described["batchSize"] == 4 and described["maxBatchDelay"] == 20
        assert described["minWorkers"] == described["maxWorkers"] == 1
    assert readiness.main(["--management-url", torchserve.management_url]) == 0
    # the archive's model-config.yaml reached the handler through TorchServe
    log = (torchserve.log_dir / "model_log.log").read_text()
    assert re.search(r'drawn_humanoid_detector: loaded on cpu .*torch threads 1; handler settings '
                     r'\{"config": "config.py", "max_detections": 10, "score_threshold": 0.5, "weights": "tiny"\}',
                     log), log[-3000:]


def test_readiness_fails_for_a_missing_model_and_a_dead_server(torchserve, capsys):
    assert readiness.main(["--management-url", torchserve.management_url, "--models", f"{DETECTOR},nope"]) == 1
    assert "nope: management API answered 404" in capsys.readouterr().err
    assert readiness.main(["--management-url", "http://127.0.0.1:9", "--timeout", "1"]) == 1
    assert "cannot ask" in capsys.readouterr().err


# -- good requests --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt, multipart", [("PNG", False), ("JPEG", True), ("PNG", True), ("JPEG", False)])
def test_detector_answers_boxes_inside_the_image(torchserve, fmt, multipart):
    for width, height in ((320, 240), (180, 300)):
        status, answer, headers = post(predict_url(torchserve, DETECTOR), encoded(drawing(width, height), fmt),
                                       f"image/{fmt.lower()}", multipart)
        assert status == 200, answer
        assert headers.get("content-type", headers.get("Content-Type", "")).startswith("application/json")
        # the archive's weights are named, so the app can tell a person the models are the tiny ones
        assert {k.lower(): v for k, v in headers.items()}.get("x-doodlepod-weights") == "tiny"
        assert_detections(answer, width, height)


@pytest.mark.parametrize("fmt, multipart", [("PNG", True), ("JPEG", False)])
def test_pose_answers_17_keypoints_inside_the_image(torchserve, fmt, multipart):
    for width, height in ((150, 260), (300, 200)):
        status, answer, _ = post(predict_url(torchserve, POSE), encoded(drawing(width, height, 1), fmt),
                                 f"image/{fmt.lower()}", multipart)
        assert status == 200, answer
        assert_pose(answer, width, height)


def test_concurrent_requests_are_batched_and_answered_in_order(torchserve):
    """12 pose requests of 12 different sizes at once: TorchServe batches them (the handler logs its
    batch sizes), and each answer describes its own image (the pose answer echoes the image size)."""
    sizes = [(96 + 8 * i, 200 - 4 * i) for i in range(12)]
    payloads = [encoded(drawing(w, h, i), "PNG") for i, (w, h) in enumerate(sizes)]
    with cf.ThreadPoolExecutor(len(payloads)) as pool:
        results = list(pool.map(lambda p: post(predict_url(torchserve, POSE), p, "image/png"), payloads))
    for (status, answer, _), (w, h) in zip(results, sizes):
        assert status == 200, answer
        assert_pose(answer, w, h)
    batches = [int(n) for n in re.findall(r"drawn_humanoid_pose_estimator: batch of (\d+)",
                                          (torchserve.log_dir / "model_log.log").read_text())]
    assert max(batches) > 1, batches


def test_same_image_alone_and_in_a_batch_gives_the_same_answer(torchserve):
    data = encoded(drawing(256, 192, 7), "PNG")
    _, alone, _ = post(predict_url(torchserve, DETECTOR), data, "image/png")
    with cf.ThreadPoolExecutor(6) as pool:
        together = list(pool.map(lambda _: post(predict_url(torchserve, DETECTOR), data, "image/png"), range(6)))
    for status, answer, _ in together:
        assert status == 200
        assert_detections(answer, 256, 192)
        assert answer[0]["bbox"] == pytest.approx(alone[0]["bbox"], abs=0.5)
        assert answer[0]["score"] == pytest.approx(alone[0]["score"], abs=1e-3)


# -- bad requests --------------------------------------------------------------------------------------------
def bad_inputs() -> dict[str, tuple[bytes, str | None, bool]]:
    png = encoded(drawing(120, 160), "PNG")
    return {
        "empty body": (b"", "image/png", False),
        "empty multipart field": (b"", None, True),
        "text": (b"hello, this is not a drawing", "text/plain", False),
        "json": (b'{"image": "drawing.png"}', "application/json", False),
        "truncated PNG": (png[: len(png) // 2], "image/png", False),
        "1x1 image": (encoded(Image.new("RGB", (1, 1), (0, 0, 0)), "PNG"), "image/png", True),
        "GIF": (encoded(Image.new("RGB", (64, 64)), "GIF"), "image/gif", False),
    }


@pytest.mark.parametrize("model", [DETECTOR, POSE])
@pytest.mark.parametrize("case", list(bad_inputs()))
def test_bad_input_gets_a_4xx_json_error_with_a_message(torchserve, model, case):
    data, ctype, multipart = bad_inputs()[case]
    status, answer, _ = post(predict_url(torchserve, model), data, ctype, multipart)
    assert 400 <= status < 500, (status, answer)
    assert isinstance(answer, dict) and answer.get("message"), answer
    assert "Traceback" not in json.dumps(answer)


def test_bad_input_error_codes(torchserve):
    expected = {"empty body": (400, "empty_body"), "text": (415, "not_an_image"),
                "truncated PNG": (400, "corrupt_image"), "1x1 image": (400, "image_too_small"),
                "GIF": (415, "unsupported_format"), "json": (415, "not_an_image")}
    for case, (code, error) in expected.items():
        data, ctype, multipart = bad_inputs()[case]
        status, answer, _ = post(predict_url(torchserve, DETECTOR), data, ctype, multipart)
        assert (status, answer.get("error")) == (code, error), (case, status, answer)


def test_a_bad_request_in_a_batch_does_not_spoil_the_good_ones(torchserve):
    good = encoded(drawing(200, 200, 3), "JPEG")
    bad = bad_inputs()["truncated PNG"][0]
    payloads = [good, bad] * 4
    with cf.ThreadPoolExecutor(len(payloads)) as pool:
        results = list(pool.map(lambda p: post(predict_url(torchserve, POSE), p, "image/png"), payloads))
    for (status, answer, _), payload in zip(results, payloads):
        if payload is good:
            assert status == 200 and len(answer[0]["keypoints"]) == 17
        else:
            assert status == 400 and answer["error"] == "corrupt_image"


def test_request_over_the_size_limit_is_refused(torchserve):
    """A 17 MiB body (max_request_size is 16 MiB) is refused with 413 from its Content-Length alone,
    before the client sends it; the server keeps serving afterwards."""
    size = 17 * 1024 * 1024
    with socket.create_connection(("127.0.0.1", torchserve.ports.inference), timeout=30) as sock:
        sock.sendall((f"POST /predictions/{DETECTOR} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      f"Content-Type: image/png\r\nContent-Length: {size}\r\n\r\n").encode())
        sock.sendall(b"\x89PNG\r\n\x1a\n" + b"\0" * 65536)   # a start; the server must not wait for the rest
        status_line = sock.makefile("rb").readline().decode()
    assert status_line.split()[1] == "413", status_line
    status, _, _ = post(predict_url(torchserve, DETECTOR), encoded(drawing(120, 120), "PNG"), "image/png")
    assert status == 200
