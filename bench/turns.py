#!/usr/bin/env python
"""What taking a render job costs the queue, A/B against a git ref in the same run (issue 41 S4).

Since the render stream is taken in clients' turns (app/jobs/lua/turn.lua), each take reads the whole
stream (bounded by DOODLEPOD_JOBS_MAX_QUEUED) where XREADGROUP read one entry. This measures that
cost alone: a real Redis-compatible server (Valkey on loopback, tests/support/jobstack.py), ``--jobs``
render jobs from ``--clients`` clients queued at once, then taken, started and ended one after the
other as a worker's job thread does (``has_work``, ``take``, ``start``, ``succeed``), by this tree's
``app.jobs.queue`` and by the ref's, each in a process of its own. No rendering.

Prints per tree: the median and p95 of one has_work + take, and of the whole cycle, in ms, the order
of the clients served (first 12), and the load. ``--ref main`` by default.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def child(url: str, prefix: str, jobs: int, clients: int) -> dict:
    from app.jobs.queue import JobQueue

    q = JobQueue(url, prefix, max_queued=jobs + 10, max_attempts=3, visibility_s=60)
    for i in range(jobs):   # client 0 queues its jobs first, then the others theirs: the S4 order
        who = f"c{min(clients - 1, i * clients // jobs)}"
        q.submit("animate", {"n": i}, b"x", client=who)
    takes, cycles, order = [], [], []
    while True:
        t0 = time.perf_counter()
        if not q.has_work():
            break
        taken = q.take("bench", 0)
        t1 = time.perf_counter()
        started = q.start(taken, "bench")
        order.append(started.job["client"])
        q.succeed(taken, started.owner, {})
        takes.append((t1 - t0) * 1e3)
        cycles.append((time.perf_counter() - t0) * 1e3)
    takes.sort()
    cycles.sort()
    return {"taken": len(takes), "take_p50": takes[len(takes) // 2], "take_p95": takes[int(len(takes) * 0.95)],
            "cycle_p50": cycles[len(cycles) // 2], "cycle_p95": cycles[int(len(cycles) * 0.95)],
            "order": order[:12]}


def run_tree(root: Path, url: str, prefix: str, args) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", url, prefix, str(args.jobs),
                          str(args.clients)], cwd=root, env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ref", default="main")
    ap.add_argument("--jobs", type=int, default=100, help="jobs queued at once (DOODLEPOD_JOBS_MAX_QUEUED: 100)")
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        url, prefix, jobs, clients = args.child
        print(json.dumps(child(url, prefix, int(jobs), int(clients))))
        return 0
    sys.path.insert(0, str(REPO))
    from tests.support.jobstack import RedisServer

    base = Path(tempfile.mkdtemp(prefix="dp-turns-ref-"))
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(base), args.ref], check=True)
    try:
        with RedisServer(appendonly=False) as server:
            for r in range(args.rounds):  # interleaved, so both trees see the same load
                for name, root in (("this", REPO), (args.ref, base)):
                    got = run_tree(root, server.url, f"turns-{name}-{r}:", args)
                    print(f"{name:>6} round {r}: {got['taken']} jobs, has_work+take p50 {got['take_p50']:.2f} ms "
                          f"p95 {got['take_p95']:.2f} ms; cycle p50 {got['cycle_p50']:.2f} ms p95 "
                          f"{got['cycle_p95']:.2f} ms; served {' '.join(got['order'])}")
        print(f"load {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)], check=False)
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
