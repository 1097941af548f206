"""Prometheus metrics of the app, summed over every gunicorn worker of the pod.

The counters use prometheus_client's multiprocess mode: each worker writes its values to files under
``$PROMETHEUS_MULTIPROC_DIR`` (``<DOODLEPOD_RUNTIME_DIR>/metrics``, set by :func:`app.create_app` or
the gunicorn config *before* this module is imported) and ``GET /metrics`` reads them all, so a
scrape sees pod totals whichever worker answers it. The in-flight gauge is a live sum over workers.
"""
from __future__ import annotations

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

_STAGE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)

REQUESTS = Counter("doodlepod_requests_total", "HTTP requests answered.", ["endpoint", "method", "status"])
ERRORS = Counter("doodlepod_errors_total", "Error answers by error code.", ["code", "status"])
REQUEST_SECONDS = Histogram("doodlepod_request_seconds", "Time to answer a request.", ["endpoint"],
                            buckets=_STAGE_BUCKETS)
STAGE_SECONDS = Histogram("doodlepod_stage_seconds", "Time of each pipeline stage (decode, detect, "
                          "segment, pose, animate, upload).", ["stage"], buckets=_STAGE_BUCKETS)
RENDERS_IN_FLIGHT = Gauge("doodlepod_renders_in_flight", "Requests holding a render slot now.",
                          multiprocess_mode="livesum")
ANIMATIONS = Counter("doodlepod_animations_total", "Animations rendered and stored.", ["motion", "format"])
ANIMATION_CACHE = Counter("doodlepod_animation_cache_total", "Animations a character's render request "
                          "found already stored (hit) or had to render (miss).", ["result"])
CHARACTER_EDITS = Counter("doodlepod_character_edits_total", "Characters created and edited, by what "
                          "changed (create, bbox, mask, joints).", ["change"])
EXPIRED = Counter("doodlepod_expired_total", "Stored items deleted by the expiry sweep.", ["kind"])


def render_latest() -> tuple[bytes, str]:
    """The exposition text for ``GET /metrics`` and its content type."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(), CONTENT_TYPE_LATEST

