"""doodlepod's web app: POST a photo of a drawing, get animation URLs back.

Start it with gunicorn (gevent workers)::

    gunicorn -c app/gunicorn_conf.py "app:create_app()"

Settings are ``DOODLEPOD_*`` environment variables, declared in :mod:`app.config`.
"""
from __future__ import annotations

import atexit
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from .config import Settings, load_settings, unknown_variables
from .logs import configure_logging

__all__ = ["create_app"]


def new_runtime_dir() -> str:
    """A fresh runtime folder when DOODLEPOD_RUNTIME_DIR is not set: in /dev/shm (memory) where it
    is writable, else the temp folder. Prometheus' metric files in it are memory-mapped, and a write
    to a mapped file whose disk is full is a SIGBUS that kills the worker, so they must not share a
    disk that uploads and animations can fill."""
    shm = "/dev/shm"
    parent = shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None
    return tempfile.mkdtemp(prefix="doodlepod-", dir=parent)


def _device(path: str | Path) -> int:
    """The filesystem holding ``path`` (its nearest existing ancestor)."""
    p = Path(path).resolve()
    while not p.exists() and p != p.parent:
        p = p.parent
    return os.stat(p).st_dev


def metrics_dir(run_dir: str | Path, settings: Settings, shm: str = "/dev/shm") -> Path:
    """Where the memory-mapped metric files go: ``<runtime folder>/metrics``, unless that folder is on
    the filesystem the local storage fills (a write to a mapped file on a full disk is a SIGBUS that
    kills the worker): then a folder in memory named after the runtime folder (the pod's processes
    find the same one), or, with no memory filesystem, the app refuses to start."""
    from .config import SettingsError

    run_dir = Path(run_dir)
    if settings.storage != "local" or _device(run_dir) != _device(settings.local_dir):
        return run_dir / "metrics"
    if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) and _device(shm) != _device(settings.local_dir):
        import hashlib
        return Path(shm) / f"doodlepod-metrics-{hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:12]}"
    raise SettingsError(f"DOODLEPOD_RUNTIME_DIR ({run_dir}) is on the filesystem of the local storage "
                        f"({settings.local_dir}), which uploads and animations can fill, and there is no {shm} "
                        "to hold the memory-mapped metric files instead: a write to them on a full disk kills "
                        "the worker. Give DOODLEPOD_RUNTIME_DIR a small volume of its own.")


def runtime_dir(settings: Settings) -> Path:
    """The folder shared by the pod's workers; made (and exported to later workers) if not set."""
    path = settings.runtime_dir or new_runtime_dir()
    p = Path(path)
    p.mkdir(parents=True, exist_ok=True)
    metrics = metrics_dir(p, settings)
    metrics.mkdir(parents=True, exist_ok=True)
    # prometheus_client reads its own variable when first imported; point it at our folder.
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(metrics))
    return p


def create_app(**overrides: Any):
    """Build the Flask app. ``overrides`` replace settings (attribute names, parsed values): tests."""
    from flask import Flask

    settings = load_settings(**overrides)
    configure_logging(settings.log_level)
    log = logging.getLogger("doodlepod.app")
    for name in unknown_variables():
        log.warning("ignoring unknown setting %s (typo? see app/config.py)", name)
    run_dir = runtime_dir(settings)

    # Imports that need PROMETHEUS_MULTIPROC_DIR set come after runtime_dir().
    from .http import answers, register_blueprints
    from .http.hooks import install_hooks
    from .loop import under_gevent
    from .services import EXTENSION, build_services

    app = Flask(__name__, static_folder=None)  # pages serve their own files, with their policy (app/http)
    app.config["MAX_CONTENT_LENGTH"] = int(settings.max_upload_mb * 2**20)
    app.config["SETTINGS"] = settings
    app.json.sort_keys = False
    app.jinja_env.trim_blocks = app.jinja_env.lstrip_blocks = True  # the pages' templates (app/templates) as written

    services = build_services(settings, run_dir, f"spill-{os.getpid()}")
    pool, storage = services.pool, services.storage
    budget = getattr(storage, "budget", None)
    if budget is not None and budget.enabled and services.jobs is not None:
        budget.count_reserved(services.jobs.reserved_bytes)  # admissions count the queued jobs' reservations
    app.extensions[EXTENSION] = services
    answers.register(app)
    install_hooks(app)
    register_blueprints(app)

    atexit.register(pool.shutdown)
    if under_gevent():
        import gevent
        gevent.spawn(_warm, pool, log)
        if storage.name == "local":  # S3 expires objects with a lifecycle rule (docs/api.md)
            from .storage import sweep
            gevent.spawn(sweep.run_forever, storage.root, settings.expiry_hours * 3600,
                         settings.sweep_interval_s, run_dir / "sweep.lock")
    log.info("app ready: storage=%s motions=%s render_processes=%d max_inflight=%d deadline=%gs",
             storage.name, ",".join(services.motions), pool.processes,
             settings.max_inflight, settings.request_deadline_s)
    return app


def _warm(pool, log) -> None:
    try:
        pool.warm()
    except Exception:  # a failed warm-up is not fatal: the pool starts on demand
        log.exception("render pool warm-up failed")

