"""Photos while the model server is not there: the app's own ink finder answers them.

A real gunicorn (gevent workers, render processes) with no model server at all (TorchServe's ports
closed) and the state file `make run` writes while the model stack builds (DOODLEPOD_MODELS_STATE_FILE
says "preparing"). A photo of a drawing (AnimatedDrawings' char1 pasted on a page, its joints known)
is animated anyway: the finder runs in the render processes under the request's render slot and
deadline, and the answer says so (``warnings``: ``found_by_ink_finder_in_app``). The characters API
(what the studio calls) works the same way, and a box drawn by hand gets a skeleton fitted inside it.
``GET /ping`` says what serves the models. The 503 path (DOODLEPOD_FINDER_FALLBACK=false) is
tests/app/test_models_preparation.py's.
"""
from __future__ import annotations

import json
import math
import os
import time

import numpy as np
import pytest
import requests

from tests.support import hold, stack, wait

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

CODE = "found_by_ink_finder_in_app"


@pytest.fixture(scope="module")
def app_finding_in_process():
    workdir = stack.make_workdir("dp-finder-fallback-")
    closed = stack.free_port()  # nothing listens: no model server at all
    state_file = workdir / "models-state.json"
    tmp = state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps({"state": "preparing", "detail": "Compiling mmcv's C++ ops for the model server.",
                               "progress": {"step": "step 4 of 7, compiling mmcv", "done": 38, "total": 77},
                               "retry_after_s": 420}))
    os.replace(tmp, state_file)
    app = stack.Gunicorn(workdir / "app", {
        "DOODLEPOD_TORCHSERVE_URL": f"http://127.0.0.1:{closed}",
        "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": f"http://127.0.0.1:{closed}",
        "DOODLEPOD_MODELS_STATE_FILE": str(state_file), "DOODLEPOD_LOCAL_DIR": str(workdir / "files"),
        "DOODLEPOD_RENDER_SIZE": "160", "DOODLEPOD_RENDER_PROCESSES": "1", "DOODLEPOD_DEFAULT_MOTIONS": "dab,zombie",
        "DOODLEPOD_RENDER_MAX_FRAMES": "8"})
    try:
        app.start()
        yield app
    finally:
        app.stop()
        stack.remove(workdir)


def figure_size(joints: dict) -> float:
    xs = [p[0] for p in joints.values()]
    ys = [p[1] for p in joints.values()]
    return max(max(xs) - min(xs), max(ys) - min(ys))


def iou(a, b) -> float:
    inter = max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def test_ping_says_the_apps_own_finder_serves_photos(app_finding_in_process) -> None:
    resp = requests.get(f"{app_finding_in_process.url}/ping", timeout=10)
    assert resp.status_code == 503  # the model server is not ready: the pod is not, either
    models = resp.json()["models"]
    assert models["state"] == "preparing" and models["served_by"] == "ink_finder_in_app", models


def test_a_photo_is_animated_by_the_apps_finder(app_finding_in_process) -> None:
    app = app_finding_in_process
    page, truth = stack.page_with_character("char1")
    t0 = time.monotonic()
    resp = requests.post(f"{app.url}/animate", files={"image": ("p.jpg", stack.encode(page, "JPEG", quality=92),
                                                                "image/jpeg")}, timeout=240)
    took = time.monotonic() - t0
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert [w["code"] for w in body["warnings"]] == [CODE], body.get("warnings")
    assert set(body["animations"]) == {"dab", "zombie"}
    for url in body["animations"].values():
        gif = requests.get(url if url.startswith("http") else app.url + url, timeout=30)
        assert gif.status_code == 200 and gif.content[:6] in (b"GIF89a", b"GIF87a")
    # the finder's stages ran in the render processes in place of the models'
    assert {"find", "fit"} <= set(body["timings_ms"]), body["timings_ms"]
    assert iou(body["character"]["bbox"], stack.ink_box(page)) >= 0.8, body["character"]["bbox"]
    joints = body["character"]["joints"]
    assert set(joints) == set(truth)
    size = figure_size(truth)
    for hand in ("left_hand", "right_hand"):  # the outermost ends of the arms: where the finder is surest
        assert math.dist(joints[hand], truth[hand]) <= 0.1 * size, (hand, joints[hand], truth[hand])
    log = app.log_text()
    assert "the app's ink finder answers" in log
    print(f"fallback /animate of a 1200x900 photo, 2 motions: {took:.1f} s; timings {body['timings_ms']}")


def test_characters_open_on_the_finders_fit_and_a_hand_drawn_box_is_refitted(app_finding_in_process) -> None:
    """What the studio calls: the character opens on the finder's box and joints; a box drawn by hand
    (PATCH bbox without joints) gets a skeleton fitted to the mask inside it, not a template."""
    from tests.support.model_answers import drawing

    app = app_finding_in_process
    page = drawing(480, 640)  # a stick figure on paper: its hands are the ink's leftmost and rightmost ends
    ink = np.asarray(page).min(axis=2) < 128
    ys, xs = np.nonzero(ink)
    right_hand = (xs.min(), ys[xs == xs.min()].mean())  # the figure's right: the image's left
    left_hand = (xs.max(), ys[xs == xs.max()].mean())
    size = max(xs.max() - xs.min(), ys.max() - ys.min())
    resp = requests.post(f"{app.url}/characters", files={"image": ("p.png", stack.encode(page), "image/png")},
                         timeout=240)
    assert resp.status_code == 201, resp.text
    doc = resp.json()
    assert [w["code"] for w in doc["warnings"]] == [CODE]
    assert iou(doc["bbox"], (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1)) >= 0.7, doc["bbox"]
    # a box drawn by hand (wider, off-centre), no joints sent: the server fits them inside it
    box = [float(xs.min() - 60), float(ys.min() - 25), float(xs.max() + 120), float(ys.max() + 10)]
    resp = requests.patch(f"{app.url}/characters/{doc['id']}", json={"bbox": box},
                          headers={"If-Match": f'"{doc["version"]}"'}, timeout=240)
    assert resp.status_code == 200, resp.text
    edited = resp.json()
    assert edited["version"] == 2 and [w["code"] for w in edited["warnings"]] == [CODE]
    assert edited["bbox"] == pytest.approx(box, abs=2)
    for name, (x, y) in edited["joints"].items():
        assert box[0] <= x <= box[2] and box[1] <= y <= box[3], (name, x, y)
    assert math.dist(edited["joints"]["right_hand"], right_hand) <= 0.1 * size, edited["joints"]["right_hand"]
    assert math.dist(edited["joints"]["left_hand"], left_hand) <= 0.1 * size, edited["joints"]["left_hand"]
    # a standing template placed in the new box would put the left hand at its fixed fraction instead
    template_left_hand = (box[0] + 0.92 * (box[2] - box[0]), box[1] + 0.52 * (box[3] - box[1]))
    assert math.dist(edited["joints"]["left_hand"], template_left_hand) > 0.05 * size
    # moving a joint only: nothing is re-fitted, no finder ran
    resp = requests.patch(f"{app.url}/characters/{doc['id']}", json={"joints": {"neck": edited["joints"]["neck"]}},
                          headers={"If-Match": '"2"'}, timeout=120)
    assert resp.status_code == 200 and "warnings" not in resp.json(), resp.text
    assert resp.json()["joints"]["left_hand"] == edited["joints"]["left_hand"]


def test_blank_paper_is_refused_with_a_reason_not_invented_joints(app_finding_in_process) -> None:
    from PIL import Image

    paper = Image.new("RGB", (640, 480), (246, 244, 238))
    resp = requests.post(f"{app_finding_in_process.url}/animate",
                         files={"image": ("p.png", stack.encode(paper), "image/png")}, timeout=120)
    assert resp.status_code == 422 and resp.json()["error"] == "no_character", resp.text


@pytest.fixture(scope="module")
def one_slot_app():
    """The fallback with one render slot and no waiting room: the finder's work is admitted like a render."""
    workdir = stack.make_workdir("dp-finder-slot-")
    closed = stack.free_port()
    app = stack.Gunicorn(workdir / "app", {
        "DOODLEPOD_TORCHSERVE_URL": f"http://127.0.0.1:{closed}",
        "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": f"http://127.0.0.1:{closed}", "DOODLEPOD_TORCHSERVE_RETRIES": "0",
        "DOODLEPOD_LOCAL_DIR": str(workdir / "files"), "DOODLEPOD_RENDER_SIZE": "160",
        "DOODLEPOD_RENDER_PROCESSES": "1", "DOODLEPOD_DEFAULT_MOTIONS": "dab", "DOODLEPOD_MAX_INFLIGHT": "1",
        "DOODLEPOD_ADMISSION_WAIT_S": "0"})
    try:
        app.start()
        yield app
    finally:
        app.stop()
        stack.remove(workdir)


def test_the_apps_finder_holds_a_render_slot_and_keeps_the_deadline(one_slot_app) -> None:
    """Hostile neighbours: a photo that keeps the one slot busy turns the next away at once (503
    overloaded, not a queue behind the finder), and a deadline shorter than the finder's work ends
    in 504 within it, the slot free again for the next request."""
    import concurrent.futures as cf

    from tests.studio.test_studio_by_hand import PHOTO  # char4: a 4032x3024 JPEG, the finder's longest case

    app = one_slot_app

    def send(headers=None):
        return requests.post(f"{app.url}/animate", files={"image": ("c.jpg", PHOTO, "image/jpeg")},
                             headers=headers or {}, timeout=120)

    # The render processes are stopped while the second request comes: the first holds the slot then on
    # any machine (a fast one did the whole photo in 0.25 s, about the time the second took to be sent)
    with cf.ThreadPoolExecutor(2) as pool:
        with hold.paused(hold.app_render_processes(app.proc.pid)):
            first = pool.submit(send)
            wait.until(lambda: "animate motions=" in app.log_text(), 20, "the first request holding the slot",
                       every=0.02)  # logged once the first holds its render slot (then it decodes and finds)
            t0 = time.monotonic()
            second = send()
            assert second.status_code == 503 and second.json()["error"] == "overloaded", second.text
            assert time.monotonic() - t0 < 5
        released = time.monotonic()
        assert first.result().status_code == 200, first.result().text
        whole = time.monotonic() - released  # all of its work: it waited at its first step, the decode
    # a deadline of a quarter of what the same photo just took on this machine (a fixed 0.3 s was more
    # than the whole request on a fast machine, 0.25 s)
    t0 = time.monotonic()
    late = send({"X-Deadline-Seconds": f"{whole / 4:.3f}"})
    took = time.monotonic() - t0
    assert late.status_code == 504 and late.json()["error"] == "deadline_exceeded", (whole, late.text)
    assert took < whole / 4 + 3, (whole, took)
    ok = send()
    assert ok.status_code == 200 and [w["code"] for w in ok.json()["warnings"]] == [CODE], ok.text
