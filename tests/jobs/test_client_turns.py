"""Issue 41 S4: the render worker serves clients in turn, and no client's jobs hold more than its render
share (DOODLEPOD_CLIENT_RENDER_SLOTS) of the worker's slots. One client's four queued scene jobs held
both slots for 242 s while another client's small /animate waited behind them.

The real worker (:class:`app.worker.Worker`, its job threads and render slots) on a real Redis server and
TorchServe (the fake models: the worker takes jobs only while they are ready); the jobs are the test's
own kinds, each held on an event until the test lets it go, so what runs when is decided by the worker's
turns alone, never by how fast this machine renders.
"""
from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from app import worker as worker_module
from app.jobs.queue import JobQueue
from tests.support import wait

pytestmark = [pytest.mark.redis, pytest.mark.timeout(180)]

#: Longest a held job waits for the event that lets it go (the test fails long before on a wrong order).
HOLD_S = 20.0


class _Worker:
    """A worker in this process with ``concurrency`` job threads over ``slots`` render slots."""

    def __init__(self, redis_server, torchserve, tmp_path: Path, slots: int, concurrency: int, share: int) -> None:
        from app.characters.torchserve import TorchServeClient
        from app.config import load_settings
        from app.render.admission import InflightSlots

        settings = load_settings({}, worker_concurrency=concurrency, request_deadline_s=60.0, ping_timeout_s=5.0,
                                 client_render_slots=share)
        self.queue = JobQueue(redis_server.url, f"turns-{tmp_path.name}:", max_attempts=1, visibility_s=60)
        services = SimpleNamespace(settings=settings, jobs=self.queue, pool=None,
                                   slots=InflightSlots(tmp_path / "slots", slots),
                                   torchserve=TorchServeClient(torchserve.inference_url, torchserve.management_url))
        self.worker = worker_module.Worker(services, tmp_path)
        self.thread = threading.Thread(target=self.worker.run, name="worker-under-test", daemon=True)

    def __enter__(self) -> _Worker:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.worker.stop.set()
        self.thread.join(60)
        assert not self.thread.is_alive(), "the worker did not stop"

    def submit(self, client: str, n: int = 1, cost: float = 0.0) -> list[str]:
        return [self.queue.submit("test_held", {"client": client}, client=client, cost=cost).job["id"]
                for _ in range(n)]

    def wait_ended(self, ids: list[str]) -> None:
        for job_id in ids:
            job = wait.until(lambda: (j := self.queue.get(job_id)) and j["status"] in ("succeeded", "failed") and j,
                             90, f"job {job_id} ended")
            assert job["status"] == "succeeded", job


class _Log:
    """What the held jobs did, in order: ("start"|"end", client, job id), and how many ran at once per client."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[str, str, str]] = []
        self.running: dict[str, int] = {}
        self.most: dict[str, int] = {}

    def start(self, client: str, job_id: str) -> None:
        with self.lock:
            self.events.append(("start", client, job_id))
            self.running[client] = self.running.get(client, 0) + 1
            self.most[client] = max(self.most.get(client, 0), self.running[client])

    def end(self, client: str, job_id: str) -> None:
        with self.lock:
            self.events.append(("end", client, job_id))
            self.running[client] -= 1

    def started(self, client: str) -> list[str]:
        with self.lock:
            return [j for e, c, j in self.events if e == "start" and c == client]


def test_a_client_queued_after_anothers_four_jobs_is_served_at_the_next_turn(redis_server, torchserve, tmp_path,
                                                                            monkeypatch):
    """One job slot (two slots: one stays for synchronous requests), no render share: client A queues
    four jobs, B one while A's first renders. B's job is the next to start, before A's second (in
    stream order it started after A's fourth)."""
    log = _Log()
    b_queued = threading.Event()

    def held(_ctx, payload, _input, job_id, _deadline):
        log.start(payload["client"], job_id)
        if payload["client"] == "A" and len(log.started("A")) == 1:
            b_queued.wait(HOLD_S)             # A's first job renders until B's job is queued
        log.end(payload["client"], job_id)
        return {}

    monkeypatch.setitem(worker_module.HANDLERS, "test_held", held)
    with _Worker(redis_server, torchserve, tmp_path, slots=2, concurrency=2, share=0) as w:
        a = w.submit("A", 4)
        wait.until(lambda: log.started("A"), 60, "A's first job started")
        b = w.submit("B")
        b_queued.set()
        w.wait_ended(a + b)
    starts = [(c, j) for e, c, j in log.events if e == "start"]
    assert starts[:2] == [("A", a[0]), ("B", b[0])], starts
    assert sorted(j for c, j in starts if c == "A") == sorted(a)


def test_a_clients_jobs_hold_no_more_than_its_render_share_of_the_worker_slots(redis_server, torchserve, tmp_path,
                                                                               monkeypatch):
    """Three job slots, a render share of 1: client A's three queued jobs run one at a time, and client B's
    job, queued after them, takes a slot beside A's first (every A job is held until B's has started: with
    A holding all three slots, B's could not start until they gave up waiting)."""
    log = _Log()
    b_started = threading.Event()

    def held(_ctx, payload, _input, job_id, _deadline):
        log.start(payload["client"], job_id)
        if payload["client"] == "B":
            b_started.set()
        else:
            b_started.wait(HOLD_S)
        log.end(payload["client"], job_id)
        return {}

    monkeypatch.setitem(worker_module.HANDLERS, "test_held", held)
    with _Worker(redis_server, torchserve, tmp_path, slots=4, concurrency=3, share=1) as w:
        a = w.submit("A", 3)
        wait.until(lambda: log.started("A"), 60, "A's first job started")
        b = w.submit("B")
        w.wait_ended(a + b)
    first_end = next(i for i, e in enumerate(log.events) if e[0] == "end")
    assert ("start", "B", b[0]) in log.events[:first_end], log.events   # B began while A's first was running
    assert log.most == {"A": 1, "B": 1}, log.most


def test_turns_charge_each_job_its_render_cpu_price(redis_server, torchserve, tmp_path, monkeypatch):
    """One job slot: client A queues three jobs of 3 motions at 400 px, B four of 1 motion at 200 px (a
    twelfth of A's CPU price each) while A's first renders. B's are served three for one of A's once both
    are in the turns: A1 B1 A2 B2 B3 B4 A3 (by job counts alone: A1 B1 A2 B2 A3 B3 B4)."""
    from app.config import load_settings
    from app.jobs.price import cpu_cost
    from app.orders import AnimateOrder

    settings = load_settings({}, render_max_frames=60)
    big = cpu_cost(AnimateOrder(motions=("dab", "jumping", "zombie"), format="gif", size=400, base_url="h"), settings)
    small = cpu_cost(AnimateOrder(motions=("dab",), format="gif", size=200, base_url="h"), settings)
    assert big == pytest.approx(12 * small) and small > 0
    log = _Log()
    b_queued = threading.Event()

    def held(_ctx, payload, _input, job_id, _deadline):
        log.start(payload["client"], job_id)
        if payload["client"] == "A" and len(log.started("A")) == 1:
            b_queued.wait(HOLD_S)
        log.end(payload["client"], job_id)
        return {}

    monkeypatch.setitem(worker_module.HANDLERS, "test_held", held)
    with _Worker(redis_server, torchserve, tmp_path, slots=2, concurrency=2, share=0) as w:
        a = w.submit("A", 3, cost=big)
        wait.until(lambda: log.started("A"), 60, "A's first job started")
        b = w.submit("B", 4, cost=small)
        b_queued.set()
        w.wait_ended(a + b)
    starts = [j for e, c, j in log.events if e == "start"]
    assert starts == [a[0], b[0], a[1], b[1], b[2], b[3], a[2]], [("A" if j in a else "B") for j in starts]


# --- over real HTTP: gunicorn, the worker process (python -m app.worker), real renders --------------------

def test_over_http_another_clients_small_job_renders_before_a_clients_queued_jobs(redis_server, torchserve,
                                                                                 tmp_path):
    """The pod's settings (two render slots, so one job slot; render share 1): client A queues four async
    /animate jobs whose drawing the detector finds, B one with its own joints (no model call) while A's
    first is held in the detector (the fake model holds its answer while a file of the test's exists).
    In the worker's log B's job starts right after A's first, before A's second."""
    import json as _json

    import requests

    from tests.support import stack
    from tests.support.jobstack import app_and_worker

    image, joints = stack.page_with_character("char1", (800, 800), (150, 100))
    png = stack.encode(image)
    held = tmp_path / "hold-detector"
    held.touch()
    torchserve.set_control(detector={"mode": "nonwhite", "hold_while": str(held)},
                           pose={"mode": "fractions", "fractions": stack.pose_fractions(image, joints)})
    env = {"DOODLEPOD_REDIS_URL": redis_server.url, "DOODLEPOD_REDIS_PREFIX": f"turns-http-{tmp_path.name}:",
           "DOODLEPOD_TORCHSERVE_URL": torchserve.inference_url,
           "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": torchserve.management_url, "DOODLEPOD_TORCHSERVE_RETRIES": "0",
           "DOODLEPOD_RENDER_SIZE": "120", "DOODLEPOD_RENDER_MAX_FRAMES": "8", "DOODLEPOD_RENDER_PROCESSES": "1",
           "DOODLEPOD_LOCAL_DIR": str(tmp_path / "files"), "DOODLEPOD_RUNTIME_DIR": str(tmp_path / "pod"),
           "DOODLEPOD_MAX_INFLIGHT": "2", "DOODLEPOD_WORKER_CONCURRENCY": "2", "DOODLEPOD_CLIENT_RENDER_SLOTS": "1",
           "DOODLEPOD_TRUSTED_PROXIES": "127.0.0.1/32", "DOODLEPOD_RATE_LIMIT_PER_MIN": "6000",
           "DOODLEPOD_RATE_LIMIT_BURST": "1000"}

    def post(who: str, **form) -> str:
        resp = requests.post(f"{app.url}/animate", files={"image": ("d.png", png, "image/png")},
                             data={"motions": "dab", **form},
                             headers={"Prefer": "respond-async", "X-Forwarded-For": who}, timeout=60)
        assert resp.status_code == 202, resp.text[:300]
        return resp.json()["id"]

    def ended(job_id: str) -> dict:
        return wait.until(lambda: (j := requests.get(f"{app.url}/jobs/{job_id}", timeout=10).json())["status"]
                          in ("succeeded", "failed") and j, 120, f"job {job_id} ended")

    try:
        with app_and_worker(tmp_path, env) as app:
            a = [post("203.0.113.50") for _ in range(4)]
            # A's first job is in the detector, which holds its answer until the test lets it go: B is
            # queued meanwhile, then A's jobs go on
            wait.until(lambda: any(c.startswith("detector") for c in torchserve.calls()), 60,
                       "A's first job in the detector")
            b = post("198.51.100.50", joints=_json.dumps({k: list(v) for k, v in joints.items()}))
            held.unlink()
            jobs = {job_id: ended(job_id) for job_id in [*a, b]}
            log = app.worker.log_text()
    finally:
        held.unlink(missing_ok=True)
        torchserve.set_control()
    assert all(j["status"] == "succeeded" for j in jobs.values()), [(j["status"], j.get("error")) for j in jobs.values()]
    starts = [m for m in (line.split("job ", 1)[1].split(" ", 1)[0] for line in log.splitlines()
                          if " start kind=" in line)]
    assert starts == [a[0], b, *a[1:]], ["B" if j == b else f"A{a.index(j) + 1}" for j in starts]
