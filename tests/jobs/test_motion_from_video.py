"""A motion from a video, over real HTTP: gunicorn (gevent workers) + a render worker + a real Redis
server (Valkey) + TorchServe serving the fake drawing models (the real weights cannot be downloaded
here), all on loopback. The pose model is the real one (BlazePose, CPU), on a video made from a
photo of a person (tests/fixtures/people): no video of a person moving is available offline.

Upload the video -> the job reports progress -> it names the new motion -> the same client renders
the drawing char1 with it by name, like a library motion.
"""
from __future__ import annotations

import io
import re

import numpy as np
import pytest
import requests
from PIL import Image

from tests.support import stack, wait
from tests.support.jobstack import app_and_worker
from tests.support.person_video import PHOTO, frame, placements, write_video

pytestmark = [pytest.mark.redis, pytest.mark.e2e, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def page():
    return stack.page_with_character("char1", (800, 600), (200, 60))


@pytest.fixture(autouse=True)
def models_find_the_drawing(torchserve, page):
    image, joints = page
    torchserve.set_control(detector={"mode": "nonwhite"},
                           pose={"mode": "fractions", "fractions": stack.pose_fractions(image, joints)})
    yield


@pytest.fixture(scope="module")
def workdir():
    path = stack.make_workdir("dp-video-")
    yield path
    stack.remove(path)


@pytest.fixture(scope="module")
def pod(redis_server, torchserve, workdir):
    """The app and one render worker sharing a runtime folder, as in a pod."""
    env = {"DOODLEPOD_REDIS_URL": redis_server.url, "DOODLEPOD_TORCHSERVE_URL": torchserve.inference_url,
           "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": torchserve.management_url, "DOODLEPOD_TORCHSERVE_RETRIES": "0",
           "DOODLEPOD_RENDER_SIZE": "160", "DOODLEPOD_RENDER_MAX_FRAMES": "20", "DOODLEPOD_RENDER_PROCESSES": "1",
           "DOODLEPOD_LOCAL_DIR": str(workdir / "files"), "DOODLEPOD_RUNTIME_DIR": str(workdir / "pod"),
           "DOODLEPOD_JOBS_VISIBILITY_TIMEOUT_S": "30", "DOODLEPOD_MAX_INFLIGHT": "2",
           "DOODLEPOD_VIDEO_MAX_SECONDS": "10"}
    with app_and_worker(workdir, env) as app:
        yield app


@pytest.fixture(scope="module")
def person_mp4(tmp_path_factory) -> bytes:
    photo = Image.open(PHOTO).convert("RGB")
    frames = [frame(photo, *p) for p in placements(45)]  # 3 s at 15 fps
    return write_video(tmp_path_factory.mktemp("v") / "person.mp4", frames).read_bytes()


def _upload(pod, data: bytes, name: str = "dance.mp4") -> requests.Response:
    return requests.post(f"{pod.url}/motions", files={"video": (name, data, "video/mp4")}, timeout=60)


def _follow(pod, location: str, timeout: float = 180) -> tuple[dict, list[dict]]:
    """Poll the job until it ends: (last answer, every answer seen)."""
    seen: list[dict] = []

    def ended() -> dict | None:
        seen.append(requests.get(pod.url + location, timeout=10).json())
        return seen[-1] if seen[-1]["status"] in ("succeeded", "failed") else None

    return wait.until(ended, timeout, lambda: f"{location} ended: {seen[-1:]}", every=0.1), seen


def test_a_video_becomes_a_motion_the_client_renders_by_name(pod, page, person_mp4):
    resp = _upload(pod, person_mp4)
    assert resp.status_code == 202, resp.text
    assert re.fullmatch(r"/jobs/[0-9a-f]{32}", resp.headers["Location"])
    job, seen = _follow(pod, resp.headers["Location"])
    assert job["status"] == "succeeded", job
    motion = job["motion"]
    assert re.fullmatch(r"video-[0-9a-f]{12}", motion["name"]) and motion["frames"] == 45 and motion["fps"] == 15
    assert motion["expires"] > job["created"]
    # progress: frames read out of the frames expected, reported while it ran and complete at the end
    running = [s["progress"] for s in seen if s["status"] == "running" and s["progress"].get("frames_total")]
    assert running and all(0 < p["frames_done"] <= p["frames_total"] == 45 for p in running), seen[-3:]
    assert job["progress"] == {"stage": "succeeded", "frames_done": 45, "frames_total": 45}
    # the worker's log: its own lines, not the pose model's ~150 native INFO/WARNING lines (issue 43)
    log = pod.worker.log_text()
    assert " start kind=motion_from_video" in log or "motion_from_video" in log
    assert "Sparsity tensors" not in log and "LiteRT" not in log and "XNNPACK" not in log, log[-2000:]

    drawing = stack.encode(page[0], "PNG")
    made = requests.post(f"{pod.url}/animate", files={"image": ("drawing.png", drawing, "image/png")},
                         data={"motions": motion["name"], "format": "gif"}, timeout=120)
    assert made.status_code == 200, made.text
    url = made.json()["animations"][motion["name"]]
    gif = Image.open(io.BytesIO(requests.get(url, timeout=10).content))
    assert gif.format == "GIF" and gif.n_frames > 1
    # the drawing moves: frames differ
    first = np.asarray(gif.convert("RGB"))
    gif.seek(gif.n_frames - 1)
    assert np.abs(np.asarray(gif.convert("RGB")).astype(int) - first).sum() > 0

    # a stored character (the studio's path) renders it by name too
    made = requests.post(f"{pod.url}/characters", files={"image": ("drawing.png", drawing, "image/png")}, timeout=120)
    assert made.status_code == 201, made.text
    cid = made.json()["id"]
    anim = requests.post(f"{pod.url}/characters/{cid}/animations", json={"motions": [motion["name"]], "size": 96},
                         timeout=120)
    assert anim.status_code == 200, anim.text
    gif = Image.open(io.BytesIO(requests.get(anim.json()["animations"][motion["name"]], timeout=10).content))
    assert gif.format == "GIF" and gif.n_frames > 1


def test_a_blank_video_fails_the_job_with_no_person(pod, tmp_path):
    blank = [np.full((240, 320, 3), 128, np.uint8)] * 10
    with_nobody = write_video(tmp_path / "blank.mp4", blank).read_bytes()
    resp = _upload(pod, with_nobody)
    assert resp.status_code == 202, resp.text
    job, _ = _follow(pod, resp.headers["Location"])
    assert job["status"] == "failed" and job["attempts"] == 1
    assert job["error"]["code"] == "no_person" and job["error"]["status"] == 422, job


def test_a_longer_video_uses_its_first_seconds_or_the_window_asked_for(pod, tmp_path):
    """Issue 33 item 10: a video over DOODLEPOD_VIDEO_MAX_SECONDS was refused outright; now its first
    seconds are used and the job says which part, or the part `start`/`end` choose."""
    still = np.asarray(Image.open(PHOTO).convert("RGB").resize((160, 160)))
    long_video = write_video(tmp_path / "long.mp4", [still] * 12, fps=1.0).read_bytes()  # 12 s
    job, _ = _follow(pod, _upload(pod, long_video).headers["Location"])
    assert job["status"] == "succeeded", job
    window = job["motion"]["window"]
    assert (window["start_s"], window["end_s"], window["video_s"]) == (0.0, 10.0, 12.0), window
    assert "the first 10 s" in window["note"] and job["motion"]["frames"] <= 11

    r = requests.post(f"{pod.url}/motions", files={"video": ("long.mp4", long_video, "video/mp4")},
                      data={"start": "8"}, timeout=60)
    job, _ = _follow(pod, r.headers["Location"])
    assert job["status"] == "succeeded", job
    assert (job["motion"]["window"]["start_s"], job["motion"]["window"]["end_s"]) == (8.0, 12.0)
    assert job["motion"]["window"]["note"] == "8-12 s of the 12.0 s video"

    # a start after the video's end: refused before decoding
    r = requests.post(f"{pod.url}/motions", files={"video": ("long.mp4", long_video, "video/mp4")},
                      data={"start": "13"}, timeout=60)
    job, _ = _follow(pod, r.headers["Location"])
    assert job["status"] == "failed" and job["error"]["code"] == "invalid_video", job
    assert "only 12.00 s long" in job["error"]["message"]
    assert job["progress"] == {"stage": "failed"}, job  # not one frame read


def test_what_is_not_a_video_is_refused_at_once(pod):
    resp = _upload(pod, b"GIF89a" + b"\0" * 100, "x.gif")
    assert resp.status_code == 415 and resp.json()["error"] == "unsupported_type"
    resp = requests.post(f"{pod.url}/motions", data={"x": "1"}, timeout=10)
    assert resp.status_code == 400 and resp.json()["error"] == "bad_request"


def test_a_name_nobody_made_is_an_unknown_motion(pod, page):
    drawing = stack.encode(page[0], "PNG")
    resp = requests.post(f"{pod.url}/animate", files={"image": ("drawing.png", drawing, "image/png")},
                         data={"motions": "video-0123456789ab"}, timeout=60)
    assert resp.status_code == 400 and resp.json()["error"] == "unknown_motion"
