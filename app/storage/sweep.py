"""The expiry sweep of the local storage: characters and animations live DOODLEPOD_EXPIRY_HOURS.

* ``characters/<id>/`` goes as a whole once its document's ``expires_at`` has passed, with the
  ``character-files/<files key>/`` folder it names (a folder without a readable document, e.g. a
  crashed upload, once its newest file is that old; a files folder whose document is gone, file
  by file as any other file);
* any other file (the animations of /animate and POST /) goes once it is older than the expiry,
  and the folders it leaves empty with it;
* a ``.partial-*`` file (a write that crashed before its rename) goes after an hour.

S3 does the same with a lifecycle rule on the bucket (deploy/examples/s3-lifecycle.json): the app
never lists a bucket to expire it. Each worker of a pod runs :func:`run_forever`; a lock file in
the pod's runtime folder lets one sweep at a time.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import time
from pathlib import Path

from .. import metrics

log = logging.getLogger("doodlepod.sweep")

PARTIAL_MAX_AGE_S = 3600.0


def sweep_local(root: str | Path, ttl_s: float, now: float | None = None) -> dict[str, int]:
    """Delete what has expired under ``root``; returns how many characters and files went."""
    root = Path(root)
    now = time.time() if now is None else now
    counts = {"characters": 0, "files": 0}
    chars = root / "characters"
    if chars.is_dir():
        for folder in chars.iterdir():
            if folder.is_dir() and _character_expired(folder, ttl_s, now):
                files_key = _files_key(folder)
                shutil.rmtree(folder, ignore_errors=True)
                if files_key:
                    shutil.rmtree(root / "character-files" / files_key, ignore_errors=True)
                counts["characters"] += 1
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        here = Path(dirpath)
        if here == chars or chars in here.parents:
            continue
        for name in filenames:
            path = here / name
            try:
                age = now - path.stat().st_mtime
            except FileNotFoundError:
                continue
            if age >= (PARTIAL_MAX_AGE_S if name.startswith(".partial-") else ttl_s):
                path.unlink(missing_ok=True)
                counts["files"] += 1
        if here != root:
            try:
                here.rmdir()  # only when empty
            except OSError:
                pass
    return counts


def report(root: str | Path, counts: dict[str, int] | None) -> None:
    """Count and log what a sweep deleted (on the gevent loop: no locks taken in a native thread)."""
    if counts and (counts["characters"] or counts["files"]):
        metrics.EXPIRED.labels(kind="character").inc(counts["characters"])
        metrics.EXPIRED.labels(kind="file").inc(counts["files"])
        log.info("expiry sweep of %s: %d characters and %d files deleted", root, counts["characters"],
                 counts["files"])


def _files_key(folder: Path) -> str:
    """The key of the files' folder the character document in ``folder`` names ('' if none)."""
    try:
        key = str(json.loads((folder / "character.json").read_bytes()).get("files_key") or "")
    except (OSError, ValueError, AttributeError):
        return ""
    return key if key.isalnum() else ""


def _character_expired(folder: Path, ttl_s: float, now: float) -> bool:
    try:
        return float(json.loads((folder / "character.json").read_bytes())["expires_at"]) <= now
    except (OSError, ValueError, KeyError, TypeError):
        pass
    newest = None
    for path in folder.rglob("*"):
        try:
            if path.is_file():
                newest = max(newest or 0.0, path.stat().st_mtime)
        except FileNotFoundError:
            pass
    return now - (newest if newest is not None else folder.stat().st_mtime) >= ttl_s


def sweep_once(root: str | Path, ttl_s: float, lock_path: str | Path) -> dict[str, int] | None:
    """:func:`sweep_local` unless another process of the pod is sweeping (then None)."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        return sweep_local(root, ttl_s)
    finally:
        os.close(fd)


def run_forever(root: str | Path, ttl_s: float, interval_s: float, lock_path: str | Path) -> None:
    """Sweep now and every ``interval_s`` (a gevent greenlet; the file work runs in a native thread)."""
    import gevent

    while True:
        try:
            report(root, gevent.get_hub().threadpool.apply(sweep_once, (root, ttl_s, lock_path)))
        except Exception:
            log.exception("expiry sweep failed; trying again in %g s", interval_s)
        gevent.sleep(interval_s)
