"""HTTP endpoints of scenes: POST/GET/PATCH/DELETE /scenes, POST /scenes/{id}/animations.

The steps are in :mod:`app.scenes.resource`; this module reads requests and writes answers. Answers
carrying a document have ``ETag: "<version>"``; PATCH and POST .../animations honour ``If-Match``.
"""
from __future__ import annotations

import logging
from functools import partial
from typing import Any

from flask import Blueprint, Response, jsonify, request

from animator import FORMATS

from ..errors import BadRequest, UnknownMotion
from ..intake.fields import ABSENT, check_field_size, json_field, parse_bbox, parse_joints, parse_max_frames, parse_size
from ..jobs.webhooks import validate_callback_url
from ..scenes.resource import BACKGROUND_KINDS, SceneEdit, TooManyCharacters, parse_colour
from ..services import services
from .animate import read_drawing
from .api import base_url, json_body, read_body, render_slot, request_deadline, request_priority
from .jobs import admit_work, idempotent, submit, wants_async

log = logging.getLogger("doodlepod.http")

bp = Blueprint("scenes", __name__)


def _answer(record, status: int = 200, extra: dict[str, Any] | None = None) -> Response:
    base = base_url()
    storage = services().storage
    body = services().scenes.public(record, request_deadline(), lambda key: storage.url(key, base))
    response = jsonify({**body, **(extra or {})})
    response.status_code = status
    response.headers["ETag"] = f'"{record.version}"'
    response.headers["Cache-Control"] = "no-cache"
    return response


def motion_names(raw: Any, field: str = "motions") -> list[str] | None:
    """Motion names (a list, or text with commas), each in the library; None when absent."""
    if raw is None or raw == [] or raw == "":
        return None
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not all(isinstance(m, str) for m in items):
        raise BadRequest(f"'{field}' must be motion names (GET /motions lists them)")
    names: list[str] = []
    for item in items:
        check_field_size(item, field)
        names += [n.strip() for n in item.split(",") if n.strip()]
    library = services().motions
    unknown = [n for n in names if n not in library]
    if unknown:
        raise UnknownMotion(f"unknown motion(s): {', '.join(repr(n[:40]) for n in unknown[:5])}; "
                            f"GET /motions lists the {len(library)} available")
    return names or None


def _background(raw: Any, upload: bytes | None, has_page: bool, default: str | None) -> dict[str, Any] | None:
    """The ``background`` field: page, none, #rrggbb, or (with an uploaded file) image."""
    if upload is not None:
        if raw not in (None, "", "image"):
            raise BadRequest("send either a 'background' file or a 'background' text, not both")
        return {"kind": "image"}
    if raw in (None, ""):
        return None if default is None else {"kind": default}
    if not isinstance(raw, str):
        raise BadRequest(f"'background' must be one of {', '.join(BACKGROUND_KINDS)} or a colour #rrggbb")
    if raw in ("page", "none"):
        return {"kind": raw}
    if raw == "image":
        raise BadRequest("an image background needs the picture: send it as the multipart file 'background'")
    return {"kind": "colour", "colour": parse_colour(raw)}


def _background_upload(deadline) -> bytes | None:
    """The uploaded background picture, decoded and downsized like a photo (PNG), or None."""
    upload = request.files.get("background")
    if upload is None:
        return None
    data = upload.read()
    if not data:
        raise BadRequest("the 'background' file is empty")
    img = services().pipeline.decode(data, deadline, {})
    return img.png


def _clients(raw: Any) -> list[dict[str, Any]] | None:
    """Client-sent characters ``[{"bbox"?, "joints"?}, ...]`` (image pixels), each checked."""
    value = json_field(raw, "characters")
    if value is ABSENT:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(c, dict) for c in value):
        raise BadRequest("'characters' must be a non-empty list of {\"bbox\"?, \"joints\"?}")
    bound = services().settings.scene_max_characters
    if len(value) > bound:
        raise TooManyCharacters(f"{len(value)} characters sent; a scene holds at most {bound}")
    out = []
    for k, c in enumerate(value):
        unknown = set(c) - {"bbox", "joints"}
        if unknown or not c:
            raise BadRequest(f"'characters[{k}]' takes bbox and/or joints, got {sorted(map(str, c))[:5]}")
        out.append({"bbox": parse_bbox(c.get("bbox")), "joints": parse_joints(c.get("joints"))})
    return out


def _ids(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise BadRequest("'characters' must be a non-empty list of {\"id\", \"motion\"?, \"at\"?}")
    bound = services().settings.scene_max_characters
    if len(value) > bound:
        raise TooManyCharacters(f"{len(value)} characters named; a scene holds at most {bound}")
    return [_character_ref(c, f"characters[{k}]", {"id", "motion", "at"}) for k, c in enumerate(value)]


def _character_ref(c: Any, where: str, allowed: set[str]) -> dict[str, Any]:
    if isinstance(c, str):
        c = {"id": c}
    if not isinstance(c, dict) or not isinstance(c.get("id"), str):
        raise BadRequest(f"'{where}' must be {{\"id\": character id, ...}}")
    unknown = set(c) - allowed
    if unknown:
        raise BadRequest(f"'{where}': unknown field(s) {', '.join(sorted(map(str, unknown))[:5])}; "
                         f"known: {', '.join(sorted(allowed))}")
    out: dict[str, Any] = {"id": c["id"][:64]}
    if "motion" in c:
        names = motion_names(c["motion"], f"{where}.motion")
        if not names or len(names) != 1:
            raise BadRequest(f"'{where}.motion' must be one motion name")
        out["motion"] = names[0]
    if "at" in c:
        out["at"] = _point(c["at"], f"{where}.at")
    if "drop" in c:
        if not isinstance(c["drop"], bool):
            raise BadRequest(f"'{where}.drop' must be true or false")
        out["drop"] = c["drop"]
    return out


def _point(value: Any, where: str) -> list[float] | None:
    import math

    if value is None:
        return None
    ok = isinstance(value, list) and len(value) == 2 and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and abs(v) <= 1e6 for v in value)
    if not ok:
        raise BadRequest(f"'{where}' must be [x, y] (image pixels of the page) or null (where it was drawn)")
    return [float(value[0]), float(value[1])]


@bp.post("/scenes")
def create_scene():
    """Multipart: the photo (``image``) and optionally ``characters`` (JSON: boxes and joints sent by the
    client), ``motions``, ``background`` (text or file). JSON: ``{"characters": [{"id", "motion"?,
    "at"?}], "motions"?, "background"?}`` to make a scene of characters that exist."""
    deadline = request_deadline()
    admit_work()
    read_body(deadline)
    return idempotent(lambda: _create_scene(deadline))


def _create_scene(deadline) -> Response:
    svc = services()
    if request.is_json:
        body = json_body()
        if not isinstance(body, dict):
            raise BadRequest('expected a JSON object {"characters": [{"id", ...}], "motions"?, "background"?}')
        unknown = set(body) - {"characters", "motions", "background"}
        if unknown:
            raise BadRequest(f"unknown field(s): {', '.join(sorted(map(str, unknown))[:5])}")
        ids = _ids(body.get("characters"))
        motions = motion_names(body.get("motions"))
        background = _background(body.get("background"), None, True, "page")
        record = svc.scenes.from_characters(ids, motions, background, None, deadline)
        response = _answer(record, 201)
    else:
        unknown_files = set(request.files) - {"image", "background"}
        if unknown_files:
            raise BadRequest(f"unknown file field(s): {', '.join(sorted(unknown_files))}; send image, background")
        unknown = set(request.form) - {"characters", "motions", "background"}
        if unknown:
            raise BadRequest(f"unknown field(s): {', '.join(sorted(map(str, unknown))[:5])}")
        image = read_drawing()
        clients = _clients(request.form.get("characters"))
        motions = motion_names(request.form.getlist("motions"))
        background = _background(request.form.get("background"), b"" if "background" in request.files else None,
                                 True, "page")
        with render_slot():
            timings: dict[str, float] = {}
            bg_png = _background_upload(deadline)
            record, skipped = svc.scenes.from_photo(image, clients, motions, background, bg_png, deadline, timings)
        response = _answer(record, 201, {"skipped": skipped})
    response.headers["Location"] = f"/scenes/{record.id}"
    return response


@bp.get("/scenes/<sid>")
def get_scene(sid: str):
    record, _ = services().scenes.load(sid, request_deadline())
    return _answer(record)


@bp.patch("/scenes/<sid>")
def edit_scene(sid: str):
    """JSON ``{"characters"?: [{"id", "motion"?, "at"?, "drop"?}], "add"?: [{"id", "motion"?, "at"?}],
    "motion"?, "background"?}``, or multipart with those as text fields and a ``background`` file."""
    deadline = request_deadline()
    admit_work()
    read_body(deadline)
    if request.is_json:
        body = json_body()
        if not isinstance(body, dict):
            raise BadRequest('expected a JSON object {"characters"?, "add"?, "motion"?, "background"?}')
        fields: dict[str, Any] = body
    elif request.mimetype in ("multipart/form-data", "application/x-www-form-urlencoded"):
        fields = {k: json_field(v, k) if k in ("characters", "add") else v for k, v in request.form.items()}
        extra = set(request.files) - {"background"}
        if extra:
            raise BadRequest(f"unknown file field(s): {', '.join(sorted(extra))}; send 'background'")
    else:
        raise BadRequest('send JSON {"characters"?, "add"?, "motion"?, "background"?} or a multipart form')
    unknown = set(fields) - {"characters", "add", "motion", "background"}
    if unknown:
        raise BadRequest(f"unknown field(s): {', '.join(sorted(map(str, unknown))[:5])}; a PATCH takes characters, "
                         "add, motion or background")
    change = SceneEdit()
    if fields.get("characters") is not None:
        if not isinstance(fields["characters"], list):
            raise BadRequest("'characters' must be a list of {\"id\", \"motion\"?, \"at\"?, \"drop\"?}")
        change.characters = [_character_ref(c, f"characters[{k}]", {"id", "motion", "at", "drop"})
                             for k, c in enumerate(fields["characters"])]
    if fields.get("add") is not None:
        if not isinstance(fields["add"], list):
            raise BadRequest("'add' must be a list of {\"id\", \"motion\"?, \"at\"?}")
        change.add = [_character_ref(c, f"add[{k}]", {"id", "motion", "at"}) for k, c in enumerate(fields["add"])]
    if fields.get("motion") is not None:
        names = motion_names(fields["motion"], "motion")
        if not names or len(names) != 1:
            raise BadRequest("'motion' must be one motion name")
        change.motion = names[0]
    upload = request.files.get("background")
    change.background = _background(fields.get("background"), b"" if upload is not None else None, True, None)
    if change.characters is None and change.add is None and change.motion is None and change.background is None:
        raise BadRequest("nothing to change: send characters, add, motion or background")
    if upload is not None:
        with render_slot():
            change.background_png = _background_upload(deadline)
    library = services().motions
    record = services().scenes.edit(sid, change, request.headers.get("If-Match"), lambda m: m in library, deadline)
    return _answer(record)


@bp.delete("/scenes/<sid>")
def delete_scene(sid: str):
    services().scenes.delete(sid, request_deadline())
    return Response(status=204)


@bp.post("/scenes/<sid>/animations")
def animate_scene(sid: str):
    """``format``, ``size`` (the canvas's longer side), ``max_frames``: form fields or JSON. With
    ``Prefer: respond-async``: 202 and a job, optional ``callback_url``."""
    deadline = request_deadline()
    admit_work()
    read_body(deadline)
    svc = services()
    settings = svc.settings
    if request.is_json:
        body = json_body()
        if not isinstance(body, dict):
            raise BadRequest('expected a JSON object {"format"?, "size"?, "max_frames"?}')
        unknown = set(body) - {"format", "size", "max_frames", "callback_url"}
        if unknown:
            raise BadRequest(f"unknown field(s): {', '.join(sorted(map(str, unknown))[:5])}")
        fmt, size, max_frames, callback = body.get("format"), body.get("size"), body.get("max_frames"), \
            body.get("callback_url")
    else:
        form = request.form
        fmt, size, max_frames, callback = form.get("format"), form.get("size"), form.get("max_frames"), \
            form.get("callback_url")
    fmt = str(fmt or settings.default_format).lower()
    if fmt not in FORMATS:
        raise BadRequest(f"format must be one of {', '.join(FORMATS)}")
    if fmt == "glb":
        raise BadRequest("glb holds one character's rigged mesh, not a scene: animate each character as glb "
                         "(POST /characters/{id}/animations), or ask for joints")
    side = parse_size(size, settings)
    frames = parse_max_frames(max_frames, settings)
    if wants_async():
        record, _ = svc.scenes.load(sid, deadline)         # 404 now, not a failed job later
        svc.scenes.plan(record, svc.motions, fmt, side, frames)  # the work bound now: 422, not a failed job
        payload = {"scene": sid, "format": fmt, "size": side, "max_frames": frames,
                   "if_match": request.headers.get("If-Match"), "base_url": base_url()}
        url = validate_callback_url(callback if isinstance(callback, str) else None, settings)
        return submit("scene_animations", payload, None, url)
    if callback:
        raise BadRequest("callback_url needs the header 'Prefer: respond-async'")
    return idempotent(lambda: _animate_scene(sid, fmt, side, frames, deadline))


def _animate_scene(sid: str, fmt: str, side: int, frames: int | None, deadline) -> Response:
    timings: dict[str, float] = {}
    record, out = services().scenes.render(sid, services().motions, fmt, side, frames, request.headers.get("If-Match"),
                                           deadline, timings, base_url(), partial(render_slot, request_priority()))
    response = jsonify(id=record.id, version=record.version, format=fmt, size=side, animation=out["url"],
                       width=out["width"], height=out["height"], cached=out["cached"], timings_ms=timings)
    response.headers["ETag"] = f'"{record.version}"'
    return response
