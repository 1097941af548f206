"""Probes and scrapes (public): GET /ping readiness, GET /healthz and /live liveness, GET /metrics."""
from __future__ import annotations

import logging
from typing import Any

from flask import Blueprint, Response, jsonify

from .. import metrics
from ..characters.preparation import models_summary, served_by
from ..services import services
from ..storage.backends import free_disk_mb

log = logging.getLogger("doodlepod.http")

bp = Blueprint("health", __name__)

#: Free space /ping requires in the runtime folder (its metric files grow by a few pages at a time).
RUNTIME_MIN_FREE_MB = 4.0


@bp.get("/healthz")
def healthz():
    """Liveness: the worker's loop answers. Checks nothing else (a restart would not fix it)."""
    return jsonify(status="alive")


@bp.get("/live")
def live():
    return healthz()


@bp.get("/ping")
def ping():
    """Readiness: TorchServe models READY, enough free disk, storage reachable. 200 or 503.

    ``components.jobs`` says whether async jobs can be taken (Redis reachable, the queue's state) and
    why not; it does not make the pod unready: synchronous requests work without Redis.

    ``models`` says, for a person, where the models are: ``ready``, ``preparing`` (``make run`` is still
    building the model stack; ``progress`` says how far), ``starting`` (TorchServe is loading them) or
    ``absent`` (no model server answers), with ``retry_after_s`` an estimate of when to ask again
    (:func:`app.characters.preparation.models_summary`), and ``served_by`` what answers a photo now:
    trained weights, tiny random models, the ink finder on the model server, or the app's own ink finder
    while the model server is not ready (:func:`app.characters.preparation.served_by`).
    """
    import gevent

    svc = services()
    settings = svc.settings
    timeout = settings.ping_timeout_s
    ts = svc.torchserve
    checks = {
        "detector": gevent.spawn(ts.model_state, settings.detector_model, timeout),
        "pose_estimator": gevent.spawn(ts.model_state, settings.pose_model, timeout),
        "storage": gevent.spawn(svc.storage.check, timeout),
    }
    if svc.jobs is not None:
        checks["jobs"] = gevent.spawn(svc.jobs.check)
    gevent.joinall(list(checks.values()), timeout=timeout + 1.0)
    components: dict[str, dict[str, Any]] = {}
    for name, greenlet in checks.items():
        if greenlet.successful():
            value = greenlet.value
        elif greenlet.ready():
            value = {"ok": False, "detail": f"check failed: {type(greenlet.exception).__name__}"}
        else:
            greenlet.kill(block=False)
            value = {"ok": False, "detail": "check did not finish in time"}
            if name == "jobs":
                value["detail"] = (f"Redis at {svc.jobs.safe_url()} did not answer in time; async requests "
                                   "answer 503, synchronous ones work")
        if "ready" in value:
            value = {"ok": value.pop("ready"), **value}
        components[name] = value
    # the runtime folder holds memory-mapped metric files: writing to one on a full disk is a SIGBUS
    run_free = free_disk_mb(svc.runtime_dir)
    components["runtime_disk"] = {"ok": run_free >= RUNTIME_MIN_FREE_MB, "path": str(svc.runtime_dir),
                                  "free_mb": round(run_free, 1), "min_free_mb": RUNTIME_MIN_FREE_MB}
    path = svc.pipeline.disk_path()
    free = free_disk_mb(path)
    components["disk"] = {"ok": free >= settings.min_free_disk_mb, "path": path, "free_mb": round(free),
                          "min_free_mb": settings.min_free_disk_mb}
    if svc.jobs is None:
        components["jobs"] = {"ok": False, "detail": "async jobs are off: DOODLEPOD_REDIS_URL is not set"}
    components["jobs"]["required"] = False
    preparation = svc.preparation.read() if svc.preparation is not None else None
    models = models_summary({k: components[k] for k in ("detector", "pose_estimator")}, preparation,
                            settings.torchserve_management_url, settings.finder_fallback)
    weights = ts.weights or (preparation or {}).get("weights")
    models["served_by"] = served_by(models["state"] == "ready", weights, settings.finder_fallback)
    ok = all(c["ok"] for c in components.values() if c.get("required", True))
    degraded = svc.jobs is not None and not components["jobs"]["ok"]
    response = jsonify(status="unavailable" if not ok else "degraded" if degraded else "ok", components=components,
                       models=models)
    response.status_code = 200 if ok else 503
    if not ok:
        log.warning("ping unavailable: %s", {k: v.get("detail", v) for k, v in components.items()
                                             if not v["ok"] and v.get("required", True)})
    return response


@bp.get("/metrics")
def metrics_endpoint():
    body, content_type = metrics.render_latest(services().jobs)
    return Response(body, content_type=content_type)
