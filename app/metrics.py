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
RENDERS_WAITING = Gauge("doodlepod_renders_waiting", "Requests waiting for a render slot now "
                        "(DOODLEPOD_ADMISSION_WAIT_S).", multiprocess_mode="livesum")
ANIMATIONS = Counter("doodlepod_animations_total", "Animations rendered and stored.", ["motion", "format"])
ANIMATION_CACHE = Counter("doodlepod_animation_cache_total", "Animations a character's render request "
                          "found already stored (hit) or had to render (miss).", ["result"])
CHARACTER_EDITS = Counter("doodlepod_character_edits_total", "Characters created and edited, by what "
                          "changed (create, bbox, mask, joints).", ["change"])
EXPIRED = Counter("doodlepod_expired_total", "Stored items deleted by the expiry sweep.", ["kind"])


def render_latest(queue=None) -> tuple[bytes, str]:
    """The exposition text for ``GET /metrics`` and its content type (plus the queue's live gauges)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        from prometheus_client import REGISTRY
        registry = REGISTRY
    text = generate_latest(registry)
    if queue is not None:
        extra = CollectorRegistry()
        extra.register(QueueCollector(queue))
        text += generate_latest(extra)
    return text, CONTENT_TYPE_LATEST


# --- async jobs (app/jobs/queue.py, app/worker.py); the queue's depth and oldest age are read from
# Redis at scrape time (:class:`QueueCollector`) ---
JOBS = Counter("doodlepod_jobs_total", "Async job events: submitted, succeeded, failed (ended failed), "
               "retried (requeued after a failure), redelivered (taken over from a worker that stopped).",
               ["event"])
JOB_SECONDS = Histogram("doodlepod_job_seconds", "Time from submission to the end of a job (succeeded or failed).",
                        ["status"], buckets=_STAGE_BUCKETS + (300, 600, 1800))
WEBHOOKS = Counter("doodlepod_webhooks_total", "Job callbacks by outcome: delivered, failed, retried.", ["outcome"])
RATE_LIMITED = Counter("doodlepod_rate_limited_total", "Requests refused with 429 by the per-client rate limit.")


class QueueCollector:
    """Live gauges of the shared queue, read from Redis when /metrics is scraped (every pod reports
    the same cluster-wide values: aggregate them with max, not sum)."""

    def __init__(self, queue) -> None:
        self.queue = queue

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        up = GaugeMetricFamily("doodlepod_jobs_redis_up", "1 if Redis answered this scrape, else 0.")
        try:
            stats = self.queue.stats()
        except Exception:  # a scrape must not fail because Redis is down
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        depth = GaugeMetricFamily("doodlepod_jobs_queue_depth", "Async jobs waiting (queued) or being rendered "
                                  "(running), across the deployment.", labels=["state"])
        depth.add_metric(["queued"], stats.queued)
        depth.add_metric(["running"], stats.running)
        yield depth
        yield GaugeMetricFamily("doodlepod_jobs_queue_limit", "DOODLEPOD_JOBS_MAX_QUEUED.",
                                value=self.queue.max_queued)
        yield GaugeMetricFamily("doodlepod_jobs_oldest_age_seconds", "Age of the oldest unfinished job's queue "
                                "entry (0 when the queue is empty).", value=stats.oldest_age_s)
