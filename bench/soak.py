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
  motions, a 16-bit greyscale PNG, a 6-pixel character with every joint on one point, a
  callback_url inside the cluster (169.254.169.254, 2130706433, doodlepod-redis, user:pw@).

Beside them, with a Redis (Valkey) and a render worker (``python -m app.worker``) in the pod:
a *callback tarpit* (async jobs whose callback receiver answers one byte every 2 s), a *good
callback* client (async jobs to a receiver that answers at once), a *character flood* (POST
/characters as fast as two connections go, from one forwarded address) and a *BVH race* (two uploads
of different clips under one X-Request-ID, at once). Each client has its own address in
X-Forwarded-For (loopback is a trusted proxy), so the rate limit tells them apart.

A prober GETs /healthz every 100 ms meanwhile. Pass criteria (printed, exit 1 if one fails):
no gunicorn worker restarted; /healthz p99 under 250 ms; every good request answered 200 or an
immediate (<= 1 s) 503; no 500 for anyone; nothing left running after the stack stops; internal
callbacks refused with 422; every good callback arrived within 10 s of its job's end despite the
tarpit; the flood limited to its bucket (429 beyond); each racing upload rendered its own clip.

    python bench/soak.py [--clients 16] [--duration 60]

``--shares`` runs the per-client shares soak instead (app/shares.py): good clients alone for
``--duration`` seconds (the quiet run), then the same good clients for as long beside hostile ones
that each try to take a shared pool: a *storage filler* (POST /characters from two connections), a
*video queuer* (POST /motions of 4 MiB that only looks like a video, back to back; with
``--real-videos`` every other one is a real 15 s video of a person, which the worker reads), a *slow
callback client* (async jobs whose callbacks go to 4 receivers that answer one byte a second, on 4
ports), a */64 rotator* (three connections, each request from a fresh address of one IPv6 /64) and a
*slow DNS client* (three connections of async jobs whose callback names a name server on loopback
answers after 15 s, at submit or, every other name, only from its callback's delivery on: the app
and the worker run in a mount namespace of their own whose /etc/resolv.conf names it,
tests/support/slowdns.py; that needs root, and without it the soak says so and plays the rest). A
good client animates a drawing, looks at it for ``--think`` seconds and asks again (a person, not a
load generator); the async one submits every 4 s with a callback. The hostile clients use their rate
limit to the full: they wait out a ``429 rate_limited`` (the issue's clients work within the limit)
and retry every other refusal at once; ``--flood`` makes them ignore the limit's Retry-After too, a
flood of 429s that only an ingress in front of the pod can absorb (reported, not a pass criterion).
Pass criteria: the good clients' p95 within 2x of the quiet run's (same run, same machine); none of
them refused for another client's use (no ``storage_full``, ``queue_full``, ``jobs_unavailable``,
``rate_limited`` or ``*_share_used``); no 5xx for anyone but 503/504 with Retry-After; every good
callback within 10 s of its job's end; each hostile client held by its own share (or its bucket).
``--hostile`` runs some of them only (to see which one costs the good clients).

    python bench/soak.py --shares [--good 4] [--think 2] [--duration 60] [--hostile a,b] [--flood]
                          [--real-videos]

``--url URL`` plays the shares soak against a stack already running (``make pod``) with its own
settings instead of starting one: the stack must trust the soak's address as a proxy
(DOODLEPOD_TRUSTED_PROXIES, so each client's X-Forwarded-For counts) and allow callbacks to
``--callback-host``, where the receivers listen (DOODLEPOD_WEBHOOK_ALLOW); ``--app-log-cmd`` prints the
app's log, to count worker restarts. The slow DNS client is not played there (the stack resolves
names with its own resolver). docs/speed.md has the pod's command line.
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
from common import REPO, pct, stack
from PIL import Image

from tests.support import procs, slowdns  # after common, which puts the repository on sys.path
from tests.support.jobstack import RedisServer, WorkerProcess
from tests.support.rawhttp import Tarpit
from tests.support.receiver import CallbackReceiver

BODY_TIMEOUT_S = 8
#: The hostile clients of the shares soak (--hostile picks some, to see which one costs the good ones).
HOSTILE = ("storage-filler", "video-queuer", "slow-callbacks", "64-rotator", "slow-dns")
#: Seconds of the video queuer's real video (30 fps, 640x480: the worker's pose model reads every frame).
VIDEO_S = 15.0
#: Seconds the slow name server takes to answer the slow DNS client's callback names.
SLOW_DNS_S = 15.0
#: DOODLEPOD_WEBHOOK_DNS_TIMEOUT_S in the shares soak (the default).
DNS_TIMEOUT_S = 2.0
#: The soak's rate limit per client (each client is one forwarded address); the flood goes past it.
RATE_PER_MIN, RATE_BURST = 120, 20
WEBHOOK_SECRET = "soak-secret"
RACE_ENDS = ("30", "120")   # two cuts of the clip: frames 0-29 and 0-119
JJ = REPO / "tests" / "fixtures" / "animated_drawings" / "examples" / "bvh" / "cmu1" / "jumping_jacks.bvh"


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
        import tempfile

        from tests.support.person_video import PHOTO, frame, placements, write_video

        photo = Image.open(PHOTO).convert("RGB")
        n = int(VIDEO_S * 30)
        with tempfile.TemporaryDirectory() as tmp:
            path = write_video(Path(tmp) / "person.mp4", [frame(photo, *pl) for pl in placements(n)], fps=30)
            self.person_video = path.read_bytes()
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
        self.me = threading.local()          # this thread's client address (X-Forwarded-For)
        self.callbacks: dict[str, float] = {}  # job id -> when its good callback arrived (unix s)
        self.good_jobs: list[str] = []
        self.race: list[tuple[str, int]] = []  # (the cut's end frame, frames of its rendered answer)
        self.race_expected: dict[str, int] = {}

    # -- the clients ----------------------------------------------------------------------------
    def record(self, kind: str, status: int | str, seconds: float, code: str = "") -> None:
        with self.lock:
            self.results.append((kind, status, seconds, code))

    def post(self, kind: str, path: str = "/animate", timeout: float = 180, **kw) -> requests.Response | None:
        t0 = time.monotonic()
        headers = {"X-Forwarded-For": getattr(self.me, "address", "198.51.100.250"), **kw.pop("headers", {})}
        try:
            resp = requests.post(self.url + path, timeout=timeout, headers=headers, **kw)
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
            "newline_motions", "dotdot_id", "short_deadline", "png16", "ring", "callback_internal"])
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
        elif pick == "callback_internal":
            target = random.choice(["http://169.254.169.254/latest/meta-data/", "http://2130706433/",
                                    "http://doodlepod-redis:6379/", "https://user:pw@example.com/hook"])
            self.post(kind, headers={"Prefer": "respond-async"}, **self.form(i.png, i.joints, callback_url=target))

    # -- the clients beside the mix -------------------------------------------------------------
    def callback_tarpit(self, tarpit_url: str) -> None:
        self.me.address = "203.0.113.10"
        while not self.stop.is_set():
            self.post("tarpit-callback", headers={"Prefer": "respond-async"},
                      **self.form(self.inputs.png, self.inputs.joints, callback_url=tarpit_url))
            self.stop.wait(5.0)

    def good_callback(self, receiver_url: str) -> None:
        self.me.address = "203.0.113.11"
        self.post("hostile:callback_internal", headers={"Prefer": "respond-async"},   # at least one, whatever
                  **self.form(self.inputs.png, self.inputs.joints,                    # the mix draws
                              callback_url="http://169.254.169.254/latest/meta-data/"))
        while not self.stop.is_set():
            resp = self.post("good-callback", headers={"Prefer": "respond-async"},
                             **self.form(self.inputs.png, self.inputs.joints, callback_url=receiver_url))
            if resp is not None and resp.status_code == 202:
                with self.lock:
                    self.good_jobs.append(resp.json()["id"])
            self.stop.wait(5.0)

    def character_flood(self) -> None:
        self.me.address = "203.0.113.66"
        while not self.stop.is_set():
            self.post("character-flood", path="/characters", **self.form(self.inputs.png, self.inputs.joints))

    def clip_upload(self, end: str, request_id: str, patience_s: float) -> int:
        """Upload frames 0..``end`` of the clip under ``request_id`` (retrying 503s for ``patience_s``);
        the frame count of the animation answered, or -1 if none was rendered."""
        give_up = time.monotonic() + patience_s
        while True:
            resp = self.post("bvh-race", headers={"X-Request-ID": request_id}, files={
                "image": ("d.png", self.inputs.png, "image/png"), "bvh": ("jj.bvh", JJ.read_bytes(), "text/plain")},
                data={"joints": json.dumps(self.inputs.joints), "start_frame": "0", "end_frame": end})
            if resp is None or resp.status_code != 503 or time.monotonic() > give_up:
                break
            time.sleep(0.3)   # sooner than Retry-After: the flood retries at once, a race must too
        if resp is None or resp.status_code != 200:
            return -1
        gif = requests.get(resp.json()["animations"]["upload"], timeout=30).content
        from io import BytesIO
        with Image.open(BytesIO(gif)) as im:
            return im.n_frames

    def calibrate_race(self) -> None:
        """Each clip's frame count uploaded alone, on the idle pod: what a racing upload must get."""
        self.me.address = "203.0.113.13"
        self.race_expected = {end: self.clip_upload(end, f"alone-{end}", 60) for end in RACE_ENDS}

    def bvh_race(self) -> None:
        """Two uploads of different cuts of one clip under one X-Request-ID at once, again and again;
        each rendered answer's frame count must be its own cut's (a shared scratch name mixed them)."""
        self.me.address = "203.0.113.12"
        while not self.stop.is_set():
            results: dict[str, int] = {}
            threads = [threading.Thread(target=lambda e=e: results.__setitem__(e, self.clip_upload(e, "race", 20)))
                       for e in RACE_ENDS]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            with self.lock:
                self.race += [(end, frames) for end, frames in results.items() if frames > 0]
            self.stop.wait(1.0)

    def client(self, seed: int) -> None:
        self.me.address = f"198.51.100.{seed % 250 + 1}"
        rng = random.Random(seed)
        actions = [(self.good_joints, 30), (self.good_models, 15), (lambda: self.slow_upload(True), 8),
                   (lambda: self.slow_upload(False), 7), (self.hostile, 40)]
        funcs, weights = zip(*actions)
        while not self.stop.is_set():
            rng.choices(funcs, weights)[0]()

    # -- the shares soak (--shares) -------------------------------------------------------------------
    def post_shares(self, kind: str, path: str, **kw) -> requests.Response | None:
        """:meth:`post`, noting also whether a 503/504 carried Retry-After."""
        resp = self.post(kind, path, **kw)
        if resp is not None and resp.status_code >= 500:
            with self.lock:
                self.retry_after_missing += int(resp.status_code in (503, 504)
                                                and "Retry-After" not in resp.headers)
        if (kind.startswith("hostile") and not self.args.flood and resp is not None and resp.status_code == 429
                and resp.json().get("error") == "rate_limited"):
            # within its rate limit, as the hostile clients are: past it every request is a 429,
            # and a flood of 429s is the ingress's to absorb (--flood plays it)
            self.stop.wait(float(resp.headers.get("Retry-After", "1")))
        return resp

    def shares_good(self, seed: int) -> None:
        self.me.address = f"198.51.100.{seed + 1}"
        while not self.stop.is_set():
            resp = self.post_shares(f"good:{self.phase}", "/animate", **self.form(self.inputs.png, self.inputs.joints))
            self.honour_retry_after(resp)
            self.stop.wait(self.args.think)

    def shares_good_callback(self, receiver_url: str) -> None:
        self.me.address = "198.51.100.200"
        while not self.stop.is_set():
            resp = self.post_shares(f"good:{self.phase}:async", "/animate", headers={"Prefer": "respond-async"},
                                    **self.form(self.inputs.png, self.inputs.joints, callback_url=receiver_url))
            if resp is not None and resp.status_code == 202:
                with self.lock:
                    self.good_jobs.append(resp.json()["id"])
            self.stop.wait(4.0)

    def storage_filler(self) -> None:
        self.me.address = "203.0.113.70"
        while not self.stop.is_set():
            self.post_shares("hostile:storage-filler", "/characters", **self.form(self.inputs.png, self.inputs.joints))

    def video_queuer(self) -> None:
        """Videos back to back: 4 MiB that only looks like one (the shares of the queue and the storage
        are what it tries); with ``--real-videos`` every other one is a real video of a person (the
        worker reads it: ffmpeg and the pose model, about one CPU for :data:`VIDEO_S` seconds of frames)."""
        self.me.address = "203.0.113.71"
        junk = b"\x00\x00\x00\x18ftypisom" + os.urandom(4 * 2**20)
        n = 0
        while not self.stop.is_set():
            n += 1
            video = self.inputs.person_video if n % 2 and self.args.real_videos else junk
            self.post_shares("hostile:video-queuer", "/motions", files={"video": ("v.mp4", video, "video/mp4")})

    def slow_callbacks(self, urls: list[str]) -> None:
        self.me.address = "203.0.113.72"
        n = 0
        while not self.stop.is_set():
            self.post_shares("hostile:slow-callbacks", "/animate", headers={"Prefer": "respond-async"},
                             **self.form(self.inputs.png, self.inputs.joints, callback_url=urls[n % len(urls)]))
            n += 1
            self.stop.wait(0.5)

    def slow_dns(self, seed: int) -> None:
        """Async jobs whose callback names take :data:`SLOW_DNS_S` to resolve, a fresh name each time:
        slow at once (refused at submit), or every other one fast at submit and slow from then on,
        when its callback is delivered."""
        self.me.address = "203.0.113.73"
        n = 0
        while not self.stop.is_set():
            n += 1
            url = f"http://h{seed}-{n}.{'late' if n % 2 else 'slow'}.soak.test:8080/hook"
            self.post_shares("hostile:slow-dns", "/animate", headers={"Prefer": "respond-async"},
                             **self.form(self.inputs.png, self.inputs.joints, callback_url=url))

    def rotator(self, seed: int) -> None:
        rng = random.Random(seed)
        while not self.stop.is_set():
            self.me.address = f"2001:db8:66:1:{rng.getrandbits(16):x}:{rng.getrandbits(16):x}::{rng.getrandbits(16):x}"
            self.post_shares("hostile:64-rotator", "/animate", **self.form(self.inputs.png, self.inputs.joints))

    def run_shares(self) -> int:
        url = self.args.url.rstrip("/") if self.args.url else None
        workdir = stack.make_workdir("dp-soak-shares-")
        ts = stack.FakeTorchServe(workdir / "ts")
        redis_server = RedisServer(workdir / "redis")
        self.retry_after_missing = 0
        self.phase = "quiet"

        def note(body: bytes) -> None:
            self.callbacks.setdefault(json.loads(body)["job"]["id"], time.time())

        # Receivers where the stack can reach them: loopback, or (--callback-host) e.g. the pod network's gateway.
        tarpits = [Tarpit(every=1.0, host=self.args.callback_host) for _ in range(4)]
        receiver = CallbackReceiver(on_arrival=note, host=self.args.callback_host)
        app = worker = dns = None
        preexec = None
        if "slow-dns" in self.args.hostile:
            self.slow_dns_missing = ("a running stack (--url) resolves names with its own resolver, not the soak's "
                                     "slow name server") if url else slowdns.unavailable()
            if self.slow_dns_missing:
                print(f"slow DNS not played: {self.slow_dns_missing}", flush=True)
                self.args.hostile.remove("slow-dns")
            else:  # the app and the worker resolve names through a server that answers late
                dns = slowdns.SlowDns(delay_s=SLOW_DNS_S)
                preexec = slowdns.resolved_by(dns.resolv_conf(workdir))
        try:
            if url:  # a running stack (make pod): its own settings, its own worker
                self.url = url
                app_log = self.running_stack_log
                print(f"against the running stack at {url} (its own settings; callbacks to "
                      f"{self.args.callback_host})", flush=True)
            else:
                print("starting TorchServe (fake models), Redis, gunicorn and a render worker ...", flush=True)
                ts.start()
                redis_server.start()
                env = {"DOODLEPOD_TORCHSERVE_URL": ts.inference_url,
                       "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": ts.management_url,
                       "DOODLEPOD_LOCAL_DIR": str(workdir / "files"), "DOODLEPOD_MAX_UPLOAD_MB": "2",
                       "DOODLEPOD_WORKERS": str(self.args.workers),
                       "DOODLEPOD_RENDER_PROCESSES": str(self.args.render_processes),
                       "DOODLEPOD_RUNTIME_DIR": str(workdir / "pod"), "DOODLEPOD_REDIS_URL": redis_server.url,
                       "DOODLEPOD_TRUSTED_PROXIES": "127.0.0.1/32",
                       "DOODLEPOD_RATE_LIMIT_PER_MIN": str(RATE_PER_MIN),
                       "DOODLEPOD_RATE_LIMIT_BURST": str(RATE_BURST), "DOODLEPOD_WEBHOOK_SECRET": WEBHOOK_SECRET,
                       "DOODLEPOD_WEBHOOK_ALLOW": "127.0.0.1/32", "DOODLEPOD_WEBHOOK_TIMEOUT_S": "5",
                       "DOODLEPOD_WEBHOOK_ATTEMPTS": "5", "DOODLEPOD_STORAGE_BUDGET_MB": "400",
                       "DOODLEPOD_CLIENT_STORAGE_MB": "64", "DOODLEPOD_MAX_INFLIGHT": "3",
                       "DOODLEPOD_CLIENT_RENDER_SLOTS": "1", "DOODLEPOD_WEBHOOK_DNS_TIMEOUT_S": str(DNS_TIMEOUT_S),
                       "DOODLEPOD_DEFAULT_MOTIONS": self.args.motions}
                env.update({k: v for k, v in os.environ.items() if k.startswith("DOODLEPOD_")})
                app = stack.Gunicorn(workdir / "app", env, preexec=preexec).start(timeout=120)
                worker = WorkerProcess(workdir, {**app.env, "DOODLEPOD_WORKER_CONCURRENCY": "1"},
                                       preexec=preexec).start()
                self.url, self.port = app.url, app.port
                app_log = app.log_text
            booted = self.boots(app_log)
            good = [threading.Thread(target=self.shares_good, args=(n,), daemon=True) for n in range(self.args.good)]
            good.append(threading.Thread(target=self.shares_good_callback, args=(receiver.url,), daemon=True))
            print(f"shares soak: {self.args.good} good clients, {self.args.duration:.0f} s quiet, then "
                  f"{self.args.duration:.0f} s beside the hostile ones, against {self.url}", flush=True)
            for t in good:
                t.start()
            time.sleep(self.args.duration)
            self.phase = "hostile"
            hostile = [threading.Thread(target=f, args=a, daemon=True) for name, f, a in (
                ("storage-filler", self.storage_filler, ()), ("storage-filler", self.storage_filler, ()),
                ("video-queuer", self.video_queuer, ()),
                ("slow-callbacks", self.slow_callbacks, ([t.url for t in tarpits],)),
                ("64-rotator", self.rotator, (1,)), ("64-rotator", self.rotator, (2,)),
                ("64-rotator", self.rotator, (3,)), ("slow-dns", self.slow_dns, (1,)),
                ("slow-dns", self.slow_dns, (2,)), ("slow-dns", self.slow_dns, (3,))) if name in self.args.hostile]
            for t in hostile:
                t.start()
            time.sleep(self.args.duration)
            load = os.getloadavg()
            self.stop.set()
            for t in good + hostile:
                t.join(90)
            lags = self.callback_lags(self.url)
            restarts = None if booted is None else self.boots(app_log) - booted
        finally:
            if worker is not None:
                worker.stop()
            if app is not None:
                app.stop()
            ts.stop()
            redis_server.stop()
            for t in tarpits:
                t.close()
            receiver.close()
            if dns is not None:
                dns.close()
        stack.remove(workdir)
        return self.report_shares(restarts, load, lags)

    def running_stack_log(self) -> str | None:
        """The running stack's app log (--app-log-cmd's output, stdout and stderr), or None without one."""
        if not self.args.app_log_cmd:
            return None
        res = subprocess.run(self.args.app_log_cmd, shell=True, capture_output=True, text=True, timeout=60)
        if res.returncode != 0:
            raise SystemExit(f"--app-log-cmd failed ({res.returncode}): {res.stderr[-500:]}")
        return res.stdout + res.stderr

    @staticmethod
    def boots(log_text) -> int | None:
        """gunicorn workers booted so far, from the app's log (None: no log to read)."""
        text = log_text()
        return None if text is None else text.count("Booting worker")

    def print_kinds(self, duration_s: float, width: int, tail: int) -> None:
        """One line per kind of client: how many answers, p50 and p``tail`` seconds, each status's count."""
        by_kind: dict[str, Counter] = defaultdict(Counter)
        seconds: dict[str, list[float]] = defaultdict(list)
        for kind, status, s, code in self.results:
            by_kind[kind][f"{status}{' ' + code if code else ''}"] += 1
            seconds[kind].append(s)
        print(f"\n{len(self.results)} requests in {duration_s:.0f} s")
        for kind in sorted(by_kind):
            answers = ", ".join(f"{k}: {v}" for k, v in by_kind[kind].most_common())
            print(f"  {kind:{width}s} n={sum(by_kind[kind].values()):4d}  p50 {pct(seconds[kind], 50):6.2f} s  "
                  f"p{tail} {pct(seconds[kind], tail):6.2f} s  {answers}")

    def report_shares(self, restarts: int | None, load: tuple[float, float, float], lags: list[float | None]) -> int:
        self.print_kinds(2 * self.args.duration, width=28, tail=95)
        ok = {k: [s for kind, st, s, _ in self.results if kind == f"good:{k}" and st == 200]
              for k in ("quiet", "hostile")}
        p95 = {k: pct(v, 95) if v else float("nan") for k, v in ok.items()}
        others = ("storage_full", "queue_full", "jobs_unavailable", "rate_limited")
        refused = [(k, st, c) for k, st, _, c in self.results
                   if k.startswith("good") and (c in others or c.endswith("_share_used"))]
        fives = [(k, st, c) for k, st, _, c in self.results
                 if isinstance(st, int) and st >= 500 and st not in (503, 504)]
        broken = [(k, st) for k, st, _, _ in self.results if isinstance(st, str)]
        arrived = [v for v in lags if v is not None]

        def held(kind: str, *codes: str) -> bool:
            return any(c in codes for k, _, _, c in self.results if k == kind)

        checks = [
            ("good p95 within 2x of the quiet run", bool(ok["quiet"]) and bool(ok["hostile"])
             and p95["hostile"] <= 2 * p95["quiet"],
             f"quiet p95 {p95['quiet']:.2f} s (n={len(ok['quiet'])}), beside hostile clients "
             f"{p95['hostile']:.2f} s (n={len(ok['hostile'])})"),
            ("no good client refused for another's use", not refused, f"{Counter(refused).most_common(5)}"),
            ("no 5xx but 503/504 with Retry-After", not fives and self.retry_after_missing == 0 and not broken,
             f"other 5xx: {fives[:5]}; 503/504 without Retry-After: {self.retry_after_missing}; "
             f"no answer: {Counter(broken).most_common(3)}"),
            ("good callbacks within 10 s beside slow receivers", bool(lags) and len(arrived) == len(lags)
             and max(arrived) < 10.0, f"{len(arrived)} of {len(lags)} arrived, max lag "
             f"{max(arrived, default=float('nan')):.2f} s"),
        ]
        if restarts is None:  # a running stack without --app-log-cmd: nothing to count them in
            print("  (worker restarts not counted: --url without --app-log-cmd)")
        else:
            checks.append(("no worker restart", restarts == 0, f"{restarts} restarts"))
        ran, filler, dns = self.args.hostile, "hostile:storage-filler", "hostile:slow-dns"
        slow_dns_p95 = pct([s for k, _, s, _ in self.results if k == dns] or [float("nan")], 95)
        good_async = [s for k, _, s, _ in self.results if k == "good:hostile:async"]
        checks += [c for name, c in (
            ("storage-filler", ("storage filler held by its own shares and bucket, never the pod's budget",
                                held(filler, "storage_share_used", "render_share_used", "rate_limited")
                                and not held(filler, "storage_full"),
                                f"{sum(1 for k, st, _, _ in self.results if k == filler and st == 201)} stored")),
            ("video-queuer", ("video queuer held by its video/queued-bytes share",
                              held("hostile:video-queuer", "video_share_used", "queued_bytes_share_used",
                                   "jobs_share_used"), "")),
            ("slow-callbacks", ("slow callback client held by its jobs share (callbacks still due count)",
                                held("hostile:slow-callbacks", "jobs_share_used"), "")),
            ("64-rotator", ("/64 rotator held by one bucket", held("hostile:64-rotator", "rate_limited"), "")),
            ("slow-dns", ("slow DNS client held by the lookup bound and its one lookup at a time",
                          held(dns, "callback_url_refused") and slow_dns_p95 <= DNS_TIMEOUT_S + 1.0,
                          f"p95 {slow_dns_p95:.2f} s, {dict(Counter(c for k, _, _, c in self.results if k == dns))}")),
            ("slow-dns", ("good async submits answered at once beside slow callback names",
                          bool(good_async) and pct(good_async, 95) < 1.0,
                          f"p95 {pct(good_async, 95) if good_async else float('nan'):.2f} s")),
        ) if name in ran]
        print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (the machine is shared: other work ran "
              f"meanwhile); uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
        failed = 0
        for name, passed, detail in checks:
            failed += not passed
            print(f"  {'PASS' if passed else 'FAIL'}  {name}{': ' + detail if detail else ''}")
        return 1 if failed else 0

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
        redis_server = RedisServer(workdir / "redis")

        def note(body: bytes) -> None:  # when each job's callback came (the first time)
            self.callbacks.setdefault(json.loads(body)["job"]["id"], time.time())

        tarpit, receiver = Tarpit(), CallbackReceiver(on_arrival=note)
        app = worker = None
        tracked: set[int] = set()
        try:
            print("starting TorchServe (fake models) and gunicorn ...", flush=True)
            ts.start()
            ts.set_control(pose={"mode": "fractions",
                                 "fractions": stack.pose_fractions(self.inputs.page, {
                                     k: tuple(v) for k, v in self.inputs.joints.items()})})
            redis_server.start()
            env = {"DOODLEPOD_TORCHSERVE_URL": ts.inference_url,
                   "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": ts.management_url,
                   "DOODLEPOD_LOCAL_DIR": str(workdir / "files"), "DOODLEPOD_MAX_UPLOAD_MB": "2",
                   "DOODLEPOD_BODY_TIMEOUT_S": str(BODY_TIMEOUT_S), "DOODLEPOD_WORKERS": str(self.args.workers),
                   "DOODLEPOD_RENDER_PROCESSES": str(self.args.render_processes),
                   "DOODLEPOD_RUNTIME_DIR": str(workdir / "pod"), "DOODLEPOD_REDIS_URL": redis_server.url,
                   "DOODLEPOD_TRUSTED_PROXIES": "127.0.0.1/32", "DOODLEPOD_RATE_LIMIT_PER_MIN": str(RATE_PER_MIN),
                   "DOODLEPOD_RATE_LIMIT_BURST": str(RATE_BURST), "DOODLEPOD_WEBHOOK_SECRET": WEBHOOK_SECRET,
                   "DOODLEPOD_WEBHOOK_ALLOW": "127.0.0.1/32", "DOODLEPOD_WEBHOOK_TIMEOUT_S": "3",
                   "DOODLEPOD_WEBHOOK_ATTEMPTS": "2", "DOODLEPOD_STORAGE_BUDGET_MB": "400",
                   "DOODLEPOD_BVH_MAX_FRAMES": "1000"}
            env.update({k: v for k, v in os.environ.items() if k.startswith("DOODLEPOD_")})
            app = stack.Gunicorn(workdir / "app", env).start(timeout=120)
            worker = WorkerProcess(workdir, {**app.env, "DOODLEPOD_WORKER_CONCURRENCY": "1"}).start()
            self.url, self.port = app.url, app.port
            self.calibrate_race()
            booted = app.log_text().count("Booting worker")
            print(f"soak: {self.args.clients} clients for {self.args.duration:.0f} s against {app.url} "
                  f"({self.args.workers} workers x {self.args.render_processes} render processes)", flush=True)
            threads = [threading.Thread(target=self.client, args=(n,), daemon=True) for n in range(self.args.clients)]
            threads.append(threading.Thread(target=self.prober, daemon=True))
            threads += [threading.Thread(target=self.callback_tarpit, args=(tarpit.url,), daemon=True),
                        threading.Thread(target=self.good_callback, args=(receiver.url,), daemon=True),
                        threading.Thread(target=self.bvh_race, daemon=True)]
            threads += [threading.Thread(target=self.character_flood, daemon=True) for _ in range(2)]
            for t in threads:
                t.start()
            end = time.monotonic() + self.args.duration
            while time.monotonic() < end:
                tracked |= procs.descendants(app.proc.pid, ts.server.proc.pid)
                time.sleep(1.0)
            self.stop.set()
            for t in threads:
                t.join(90)
            lags = self.callback_lags(app.url)
            tracked |= procs.descendants(app.proc.pid, ts.server.proc.pid, worker.proc.pid)
            log = app.log_text()
            restarts = log.count("Booting worker") - booted
            timeouts = log.count("WORKER TIMEOUT")
            load = os.getloadavg()
        finally:
            if worker is not None:
                worker.stop()
            if app is not None:
                app.stop()
            ts.stop()
            redis_server.stop()
            tarpit.close()
            receiver.close()
        time.sleep(2)
        left = sorted(p for p in tracked if procs.alive(p))
        stack.remove(workdir)
        return self.report(restarts, timeouts, left, load, lags)

    def callback_lags(self, url: str) -> list[float | None]:
        """For each good callback job that ended: seconds from its end to its callback (None: none came),
        after giving late ones 15 s."""
        from datetime import datetime

        ended: dict[str, float] = {}
        t_end = time.monotonic() + 120
        for job_id in list(self.good_jobs):
            while time.monotonic() < t_end:
                job = requests.get(f"{url}/jobs/{job_id}", timeout=10).json()
                if job["status"] in ("succeeded", "failed"):
                    ended[job_id] = datetime.fromisoformat(job["updated"].replace("Z", "+00:00")).timestamp()
                    break
                time.sleep(0.5)
        deadline = time.time() + 15
        while time.time() < deadline and any(j not in self.callbacks for j in ended):
            time.sleep(0.2)
        return [self.callbacks[j] - t if j in self.callbacks else None for j, t in ended.items()]

    def report(self, restarts: int, timeouts: int, left: list[int], load: tuple[float, float, float],
               lags: list[float | None]) -> int:
        self.print_kinds(self.args.duration, width=26, tail=99)
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
        internal = [(st, c) for k, st, _, c in self.results if k == "hostile:callback_internal"]
        arrived = [v for v in lags if v is not None]
        flood = Counter(st for k, st, _, _ in self.results if k == "character-flood")
        stored_by_flood = flood.get(201, 0)
        flood_cap = RATE_BURST + RATE_PER_MIN * self.args.duration / 60 + 5
        tarpit_jobs = sum(1 for r in self.results if r[0] == "tarpit-callback" and r[1] == 202)
        checks += [
            ("internal callbacks refused", bool(internal) and all(x == (422, "callback_url_refused") for x in internal),
             f"{Counter(internal).most_common(3)}"),
            ("good callbacks on time beside a tarpit", bool(lags) and len(arrived) == len(lags)
             and max(arrived) < 10.0,
             f"{len(arrived)} of {len(lags)} arrived, lag p50 {pct(arrived, 50):.2f} s, max "
             f"{max(arrived, default=float('nan')):.2f} s; {tarpit_jobs} tarpit jobs"),
            ("character flood held to its bucket", flood.get(429, 0) > 0 and stored_by_flood <= flood_cap,
             f"{dict(flood)}; at most {flood_cap:.0f} stored"),
            ("racing uploads render their own clips", len(set(self.race_expected.values())) == 2
             and -1 not in self.race_expected.values() and bool(self.race)
             and all(frames == self.race_expected[end] for end, frames in self.race),
             f"alone: {self.race_expected}; {len(self.race)} racing answers rendered, "
             f"{Counter(self.race).most_common(4)}"),
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
    parser.add_argument("--shares", action="store_true", help="the per-client shares soak (see above)")
    parser.add_argument("--good", type=int, default=4, help="good clients of the shares soak")
    parser.add_argument("--think", type=float, default=2.0,
                        help="seconds a good client of the shares soak looks at each animation before the next")
    parser.add_argument("--real-videos", action="store_true",
                        help="the shares soak's video queuer sends a real video of a person every other time")
    parser.add_argument("--flood", action="store_true",
                        help="the shares soak's hostile clients ignore their rate limit's Retry-After")
    parser.add_argument("--url", help="the shares soak against a running stack at this URL (e.g. `make pod`'s "
                        "http://127.0.0.1:8000) instead of one it starts; the stack's own settings, which must trust "
                        "the soak's address as a proxy and allow callbacks to --callback-host (docs/speed.md)")
    parser.add_argument("--callback-host", default="127.0.0.1",
                        help="address the soak's callback receivers listen on, reachable from the stack "
                        "(with --url and a pod: its podman network's gateway)")
    parser.add_argument("--app-log-cmd", help="with --url: a shell command printing the app's log (e.g. "
                        "`podman logs doodlepod-app`), to count gunicorn worker restarts")
    parser.add_argument("--hostile", type=lambda v: v.split(","), default=list(HOSTILE),
                        help=f"the shares soak's hostile clients, comma-separated (default: {','.join(HOSTILE)})")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    return Soak(args).run_shares() if args.shares else Soak(args).run()


if __name__ == "__main__":
    sys.exit(main())
