#!/usr/bin/env python3
"""Readiness check for the model container: are both models loaded with a READY worker?

TorchServe's ``/ping`` answers "Healthy" as soon as the frontend is up, before any model has
loaded (and keeps answering it when every worker has died), so a probe on ``/ping`` would send
traffic to a server that can only fail. This asks the management API instead:
``GET <management>/models/<name>`` for each model, and succeeds only if every model has at least
one worker whose status is ``READY``.

Exit status 0: ready; 1: not ready (the reason is printed on stderr); 2: bad usage.
Standard library only, so it runs in the image without the virtualenv.

    readiness.py [--management-url http://127.0.0.1:8081] [--models a,b] [--timeout 2] [--wait 0]

Env: DOODLEPOD_TS_MANAGEMENT_URL sets the default management URL.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request

DEFAULT_MODELS = ("drawn_humanoid_detector", "drawn_humanoid_pose_estimator")
DEFAULT_MANAGEMENT_URL = "http://127.0.0.1:8081"


def model_problems(management_url: str, models: tuple[str, ...] | list[str] = DEFAULT_MODELS,
                   timeout: float = 2.0) -> list[str]:
    """Return why the models are not ready (empty list: every model has a READY worker)."""
    problems = []
    for name in models:
        url = f"{management_url.rstrip('/')}/models/{name}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:
                described = json.loads(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as err:
            problems.append(f"{name}: management API answered {err.code} ({_short(err.read())})")
            continue
        except (urllib.error.URLError, OSError, ValueError) as err:
            problems.append(f"{name}: cannot ask {url}: {getattr(err, 'reason', err)}")
            continue
        workers = [w for entry in (described if isinstance(described, list) else [described])
                   for w in (entry.get("workers") or [])]
        statuses = sorted({str(w.get("status")) for w in workers})
        if not any(w.get("status") == "READY" for w in workers):
            problems.append(f"{name}: no READY worker (workers: {', '.join(statuses) or 'none'})")
    return problems


def _short(body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip().replace("\n", " ")
    return text[:200]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Exit 0 when every model has a READY TorchServe worker, 1 otherwise.")
    parser.add_argument("--management-url",
                        default=os.environ.get("DOODLEPOD_TS_MANAGEMENT_URL", DEFAULT_MANAGEMENT_URL),
                        help="TorchServe management API (default %(default)s)")
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS),
                        help="comma-separated model names (default %(default)s)")
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds per HTTP call")
    parser.add_argument("--wait", type=float, default=0.0,
                        help="keep asking for up to this many seconds before giving up (default: ask once)")
    args = parser.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    deadline = time.monotonic() + args.wait
    while True:
        problems = model_problems(args.management_url, models, args.timeout)
        if not problems:
            print(f"ready: {', '.join(models)}")
            return 0
        if time.monotonic() >= deadline:
            for p in problems:
                print(f"not ready: {p}", file=sys.stderr)
            return 1
        time.sleep(1.0)


if __name__ == "__main__":
    sys.exit(main())
