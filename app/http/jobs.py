"""Async requests and the job resource; the rate limit and Idempotency-Key of POSTs that create work.

* ``Prefer: respond-async`` on POST /animate (and POST /characters/{id}/animations): the request is
  checked as usual, then queued (app/jobs/queue.py) and answered ``202`` with ``Location: /jobs/{id}``
  and ``Retry-After``; a worker (``python -m app.worker``) renders it.
* ``GET /jobs/{id}``: ``{"id", "status": queued|running|succeeded|failed, "animations"?, "error"?,
  "timings_ms"?, "created", "updated", ...}``.
* :func:`admit_work` (every request that queues work): the client's token bucket (app/clients/ratelimit.py),
  429 with ``RateLimit-*`` and ``Retry-After`` when empty. Synchronous requests are bounded by the
  pod's render slots instead (503 at once), exactly as without Redis.
* :func:`idempotent` (synchronous work) and :func:`submit` (async) honour ``Idempotency-Key``
  (app/jobs/idempotency.py).

Without Redis (not configured, or down) async requests get a JSON 503 and GET /jobs too; synchronous
requests go on exactly as without this module (an Idempotency-Key is then not honoured: logged).
"""
from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response, g, jsonify, request
from werkzeug.http import parse_list_header

from .. import metrics, shares
from ..errors import ApiError, NotFound, retry_after_header
from ..jobs.idempotency import HEADER as IDEMPOTENCY_HEADER
from ..jobs.idempotency import check_record, fingerprint, redis_key, validate_key
from ..jobs.queue import REDIS_ERRORS, JobsUnavailable
from ..jobs.webhooks import validate_callback_url
from ..loop import off_loop
from ..orders import WorkOrder
from ..services import services
from .api import json_body, request_client

log = logging.getLogger("doodlepod.http")

bp = Blueprint("jobs", __name__)

_JOB_ID = re.compile(r"^[0-9a-f]{32}$")


def wants_async() -> bool:
    """True when the request says ``Prefer: respond-async`` (RFC 7240; other preferences ignored)."""
    prefs = parse_list_header(",".join(request.headers.getlist("Prefer")))
    return any(p.split(";")[0].split("=")[0].strip().lower() == "respond-async" for p in prefs)


def client() -> str:
    """Who is asking, for rate limits, shares and idempotency keys (:mod:`app.clients` decides)."""
    return request_client()


def request_fingerprint() -> str:
    """The request's content (form fields, files by SHA-256, JSON or raw body) for Idempotency-Key."""
    files = []
    for name, upload in request.files.items(multi=True):
        files.append((name, upload.read()))
        upload.seek(0)
    body = json_body() if request.is_json else None  # bounded depth: see app.intake
    if not request.files and not request.form and body is None:
        files.append(("body", request.get_data(cache=True)))
    return fingerprint(request.method, request.path, request.form.items(multi=True), files, body)


def admit_work() -> None:
    """Take a token from the client's bucket, or answer 429 (headers kept for the response); then
    check the client's storage share (429 ``storage_share_used``) and meter what this request stores
    (charged to the client when the request ends: :func:`_charge_stored`)."""
    limiter = services().limiter
    if limiter is not None:
        try:
            decision = limiter.take(client())
        except REDIS_ERRORS as exc:
            log.warning("rate limit not applied: Redis unavailable (%s)", type(exc).__name__)
        else:
            g.rate_limit_headers = decision.headers()
            if not decision.allowed:
                metrics.RATE_LIMITED.inc()
                raise limiter.refuse(decision)
    meter_storage()


def meter_storage(check: bool = True) -> None:
    """Refuse a client past its storage share (``check``), and count what this request stores."""
    svc = services()
    if check:
        try:
            svc.shares.check_storage(client())
        except REDIS_ERRORS as exc:
            log.warning("storage share not checked: Redis unavailable (%s)", type(exc).__name__)
    if g.get("storage_meter") is None:
        g.storage_meter = shares.start_metering()


@bp.teardown_app_request
def _charge_stored(_exc: BaseException | None) -> None:
    """Charge what the request stored (or freed) to the client's storage share."""
    started = g.pop("storage_meter", None)
    if started is None:
        return
    meter, token = started
    try:
        shares.stop_metering(token)
    except ValueError:  # reset from another context (never expected): the count still stands
        pass
    try:
        services().shares.charge_storage(client(), meter.bytes)
    except REDIS_ERRORS as exc:
        log.warning("storage share not charged (%d bytes): Redis unavailable (%s)", meter.bytes,
                    type(exc).__name__)


@bp.after_app_request
def _add_rate_limit_headers(response: Response) -> Response:
    for key, value in g.get("rate_limit_headers", {}).items():
        response.headers.setdefault(key, value)
    return response


def _queue():
    queue = services().jobs
    if queue is None:
        raise JobsUnavailable("async jobs are off on this server (no DOODLEPOD_REDIS_URL); send the request "
                              "without 'Prefer: respond-async'", services().settings.retry_after_s or 5)
    return queue


def _accepted(job: dict[str, Any], replayed: bool = False) -> Response:
    response = jsonify(job)
    response.status_code = 202
    response.headers["Location"] = f"/jobs/{job['id']}"
    response.headers.update(retry_after_header(services().settings.jobs_poll_after_s))
    response.headers["Preference-Applied"] = "respond-async"
    if replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return response


def _replay(record: dict[str, Any]) -> Response:
    """The answer a key's first request got: its job (202) or its stored response."""
    if "job" in record:
        job = _queue().get(record["job"])
        if job is None:
            raise NotFound(f"the job {record['job']} made for this {IDEMPOTENCY_HEADER} has expired")
        return _accepted(job, replayed=True)
    stored = record["response"]
    response = jsonify(stored["body"])
    response.status_code = stored["status"]
    response.headers.update(stored.get("headers", {}))
    response.headers["Idempotent-Replayed"] = "true"
    return response


def submit(order: WorkOrder, input_data: bytes | None, callback_url: str = "",
           input_bytes: int | None = None) -> Response:
    """Queue ``order`` (its payload a job of its kind: a handler of app/worker.py) and answer 202; or replay
    the key's first answer. ``input_bytes``: the size of an input the order names (a stored video), for the
    client's share."""
    from ..jobs.price import cpu_cost, stored_bytes

    svc = services()
    queue = _queue()
    key = validate_key(request.headers.get(IDEMPOTENCY_HEADER))
    fp = request_fingerprint() if key else ""
    who = client()
    # what the job will store: checked against the pod's budget now, reserved until the job ends
    price = stored_bytes(order, len(input_data or b"") if input_bytes is None else input_bytes, svc.settings)
    check_pod_storage(price)
    # the address the callback names (DNS, the egress rules): the model checked its text only
    callback_url = validate_callback_url(callback_url, svc.settings, client=who)
    submitted = queue.submit(order.kind, order.to_json(), input_data, callback_url=callback_url, client=who,
                             idem_key=redis_key(svc.settings.redis_prefix, who, key) if key else "",
                             idem_record={"fp": fp}, idem_ttl_s=svc.settings.idempotency_ttl_s,
                             input_bytes=input_bytes, reserve=price, cost=cpu_cost(order, svc.settings))
    if submitted.duplicate_of is not None:
        record = check_record(submitted.duplicate_of, fp, key)
        if record.get("state") == "running":
            from ..jobs.idempotency import IdempotencyInProgress
            raise IdempotencyInProgress(f"a request with {IDEMPOTENCY_HEADER} '{key[:64]}' is still running",
                                        svc.settings.retry_after_s or 5)
        log.info("idempotent replay of %s", record.get("job", "a stored response"))
        return _replay(record)
    metrics.JOBS.labels(event="submitted").inc()
    _reserve_storage(who, price)
    return _accepted(submitted.job)


def check_pod_storage(nbytes: int) -> None:
    """503 ``storage_full`` when the pod's stored files and its queued jobs' reservations leave no room
    for ``nbytes`` more (DOODLEPOD_STORAGE_BUDGET_MB; local storage only)."""
    svc = services()
    budget = getattr(svc.storage, "budget", None)
    if budget is None or not budget.enabled:
        return
    left = off_loop(budget.left_bytes, budget.reserved_bytes())  # Redis on the loop, the folder off it
    if left is not None and left < nbytes:
        raise budget.refuse(svc.settings.sweep_interval_s, nbytes)


def _reserve_storage(who: str, price: int) -> None:
    """Reserve what the job will store against the client's storage share, now that it is queued (its
    end gives the reservation back, and what it stored counts instead: :mod:`app.jobs.price`)."""
    try:
        services().shares.charge_storage(who, price)
    except REDIS_ERRORS as exc:
        log.warning("storage of a queued job not reserved: Redis unavailable (%s)", type(exc).__name__)


def idempotent(work: Callable[[], Response]) -> Response:
    """Run synchronous ``work`` once per Idempotency-Key: a repeat gets the stored answer."""
    svc = services()
    key = validate_key(request.headers.get(IDEMPOTENCY_HEADER))
    if not key or svc.idempotency is None:
        return work()
    fp = request_fingerprint()
    try:
        claim, record = svc.idempotency.begin(client(), key, fp)
    except REDIS_ERRORS as exc:
        log.warning("%s not honoured: Redis unavailable (%s)", IDEMPOTENCY_HEADER, type(exc).__name__)
        return work()
    if record is not None:
        log.info("idempotent replay of a stored response")
        return _replay(record)
    try:
        response = work()
    except ApiError as exc:
        _settle(claim, exc.status, {"error": exc.code, "message": exc.message}, retryable=exc.retryable)
        raise
    except BaseException:
        _settle(claim, 500, None)
        raise
    _settle(claim, response.status_code, response.get_json(silent=True),
            {name: response.headers[name] for name in _REPLAYED_HEADERS if name in response.headers})
    return response


#: The headers of a stored answer that its replay carries too (the document's version, where it lives).
_REPLAYED_HEADERS = ("ETag", "Location")


def _settle(claim, status: int, body: Any, headers: dict[str, str] | None = None, retryable: bool = False) -> None:
    try:
        services().idempotency.complete(claim, status, body, headers, retryable=retryable)
    except REDIS_ERRORS as exc:
        log.warning("could not store the response for %s: %s", IDEMPOTENCY_HEADER, type(exc).__name__)


@bp.get("/jobs/<job_id>")
def get_job(job_id: str):
    """A job's state; ``Retry-After`` while it is queued or running."""
    queue = _queue()
    job = queue.get(job_id) if _JOB_ID.match(job_id) else None
    if job is None:
        raise NotFound(f"no job {job_id[:40]} (unknown, or ended more than "
                       f"{services().settings.jobs_ttl_s // 86400} days ago)")
    response = jsonify(job)
    if job["status"] in ("queued", "running"):
        response.headers.update(retry_after_header(services().settings.jobs_poll_after_s))
    return response
