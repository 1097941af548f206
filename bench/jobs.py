#!/usr/bin/env python
"""Async jobs benchmark: N jobs submitted with ``Prefer: respond-async`` by C clients at once.

It starts the stack on loopback: a real Redis-compatible server (Valkey, tests/support/jobstack.py), a
real TorchServe serving the *fake* models of tests/fixtures/torchserve_fake (they answer in
milliseconds: model time is excluded), the app under gunicorn with gevent workers, and ``--workers``
render worker processes (``python -m app.worker``), each as its own pod (own render slots).

Every client posts its share of the ``--jobs`` (200) back to back, each with its own
Idempotency-Key, then polls ``GET /jobs/{id}`` until each ends. Renders are small (``--size`` px,
``--motions``), so the figures are the queue's and the app's own costs plus the rendering.

Prints: submissions (202s) and their latency; time to completion per job (the job's own
``created`` -> ``updated`` times) p50/p95/max; the peak queue depth (XLEN sampled every 50 ms);
throughput; and the checks that every job succeeded once: no job lost (all ``succeeded``), none run
twice (each job started exactly once in the workers' logs, ``attempts`` 1, one file per motion).
Exit status 1 if a check fails.
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import uuid
from collections import Counter
from datetime import datetime
from pathlib import Path

import redis
import requests
from common import load_avg, pct, run_clients, shares, stack

from tests.support import jobstack


def epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def sync_phase(args, workdir: Path, common: dict[str, str], photo: bytes) -> None:
    """The same renders as synchronous requests, on the same render capacity (render processes =
    workers x render processes, slots = workers x concurrency): each client posts its share back to
    back and, on 503, waits its Retry-After and posts again, as the mobile app does."""
    app = stack.Gunicorn(workdir / "sync-app", {
        **common, "DOODLEPOD_REDIS_URL": "", "DOODLEPOD_RUNTIME_DIR": str(workdir / "sync-run"),
        "DOODLEPOD_RENDER_PROCESSES": str(args.workers * args.render_processes),
        "DOODLEPOD_MAX_INFLIGHT": str(args.workers * args.concurrency)}).start()
    try:
        done: list[float] = []
        refused = Counter()
        lock = threading.Lock()

        def client(n: int) -> None:
            http = requests.Session()
            for _ in range(n):
                t0 = time.perf_counter()
                while True:
                    try:
                        resp = http.post(f"{app.url}/animate", files={"image": ("p.png", photo, "image/png")},
                                         data={"motions": args.motions}, timeout=300)
                    except requests.ConnectionError:  # a kept-alive connection the server closed meanwhile
                        with lock:
                            refused["connection closed, retried"] += 1
                        continue
                    if resp.status_code != 503:
                        break
                    with lock:
                        refused[resp.json()["error"]] += 1
                    time.sleep(float(resp.headers.get("Retry-After", "3")))
                with lock:
                    if resp.status_code == 200:
                        done.append(time.perf_counter() - t0)
                    else:
                        refused[f"HTTP {resp.status_code}"] += 1

        wall = run_clients(client, shares(args.jobs, args.clients))
        print(f"\nsame renders, synchronous (A/B in this run): {len(done)} of {args.jobs} succeeded in {wall:.1f} s "
              f"({len(done) / wall:.2f}/s); 503s answered and retried: {sum(refused.values())} {dict(refused)}")
        print(f"  time to completion (first POST -> 200, retries included): p50 {pct(done, 50):.2f} s, "
              f"p95 {pct(done, 95):.2f} s; a client holds a connection open for each render")
    finally:
        app.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--workers", type=int, default=2, help="worker processes (each its own pod)")
    ap.add_argument("--concurrency", type=int, default=2, help="DOODLEPOD_WORKER_CONCURRENCY of each worker")
    ap.add_argument("--render-processes", type=int, default=1, help="render processes per worker")
    ap.add_argument("--size", type=int, default=128, help="render size in pixels")
    ap.add_argument("--motions", default="dab")
    ap.add_argument("--max-frames", type=int, default=24)
    ap.add_argument("--timeout", type=float, default=900, help="give up waiting for the jobs after this many s")
    ap.add_argument("--no-sync", action="store_true", help="skip the synchronous comparison")
    args = ap.parse_args()

    workdir = stack.make_workdir("dp-bench-jobs-")
    page, joints = stack.page_with_character("char1", (800, 600), (200, 60))
    photo = stack.encode(page, "PNG")
    server = jobstack.RedisServer(workdir / "redis")
    (workdir / "ts").mkdir()
    ts = stack.FakeTorchServe(workdir / "ts")
    app = None
    workers: list[jobstack.WorkerProcess] = []
    try:
        server.start()
        ts.start()
        ts.set_control(detector={"mode": "nonwhite"}, pose={"mode": "fractions",
                                                             "fractions": stack.pose_fractions(page, joints)})
        common = {"DOODLEPOD_REDIS_URL": server.url, "DOODLEPOD_TORCHSERVE_URL": ts.inference_url,
                  "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": ts.management_url,
                  "DOODLEPOD_RENDER_SIZE": str(args.size), "DOODLEPOD_RENDER_MAX_FRAMES": str(args.max_frames),
                  "DOODLEPOD_LOCAL_DIR": str(workdir / "files"), "DOODLEPOD_JOBS_MAX_QUEUED": str(args.jobs + 50),
                  "DOODLEPOD_RATE_LIMIT_PER_MIN": "0", "DOODLEPOD_LOG_LEVEL": "info"}
        app = stack.Gunicorn(workdir / "app", {**common, "DOODLEPOD_RENDER_PROCESSES": "1"}).start()
        for i in range(args.workers):
            workers.append(jobstack.WorkerProcess(workdir / f"pod{i}", {
                **common, "DOODLEPOD_RUNTIME_DIR": str(workdir / f"pod{i}" / "run"),
                "DOODLEPOD_WORKER_CONCURRENCY": str(args.concurrency), "DOODLEPOD_MAX_INFLIGHT": str(args.concurrency),
                "DOODLEPOD_RENDER_PROCESSES": str(args.render_processes)}, f"worker{i}").start())
        r = redis.Redis.from_url(server.url)

        peak = [0]
        sampling = threading.Event()

        def sample() -> None:
            while not sampling.wait(0.05):
                try:
                    peak[0] = max(peak[0], r.xlen("doodlepod:jobs"))
                except redis.RedisError:
                    pass
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()

        submitted: list[tuple[str, float]] = []
        statuses: Counter = Counter()
        lock = threading.Lock()

        def client(n: int) -> None:
            http = requests.Session()
            for _ in range(n):
                key = uuid.uuid4().hex
                t0 = time.perf_counter()
                for _try in range(5):  # a retry with the same key never makes a second job
                    try:
                        resp = http.post(f"{app.url}/animate", files={"image": ("p.png", photo, "image/png")},
                                         data={"motions": args.motions},
                                         headers={"Prefer": "respond-async", "Idempotency-Key": key}, timeout=60)
                        break
                    except requests.RequestException:
                        time.sleep(0.5)
                else:
                    with lock:
                        statuses["no answer"] += 1
                    continue
                with lock:
                    statuses[resp.status_code] += 1
                    if resp.status_code == 202:
                        submitted.append((resp.json()["id"], time.perf_counter() - t0))

        t_start = time.perf_counter()
        t_submitted = run_clients(client, shares(args.jobs, args.clients))

        ids = [job_id for job_id, _ in submitted]
        pending = set(ids)
        final: dict[str, dict] = {}
        t_end = time.monotonic() + args.timeout
        http = requests.Session()
        while pending and time.monotonic() < t_end:
            for job_id in list(pending):
                job = http.get(f"{app.url}/jobs/{job_id}", timeout=10).json()
                if job["status"] in ("succeeded", "failed"):
                    final[job_id] = job
                    pending.discard(job_id)
            time.sleep(0.25)
        t_done = time.perf_counter() - t_start
        sampling.set()
        sampler.join()

        completion = [epoch(j["updated"]) - epoch(j["created"]) for j in final.values()]
        outcomes = Counter(j["status"] for j in final.values())
        logs = "".join(w.log_text() for w in workers)
        starts = {job_id: logs.count(f"job {job_id} start") for job_id in ids}
        twice = [j for j in ids if starts[j] != 1]
        attempts_off = [j for j, job in final.items() if job["attempts"] != 1]
        motions = args.motions.split(",")
        files = sum(1 for job in final.values() for m, url in job.get("animations", {}).items()
                    if m in motions and (workdir / "files" / url.split("/files/", 1)[-1]).is_file())

        print(f"\nasync jobs: {args.jobs} jobs by {args.clients} clients; {args.workers} worker process(es) x "
              f"concurrency {args.concurrency}, {args.render_processes} render process(es) each; renders "
              f"{args.size}px, motions {args.motions}, <= {args.max_frames} frames")
        latencies = [s for _, s in submitted]
        print(f"  submissions: {dict(statuses)} in {t_submitted:.2f} s; 202 latency p50 "
              f"{pct(latencies, 50) * 1e3:.0f} ms, p95 {pct(latencies, 95) * 1e3:.0f} ms")
        print(f"  time to completion (created -> ended): p50 {pct(completion, 50):.2f} s, p95 "
              f"{pct(completion, 95):.2f} s, max {max(completion, default=float('nan')):.2f} s")
        print(f"  peak queue depth (queued + running): {peak[0]}")
        print(f"  all ended after {t_done:.1f} s: {dict(outcomes)}; throughput {len(final) / t_done:.2f} jobs/s")
        print(f"  load average at the end of the run: {load_avg()} ({os.cpu_count()} CPUs)")
        checks = {
            f"all {args.jobs} submissions answered 202": statuses.get(202, 0) == args.jobs,
            "no job lost (every job ended succeeded)": outcomes.get("succeeded", 0) == len(ids) and not pending,
            "none run twice (each started once, attempts 1)": not twice and not attempts_off,
            f"one file per job and motion ({len(ids) * len(motions)})": files == len(ids) * len(motions),
        }
        for name, ok in checks.items():
            print(f"  {'PASS' if ok else 'FAIL'}: {name}")
        if twice:
            print(f"    started other than once: {[(j, starts[j]) for j in twice[:5]]}")
        if not args.no_sync:
            for w in workers:
                w.stop()
            sync_phase(args, workdir, common, photo)
        return 0 if all(checks.values()) else 1
    finally:
        for w in workers:
            w.stop()
        if app is not None:
            app.stop()
        ts.stop()
        server.remove()
        stack.remove(workdir)


if __name__ == "__main__":
    sys.exit(main())
