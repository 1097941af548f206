"""A small pod as `make run` starts it on a 2-CPU machine: one render slot, shared by people at once.

Real parts over loopback: gunicorn with gevent workers and its render processes, the render worker
(python -m app.worker) and a Redis (Valkey) as scripts/run_local.sh starts them, with its
settings (tests/support/make_run_pod.py), on two CPUs; TorchServe with the fake models (the real
weights cannot be downloaded here).

- The studio's person (a save, the motion previews at background priority, a render as an async
  job) and the old mobile client (``POST /``) at the same time: both get their animations, neither
  is told 503.
- Two people's synchronous requests at once: the second waits the few seconds the first takes.
- ``GET /jobs/{id}`` reports the render's progress: the stage, frames done and total per motion,
  moving while the render runs.
"""
from __future__ import annotations

import base64
import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.conftest import REPO
from tests.support import hold, make_run_pod, stack, wait

pytestmark = [pytest.mark.e2e, pytest.mark.redis, pytest.mark.timeout(600)]

BACKGROUND = {"Priority": "u=7"}
ASYNC = {"Prefer": "respond-async"}


@pytest.fixture(scope="module")
def drawing():
    return stack.page_with_character("char1", (800, 700), (150, 50))


@pytest.fixture(scope="module")
def pod(torchserve, drawing):
    image, joints = drawing
    torchserve.set_control(detector={"mode": "nonwhite"},
                           pose={"mode": "fractions", "fractions": stack.pose_fractions(image, joints)})
    with make_run_pod.pod("dp-small-pod-", torchserve) as running:
        try:
            yield running
        finally:
            print(running.log_text()[-4000:])


def _character(pod, drawing) -> dict:
    image, joints = drawing
    r = requests.post(f"{pod.url}/characters", files={"image": ("page.png", stack.encode(image), "image/png")},
                      data={"joints": json.dumps({k: list(v) for k, v in joints.items()})}, timeout=120)
    assert r.status_code == 201, r.text
    return r.json()


def _mobile(pod, drawing) -> requests.Response:
    """The old mobile client: JSON {"file": base64} to POST / (the models find the drawing)."""
    image, _ = drawing
    return requests.post(f"{pod.url}/", json={"file": base64.b64encode(stack.encode(image)).decode()}, timeout=300)


def _job(pod, job_id: str) -> dict:
    r = requests.get(f"{pod.url}/jobs/{job_id}", timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def test_make_run_sets_no_capacity_knob():
    """The pod of these tests has make run's settings only while run_local.sh exports nothing else."""
    script = (REPO / "scripts" / "run_local.sh").read_text()
    exported = set(re.findall(r"export (DOODLEPOD_[A-Z_]+)=", script)) - set(make_run_pod.RUN_LOCAL_SCRIPT_VARS)
    assert exported <= set(make_run_pod.RUN_LOCAL_SETS), exported - set(make_run_pod.RUN_LOCAL_SETS)


def test_the_pod_has_one_render_slot(pod):
    assert "max_inflight=1 " in pod.app.log_text(), "not make run's admission on 2 CPUs"


def test_studio_and_mobile_client_at_once_both_get_their_animations(pod, drawing):
    doc = _character(pod, drawing)
    path = f"{pod.url}/characters/{doc['id']}"
    saved = requests.patch(path, json={"joints": {"left_elbow": doc["joints"]["left_elbow"]}},
                           headers={"If-Match": f'"{doc["version"]}"'}, timeout=120)
    assert saved.status_code == 200, saved.text
    previews: list[int] = []
    stop = threading.Event()

    def preview_loop() -> None:
        """The page's previews of the saved version, one at a time, until the render is asked for."""
        for frames in range(20, 40):  # a new max_frames each time: no cache hit, every one renders
            if stop.is_set():
                return
            r = requests.post(f"{path}/animations", headers=BACKGROUND, timeout=120,
                              json={"motions": ["zombie"], "size": 128, "max_frames": frames})
            previews.append(r.status_code)

    with ThreadPoolExecutor(2) as pool:
        running = pool.submit(preview_loop)
        wait.until(lambda: _in_flight(pod) == 1, 60, "a preview holding the only render slot", every=0.01)
        mobile = pool.submit(_mobile, pod, drawing)          # the other person, while a preview runs
        # Past the models and waiting for the slot a preview holds (or, between two previews, served).
        wait.until(lambda: mobile.done() or _gauge(pod, "doodlepod_renders_waiting") >= 1, 120,
                   "the mobile request waiting for the render slot", every=0.02)
        stop.set()
        asked = requests.post(f"{path}/animations", headers=ASYNC, json={"motions": ["dab"]}, timeout=60)
        assert asked.status_code == 202, asked.text
        answer = mobile.result(timeout=300)
        running.result(timeout=300)
    assert answer.status_code == 200, answer.text
    assert set(answer.json()) >= {"dab", "jumping", "zombie"}
    def ended() -> dict | None:
        job = _job(pod, asked.json()["id"])
        return job if job["status"] not in ("queued", "running") else None

    job = wait.until(ended, 300, "the async job ended", every=0.2)
    assert job["status"] == "succeeded", job
    assert requests.get(f"{pod.url}{job['animations']['dab']}" if job["animations"]["dab"].startswith("/")
                        else job["animations"]["dab"], timeout=30).status_code == 200
    # previews are background work: they may be refused (503, tried again by the page), never a person
    assert set(previews) <= {200, 503}, previews
    print(f"preview answers: {previews}")


def test_a_second_request_waits_the_few_seconds_the_first_takes(pod, drawing):
    doc = _character(pod, drawing)
    studio = f"{pod.url}/characters/{doc['id']}/animations"
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(requests.post, studio, json={"motions": ["zombie"], "size": 1024}, timeout=120)
        wait.until(lambda: _in_flight(pod) == 1, 60, "the first render holding the only slot", every=0.01)
        t0 = time.monotonic()
        second = _mobile(pod, drawing)
        waited = time.monotonic() - t0
        assert first.result(timeout=120).status_code == 200
    assert second.status_code == 200, second.text
    print(f"the second request was answered after {waited:.1f} s")


def _gauge(pod, name: str) -> float:
    text = requests.get(f"{pod.url}/metrics", timeout=10).text
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith(name) and not line.startswith("#"))


def _in_flight(pod) -> float:
    return _gauge(pod, "doodlepod_renders_in_flight")


#: Four motions at the largest size: each renders in one process (a render split over processes counts
#: its frames only as each process's run is joined), long enough for the frames done to be seen moving.
MOTIONS = ["zombie", "dab", "jumping", "wave_hello"]


def test_job_progress_moves_frames_per_motion_and_stage(pod, drawing):
    doc = _character(pod, drawing)
    r = requests.post(f"{pod.url}/characters/{doc['id']}/animations", headers=ASYNC,
                      json={"motions": MOTIONS, "size": 1024}, timeout=60)
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    assert r.json()["progress"] == {"stage": "queued"}
    seen: list[dict] = []

    def ended() -> dict | None:
        seen.append(_job(pod, job_id))
        return seen[-1] if seen[-1]["status"] not in ("queued", "running") else None

    # the worker runs in short bursts with a look between two, so the frames are seen moving however
    # fast the machine renders (a free-running poll saw them move only where the render took seconds)
    job = hold.stepped(pod.worker.proc.pid, ended, 300)
    assert job["status"] == "succeeded", job
    rendering = [j["progress"] for j in seen if j["status"] == "running" and j["progress"].get("motions")]
    assert rendering, [j.get("progress") for j in seen]
    for p in rendering:
        assert set(p["motions"]) == set(MOTIONS)
        assert p["stage"] in ("rendering", "storing", "stored")
        for m in p["motions"].values():
            assert m["frames_total"] is None or 0 <= m["frames_done"] <= m["frames_total"]
    moving = sorted({p["frames_done"] for p in rendering if 0 < p["frames_done"] < p["frames_total"]})
    assert len(moving) >= 2, f"the frames done did not move while the render ran: {rendering}"
    done = [p["frames_done"] for p in rendering]
    assert done == sorted(done), "progress went backwards"
    final = job["progress"]
    assert final["stage"] == "succeeded"
    assert final["frames_done"] == final["frames_total"] > 0
    assert all(m["frames_done"] == m["frames_total"] > 0 for m in final["motions"].values())
