"""HTTP endpoints.

Blueprints: ``api`` (POST /animate, POST / for the old mobile client, GET /motions), ``health``
(GET /ping readiness, GET /healthz and /live liveness, GET /metrics) and ``files`` (GET /files/...,
the local storage). :func:`install_hooks` adds the request id, optional bearer auth, the deadline,
metrics and one summary log line per request.
"""
from __future__ import annotations

import base64
import binascii
import hmac
import json
import logging
import re
import time
from contextlib import contextmanager
from typing import Any, Iterator

from flask import Blueprint, Flask, Response, current_app, g, jsonify, request, send_file

from . import metrics
from .deadline import Deadline
from .errors import (BadRequest, NotFound, Overloaded, TooLarge, Unauthorized, UnknownMotion,
                     UnsupportedType)
from .pipeline import Job, new_request_id
from .storage import LocalStorage, free_disk_mb

log = logging.getLogger("doodlepod.http")

api = Blueprint("api", __name__)
health = Blueprint("health", __name__)
files = Blueprint("files", __name__)

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_PUBLIC_ENDPOINTS = {"health.ping", "health.live", "health.healthz", "health.metrics_endpoint", "files.get_file"}
FORMATS = ("gif", "webp", "mp4")


def _services() -> dict[str, Any]:
    return current_app.extensions["doodlepod"]


def install_hooks(app: Flask) -> None:
    @app.before_request
    def _begin() -> None:
        g.t0 = time.perf_counter()
        incoming = request.headers.get("X-Request-ID", "")
        g.request_id = incoming if _REQUEST_ID.match(incoming) else new_request_id()
        settings = _services()["settings"]
        if settings.auth_token and request.endpoint not in _PUBLIC_ENDPOINTS:
            header = request.headers.get("Authorization", "")
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token:
                raise Unauthorized("this server needs 'Authorization: Bearer <token>'")
            if not hmac.compare_digest(token.strip().encode(), settings.auth_token.encode()):
                raise Unauthorized("the bearer token is not valid")

    @app.after_request
    def _finish(response: Response) -> Response:
        response.headers["X-Request-ID"] = g.get("request_id", "-")
        endpoint = request.url_rule.rule if request.url_rule is not None else "unmatched"
        elapsed = time.perf_counter() - g.get("t0", time.perf_counter())
        metrics.REQUESTS.labels(endpoint=endpoint, method=request.method, status=str(response.status_code)).inc()
        metrics.REQUEST_SECONDS.labels(endpoint=endpoint).observe(elapsed)
        if endpoint not in ("/ping", "/healthz", "/live", "/metrics"):
            log.info("%s %s -> %d in %.1f ms", request.method, request.path, response.status_code, elapsed * 1e3)
        return response


def _deadline() -> Deadline:
    limit = _services()["settings"].request_deadline_s
    asked = request.headers.get("X-Deadline-Seconds")
    if asked:
        try:
            value = float(asked)
        except ValueError:
            raise BadRequest("X-Deadline-Seconds must be a number of seconds") from None
        if not value > 0:
            raise BadRequest("X-Deadline-Seconds must be > 0")
        limit = min(limit, value)
    elapsed = time.perf_counter() - g.t0
    return Deadline(limit - elapsed)


def _base_url() -> str:
    return request.host_url.rstrip("/")


def _motion_list(raw: list[str] | None) -> list:
    library = _services()["motions"]
    names: list[str] = []
    for item in raw or []:
        names += [n.strip() for n in item.split(",") if n.strip()]
    if not names:
        names = list(_services()["settings"].default_motions)
    unknown = [n for n in names if n not in library]
    if unknown:
        raise UnknownMotion(f"unknown motion(s): {', '.join(unknown)}; GET /motions lists the "
                            f"{len(library)} available")
    seen: dict[str, None] = dict.fromkeys(names)
    return [library[n] for n in seen]


_ABSENT = object()


def _json_field(raw: Any, name: str, shape: str = "") -> Any:
    """A form/JSON field: absent or empty -> _ABSENT; JSON text is decoded; decoded values pass."""
    if raw is None or raw == "":
        return _ABSENT
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            raise BadRequest(f"'{name}' is not valid JSON{shape}") from None
    return raw


def _parse_joints(raw: Any) -> list | None:
    """Client joints: JSON text or an already decoded value, in uploaded-image pixels (see docs)."""
    value = _json_field(raw, "joints")
    if value is _ABSENT:
        return None
    from animator import CharacterError
    from animator.photo_skeleton import skeleton_from_client

    try:
        return skeleton_from_client(value)
    except CharacterError as exc:
        raise BadRequest(f"'joints': {exc.message}") from None


def _parse_bbox(raw: Any) -> list[float] | None:
    """Client box [left, top, right, bottom] in uploaded-image pixels."""
    value = _json_field(raw, "bbox", " ([left, top, right, bottom])")
    if value is _ABSENT:
        return None
    try:
        box = [float(v) for v in value]
    except (TypeError, ValueError):
        box = []
    if len(box) != 4:
        raise BadRequest("'bbox' must be [left, top, right, bottom] in pixels")
    return box


@contextmanager
def _render_slot() -> Iterator[None]:
    """Hold one of the pod's render slots, or answer 503 + Retry-After at once (before reading the body)."""
    services = _services()
    settings = services["settings"]
    slot = services["slots"].try_acquire()
    if slot is None:
        raise Overloaded(f"all {settings.max_inflight} render slots are busy; retry in "
                         f"{settings.retry_after_s} s", settings.retry_after_s)
    metrics.RENDERS_IN_FLIGHT.inc()
    try:
        yield
    finally:
        metrics.RENDERS_IN_FLIGHT.dec()
        slot.release()


def _run(job_kwargs: dict[str, Any]):
    """Run the pipeline (the caller holds a render slot)."""
    job = Job(deadline=job_kwargs.pop("deadline"), base_url=_base_url(), request_id=g.request_id, **job_kwargs)
    log.info("animate motions=%s format=%s bytes=%d client_joints=%s deadline=%.1fs",
             ",".join(m.name for m in job.motions), job.format, len(job.image), job.joints is not None,
             job.deadline.remaining())
    result = _services()["pipeline"].run(job)
    log.info("timings_ms %s", json.dumps(result.timings_ms))
    return result


@api.post("/animate")
def animate():
    """Multipart form: ``image`` (file), optional ``motions``, ``format``, ``joints``, ``bbox``."""
    deadline = _deadline()
    with _render_slot():
        return _animate(deadline)


def _animate(deadline: Deadline):
    upload = request.files.get("image")
    if upload is None:
        if request.mimetype.startswith("image/"):
            image, declared = request.get_data(), request.mimetype
        else:
            raise BadRequest("send the drawing as the multipart form field 'image'")
    else:
        image, declared = upload.read(), upload.mimetype
    if declared and not (declared.startswith("image/") or declared in ("application/octet-stream", "")):
        _reject_if_not_image(image, declared)
    fmt = (request.form.get("format") or _services()["settings"].default_format).lower()
    if fmt not in FORMATS:
        raise BadRequest(f"format must be one of {', '.join(FORMATS)}")
    result = _run({"image": image, "motions": _motion_list(request.form.getlist("motions")), "format": fmt,
                   "joints": _parse_joints(request.form.get("joints")),
                   "bbox": _parse_bbox(request.form.get("bbox")), "deadline": deadline})
    return jsonify(id=result.id, animations=result.animations, character=result.character,
                   timings_ms=result.timings_ms)


def _reject_if_not_image(data: bytes, declared: str) -> None:
    """A part declared as, say, text/plain: accept it only if it really is an image we read."""
    from .jobs import ACCEPTED_FORMATS
    import io
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as im:
            if im.format in ACCEPTED_FORMATS:
                return
    except Exception:
        pass
    raise UnsupportedType(f"uploads of type {declared} are not supported; send PNG, JPEG or WebP")


@api.post("/")
def legacy_animate():
    """The old mobile client: JSON ``{"file": <base64 image>}`` -> flat ``{motion: url}``."""
    deadline = _deadline()
    with _render_slot():
        return _legacy_animate(deadline)


def _legacy_animate(deadline: Deadline):
    body = request.get_json(silent=True)
    if not isinstance(body, dict) or not isinstance(body.get("file"), str):
        raise BadRequest('expected JSON {"file": "<base64 image>"}')
    text = body["file"]
    if text.startswith("data:") and "," in text:  # tolerate data: URLs
        text = text.split(",", 1)[1]
    try:
        image = base64.b64decode(text, validate=False)
    except (binascii.Error, ValueError):
        raise BadRequest("'file' is not valid base64") from None
    settings = _services()["settings"]
    if len(image) > settings.max_upload_mb * 2**20:
        raise TooLarge(f"image over the limit of {settings.max_upload_mb:g} MiB")
    result = _run({"image": image, "motions": _motion_list(None), "format": settings.default_format,
                   "joints": _parse_joints(body.get("joints")), "bbox": _parse_bbox(body.get("bbox")),
                   "deadline": deadline})
    return jsonify(result.animations)


@api.get("/motions")
def list_motions():
    services = _services()
    return jsonify(default=list(services["settings"].default_motions),
                   motions=[m.as_json() for m in services["motions"].values()])


@health.get("/healthz")
def healthz():
    """Liveness: the worker's loop answers. Checks nothing else (a restart would not fix it)."""
    return jsonify(status="alive")


@health.get("/live")
def live():
    return healthz()


@health.get("/ping")
def ping():
    """Readiness: TorchServe models READY, enough free disk, storage reachable. 200 or 503."""
    import gevent

    services = _services()
    settings = services["settings"]
    timeout = settings.ping_timeout_s
    ts = services["torchserve"]
    checks = {
        "detector": gevent.spawn(ts.model_state, settings.detector_model, timeout),
        "pose_estimator": gevent.spawn(ts.model_state, settings.pose_model, timeout),
        "storage": gevent.spawn(services["storage"].check, timeout),
    }
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
        if "ready" in value:
            value = {"ok": value.pop("ready"), **value}
        components[name] = value
    path = services["pipeline"].disk_path()
    free = free_disk_mb(path)
    components["disk"] = {"ok": free >= settings.min_free_disk_mb, "path": path, "free_mb": round(free),
                          "min_free_mb": settings.min_free_disk_mb}
    ok = all(c["ok"] for c in components.values())
    response = jsonify(status="ok" if ok else "unavailable", components=components)
    response.status_code = 200 if ok else 503
    if not ok:
        log.warning("ping unavailable: %s", {k: v.get("detail", v) for k, v in components.items() if not v["ok"]})
    return response


@health.get("/metrics")
def metrics_endpoint():
    body, content_type = metrics.render_latest()
    return Response(body, content_type=content_type)


@files.get("/files/<path:key>")
def get_file(key: str):
    storage = _services()["storage"]
    if not isinstance(storage, LocalStorage):
        raise NotFound("files are served by S3 in this deployment")
    path = storage.path_of(key)
    if path is None:
        raise NotFound(f"no file {key}")
    response = send_file(path, conditional=True, max_age=86400)
    return response
