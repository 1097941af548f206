"""A job's progress total is known from its first report (issue 33 item 12): it grew mid-run
(325 -> 358 frames) as each motion's render posed its clip, so a progress bar stepped back.

Real parts: Redis (Valkey), the app under gunicorn and a render worker process sharing its runtime
folder, the render process pool, HTTP on loopback. No model is called (the character's joints and
box are the client's; TorchServe serves the fake models only so the worker takes jobs). The job's record is polled as a client does; every total it shows must be
the final one.
"""
from __future__ import annotations

import pytest
import requests

from tests.support import hold, stack
from tests.support.characters import post_char1
from tests.support.jobstack import RedisServer, app_and_worker

pytestmark = [pytest.mark.redis, pytest.mark.timeout(600)]

MOTIONS = ["jumping_jacks", "dab", "zombie", "wave_hello"]


@pytest.fixture(scope="module")
def server(torchserve):
    """The worker takes jobs once the model server is ready: the fake-model TorchServe (never called)."""
    redis = RedisServer().start()
    workdir = stack.make_workdir("dp-progress-total-")
    env = {"DOODLEPOD_REDIS_URL": redis.url, "DOODLEPOD_LOCAL_DIR": str(workdir / "files"),
           "DOODLEPOD_RUNTIME_DIR": str(workdir / "pod"), "DOODLEPOD_RENDER_PROCESSES": "1",
           "DOODLEPOD_MAX_INFLIGHT": "1", "DOODLEPOD_TORCHSERVE_URL": torchserve.inference_url,
           "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": torchserve.management_url}
    try:
        with app_and_worker(workdir, env) as app:
            try:
                yield app
            finally:
                print(app.worker.log_text()[-2000:])
    finally:
        redis.remove()
        stack.remove(workdir)


def test_the_total_frames_never_change_while_the_job_runs(server):
    cid = post_char1(server.url)
    r = requests.post(f"{server.url}/characters/{cid}/animations", json={"motions": MOTIONS, "size": 200},
                      headers={"Prefer": "respond-async"}, timeout=60)
    assert r.status_code == 202, r.text
    job_url = f"{server.url}/jobs/{r.json()['id']}"
    totals, fractions = [], []

    def ended() -> dict | None:
        job = requests.get(job_url, timeout=30).json()
        p = job.get("progress") or {}
        if p.get("frames_total"):
            totals.append(p["frames_total"])
            fractions.append(p["frames_done"] / p["frames_total"])
        return job if job["status"] in ("succeeded", "failed") else None

    # the worker runs in short bursts with a look between two (a fast machine rendered the four motions
    # between two looks of a free-running poll, and the job showed one total, at the end)
    job = hold.stepped(server.worker.proc.pid, ended, 300, burst=0.01)
    assert job["status"] == "succeeded", job
    final = job["progress"]["frames_total"]
    assert len(totals) >= 3, totals
    assert set(totals) == {final}, f"the total changed mid-run: {totals}"
    assert fractions == sorted(fractions), "the bar stepped back"
