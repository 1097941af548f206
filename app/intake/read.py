"""The one adapter from a request to its model: ``fields = read(RenderRequest, respond_async=...)``.

A view declares the model it reads with ``@takes(Model)`` (the OpenAPI contract test holds the
document's request body of that route to the model). :func:`read` takes the fields from the body the
model's ``media`` allows (see :mod:`app.intake.models`): a form's text fields and file parts (a
field marked :class:`~app.intake.shapes.Repeated` gets every value), a JSON object (decoded within
:func:`app.intake.body.parse_json`'s bounds), or a raw ``image/*`` body as the field ``image``.
The field types raise the API's own errors (code, status, message) as they parse; what pydantic
itself finds (a missing field, an unknown one) becomes a ``bad_request`` naming the field here.

Call it after the body is in (:func:`app.http.api.read_body`) and before any render slot is taken.
"""
from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any, TypeVar

from flask import current_app, request
from pydantic import ValidationError
from werkzeug.datastructures import FileStorage

from ..errors import BadRequest
from .body import parse_json
from .models import RequestModel
from .shapes import FilePart, Hint, Repeated

M = TypeVar("M", bound=RequestModel)
V = TypeVar("V", bound=Callable[..., Any])


def takes(model: type[RequestModel]) -> Callable[[V], V]:
    """Declare the model a view reads (``view.request_model``)."""
    def mark(view: V) -> V:
        view.request_model = model  # type: ignore[attr-defined]
        return view
    return mark


def read(model: type[M], *, respond_async: bool = False, settings: Any = None) -> M:
    """The request's fields as ``model``, or the API error that says what is wrong with them.

    ``respond_async``: the request is a job (``Prefer: respond-async``, or a route that is always
    one): ``callback_url`` is allowed and a ``bvh`` clip is not. ``settings``: the app's by default
    (``app.config["SETTINGS"]``: intake reads requests and never reaches the services).
    """
    if settings is None:
        settings = current_app.config["SETTINGS"]
    view = current_app.view_functions.get(request.endpoint or "")
    if getattr(view, "request_model", None) is not model:
        raise RuntimeError(f"{request.endpoint} reads {model.__name__} but declares "
                           f"{getattr(view, 'request_model', None)}: add @takes({model.__name__})")
    data = _fields(model, settings)
    try:
        return model.model_validate(data, context={"settings": settings, "respond_async": respond_async})
    except ValidationError as exc:
        raise _refusal(model, exc) from None


def body_limit(settings: Any) -> int:
    """The most bytes the current request's body may have: DOODLEPOD_MAX_JSON_KB for a JSON body
    (fields, not files), DOODLEPOD_MAX_UPLOAD_MB for one that carries a file (a form, a bare image,
    or the JSON of a route whose model says ``image_in_json``: POST /)."""
    upload = int(settings.max_upload_mb * 2**20)
    if not request.is_json:
        return upload
    model = getattr(current_app.view_functions.get(request.endpoint or ""), "request_model", None)
    if model is not None and model.image_in_json:
        return upload
    return min(upload, int(settings.max_json_kb * 1024))


def media_of(mimetype: str, is_json: bool) -> str:
    """Which kind of body a request has: ``json``, ``form``, ``image`` or ``other``."""
    if is_json:  # application/json, or any +json type (e.g. merge-patch+json)
        return "json"
    if mimetype in ("multipart/form-data", "application/x-www-form-urlencoded"):
        return "form"
    return "image" if mimetype.startswith("image/") else "other"


def _fields(model: type[RequestModel], settings: Any) -> dict[str, Any]:
    media = media_of(request.mimetype, request.is_json)
    if media not in model.media:
        return {}  # a body of another type carries no field: the model says what is missing
    if media == "json":
        body = parse_json(request.get_data(), "body", max_bytes=body_limit(settings))
        if not isinstance(body, dict):
            raise BadRequest(f"expected a JSON object {outline(model)}")
        return body
    if media == "image":
        return {"image": FileStorage(io.BytesIO(request.get_data()), content_type=request.mimetype)}
    files = {name for name, field in model.model_fields.items() if _marked(field, FilePart)}
    unknown = set(request.files) - files
    if unknown:
        wanted = " or ".join(f"'{f}'" for f in sorted(files)) or "none"
        raise BadRequest(f"unknown file field(s): {', '.join(sorted(unknown))[:200]}; send {wanted}")
    data: dict[str, Any] = {}
    for name in request.form:
        field = model.model_fields.get(name)
        data[name] = request.form.getlist(name) if field is not None and _marked(field, Repeated) \
            else request.form[name]
    data.update(request.files.items())  # the first part of each name
    return data


def _marked(field: Any, marker: type) -> bool:
    return any(isinstance(m, marker) for m in field.metadata)


def outline(model: type[RequestModel]) -> str:
    """The model's fields as a client would write them: ``{"file", "joints"?, "bbox"?}``."""
    names = [f'"{n}"' + ("" if f.is_required() else "?") for n, f in model.model_fields.items()]
    return "{" + ", ".join(names) + "}"


def _refusal(model: type[RequestModel], exc: ValidationError) -> BadRequest:
    """One ``bad_request`` for what pydantic found (the field types raise their own errors themselves)."""
    errors = exc.errors(include_url=False, include_input=False)
    extra = [str(e["loc"][0])[:40] for e in errors if e["type"] == "extra_forbidden" and e["loc"]]
    if extra:
        return BadRequest(f"unknown field(s): {', '.join(sorted(extra)[:5])}; this request takes "
                          f"{', '.join(model.model_fields)}")
    first = errors[0]
    name = ".".join(str(p) for p in first["loc"])
    field = model.model_fields.get(str(first["loc"][0])) if first["loc"] else None
    hint = next((m.text for m in field.metadata if isinstance(m, Hint)), None) if field is not None else None
    if hint:
        return BadRequest(hint)
    if first["type"] == "missing":
        return BadRequest(f"'{name}' is required: expected {outline(model)}")
    return BadRequest(f"'{name}': {first['msg']}" if name else f"expected {outline(model)}: {first['msg']}")
