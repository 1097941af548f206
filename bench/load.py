#!/usr/bin/env python
"""Load benchmark of the app: latency of one request, then N concurrent clients for a fixed time.

By default it starts the local stack itself on loopback: a real TorchServe serving the *fake* models
of tests/fixtures/torchserve_fake (they answer in milliseconds, so the figures are the app's own
time, "model time excluded") and the app under gunicorn with gevent workers on local storage, all
with the app's default settings unless DOODLEPOD_* variables say otherwise. With ``--url`` it
loads a stack that is already running (e.g. ``make run``) instead.

Phases:
  1. single: ``--single`` sequential requests (after one warm-up), each a phone photo (a 3024x4032
     JPEG of a fixture drawing on paper) asking for ``--motions``; prints p50/p95 of the latency
     and of the latency minus the model calls the app reports (detect + pose).
  2. load: ``--clients`` clients post in a loop for ``--duration`` seconds (a client that gets 503
     waits for its Retry-After, as the mobile app does) while a prober GETs /ping every 100 ms.
     Prints throughput, latency percentiles, answers by status/error code, timeouts, how fast the
     503s came back, and /ping's p50/p99/max.

Targets (2-core machine, model time excluded): single p50 <= 1.5 s with 3 motions; under 16
clients for 60 s: no timeouts, no 5xx other than immediate 503s (<= 0.5 s), /ping p99 <= 250 ms.
Each is printed with PASS/FAIL; the exit status is 1 if any fails (``--no-fail`` to always exit 0).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import requests
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "fixtures" / "torchserve_fake"))
import stack  # noqa: E402


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    k = min(len(values) - 1, max(0, int(round(q / 100 * (len(values) - 1)))))
    return values[k]


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
    """Fake TorchServe + gunicorn on loopback, stopped by close()."""

    def __init__(self, character: dict) -> None:
        self.workdir = stack.make_workdir("dp-bench-")
        self.ts = stack.FakeTorchServe(self.workdir)
        self.app = None
        self.character = character

    def start(self) -> str:
        self.ts.start()
        page = self.character["image"]
        self.ts.set_control(pose={"mode": "fractions", "fractions": stack.pose_fractions(page, self.character["joints"])})
        env = {"DOODLEPOD_TORCHSERVE_URL": self.ts.inference_url,
               "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": self.ts.management_url,
               "DOODLEPOD_LOCAL_DIR": str(self.workdir / "files"), "DOODLEPOD_ACCESS_LOG": "false"}
        env.update({k: v for k, v in os.environ.items() if k.startswith("DOODLEPOD_") and k not in
                    ("DOODLEPOD_HOST", "DOODLEPOD_PORT", "DOODLEPOD_RUNTIME_DIR")})
        self.app = stack.Gunicorn(self.workdir / "app", env)
        self.app.start(timeout=120)
        return self.app.url

    def close(self) -> None:
        if self.app is not None:
            self.app.stop()
        self.ts.stop()
        stack.remove(self.workdir)


def post(url: str, data: bytes, motions: str, headers: dict, timeout: float) -> tuple[int, str, float, dict, requests.Response | None]:
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


def phase_single(url: str, data: bytes, motions: str, n: int, headers: dict, timeout: float) -> dict:
    status, code, elapsed, body, _ = post(url, data, motions, headers, timeout)  # warm-up
    if status != 200:
        raise SystemExit(f"warm-up request failed: {status} {code} {body}")
    total, app_only = [], []
    for _ in range(n):
        status, code, elapsed, body, _ = post(url, data, motions, headers, timeout)
        if status != 200:
            raise SystemExit(f"request failed: {status} {code} {body}")
        total.append(elapsed)
        t = body.get("timings_ms", {})
        app_only.append(elapsed - (t.get("detect", 0) + t.get("pose", 0)) / 1e3)
    stages = body.get("timings_ms", {})
    return {"n": n, "p50": pct(total, 50), "p95": pct(total, 95), "app_p50": pct(app_only, 50),
            "app_p95": pct(app_only, 95), "last_timings_ms": stages}


def phase_load(url: str, data: bytes, motions: str, clients: int, duration: float, headers: dict,
               timeout: float) -> dict:
    stop_at = time.monotonic() + duration
    lock = threading.Lock()
    results: list[tuple[int, str, float]] = []
    pings: list[float] = []
    ping_errors = Counter()
    done = threading.Event()

    def client() -> None:
        while time.monotonic() < stop_at:
            status, code, elapsed, _, resp = post(url, data, motions, headers, timeout)
            with lock:
                results.append((status, code, elapsed))
            if status == 503 and resp is not None:
                wait = float(resp.headers.get("Retry-After", "1") or 1)
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

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    probe = threading.Thread(target=prober, daemon=True)
    t0 = time.monotonic()
    probe.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
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
            "ping_n": len(pings), "ping_p50": pct(pings, 50), "ping_p99": pct(pings, 99),
            "ping_max": max(pings) if pings else float("nan"), "ping_errors": dict(ping_errors)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="load this running app instead of starting the local stack")
    ap.add_argument("--token", default="", help="bearer token for --url (DOODLEPOD_AUTH_TOKEN)")
    ap.add_argument("--clients", type=int, default=16, help="concurrent clients in the load phase (16)")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of the load phase (60)")
    ap.add_argument("--single", type=int, default=10, help="sequential requests in the single phase (10)")
    ap.add_argument("--motions", default="dab,jumping,zombie", help="motions per request")
    ap.add_argument("--character", default="char1", help="fixture character drawn on the photo")
    ap.add_argument("--timeout", type=float, default=180.0, help="client timeout per request, s (180)")
    ap.add_argument("--skip-load", action="store_true", help="only the single-request phase")
    ap.add_argument("--json", help="also write the figures to this JSON file")
    ap.add_argument("--no-fail", action="store_true", help="exit 0 even when a target is missed")
    args = ap.parse_args(argv)

    data, character = phone_photo(args.character)
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    local = None
    url = args.url
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    try:
        if url is None:
            local = Stack(character)
            url = local.start()
            print(f"started local stack: app {url} (gunicorn gevent), fake TorchServe {local.ts.inference_url}",
                  flush=True)
        single = phase_single(url, data, args.motions, args.single, headers, args.timeout)
        print(f"\n== single request: 3024x4032 JPEG ({len(data) / 1e6:.1f} MB), motions {args.motions}, n={single['n']}")
        print(f"latency p50 {single['p50']:.2f} s  p95 {single['p95']:.2f} s")
        print(f"minus model calls: p50 {single['app_p50']:.2f} s  p95 {single['app_p95']:.2f} s")
        print("stages of the last request (ms): " + json.dumps(single["last_timings_ms"]))
        load = None
        if not args.skip_load:
            print(f"\n== load: {args.clients} clients for {args.duration:.0f} s ...", flush=True)
            load = phase_load(url, data, args.motions, args.clients, args.duration, headers, args.timeout)
            print(f"requests {load['requests']}, ok {load['ok']}, throughput {load['throughput_rps']:.2f} req/s "
                  f"({load['animations_per_s']:.2f} animations/s)")
            print(f"latency of ok answers: p50 {load['p50']:.2f} s  p95 {load['p95']:.2f} s  p99 {load['p99']:.2f} s")
            print(f"answers by code: {load['by_code']}")
            print(f"503 overloaded: {load['overloads']} (answered in p50 {load['overload_p50'] * 1e3:.0f} ms, "
                  f"p99 {load['overload_p99'] * 1e3:.0f} ms, upload of the photo included); "
                  f"other 5xx: {load['other_5xx']}; timeouts: {load['timeouts']}")
            print(f"/ping during load: n={load['ping_n']} p50 {load['ping_p50'] * 1e3:.0f} ms  "
                  f"p99 {load['ping_p99'] * 1e3:.0f} ms  max {load['ping_max'] * 1e3:.0f} ms  "
                  f"non-200: {load['ping_errors'] or 0}")
    finally:
        if local is not None:
            local.close()
    print(f"load average after: {os.getloadavg()[0]:.2f}")

    targets = [("single request, 3 motions, p50 <= 1.5 s (model time excluded)", single["app_p50"] <= 1.5,
                f"{single['app_p50']:.2f} s")]
    if load is not None:
        targets += [
            ("load: zero timeouts", load["timeouts"] == 0, str(load["timeouts"])),
            ("load: no 5xx other than immediate 503 overloaded", load["other_5xx"] == 0 and load["overload_p99"] <= 0.5,
             f"{load['other_5xx']} other, 503 p99 {load['overload_p99'] * 1e3:.0f} ms"),
            ("load: /ping p99 <= 250 ms", load["ping_p99"] <= 0.25, f"{load['ping_p99'] * 1e3:.0f} ms"),
            ("load: every /ping 200", not load["ping_errors"], str(load["ping_errors"] or "all 200")),
        ]
    print("\n== targets")
    for name, ok, figure in targets:
        print(f"[{'PASS' if ok else 'FAIL'}] {name}: {figure}")
    if args.json:
        Path(args.json).write_text(json.dumps({"single": single, "load": load}, indent=2, default=str))
    return 0 if args.no_fail or all(ok for _, ok, _ in targets) else 1


if __name__ == "__main__":
    sys.exit(main())
