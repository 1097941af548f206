#!/usr/bin/env python
"""Soak: good, slow and hostile clients together against one pod, and what the pod must hold to.

Starts the stack on loopback (a real TorchServe serving the fake models of
tests/fixtures/torchserve_fake, and the app under gunicorn with gevent workers on local storage),
then runs ``--clients`` clients for ``--duration`` seconds. Each client loops over a weighted mix:

* good: a drawing with its joints (no model call), or without (detector and pose model);
* slow: an upload trickled over a few seconds (finishes), or one that stalls (never finishes);
* hostile: 300 or 8,000 extra joints, a joint at 1e9, JSON nested 100,000 deep, a 400-digit integer, a chunked
  upload over the size limit, a connection that sends half its headers and waits, a NUL in a
  /files path, a newline in ``motions``, an ``X-Request-ID`` of ``..``, a 1 s deadline on four
  motions, a 16-bit greyscale PNG, a 6-pixel character with every joint on one point.

A prober GETs /healthz every 100 ms meanwhile. Pass criteria (printed, exit 1 if one fails):
no gunicorn worker restarted; /healthz p99 under 250 ms; every good request answered 200 or an
immediate (<= 1 s) 503; no 500 for anyone; nothing left running after the stack stops.

    python bench/soak.py [--clients 16] [--duration 60]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import requests
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the tests' helpers (tests.support) run the stack here too
from tests.support import procs, stack  # noqa: E402

BODY_TIMEOUT_S = 8


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, max(0, int(round(q / 100 * (len(values) - 1)))))]


def _closed(s: socket.socket) -> bool:
    """Whether the server has closed ``s`` (an empty read) within a second."""
    s.settimeout(1.0)
    try:
        return s.recv(1) == b""
    except (TimeoutError, OSError):
        return False


class Inputs:
    """The requests' payloads, made once."""

    def __init__(self) -> None:
        page, joints = stack.page_with_character("char1", (800, 700), (150, 50))
        self.page = page
        self.png = stack.encode(page)
        self.joints = {k: [round(x, 1), round(y, 1)] for k, (x, y) in joints.items()}
        grey16 = np.asarray(page.convert("L")).astype(np.uint16) * 257
        self.png16 = stack.encode(Image.fromarray(grey16))
        ring = np.full((1000, 1000, 3), 255, np.uint8)
        yy, xx = np.mgrid[:1000, :1000]
        r = np.hypot(xx - 500, yy - 500)
        ring[(r < 4) & (r > 2)] = 0
        self.ring = stack.encode(Image.fromarray(ring))
        self.ring_joints = {k: [503, 500] for k in self.joints}


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.inputs = Inputs()
        self.results: list[tuple[str, int | str, float, str]] = []  # (kind, status, seconds, error code)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.health: list[float] = []
        self.health_errors = 0

    # -- the clients ----------------------------------------------------------------------------
    def record(self, kind: str, status: int | str, seconds: float, code: str = "") -> None:
        with self.lock:
            self.results.append((kind, status, seconds, code))

    def post(self, kind: str, path: str = "/animate", timeout: float = 180, **kw) -> requests.Response | None:
        t0 = time.monotonic()
        try:
            resp = requests.post(self.url + path, timeout=timeout, **kw)
            code = ""
            if resp.headers.get("Content-Type", "").startswith("application/json") and resp.status_code >= 400:
                code = resp.json().get("error", "")
            self.record(kind, resp.status_code, time.monotonic() - t0, code)
            return resp
        except requests.RequestException as exc:
            self.record(kind, type(exc).__name__, time.monotonic() - t0)
            return None

    def honour_retry_after(self, resp: requests.Response | None) -> None:
        """A good client that got 503 waits as told (at most 5 s here), as the mobile app does."""
        if resp is not None and resp.status_code == 503:
            self.stop.wait(min(5.0, float(resp.headers.get("Retry-After", "1"))))

    def form(self, data: bytes, joints=None, **fields):
        out = {"motions": fields.pop("motions", self.args.motions), **fields}
        if joints is not None:
            out["joints"] = joints if isinstance(joints, str) else json.dumps(joints)
        return {"files": {"image": ("drawing.png", data, "image/png")}, "data": out}

    def good_joints(self) -> None:
        self.honour_retry_after(self.post("good", **self.form(self.inputs.png, self.inputs.joints)))

    def good_models(self) -> None:
        self.honour_retry_after(self.post("good", **self.form(self.inputs.png)))

    def raw(self, kind: str, head: bytes, pieces: list[bytes], gap: float, expect_answer: bool = True) -> None:
        """Send ``head`` then ``pieces`` ``gap`` seconds apart over a raw socket; read the status."""
        t0 = time.monotonic()
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=60) as s:
                s.sendall(head)
                try:
                    for p in pieces:
                        time.sleep(gap)  # the last requests of the run finish as they started
                        s.sendall(p)
                except OSError:  # the server answered (and closed) before the body was all sent
                    pass
                if not expect_answer:
                    self.record(kind, "closed by server" if _closed(s) else "left open", time.monotonic() - t0)
                    return
                answer = b""
                while not (answer.startswith(b"HTTP/") and answer.rstrip().endswith(b"}")):
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    answer += chunk
            status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else "no answer"
            code = ""
            if b'"error"' in answer:
                try:
                    code = json.loads(answer.split(b"\r\n\r\n", 1)[1]).get("error", "")
                except ValueError:
                    code = "?"
            self.record(kind, status, time.monotonic() - t0, code)
        except OSError as exc:
            self.record(kind, type(exc).__name__, time.monotonic() - t0)

    def multipart(self, fields: dict[str, str], image: bytes) -> tuple[bytes, bytes]:
        b = "soakboundary"
        parts = [f'--{b}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
                 for k, v in fields.items()]
        parts.append(f'--{b}\r\nContent-Disposition: form-data; name="image"; filename="d.png"\r\n'
                     "Content-Type: image/png\r\n\r\n".encode() + image + f"\r\n--{b}--\r\n".encode())
        return b"".join(parts), f"multipart/form-data; boundary={b}".encode()

    def slow_upload(self, finish: bool) -> None:
        body, ctype = self.multipart({"motions": self.args.motions, "joints": json.dumps(self.inputs.joints)},
                                     self.inputs.png)
        head = (b"POST /animate HTTP/1.1\r\nHost: soak\r\nContent-Type: " + ctype
                + f"\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode())
        n = 8
        pieces = [body[i * len(body) // n:(i + 1) * len(body) // n] for i in range(n)]
        if finish:  # all of it within the body timeout: a slow phone
            self.raw("slow-finishes", head, pieces, (BODY_TIMEOUT_S * 0.6) / n)
        else:       # half of it, then nothing: must end in 408 at the body timeout
            self.raw("slow-stalls", head, pieces[: n // 2], 0.2)

    def hostile(self) -> None:
        i = self.inputs
        pick = random.choice([
            "many_joints", "far_joint", "deep_json", "big_int", "chunked_over", "half_headers", "nul_path",
            "newline_motions", "dotdot_id", "short_deadline", "png16", "ring"])
        kind = f"hostile:{pick}"
        if pick == "many_joints":
            skeleton = [{"name": k, "loc": v, "parent": None} for k, v in i.joints.items()]
            extra = random.choice([300, 8000])  # over the joint cap (400), or over the field size too (413)
            skeleton += [{"name": f"x{n}", "loc": [300, 300], "parent": "torso"} for n in range(extra)]
            self.post(kind, **self.form(i.png, skeleton))
        elif pick == "far_joint":
            self.post(kind, **self.form(i.png, {**i.joints, "left_hand": [1e9, 1e9]}))
        elif pick == "deep_json":
            self.post(kind, **self.form(i.png, "[" * 100000 + "]" * 100000))
        elif pick == "big_int":
            self.post(kind, **self.form(i.png, i.joints, bbox=json.dumps([0, 0, 10**400, 500])))
        elif pick == "chunked_over":
            def chunks():
                for _ in range(3 * 2**20 // 65536 + 2):  # > the soak's 2 MiB limit
                    yield b"\x89PNG" + b"\0" * 65532
            self.post(kind, data=chunks(), headers={"Content-Type": "image/png"})
        elif pick == "half_headers":
            self.raw(kind, b"POST /animate HTTP/1.1\r\nHost: soak\r\n", [b"X-Slow: 1\r\n"] * 3, 3.0,
                     expect_answer=False)  # gunicorn closes it at its keep-alive time
        elif pick == "nul_path":
            t0 = time.monotonic()
            resp = requests.get(self.url + "/files/abc%00def/dab.gif", timeout=30)
            self.record(kind, resp.status_code, time.monotonic() - t0)
        elif pick == "newline_motions":
            self.post(kind, **self.form(i.png, i.joints, motions="dab\n2026-01-01 00:00:00 INFO forged line"))
        elif pick == "dotdot_id":
            self.post(kind, headers={"X-Request-ID": ".."}, **self.form(i.png, i.joints))
        elif pick == "short_deadline":
            self.post(kind, headers={"X-Deadline-Seconds": "1"},
                      **self.form(i.png, i.joints, motions="dab,jumping,zombie,wave_hello"))
        elif pick == "png16":
            self.post(kind, **self.form(i.png16, i.joints))
        elif pick == "ring":
            self.post(kind, **self.form(i.ring, i.ring_joints))

    def client(self, seed: int) -> None:
        rng = random.Random(seed)
        actions = [(self.good_joints, 30), (self.good_models, 15), (lambda: self.slow_upload(True), 8),
                   (lambda: self.slow_upload(False), 7), (self.hostile, 40)]
        funcs, weights = zip(*actions)
        while not self.stop.is_set():
            rng.choices(funcs, weights)[0]()

    def prober(self) -> None:
        while not self.stop.is_set():
            t0 = time.monotonic()
            try:
                requests.get(self.url + "/healthz", timeout=5).raise_for_status()
                self.health.append(time.monotonic() - t0)
            except requests.RequestException:
                self.health_errors += 1
            self.stop.wait(0.1)

    # -- the run --------------------------------------------------------------------------------
    def run(self) -> int:
        workdir = stack.make_workdir("dp-soak-")
        ts = stack.FakeTorchServe(workdir / "ts")
        app = None
        tracked: set[int] = set()
        try:
            print("starting TorchServe (fake models) and gunicorn ...", flush=True)
            ts.start()
            ts.set_control(pose={"mode": "fractions",
                                 "fractions": stack.pose_fractions(self.inputs.page, {
                                     k: tuple(v) for k, v in self.inputs.joints.items()})})
            env = {"DOODLEPOD_TORCHSERVE_URL": ts.inference_url,
                   "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": ts.management_url,
                   "DOODLEPOD_LOCAL_DIR": str(workdir / "files"), "DOODLEPOD_MAX_UPLOAD_MB": "2",
                   "DOODLEPOD_BODY_TIMEOUT_S": str(BODY_TIMEOUT_S), "DOODLEPOD_WORKERS": str(self.args.workers),
                   "DOODLEPOD_RENDER_PROCESSES": str(self.args.render_processes)}
            env.update({k: v for k, v in os.environ.items() if k.startswith("DOODLEPOD_")})
            app = stack.Gunicorn(workdir / "app", env).start(timeout=120)
            self.url, self.port = app.url, app.port
            booted = app.log_text().count("Booting worker")
            print(f"soak: {self.args.clients} clients for {self.args.duration:.0f} s against {app.url} "
                  f"({self.args.workers} workers x {self.args.render_processes} render processes)", flush=True)
            threads = [threading.Thread(target=self.client, args=(n,), daemon=True) for n in range(self.args.clients)]
            threads.append(threading.Thread(target=self.prober, daemon=True))
            for t in threads:
                t.start()
            end = time.monotonic() + self.args.duration
            while time.monotonic() < end:
                tracked |= procs.descendants(app.proc.pid, ts.server.proc.pid)
                time.sleep(1.0)
            self.stop.set()
            for t in threads:
                t.join(90)
            tracked |= procs.descendants(app.proc.pid, ts.server.proc.pid)
            log = app.log_text()
            restarts = log.count("Booting worker") - booted
            timeouts = log.count("WORKER TIMEOUT")
            load = os.getloadavg()
        finally:
            if app is not None:
                app.stop()
            ts.stop()
        time.sleep(2)
        left = sorted(p for p in tracked if procs.alive(p))
        stack.remove(workdir)
        return self.report(restarts, timeouts, left, load)

    def report(self, restarts: int, timeouts: int, left: list[int], load: tuple[float, float, float]) -> int:
        by_kind: dict[str, Counter] = defaultdict(Counter)
        seconds: dict[str, list[float]] = defaultdict(list)
        for kind, status, s, code in self.results:
            by_kind[kind][f"{status}{' ' + code if code else ''}"] += 1
            seconds[kind].append(s)
        print(f"\n{len(self.results)} requests in {self.args.duration:.0f} s")
        for kind in sorted(by_kind):
            answers = ", ".join(f"{k}: {v}" for k, v in by_kind[kind].most_common())
            print(f"  {kind:26s} n={sum(by_kind[kind].values()):4d}  p50 {pct(seconds[kind], 50):6.2f} s  "
                  f"p99 {pct(seconds[kind], 99):6.2f} s  {answers}")
        good = [(st, s) for kind, st, s, _ in self.results if kind == "good"]
        bad_good = [(st, round(s, 2)) for st, s in good if not (st == 200 or (st == 503 and s <= 1.0))]
        five_hundreds = [(k, c) for k, st, _, c in self.results if st == 500]
        hp99 = pct(self.health, 99) * 1e3
        checks = [
            ("no worker restart", restarts == 0 and timeouts == 0, f"{restarts} restarts, {timeouts} timeouts"),
            ("/healthz p99 < 250 ms", hp99 < 250 and self.health_errors == 0,
             f"p50 {pct(self.health, 50) * 1e3:.1f} ms, p99 {hp99:.1f} ms, "
             f"max {max(self.health, default=0) * 1e3:.1f} ms, "
             f"{len(self.health)} probes, {self.health_errors} failed"),
            ("good requests: 200 or immediate 503", bool(good) and not bad_good,
             f"{sum(1 for st, _ in good if st == 200)} x 200, {sum(1 for st, _ in good if st == 503)} x 503, "
             f"others: {bad_good[:8]}"),
            ("no 500 for anyone", not five_hundreds, f"{five_hundreds[:8]}"),
            ("nothing left running", not left, f"{left[:8]}"),
        ]
        print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
              f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
        failed = 0
        for name, ok, detail in checks:
            failed += not ok
            print(f"  {'PASS' if ok else 'FAIL'}  {name}: {detail}")
        return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--render-processes", type=int, default=1)
    parser.add_argument("--motions", default="dab", help="motions of the good requests")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    return Soak(args).run()


if __name__ == "__main__":
    sys.exit(main())
