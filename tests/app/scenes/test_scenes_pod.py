"""Scenes on the stack ``make run`` starts (its own settings, two CPUs): gunicorn with gevent workers,
the render worker and a Redis (Valkey), TorchServe with the fake models (no weights here).

- A scene render as an async job: 202, then GET /jobs/{id} shows its frames moving, then the file.
- A scene render that runs past the request's deadline answers 504 and frees its render slot and
  process: the next render is served at once (the render is stopped, not left running).
- POST /animate with ``every_character`` as a job: every character of the photo, one file per motion.

Faked, and why: the two models (no weights here): the detector answers the scene fixture photo's four
boxes, the pose model char1's keypoints as fractions of each crop.
"""
from __future__ import annotations

import io
import json
import time

import pytest
import requests
from PIL import Image

from tests.fixtures.scene_photo import answer_key, make_scene_photo
from tests.support import hold, make_run_pod, stack
from tests.support.answers import assert_error

pytestmark = [pytest.mark.e2e, pytest.mark.redis, pytest.mark.timeout(600)]

ASYNC = {"Prefer": "respond-async"}


@pytest.fixture(scope="module")
def pod(torchserve):
    key = answer_key(make_scene_photo()[1])
    boxes = [{"bbox": k["box"], "score": 0.9, "category": "drawn_humanoid"} for k in key]
    l, t, r, b = key[1]["box"]
    fractions = [[(key[1]["joints"][j][0] - l) / (r - l), (key[1]["joints"][j][1] - t) / (b - t)]
                 for j in stack.COCO_FROM_AD]
    torchserve.set_control(detector={"mode": "boxes", "boxes": boxes}, pose={"mode": "fractions", "fractions": fractions})
    with make_run_pod.pod("dp-scenes-pod-", torchserve) as running:
        try:
            yield running
        finally:
            print(running.log_text()[-3000:])


@pytest.fixture(scope="module")
def scene(pod):
    photo, pasted = make_scene_photo()
    buf = io.BytesIO()
    Image.fromarray(photo).save(buf, "PNG")
    chars = [{"bbox": k["box"], "joints": k["joints"]} for k in answer_key(pasted)[:3]]
    r = requests.post(f"{pod.url}/scenes", files={"image": ("page.png", buf.getvalue(), "image/png")},
                      data={"characters": json.dumps(chars), "motions": "dab,jumping,zombie"}, timeout=300)
    assert r.status_code == 201, r.text
    return r.json()


def test_a_scene_render_as_a_job_shows_its_frames_moving(pod, scene):
    r = requests.post(f"{pod.url}/scenes/{scene['id']}/animations", headers=ASYNC, json={"size": 1000}, timeout=60)
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    seen = []

    def ended() -> dict | None:
        seen.append(requests.get(f"{pod.url}/jobs/{job_id}", timeout=30).json())
        return seen[-1] if seen[-1]["status"] not in ("queued", "running") else None

    # the worker runs in short bursts with a look between two: a free-running poll saw the frames move on
    # an idle machine only (at 500 px it saw one step), and a faster one renders 1000 px as fast
    job = hold.stepped(pod.worker.proc.pid, ended, 400)
    assert job["status"] == "succeeded", job
    assert job["kind"] == "scene_animations"
    moving = sorted({j["progress"]["frames_done"] for j in seen if j["status"] == "running"
                     and j["progress"].get("frames_total") and 0 < j["progress"]["frames_done"] < j["progress"]["frames_total"]})
    assert len(moving) >= 2, [j.get("progress") for j in seen]
    # the total is known from the first report on, so a progress bar never steps back
    totals = [j["progress"]["frames_total"] for j in seen if j["status"] == "running" and "frames_total" in j["progress"]]
    assert totals and totals[0] > 0, [j.get("progress") for j in seen]
    assert job["progress"]["frames_done"] == job["progress"]["frames_total"] > 0
    gif = Image.open(io.BytesIO(requests.get(job["animation"], timeout=30).content))
    assert gif.size == (job["width"], job["height"]) == (1000, 750)


def test_a_render_past_its_deadline_is_stopped_and_frees_the_pod(pod, scene):
    r = requests.post(f"{pod.url}/scenes/{scene['id']}/animations", json={"size": 1000, "format": "webp"},
                      headers={"X-Deadline-Seconds": "3"}, timeout=60)
    assert_error(r, 504, "deadline_exceeded")
    t = time.monotonic()
    quick = requests.post(f"{pod.url}/scenes/{scene['id']}/animations", json={"size": 128, "max_frames": 3},
                          timeout=120)
    assert quick.status_code == 200, quick.text
    assert time.monotonic() - t < 60


def test_animate_every_character_as_a_job(pod):
    photo, _ = make_scene_photo()
    buf = io.BytesIO()
    Image.fromarray(photo).save(buf, "PNG")
    r = requests.post(f"{pod.url}/animate", headers=ASYNC, files={"image": ("page.png", buf.getvalue(), "image/png")},
                      data={"motions": "dab", "every_character": "true"}, timeout=60)
    assert r.status_code == 202, r.text
    t_end = time.monotonic() + 400
    while time.monotonic() < t_end:
        job = requests.get(f"{pod.url}/jobs/{r.json()['id']}", timeout=30).json()
        if job["status"] not in ("queued", "running"):
            break
        time.sleep(0.2)
    assert job["status"] == "succeeded", job
    assert len(job["characters"]) == 4 and set(job["animations"]) == {"dab"}
    gif = Image.open(io.BytesIO(requests.get(job["animations"]["dab"], timeout=30).content))
    assert gif.n_frames > 1
