"""doodlepod's web app: POST a photo of a drawing, get animation URLs back.

Start it with gunicorn (gevent workers)::

    gunicorn -c app/gunicorn_conf.py "app:create_app()"

Settings are ``DOODLEPOD_*`` environment variables, declared in :mod:`app.config`.
"""
from __future__ import annotations

import atexit
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from .config import Settings, load_settings, unknown_variables

__all__ = ["create_app"]

LOG_FORMAT = "%(asctime)s %(levelname)s [%(process)d] [%(request_id)s] %(name)s: %(message)s"


class _RequestIdFilter(logging.Filter):
    """Adds ``request_id`` (the current request's id, or ``-``) to every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = "-"
            try:
                from flask import g, has_request_context
                if has_request_context():
                    record.request_id = g.get("request_id", "-")
            except Exception:
                pass
        return True


def configure_logging(level: str) -> None:
    logger = logging.getLogger("doodlepod")
    logger.setLevel(level.upper())
    if not any(getattr(h, "_doodlepod", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler._doodlepod = True  # type: ignore[attr-defined]
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        handler.addFilter(_RequestIdFilter())
        logger.addHandler(handler)
    logger.propagate = False


def runtime_dir(settings: Settings) -> Path:
    """The folder shared by the pod's workers; made (and exported to later workers) if not set."""
    path = settings.runtime_dir or tempfile.mkdtemp(prefix="doodlepod-")
    p = Path(path)
    (p / "metrics").mkdir(parents=True, exist_ok=True)
    # prometheus_client reads its own variable when first imported; point it at our folder.
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(p / "metrics"))
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
    from . import errors, routes
    from .motions import load_motions
    from .pipeline import Pipeline
    from .render_pool import InflightSlots, RenderPool
    from .storage import from_settings
    from .torchserve import TorchServeClient

    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = int(settings.max_upload_mb * 2**20)
    app.config["SETTINGS"] = settings
    app.json.sort_keys = False

    pool = RenderPool(settings.render_processes, run_dir / f"spill-{os.getpid()}")
    storage = from_settings(settings)
    torchserve = TorchServeClient(settings.torchserve_url, settings.torchserve_management_url,
                                  timeout_s=settings.torchserve_timeout_s, retries=settings.torchserve_retries)
    app.extensions["doodlepod"] = {
        "settings": settings,
        "motions": load_motions(settings.motions_dir or None),
        "storage": storage,
        "torchserve": torchserve,
        "pool": pool,
        "slots": InflightSlots(run_dir / "slots", settings.max_inflight),
        "pipeline": Pipeline(settings, torchserve, storage, pool, scratch_dir=run_dir),
    }
    errors.register(app)
    app.register_blueprint(routes.api)
    app.register_blueprint(routes.health)
    app.register_blueprint(routes.files)
    from .routes_characters import characters
    app.register_blueprint(characters)
    routes.install_hooks(app)

    atexit.register(pool.shutdown)
    if _under_gevent():
        import gevent
        gevent.spawn(_warm, pool, log)
        if storage.name == "local":
            from . import sweep
            gevent.spawn(sweep.run_forever, storage.root, settings.expiry_hours * 3600,
                         settings.sweep_interval_s, run_dir / "sweep.lock")
    log.info("app ready: storage=%s motions=%s render_processes=%d max_inflight=%d deadline=%gs",
             storage.name, ",".join(app.extensions["doodlepod"]["motions"]), pool.processes,
             settings.max_inflight, settings.request_deadline_s)
    return app


def _warm(pool, log) -> None:
    try:
        pool.warm()
    except Exception:  # a failed warm-up is not fatal: the pool starts on demand
        log.exception("render pool warm-up failed")


def _under_gevent() -> bool:
    try:
        from gevent import monkey
        return monkey.is_module_patched("socket")
    except ImportError:
        return False
