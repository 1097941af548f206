"""The field types of requests: each one the schema a client reads and the parser the server runs.

Every type is ``Annotated[<what it becomes>, PlainValidator(<parser>, json_schema_input_type=<what
a client sends>), ...]``: the OpenAPI document's schema of the field is generated from the input
type (and the bounds, see :mod:`app.intake.bounds`), and the parser turns what came (a form's text,
or a JSON body's value) into what the routes use, raising the API's own errors (:mod:`app.errors`):
``bad_request``, ``too_large``, ``invalid_character``, ... with messages that name the field.
The parsers read the running settings from the validation context (:mod:`app.intake.read`).

A type :func:`named` becomes a component of the document (``#/components/schemas/<name>``) that
the request models (:mod:`app.intake.models`) and the written responses refer to.

Coordinates are image pixels (see :mod:`app.coordinates`).
"""
from __future__ import annotations

import base64
import binascii
import io
import math
import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, ValidationInfo, WithJsonSchema

from animator import FORMATS

from ..errors import BadMask, BadRequest, InvalidMotion, TooLarge, UnsupportedType, animator_boundary
from ..jobs.webhooks import callback_syntax
from .body import MAX_JSON_DEPTH, parse_json
from .bounds import Bound, schema_bounds
from .bvh import Clip

#: Largest ``max_frames`` a client may ask for when DOODLEPOD_RENDER_MAX_FRAMES sets no cap.
MAX_FRAMES_LIMIT = 10_000

FIELD_SIZE = Bound("DOODLEPOD_MAX_FIELD_KB")
SIZE_LOW, SIZE_HIGH = Bound("DOODLEPOD_RENDER_SIZE_MIN"), Bound("DOODLEPOD_RENDER_SIZE_MAX")
FRAMES_CAP = Bound("DOODLEPOD_RENDER_MAX_FRAMES or app.intake.shapes:MAX_FRAMES_LIMIT")
JOINTS_CAP, JOINT_NAME_CAP = Bound("animator.character:MAX_JOINTS"), Bound("animator.character:MAX_JOINT_NAME")

#: Component name -> the type whose schema it holds (filled by :func:`named`).
COMPONENTS: dict[str, Any] = {}


def named(name: str, tp: Any) -> Any:
    """``tp``, shown in the document as ``{"$ref": "#/components/schemas/<name>"}``.

    (pydantic resolves every ``$ref`` it writes itself, so the reference is written as a marker
    that :func:`app.intake.models.components` turns into one.)
    """
    COMPONENTS[name] = tp
    return Annotated[tp, WithJsonSchema({"x-component": name})]


class Repeated:
    """Marks a field a form may repeat (``motions=dab&motions=zombie``): the parser gets every value."""


class FilePart:
    """Marks a field a multipart form sends as a file part."""


class Hint:
    """What a client is told when the field is missing or not of its type."""

    def __init__(self, text: str) -> None:
        self.text = text


def _settings(info: ValidationInfo) -> Any:
    return (info.context or {})["settings"]


def _asked_async(info: ValidationInfo) -> bool:
    return bool((info.context or {}).get("respond_async"))


def _absent(raw: Any) -> bool:
    return raw is None or raw == "" or raw == []


def check_field_size(text: str, name: str, settings: Any) -> None:
    """413 ``too_large`` when the field ``name`` is over DOODLEPOD_MAX_FIELD_KB."""
    limit = FIELD_SIZE.of(settings)
    if len(text) > limit:
        raise TooLarge(f"'{name}' is over the limit of {limit / 1024:g} KiB")


def _json_value(raw: Any, name: str, settings: Any) -> Any:
    """A field holding JSON: a form's JSON text is decoded within :func:`app.intake.body.parse_json`'s bounds
    and DOODLEPOD_MAX_FIELD_KB; a JSON body's value (bounded already) passes."""
    if isinstance(raw, str):
        check_field_size(raw, name, settings)
        return parse_json(raw, name)
    return raw


def _is_number(value: Any) -> bool:
    """A JSON number (not a boolean, not a numeric string)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _text(raw: Any, name: str) -> str:
    if not isinstance(raw, str):
        raise BadRequest(f"'{name}' must be text, got {type(raw).__name__}")
    return raw


# --- motions and formats -------------------------------------------------------------------------

def parse_motions(raw: Any, info: ValidationInfo) -> list[str]:
    """Motion names: one text or a list of them, each one name or a comma-separated list (duplicates
    are dropped where the names are looked up: :func:`app.motions.library.pick`)."""
    if _absent(raw):
        return []
    items = [raw] if isinstance(raw, str) else raw
    if not (isinstance(items, list) and all(isinstance(m, str) for m in items)):
        raise BadRequest("'motions' must be a list of motion names (GET /motions lists them)")
    names: list[str] = []
    for item in items:
        check_field_size(item, "motions", _settings(info))
        names += [n.strip() for n in item.split(",") if n.strip()]
    return names


_MotionText = Annotated[str, Field(json_schema_extra=schema_bounds(maxLength=FIELD_SIZE))]
Motions = named("MotionList", Annotated[
    list[str], PlainValidator(parse_motions, json_schema_input_type=_MotionText | list[_MotionText]),
    Repeated(),
    Field(description="Motion names (GET /motions), one per item or comma-separated; a form repeats the field. "
                      "Default `DOODLEPOD_DEFAULT_MOTIONS`; the client's own clip is `upload`.")])


def parse_format(raw: Any, info: ValidationInfo) -> str:
    if _absent(raw):
        return str(_settings(info).default_format)
    fmt = _text(raw, "format").lower()
    if fmt not in FORMATS:
        raise BadRequest(f"format must be one of {', '.join(FORMATS)}")
    return fmt


Format = named("Format", Annotated[str, PlainValidator(parse_format, json_schema_input_type=str), Field(
    description="The animation's file format (case-insensitive); default `DOODLEPOD_DEFAULT_FORMAT`. Besides "
                "`gif`, `webp` and `mp4`, the exports for makers: `apng` (animated PNG with alpha), `webm` (VP9 "
                "with alpha), `frames` (zip of RGBA PNG frames and frames.json), `sheet` (zip of a sprite sheet "
                "and its JSON Hash atlas), `joints` (per-frame joint positions, JSON) and `glb` (the rigged "
                "character as glTF 2.0 binary). Still one URL per motion.",
    json_schema_extra=schema_bounds(enum=Bound("animator.formats:FORMATS")))])


# --- numbers -------------------------------------------------------------------------------------

#: A form's numbers: ASCII digits only. ``str.isdigit`` and ``int``/``float`` also take other scripts'
#: digits (``１０２４``), superscripts (``²``, which ``int`` then refuses in its own words), ``1_000``.
_WHOLE = re.compile(r"-?[0-9]{1,15}")
_DECIMAL = re.compile(r"-?(?:[0-9]{1,15}(?:\.[0-9]{0,15})?|\.[0-9]{1,15})")


def _number(raw: Any, fraction: bool = False) -> int | float | None:
    """A JSON number or a form's ASCII decimal (a sign allowed, so that a negative one is refused by its
    bound's message); None for anything else (a bool, other digits, exponents, underscores). ``-0``
    is 0."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int) or (fraction and isinstance(raw, float)):
        return raw + 0 if isinstance(raw, int) else raw + 0.0
    if isinstance(raw, str) and (_DECIMAL if fraction else _WHOLE).fullmatch(text := raw.strip()):
        return float(text) + 0.0 if fraction else int(text)
    return None


def _whole(raw: Any) -> int | None:
    """An integer from a JSON number or a form's ASCII digits (never a bool, a fraction or a sign)."""
    if isinstance(raw, str) and raw.strip().startswith("-"):
        return None
    return _number(raw)


def parse_size(raw: Any, settings: Any) -> int:
    """The ``size`` of a render request: an integer within the settings' bounds (default DOODLEPOD_RENDER_SIZE)."""
    lo, hi = SIZE_LOW.of(settings), SIZE_HIGH.of(settings)
    if _absent(raw):
        return int(min(max(settings.render_size, lo), hi))
    value = _whole(raw)
    if value is None:
        raise BadRequest(f"'size' must be an integer number of pixels, got {str(raw)[:40]!r}")
    if not lo <= value <= hi:
        raise BadRequest(f"'size' must be from {lo} to {hi} pixels, got {value}")
    return value


def parse_max_frames(raw: Any, settings: Any) -> int | None:
    """The optional ``max_frames`` of a render request: None when absent, else an integer from 1 to
    DOODLEPOD_RENDER_MAX_FRAMES (when that setting caps every animation; else :data:`MAX_FRAMES_LIMIT`)."""
    if _absent(raw):
        return None
    value = _whole(raw)
    hi = FRAMES_CAP.of(settings)
    if value is None or not 1 <= value <= hi:
        raise BadRequest(f"'max_frames' must be an integer from 1 to {hi}, got {str(raw)[:40]!r}")
    return value


RenderSize = named("RenderSize", Annotated[
    int, PlainValidator(lambda raw, info: parse_size(raw, _settings(info)), json_schema_input_type=int),
    Field(description="Width and height of the animation in pixels (even for MP4); default `DOODLEPOD_RENDER_SIZE`.",
          json_schema_extra=schema_bounds(minimum=SIZE_LOW, maximum=SIZE_HIGH))])
MaxFrames = named("MaxFrames", Annotated[
    int | None, PlainValidator(lambda raw, info: parse_max_frames(raw, _settings(info)), json_schema_input_type=int),
    Field(description="The whole clip in at most this many frames (a quick preview, cached apart); at most "
                      "`DOODLEPOD_RENDER_MAX_FRAMES` when that caps every animation.",
          json_schema_extra={"minimum": 1, **schema_bounds(maximum=FRAMES_CAP)})])


def parse_frame_index(raw: Any, info: ValidationInfo) -> int | None:
    name = info.field_name
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    value = _number(raw)
    if value is None:
        raise BadRequest(f"'{name}' must be a whole number of BVH frames, got {str(raw)[:40]!r}")
    if value < 0:
        raise BadRequest(f"'{name}' must be >= 0, got {value}")
    return value


FrameIndex = named("FrameIndex", Annotated[
    int | None, PlainValidator(parse_frame_index, json_schema_input_type=Annotated[int, Field(ge=0)]),
    Field(description="A BVH frame of the uploaded clip (`start_frame` is the first used, `end_frame` one past the "
                      "last); only with `bvh`.")])


# --- joints and boxes ----------------------------------------------------------------------------

Point = named("Point", Annotated[tuple[float, float], Field(description="[x, y] in image pixels: x right, y down.")])
JointName = named("JointName", Annotated[str, Field(
    min_length=1, json_schema_extra=schema_bounds(maxLength=JOINT_NAME_CAP))])


class SkeletonJoint(BaseModel):
    """One joint of a `char_cfg.yaml` skeleton list."""

    model_config = ConfigDict(title="SkeletonJoint")
    name: JointName
    loc: Point
    parent: str | None = None


Skeleton = named("Skeleton", Annotated[list[SkeletonJoint], Field(
    json_schema_extra=schema_bounds(maxItems=JOINTS_CAP))])


class SkeletonObject(BaseModel):
    model_config = ConfigDict(title="SkeletonObject")
    skeleton: Skeleton


_NAMES = {"propertyNames": {"x-component": "JointName"}}
_JointMap = Annotated[dict[JointName, Point], Field(json_schema_extra={
    **_NAMES, **schema_bounds(maxProperties=JOINTS_CAP)})]
JointsValue = named("Joints", Annotated[_JointMap | Skeleton | SkeletonObject, Field(
    description="Client joints: the 16 AnimatedDrawings joint names -> [x, y], or a `char_cfg.yaml` skeleton "
                "list (or `{\"skeleton\": [...]}`), in the uploaded image's pixels. At most 128 joints; as JSON, "
                f"nested at most {MAX_JSON_DEPTH} deep, numbers at most 32 characters and finite.",
    json_schema_extra=schema_bounds(**{"x-max-depth": Bound("app.intake.body:MAX_JSON_DEPTH"),
                                       "x-max-number-chars": Bound("app.intake.body:MAX_NUMBER_CHARS")}))])


def _as_json_text(of: str, what: str) -> Any:
    """A field holding the JSON text of the component ``of``."""
    return Annotated[str, Field(description=f"{what} as JSON text (a form field), at most `DOODLEPOD_MAX_FIELD_KB`.",
                                json_schema_extra={**schema_bounds(maxLength=FIELD_SIZE),
                                                   "contentMediaType": "application/json",
                                                   "contentSchema": {"x-component": of}})]


def skeleton_of(value: Any) -> list:
    """The skeleton of decoded client joints; joints that make none are ``invalid_character`` (422)."""
    from animator.skeleton import skeleton_from_client

    from .. import coordinates

    with animator_boundary():
        joints = skeleton_from_client(value)
    coordinates.check_spread(joints)  # 422 now, before a render slot (the image's bounds are checked once decoded)
    return joints


def parse_joints(raw: Any, info: ValidationInfo) -> list | None:
    """Client joints (their JSON text, or a JSON body's value) -> the skeleton (a list of joints)."""
    if _absent(raw):
        return None
    return skeleton_of(_json_value(raw, "joints", _settings(info)))


Joints = Annotated[list | None, PlainValidator(parse_joints, json_schema_input_type=JointsValue
                                                | _as_json_text("Joints", "The joints"))]

_Moves = Annotated[dict[JointName, Point], Field(min_length=1, json_schema_extra={
    **_NAMES, **schema_bounds(maxProperties=JOINTS_CAP)})]


def parse_joint_moves(raw: Any, info: ValidationInfo) -> dict[str, tuple[float, float]] | list | None:
    """PATCH joints: a mapping ``{name: [x, y]}`` moves the joints it names (any subset); a skeleton
    list (``[{"name", "loc", "parent"}]``) replaces the skeleton."""
    if _absent(raw):
        return None
    value = _json_value(raw, "joints", _settings(info))
    if not (isinstance(value, dict) and "skeleton" not in value):
        return skeleton_of(value)
    moves: dict[str, tuple[float, float]] = {}
    for name, xy in value.items():
        # exactly two JSON numbers: not "12" (two digits), ["1", "2"], [true, false] or [449, "278"],
        # which float() would take and POST /animate refuses
        if not (isinstance(xy, list) and len(xy) == 2 and all(_is_number(v) for v in xy)):
            raise BadRequest(f"'joints.{name}': expected [x, y] numbers, got {xy!r}"[:200])
        x, y = float(xy[0]), float(xy[1])
        if not (math.isfinite(x) and math.isfinite(y)):
            raise BadRequest(f"'joints.{name}': coordinates must be finite numbers")
        moves[str(name)] = (x, y)
    if not moves:
        raise BadRequest("'joints' is empty")
    return moves


JointMoves = Annotated[Any, PlainValidator(parse_joint_moves, json_schema_input_type=_Moves | Skeleton
                                           | _as_json_text("JointMoves", "The moves or the skeleton")),
                       Field(description="`{name: [x, y]}` moves the joints it names (any subset); a skeleton "
                                         "list replaces the skeleton.")]
COMPONENTS["JointMoves"] = _Moves | Skeleton

Box = named("Box", Annotated[list[float], Field(
    min_length=4, max_length=4, description="[left, top, right, bottom] in image pixels; four finite numbers.")])


def parse_bbox(raw: Any, info: ValidationInfo) -> list[float] | None:
    """Client box [left, top, right, bottom] in uploaded-image pixels (its JSON text, or a JSON body's value)."""
    if _absent(raw):
        return None
    value = _json_value(raw, "bbox", _settings(info))
    try:
        box = [float(v) for v in value] if isinstance(value, list) and all(_is_number(v) for v in value) else []
    except (TypeError, ValueError, OverflowError):
        box = []
    if len(box) != 4 or not all(math.isfinite(v) for v in box):
        raise BadRequest("'bbox' must be [left, top, right, bottom]: four finite numbers, in pixels")
    return box


Bbox = Annotated[list[float] | None, PlainValidator(parse_bbox, json_schema_input_type=Box
                                                    | _as_json_text("Box", "The box"))]


# --- callbacks -----------------------------------------------------------------------------------

def parse_callback(raw: Any, info: ValidationInfo) -> str:
    """The async job's callback URL ('' if none): only with ``Prefer: respond-async``, its text checked
    by :func:`app.jobs.webhooks.callback_syntax` (400); the address it names is checked when the job is
    submitted (app/http/jobs.py: DNS, the egress rules, the client's lookup share)."""
    if raw is None or raw == "":
        return ""
    url = _text(raw, "callback_url")
    if not _asked_async(info):
        raise BadRequest("callback_url needs the header 'Prefer: respond-async'")
    return callback_syntax(url, _settings(info))


_Url = Annotated[str, Field(json_schema_extra={
    "format": "uri", **schema_bounds(maxLength=Bound("app.jobs.webhooks:MAX_URL_LENGTH"))})]
CallbackUrl = named("CallbackUrl", Annotated[str, PlainValidator(parse_callback, json_schema_input_type=_Url),
    Field(description="With `Prefer: respond-async` only, and only when the server has `DOODLEPOD_WEBHOOK_SECRET`: "
                      "an http(s) URL that gets the signed job record when the job ends.")])


# --- files ---------------------------------------------------------------------------------------

_BINARY: dict[str, Any] = {"type": "string", "format": "binary"}


def _is_file(raw: Any) -> bool:
    return hasattr(raw, "stream") and hasattr(raw, "mimetype")


def parse_image(raw: Any, info: ValidationInfo) -> bytes:
    """The drawing's bytes; a part declared as some other type (text/plain, ...) is taken only if
    it really is an image we read (415 otherwise). Decoding and the pixel bound come later."""
    if not _is_file(raw):
        raise BadRequest("send the drawing as the multipart form field 'image'")
    data, declared = raw.read(), raw.mimetype
    if declared and not (declared.startswith("image/") or declared in ("application/octet-stream", "")):
        _reject_if_not_image(data, declared)
    return data


def _reject_if_not_image(data: bytes, declared: str) -> None:
    from PIL import Image

    from ..images import ACCEPTED_FORMATS, ACCEPTED_TEXT

    try:
        with Image.open(io.BytesIO(data)) as im:
            if im.format in ACCEPTED_FORMATS:
                return
    except Exception:
        pass
    raise UnsupportedType(f"uploads of type {declared} are not supported; send {ACCEPTED_TEXT}")


_PIXELS = schema_bounds(**{"x-max-pixels": Bound("DOODLEPOD_MAX_IMAGE_PIXELS")})
ImageFile = named("ImageFile", Annotated[bytes, PlainValidator(parse_image), FilePart(), Hint(
    "send the drawing as the multipart form field 'image'"), WithJsonSchema({
        **_BINARY, "description": "The drawing (PNG, JPEG, WebP or HEIC/HEIF; EXIF orientation honoured), at most "
        "`DOODLEPOD_MAX_IMAGE_PIXELS` pixels (checked from the header, before decoding; 413 beyond).", **_PIXELS})])


def parse_base64_image(raw: Any, info: ValidationInfo) -> bytes:
    """The old client's image: base64 text (a ``data:`` URL tolerated), at most DOODLEPOD_MAX_UPLOAD_MB."""
    if not isinstance(raw, str):
        raise BadRequest('expected JSON {"file": "<base64 image>"}')
    text = raw.split(",", 1)[1] if raw.startswith("data:") and "," in raw else raw
    try:
        image = base64.b64decode(text, validate=False)
    except (binascii.Error, ValueError):
        raise BadRequest("'file' is not valid base64") from None
    settings = _settings(info)
    if len(image) > settings.max_upload_mb * 2**20:
        raise TooLarge(f"image over the limit of {settings.max_upload_mb:g} MiB")
    return image


Base64Image = Annotated[bytes, PlainValidator(parse_base64_image), Hint('expected JSON {"file": "<base64 image>"}'),
                        WithJsonSchema({"type": "string", "contentEncoding": "base64",
                                        "description": "The image, base64 (or a `data:` URL)."})]


def parse_bvh(raw: Any, info: ValidationInfo) -> Clip | None:
    """The ``bvh`` clip: a file part or a text field; its size bounded now, its content later."""
    if raw is None or (isinstance(raw, str) and not raw):
        return None
    if _asked_async(info):
        raise BadRequest("a 'bvh' clip cannot be sent with 'Prefer: respond-async'; send it synchronously")
    settings = _settings(info)
    limit = int(settings.bvh_max_mb * 2**20)
    if _is_file(raw):
        data, name = raw.stream.read(limit + 1), raw.filename
    else:
        data, name = _text(raw, "bvh").encode(), None
    if len(data) > limit:
        raise TooLarge(f"'bvh' is over the limit of {settings.bvh_max_mb:g} MiB (DOODLEPOD_BVH_MAX_MB)")
    if not data.strip():
        raise InvalidMotion("field 'bvh': the file is empty")
    if b"\0" in data:
        raise InvalidMotion("field 'bvh': not a text file (a BVH clip starts with HIERARCHY)")
    return Clip(str(name or "").rsplit("/", 1)[-1] or "bvh", data)


BvhFile = named("BvhFile", Annotated[Clip | None, PlainValidator(parse_bvh), FilePart(), WithJsonSchema({
    **_BINARY, "description": "The client's own motion-capture clip (a file, or its text), in any common joint naming "
    "(no retarget config needed), at most `DOODLEPOD_BVH_MAX_MB` (413 beyond), `DOODLEPOD_BVH_MAX_JOINTS` joints, "
    "`DOODLEPOD_BVH_MAX_FRAMES` frames and, from `start_frame` to `end_frame`, `DOODLEPOD_BVH_MAX_SECONDS` (422 "
    "`invalid_motion` beyond). Synchronous requests only.",
    **schema_bounds(**{"x-max-bytes": Bound("DOODLEPOD_BVH_MAX_MB"), "x-max-joints": Bound("DOODLEPOD_BVH_MAX_JOINTS"),
                       "x-max-frames": Bound("DOODLEPOD_BVH_MAX_FRAMES"),
                       "x-max-seconds": Bound("DOODLEPOD_BVH_MAX_SECONDS")})})])


def parse_video(raw: Any, info: ValidationInfo) -> bytes:
    """The ``video`` part: 413 over DOODLEPOD_VIDEO_MAX_MB, 415 if not an MP4, MOV or WebM file."""
    from .video import looks_like_video

    if not _is_file(raw):
        raise BadRequest("send the video as the multipart form field 'video' (MP4, MOV or WebM)")
    limit = int(_settings(info).video_max_mb * 2**20)
    data = raw.stream.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(f"the video is over the limit of {limit / 2**20:g} MiB")
    if not looks_like_video(data):
        raise UnsupportedType("field 'video': not an MP4, MOV or WebM file")
    return data


VideoFile = Annotated[bytes, PlainValidator(parse_video), FilePart(), Hint(
    "send the video as the multipart form field 'video' (MP4, MOV or WebM)"), WithJsonSchema({
        **_BINARY, "description": "A video of one person (MP4, MOV or WebM), at most `DOODLEPOD_VIDEO_MAX_MB` "
        "(413 beyond). At most `DOODLEPOD_VIDEO_MAX_SECONDS` of it are used: `start` and `end` choose which; "
        "without them its first seconds (the job's `motion.window` says which part was used).",
        **schema_bounds(**{"x-max-bytes": Bound("DOODLEPOD_VIDEO_MAX_MB"),
                           "x-max-seconds": Bound("DOODLEPOD_VIDEO_MAX_SECONDS")})})]


def parse_seconds(raw: Any, info: ValidationInfo) -> float | None:
    """``start`` / ``end`` of a video's window: seconds into the video, 0 or more; None when absent."""
    name = info.field_name
    if _absent(raw):
        return None
    value = _number(raw, fraction=True)
    if value is None:
        raise BadRequest(f"'{name}' must be a number of seconds, got {str(raw)[:40]!r}")
    if not (math.isfinite(value) and value >= 0):
        raise BadRequest(f"'{name}' must be 0 or more seconds, got {str(raw)[:40]}")
    return value


VIDEO_SECONDS = Bound("DOODLEPOD_VIDEO_MAX_SECONDS")
VideoStart = named("VideoStart", Annotated[
    float | None, PlainValidator(parse_seconds, json_schema_input_type=float),
    Field(description="The second of the video the motion starts at (default 0). A start after the video's end "
                      "fails the job 422 `invalid_video`.", json_schema_extra={"minimum": 0})])
VideoEnd = named("VideoEnd", Annotated[
    float | None, PlainValidator(parse_seconds, json_schema_input_type=float),
    Field(description="The second it ends at (default `DOODLEPOD_VIDEO_MAX_SECONDS` after the start, or the "
                      "video's end); `end - start` at most `DOODLEPOD_VIDEO_MAX_SECONDS` (400 beyond).",
          json_schema_extra={"exclusiveMinimum": 0})])


def parse_mask(raw: Any, info: ValidationInfo) -> bytes | None:
    if raw is None:
        return None
    if not _is_file(raw):
        raise BadRequest("'mask' must be a PNG file part of a multipart form")
    data = raw.read()
    if not data:
        raise BadMask("the mask file is empty")
    return data


MaskFile = Annotated[bytes | None, PlainValidator(parse_mask), FilePart(), WithJsonSchema({
    **_BINARY, "contentMediaType": "image/png", "description": "A PNG of the texture's size (`texture.width` x "
    "`texture.height`), white (above 127) on the character; a multipart form's file."})]
