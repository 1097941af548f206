#!/usr/bin/env python
"""Load benchmark of the app: latency of one request, then N concurrent clients for a fixed time.

By default it starts the local stack itself on loopback: a real TorchServe serving the *fake* models
of tests/fixtures/torchserve_fake (they answer in milliseconds, so the figures are the app's own
time, "model time excluded") and the app under gunicorn with gevent workers on local storage, all
with the app's default settings unless DOODLEPOD_* variables say otherwise. With ``--url`` it
loads a stack that is already running (e.g. ``make run``) instead.

With ``--baseline-ref REF`` it also starts the app with our code at git ref ``REF`` (a temporary
``git worktree``, same TorchServe, same settings) and measures both in the same run, in turn:
machines here differ 1.5-2.5x between sessions, so only such side-by-side figures compare.

Phases:
  1. single: ``--single`` sequential requests per app (after one warm-up each; with a baseline the
     apps alternate request by request), each a phone photo (a 3024x4032 JPEG of a fixture drawing
     on paper) asking for ``--motions``; prints p50/p95 of the latency and of the latency minus the
     model calls the app reports (detect + pose).
  2. load: ``--clients`` clients post in a loop for ``--duration`` seconds (a client that gets 503
     waits for its Retry-After, as the mobile app does) while a prober GETs /ping every 100 ms.
     Prints throughput (animations/s), latency percentiles of the admitted requests, answers by
     status/error code, timeouts, how fast the 503s came back and the Retry-After they carried, and
     /ping's p50/p99/max. With a baseline, the baseline's load phase runs after ours.

Targets, each printed with PASS/FAIL (exit status 1 if any fails; ``--no-fail`` to always exit 0):
with a baseline, one request p50 (model time excluded) at least ``--target`` (2) times faster than
the baseline's, and throughput under load no lower than the baseline's; always: an admitted
request's p50 under load within 2x of the single-request p50, no timeouts, no 5xx other than
immediate 503s (<= 0.5 s), /ping p99 <= 250 ms.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import requests
from common import REPO, load_avg, pct, run_clients, stack
from PIL import Image
from worktree import Baseline, build_kernel, compile_tree


def phone_photo(name: str) -> tuple[bytes, dict]:
    """A 3024x4032 JPEG (12 MP phone photo, with sensor-like noise) with the fixture drawing in the middle."""
    rgb, joints = stack.load_fixture_character(name)
    char = Image.fromarray(rgb)
    k = 1800 / char.height
    char = char.resize((round(char.width * k), round(char.height * k)), Image.Resampling.BILINEAR)
    page = Image.new("RGB", (3024, 4032), (250, 250, 246))
    off = ((3024 - char.width) // 2, (4032 - char.height) // 2)
    page.paste(char, off)
    # sensor noise, so the JPEG weighs what a phone's does (a few MB) and decodes like one
    noisy = np.asarray(page, dtype=np.int16) + np.random.default_rng(0).normal(0, 3, (4032, 3024, 1)).astype(np.int16)
    page = Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))
    buf = io.BytesIO()
    page.save(buf, format="JPEG", quality=92)
    page_joints = {j: ((x * k) + off[0], (y * k) + off[1]) for j, (x, y) in joints.items()}
    return buf.getvalue(), {"image": page, "joints": page_joints}


class Stack:
    """Fake TorchServe + our app (and optionally the baseline's app) on loopback, stopped by close()."""

    def __init__(self, character: dict) -> None:
        self.workdir = stack.make_workdir("dp-bench-")
        self.ts = stack.FakeTorchServe(self.workdir)
        self.apps: list[stack.Gunicorn] = []
        self.character = character

    def start_ts(self) -> None:
        self.ts.start()
        page = self.character["image"]
        fractions = stack.pose_fractions(page, self.character["joints"])
        self.ts.set_control(pose={"mode": "fractions", "fractions": fractions})

    def start_app(self, name: str, code_root: Path = REPO) -> str:
        env = {"DOODLEPOD_TORCHSERVE_URL": self.ts.inference_url,
               "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": self.ts.management_url,
               "DOODLEPOD_LOCAL_DIR": str(self.workdir / name / "files"), "DOODLEPOD_ACCESS_LOG": "false"}
        env.update({k: v for k, v in os.environ.items() if k.startswith("DOODLEPOD_") and k not in
                    ("DOODLEPOD_HOST", "DOODLEPOD_PORT", "DOODLEPOD_RUNTIME_DIR")})
        app = stack.Gunicorn(self.workdir / name, env)
        if code_root != REPO:  # the baseline's gunicorn runs its own tree's app
            app.env["PYTHONPATH"] = str(code_root)
            app.start = _start_in(app, code_root)  # type: ignore[method-assign]
        self.apps.append(app)
        app.start(timeout=180)
        return app.url

    def close(self) -> None:
        for app in self.apps:
            app.stop()
        self.ts.stop()
        stack.remove(self.workdir)


def _start_in(app, code_root: Path):
    """``app.start`` with gunicorn started in ``code_root`` instead of this tree."""
    import subprocess

    def start(timeout: float = 60.0):
        app.workdir.mkdir(parents=True, exist_ok=True)
        with open(app.log, "ab") as fh:
            app.proc = subprocess.Popen(
                [str(stack.BIN / "gunicorn"), "-c", "app/gunicorn_conf.py", "app:create_app()"],
                cwd=code_root, env=app.env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        stack.wait_for(lambda: requests.get(f"{app.url}/healthz", timeout=2).status_code == 200, timeout,
                       "gunicorn", app.proc, app.log)
        workers = int(app.env.get("DOODLEPOD_WORKERS", "1"))
        stack.wait_for(lambda: app.log.read_text(errors="replace").count("render pool ready") >= workers,
                       timeout, "render pool", app.proc, app.log)
        return app
    return start


def post(url: str, data: bytes, motions: str, headers: dict,
         timeout: float) -> tuple[int, str, float, dict, requests.Response | None]:
    t0 = time.perf_counter()
    try:
        resp = requests.post(f"{url}/animate", files={"image": ("photo.jpg", data, "image/jpeg")},
                             data={"motions": motions}, headers=headers, timeout=timeout)
    except requests.Timeout:
        return 0, "client_timeout", time.perf_counter() - t0, {}, None
    except requests.RequestException as exc:
        return 0, f"connection:{type(exc).__name__}", time.perf_counter() - t0, {}, None
    elapsed = time.perf_counter() - t0
    try:
        body = resp.json()
    except ValueError:
        body = {}
    code = "ok" if resp.status_code == 200 else str(body.get("error", "?"))
    return resp.status_code, code, elapsed, body, resp


def phase_single(urls: dict[str, str], data: bytes, motions: str, n: int, headers: dict,
                 timeout: float) -> dict[str, dict]:
    """``n`` sequential requests per app, the apps alternating request by request (after one warm-up each)."""
    for name, url in urls.items():
        status, code, elapsed, body, _ = post(url, data, motions, headers, timeout)  # warm-up
        if status != 200:
            raise SystemExit(f"{name}: warm-up request failed: {status} {code} {body}")
    total: dict[str, list[float]] = {k: [] for k in urls}
    app_only: dict[str, list[float]] = {k: [] for k in urls}
    stages: dict[str, dict] = {}
    for i in range(n):
        names = list(urls)
        for name in names[i % len(names):] + names[:i % len(names)]:  # rotate who goes first
            status, code, elapsed, body, _ = post(urls[name], data, motions, headers, timeout)
            if status != 200:
                raise SystemExit(f"{name}: request failed: {status} {code} {body}")
            total[name].append(elapsed)
            t = body.get("timings_ms", {})
            app_only[name].append(elapsed - (t.get("detect", 0) + t.get("pose", 0)) / 1e3)
            stages[name] = body.get("timings_ms", {})
    return {name: {"n": n, "p50": pct(total[name], 50), "p95": pct(total[name], 95),
                   "app_p50": pct(app_only[name], 50), "app_p95": pct(app_only[name], 95),
                   "last_timings_ms": stages[name]} for name in urls}


def phase_load(url: str, data: bytes, motions: str, clients: int, duration: float, headers: dict,
               timeout: float) -> dict:
    stop_at = time.monotonic() + duration
    lock = threading.Lock()
    results: list[tuple[int, str, float]] = []
    retry_after: list[float] = []
    pings: list[float] = []
    ping_errors = Counter()
    done = threading.Event()

    def client(_: int) -> None:
        while time.monotonic() < stop_at:
            status, code, elapsed, _, resp = post(url, data, motions, headers, timeout)
            with lock:
                results.append((status, code, elapsed))
            if status == 503 and resp is not None:
                wait = float(resp.headers.get("Retry-After", "1") or 1)
                with lock:
                    retry_after.append(wait)
                time.sleep(max(0.0, min(wait, stop_at - time.monotonic())))

    def prober() -> None:
        while not done.is_set():
            t0 = time.perf_counter()
            try:
                r = requests.get(f"{url}/ping", timeout=5)
                pings.append(time.perf_counter() - t0)
                if r.status_code != 200:
                    ping_errors[r.status_code] += 1
            except requests.RequestException as exc:
                ping_errors[type(exc).__name__] += 1
            time.sleep(0.1)

    probe = threading.Thread(target=prober, daemon=True)
    probe.start()
    wall = run_clients(client, [0] * clients)
    done.set()
    probe.join()
    ok = [e for s, c, e in results if s == 200]
    by_code = Counter(f"{s} {c}" for s, c, _ in results)
    overload = [e for s, c, e in results if s == 503 and c == "overloaded"]
    other_5xx = [(s, c) for s, c, _ in results if s >= 500 and c != "overloaded"]
    timeouts = [1 for s, c, _ in results if c == "client_timeout" or c == "deadline_exceeded"]
    return {"clients": clients, "duration_s": wall, "requests": len(results), "ok": len(ok),
            "throughput_rps": len(ok) / wall, "animations_per_s": len(ok) * len(motions.split(",")) / wall,
            "p50": pct(ok, 50), "p95": pct(ok, 95), "p99": pct(ok, 99), "by_code": dict(by_code),
            "overload_p50": pct(overload, 50) if overload else 0.0,
            "overload_p99": pct(overload, 99) if overload else 0.0, "overloads": len(overload),
            "other_5xx": len(other_5xx), "timeouts": len(timeouts),
            "retry_after_p50": pct(retry_after, 50) if retry_after else 0.0,
            "retry_after_max": max(retry_after) if retry_after else 0.0,
            "load_avg": load_avg(), "ping_n": len(pings), "ping_p50": pct(pings, 50), "ping_p99": pct(pings, 99),
            "ping_max": max(pings) if pings else float("nan"), "ping_errors": dict(ping_errors)}


def print_load(name: str, load: dict) -> None:
    print(f"[{name}] requests {load['requests']}, ok {load['ok']}, throughput {load['throughput_rps']:.2f} req/s "
          f"({load['animations_per_s']:.2f} animations/s); load average at its end {load['load_avg']}")
    print(f"[{name}] latency of ok answers: p50 {load['p50']:.2f} s  p95 {load['p95']:.2f} s  p99 {load['p99']:.2f} s")
    print(f"[{name}] answers by code: {load['by_code']}")
    print(f"[{name}] 503 overloaded: {load['overloads']} (answered in p50 {load['overload_p50'] * 1e3:.0f} ms, "
          f"p99 {load['overload_p99'] * 1e3:.0f} ms, upload of the photo included; Retry-After p50 "
          f"{load['retry_after_p50']:g} s, max {load['retry_after_max']:g} s); other 5xx: {load['other_5xx']}; "
          f"timeouts: {load['timeouts']}")
    print(f"[{name}] /ping during load: n={load['ping_n']} p50 {load['ping_p50'] * 1e3:.0f} ms  "
          f"p99 {load['ping_p99'] * 1e3:.0f} ms  max {load['ping_max'] * 1e3:.0f} ms  "
          f"non-200: {load['ping_errors'] or 0}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="load this running app instead of starting the local stack")
    ap.add_argument("--token", default="", help="bearer token for --url (DOODLEPOD_AUTH_TOKEN)")
    ap.add_argument("--baseline-ref", metavar="REF", help="also start our app at this git ref (e.g. 769e06a) "
                    "and measure both in the same run (local stack only)")
    ap.add_argument("--target", type=float, default=2.0, help="single-request speed-up over the baseline "
                    "to report as PASS (2)")
    ap.add_argument("--clients", type=int, default=16, help="concurrent clients in the load phase (16)")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of the load phase, per app (60)")
    ap.add_argument("--single", type=int, default=10, help="sequential requests per app in the single phase (10)")
    ap.add_argument("--motions", default="dab,jumping,zombie", help="motions per request")
    ap.add_argument("--character", default="char1", help="fixture character drawn on the photo")
    ap.add_argument("--timeout", type=float, default=180.0, help="client timeout per request, s (180)")
    ap.add_argument("--skip-load", action="store_true", help="only the single-request phase")
    ap.add_argument("--json", help="also write the figures to this JSON file")
    ap.add_argument("--no-fail", action="store_true", help="exit 0 even when a target is missed")
    args = ap.parse_args(argv)
    if args.url and args.baseline_ref:
        ap.error("--baseline-ref starts its own stack: it cannot be used with --url")

    data, character = phone_photo(args.character)
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    local = None
    base = None
    urls: dict[str, str] = {}
    print(f"load average before: {load_avg()} on {os.cpu_count()} CPUs", flush=True)
    try:
        if args.url is None:
            build_kernel(REPO)
            compile_tree(REPO)  # bytecode for ours as for the baseline, as the app image holds it
            local = Stack(character)
            local.start_ts()
            urls["ours"] = local.start_app("ours")
            print(f"started local stack: app {urls['ours']} (gunicorn gevent), "
                  f"fake TorchServe {local.ts.inference_url}",
                  flush=True)
            if args.baseline_ref:
                base = Baseline(args.baseline_ref)
                urls["base"] = local.start_app("base", base.dir)
                print(f"started the baseline app ({args.baseline_ref} = {base.commit}, worktree {base.dir}): "
                      f"{urls['base']}", flush=True)
        else:
            urls["ours"] = args.url
        single = phase_single(urls, data, args.motions, args.single, headers, args.timeout)
        print(f"\n== single request: 3024x4032 JPEG ({len(data) / 1e6:.1f} MB), motions {args.motions}, "
              f"n={args.single} per app{', apps alternating' if len(urls) > 1 else ''}; load average {load_avg()}")
        for name, r in single.items():
            print(f"[{name}] latency p50 {r['p50']:.2f} s  p95 {r['p95']:.2f} s; minus model calls: "
                  f"p50 {r['app_p50']:.2f} s  p95 {r['app_p95']:.2f} s")
            print(f"[{name}] stages of the last request (ms): " + json.dumps(r["last_timings_ms"]))
        if "base" in single:
            print(f"base / ours, p50 minus model calls: {single['base']['app_p50'] / single['ours']['app_p50']:.2f}x")
        loads: dict[str, dict] = {}
        if not args.skip_load:
            for name, url in urls.items():
                print(f"\n== load on {name}: {args.clients} clients for {args.duration:.0f} s ...", flush=True)
                loads[name] = phase_load(url, data, args.motions, args.clients, args.duration, headers, args.timeout)
                print_load(name, loads[name])
    finally:
        if local is not None:
            local.close()
        if base is not None:
            base.close()
    print(f"load average after: {load_avg()}")

    ours = single["ours"]
    targets = []
    if "base" in single:
        speed = single["base"]["app_p50"] / ours["app_p50"]
        targets.append((f"single request, {args.motions}: p50 (model time excluded) >= {args.target:g}x faster "
                        f"than {args.baseline_ref}", speed >= args.target,
                        f"{ours['app_p50']:.2f} s vs {single['base']['app_p50']:.2f} s = {speed:.2f}x"))
    if "ours" in loads:
        load = loads["ours"]
        targets += [
            ("load: admitted request p50 within 2x of the single-request p50", load["p50"] <= 2 * ours["p50"],
             f"{load['p50']:.2f} s vs 2 x {ours['p50']:.2f} s"),
            ("load: zero timeouts", load["timeouts"] == 0, str(load["timeouts"])),
            ("load: no 5xx other than immediate 503 overloaded", load["other_5xx"] == 0 and load["overload_p99"] <= 0.5,
             f"{load['other_5xx']} other, 503 p99 {load['overload_p99'] * 1e3:.0f} ms"),
            ("load: /ping p99 <= 250 ms", load["ping_p99"] <= 0.25, f"{load['ping_p99'] * 1e3:.0f} ms"),
            ("load: every /ping 200", not load["ping_errors"], str(load["ping_errors"] or "all 200")),
        ]
        if "base" in loads:
            b = loads["base"]
            targets.append(("load: throughput no lower than the baseline's",
                            load["animations_per_s"] >= b["animations_per_s"],
                            f"{load['animations_per_s']:.2f} vs {b['animations_per_s']:.2f} animations/s"))
    print("\n== targets")
    for name, ok, figure in targets:
        print(f"[{'PASS' if ok else 'FAIL'}] {name}: {figure}")
    if args.json:
        Path(args.json).write_text(json.dumps({"single": single, "load": loads}, indent=2, default=str))
    return 0 if args.no_fail or all(ok for _, ok, _ in targets) else 1


if __name__ == "__main__":
    sys.exit(main())
