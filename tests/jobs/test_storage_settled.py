"""Issue 41 S6 and S8: what an async job will store is reserved when it is admitted and settled when it
ends, whatever happened to its attempts; a job whose client is past its storage share when it starts
fails alone; the pod's storage budget counts the reservations; a queued video counts in its client's
share and is checked against the pod's budget before it is stored.

The real app in this process (its routes, shares and storage on local disk), a real Redis server (Valkey
on loopback) and the real worker (:class:`app.worker.Worker`, in a thread, on the app's own services).
The job handlers are the test's: they store a known number of bytes through the real storage, or fail as
a video with no person does (the models need weights this machine lacks). One stand-in: where the test
needs a client that stored more meanwhile, it charges the client's ledger directly (what a synchronous
render's files would have done).
"""
from __future__ import annotations

import io
import json
import os
import threading
import time

import pytest

from app import worker as worker_module
from app.errors import NoPerson
from app.jobs.price import VIDEO_MOTION_BYTES
from tests.support import stack, wait

pytestmark = [pytest.mark.redis, pytest.mark.timeout(300)]

#: What the test's render handler stores.
STORED = 5000


@pytest.fixture(scope="module")
def drawing():
    page, joints = stack.page_with_character("char1", (500, 500), (60, 40))
    return stack.encode(page), json.dumps({k: list(v) for k, v in joints.items()})


def _app(make_app, redis_server, **settings):
    base = {"redis_url": redis_server.url, "redis_prefix": f"settle-{time.monotonic_ns()}:", "max_inflight": 2,
            "worker_concurrency": 1, "render_size": 200, "render_max_frames": 30,
            "trusted_proxies": ("127.0.0.1/32",)}
    return make_app(**{**base, **settings})


def _animate(app, drawing, address: str):
    image, joints = drawing
    return app.test_client().post("/animate", data={"image": (io.BytesIO(image), "d.png"), "motions": "dab",
                                                    "joints": joints},
                                  headers={"Prefer": "respond-async", "X-Forwarded-For": address},
                                  content_type="multipart/form-data")


def _video(mib: float) -> bytes:
    return b"\x00\x00\x00\x18ftypisom" + os.urandom(int(mib * 2**20))


def _post_video(app, address: str, mib: float):
    return app.test_client().post("/motions", data={"video": (io.BytesIO(_video(mib)), "v.mp4", "video/mp4")},
                                  headers={"X-Forwarded-For": address}, content_type="multipart/form-data")


class _Running:
    """The app's own services as a render worker, in a thread."""

    def __init__(self, app) -> None:
        self.svc = app.extensions["doodlepod"]
        self.worker = worker_module.Worker(self.svc, self.svc.runtime_dir)
        self.worker._models_ready = lambda: True   # the handlers are the test's: no model is asked
        self.thread = threading.Thread(target=self.worker.run, name="worker-under-test", daemon=True)

    def __enter__(self) -> _Running:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.worker.stop.set()
        self.thread.join(60)

    def ended(self, job_id: str) -> dict:
        return wait.until(lambda: (j := self.svc.jobs.get(job_id)) and j["status"] in ("succeeded", "failed") and j,
                          60, f"job {job_id} ended")


def _stores(ran: list[str]):
    def handler(ctx, order, _input, job_id, deadline, progress=None):
        ran.append(job_id)
        ctx.storage.put(f"test/{job_id}.bin", b"x" * STORED, "application/octet-stream", deadline)
        return {}
    return handler


@pytest.mark.parametrize("attempts", [3, 1], ids=["taken-over", "attempts-used-up"])
def test_a_reservation_is_settled_once_when_the_job_ends_after_a_lost_attempt(make_app, redis_server, drawing,
                                                                               monkeypatch, attempts):
    """A worker takes the job and is killed (its attempt lost); another takes it over after the visibility
    timeout. Its client's share then holds what the job stored, not that plus its price (before: the
    reservation was settled only by a first attempt); with its attempts used up by lost workers, nothing."""
    ran: list[str] = []
    monkeypatch.setitem(worker_module.HANDLERS, "animate", _stores(ran))
    app = _app(make_app, redis_server, client_storage_mb=64.0, jobs_visibility_timeout_s=1.0,
               jobs_max_attempts=attempts)
    svc = app.extensions["doodlepod"]
    resp = _animate(app, drawing, "203.0.113.7")
    assert resp.status_code == 202, resp.get_data(as_text=True)[:300]
    job_id = resp.get_json()["id"]
    who = svc.jobs.raw_job(job_id)["client"]
    price = svc.shares.ledger.usage(who)[0]
    assert price > STORED                                    # reserved at admission
    lost = svc.jobs.take("lost-worker", 0)
    assert lost.job_id == job_id and svc.jobs.start(lost, "lost-worker").verdict == "run"
    with _Running(app) as running:
        job = running.ended(job_id)
    if attempts > 1:
        assert job["status"] == "succeeded" and job["attempts"] == 2, job
        assert svc.shares.ledger.usage(who)[0] == STORED     # the real bytes replaced the price
    else:
        assert job["status"] == "failed" and job["error"]["code"] == "attempts_exhausted", job
        assert svc.shares.ledger.usage(who)[0] == 0          # the reservation given back with the dead job
        assert ran == []
    assert svc.jobs.reserved_bytes() == 0


def test_a_failed_job_gives_its_reservation_back(make_app, redis_server, drawing, monkeypatch):
    def fails(ctx, order, _input, job_id, deadline, progress=None):
        ctx.storage.put(f"test/{job_id}.bin", b"x" * STORED, "application/octet-stream", deadline)
        raise NoPerson("the test's job fails after storing")

    monkeypatch.setitem(worker_module.HANDLERS, "animate", fails)
    app = _app(make_app, redis_server, client_storage_mb=64.0)
    svc = app.extensions["doodlepod"]
    job_id = _animate(app, drawing, "203.0.113.8").get_json()["id"]
    who = svc.jobs.raw_job(job_id)["client"]
    with _Running(app) as running:
        assert running.ended(job_id)["status"] == "failed"
    assert svc.shares.ledger.usage(who)[0] == STORED and svc.jobs.reserved_bytes() == 0


def test_a_job_whose_client_is_past_its_share_when_it_starts_fails_alone(make_app, redis_server, drawing,
                                                                          monkeypatch):
    """Client A's job is admitted within its 1 MiB share; before it starts, A stores 2 MiB more (charged
    to its ledger here). A's job fails at its start with 429 storage_share_used, stores nothing and is not
    retried; client B's job, queued beside it, renders (before: A's ran and stored past its share)."""
    ran: list[str] = []
    monkeypatch.setitem(worker_module.HANDLERS, "animate", _stores(ran))
    app = _app(make_app, redis_server, client_storage_mb=1.0)
    svc = app.extensions["doodlepod"]
    a = _animate(app, drawing, "203.0.113.9")
    b = _animate(app, drawing, "198.51.100.9")
    assert (a.status_code, b.status_code) == (202, 202), a.get_data(as_text=True)[:300]
    a_id, b_id = a.get_json()["id"], b.get_json()["id"]
    who = svc.jobs.raw_job(a_id)["client"]
    svc.shares.charge_storage(who, 2 * 2**20)                # its synchronous work stored meanwhile
    with _Running(app) as running:
        job_a, job_b = running.ended(a_id), running.ended(b_id)
    assert job_a["status"] == "failed" and job_a["attempts"] == 1, job_a
    assert job_a["error"]["code"] == "storage_share_used" and job_a["error"]["status"] == 429
    assert "when the job started" in job_a["error"]["message"]
    assert ran == [b_id] and job_b["status"] == "succeeded", job_b


def test_the_pods_budget_counts_the_queued_jobs_reservations(make_app, redis_server, drawing):
    """Nothing is stored yet, every client is within its own share: the pod's budget still refuses the job
    that its reservations leave no room for, 503 storage_full (before: every job was queued, and they
    stored past the budget when they ran)."""
    from app.jobs.price import stored_bytes
    from app.orders import AnimateOrder

    image, _ = drawing
    price = stored_bytes(AnimateOrder(motions=("dab",), format="gif", base_url="http://h"), len(image),
                         app_settings := _app(make_app, redis_server).config["SETTINGS"])
    budget_mb = 2.5 * price / 2**20 + 0.05                   # room for two jobs' prices, with the app's own files
    app = _app(make_app, redis_server, storage_budget_mb=budget_mb, client_storage_mb=64.0)
    assert app_settings.render_size == app.config["SETTINGS"].render_size
    answers = [_animate(app, drawing, f"203.0.113.{20 + i}") for i in range(3)]
    codes = [(r.status_code, (r.get_json() or {}).get("error", "")) for r in answers]
    assert codes[:2] == [(202, ""), (202, "")], codes
    assert codes[2] == (503, "storage_full"), codes
    assert "reservations" in answers[2].get_json()["message"] and answers[2].headers.get("Retry-After")


# --- S8: queued videos -----------------------------------------------------------------------------------

def test_a_queued_video_counts_in_its_clients_share_until_its_job_ends(make_app, redis_server, monkeypatch):
    """A 3 MiB video against a 3 MiB share: the client's next upload is refused 429 storage_share_used while
    the video waits (before: a queued video counted in no share); when its job ends the video is removed
    and its bytes given back."""
    monkeypatch.setitem(worker_module.HANDLERS, "motion_from_video",
                        lambda *a, **k: (_ for _ in ()).throw(NoPerson("no person in the test's video")))
    app = _app(make_app, redis_server, client_storage_mb=3.0, client_queued_mb=64.0)
    svc = app.extensions["doodlepod"]
    first = _post_video(app, "203.0.113.30", 3)
    assert first.status_code == 202, first.get_data(as_text=True)[:300]
    job_id = first.get_json()["id"]
    who = svc.jobs.raw_job(job_id)["client"]
    assert svc.shares.ledger.usage(who)[0] == len(_video(3)) + VIDEO_MOTION_BYTES   # the video and its price
    second = _post_video(app, "203.0.113.30", 1)
    assert (second.status_code, second.get_json()["error"]) == (429, "storage_share_used")
    other = _post_video(app, "198.51.100.30", 1)            # another client's share is its own
    assert other.status_code == 202
    with _Running(app) as running:
        assert running.ended(job_id)["status"] == "failed"
        running.ended(other.get_json()["id"])
    assert svc.shares.ledger.usage(who)[0] == 0
    assert not list((svc.storage.root / "queued-videos").iterdir())


def test_a_video_past_the_pods_budget_is_refused_before_it_is_stored(make_app, redis_server):
    app = _app(make_app, redis_server, storage_budget_mb=2.0, client_storage_mb=64.0, client_queued_mb=64.0)
    svc = app.extensions["doodlepod"]
    resp = _post_video(app, "203.0.113.40", 3)
    body = resp.get_json()
    assert (resp.status_code, body.get("error")) == (503, "storage_full"), body
    assert resp.headers.get("Retry-After") and "DOODLEPOD_STORAGE_BUDGET_MB" in body["message"]
    videos = svc.storage.root / "queued-videos"
    assert not videos.exists() or not list(videos.iterdir())   # never written
    assert svc.jobs.redis.xlen(svc.jobs.video_stream) == 0
