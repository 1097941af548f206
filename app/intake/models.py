"""What each route takes: one pydantic model per request body, read by :func:`app.intake.read.read`.

A model is the one source of a request's shape: the route's view declares it (``@takes(Model)``),
the adapter validates the request's form or JSON body with it, and :func:`components` generates the
schemas that the OpenAPI document's request bodies refer to (JSON Schema 2020-12, as OpenAPI 3.1
takes it). The fields are the types of :mod:`app.intake.shapes`; a model adds what concerns several
fields at once (``start_frame`` needs a ``bvh``; MP4 needs an even size).

``media`` says which bodies carry the fields: ``form`` (multipart or urlencoded: a form's text
fields and file parts), ``json`` (an object), ``image`` (a raw ``image/*`` body is the ``image``
field). A body of another type carries no field.
"""
from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationInfo, model_validator
from pydantic.json_schema import GenerateJsonSchema, models_json_schema

from ..errors import BadRequest, TooManyMotions
from .bounds import Bound, schema_bounds
from .scene_shapes import (
    EVERY_CHARACTER_MOTIONS,
    CharacterAdds,
    CharacterChanges,
    EveryCharacter,
    OneMotion,
    SceneBackground,
    SceneCharacters,
    SceneImage,
)
from .shapes import (
    COMPONENTS,
    VIDEO_SECONDS,
    Base64Image,
    Bbox,
    BvhFile,
    CallbackUrl,
    Format,
    FrameIndex,
    ImageFile,
    JointMoves,
    Joints,
    MaskFile,
    MaxFrames,
    Motions,
    RenderSize,
    VideoEnd,
    VideoFile,
    VideoStart,
)

#: Where the document keeps the schemas (``components.schemas``).
REF = "#/components/schemas/{model}"


class RequestModel(BaseModel):
    """A request's fields, validated and converted: what the route's code reads."""

    model_config = ConfigDict(extra="ignore", frozen=True, arbitrary_types_allowed=True)
    #: The bodies that carry the fields (see the module's text).
    media: ClassVar[tuple[str, ...]] = ("form",)
    #: A JSON body of this request carries an image (base64): it may be as large as an upload
    #: (DOODLEPOD_MAX_UPLOAD_MB); any other JSON body is bounded by DOODLEPOD_MAX_JSON_KB.
    image_in_json: ClassVar[bool] = False


def _frames_need_a_clip(fields: AnimateForm | RenderRequest) -> None:
    if fields.bvh is None and (fields.start_frame is not None or fields.end_frame is not None):
        raise BadRequest("'start_frame' and 'end_frame' select frames of an uploaded 'bvh' clip; none was sent")


def _mp4_needs_an_even_size(fields: AnimateForm | SceneRenderRequest | RenderRequest) -> None:
    if fields.format == "mp4" and fields.size % 2:  # H.264 in yuv420p: whole 2x2 chroma blocks
        raise BadRequest(f"MP4 needs an even size, got {fields.size}")


class AnimateForm(RequestModel):
    """POST /animate: the drawing and what to make of it (a multipart form, or the bare image);
    ``every_character`` opts in to every character of the photo together (a scene)."""

    media = ("form", "image")
    image: ImageFile
    motions: Motions = []
    format: Format = Field(None, validate_default=True)
    size: RenderSize = Field(None, validate_default=True)
    joints: Joints = None
    bbox: Bbox = None
    bvh: BvhFile = None
    start_frame: FrameIndex = None
    end_frame: FrameIndex = None
    callback_url: CallbackUrl = ""
    every_character: EveryCharacter = False

    @model_validator(mode="after")
    def _checks(self, info: ValidationInfo) -> AnimateForm:
        if self.every_character:
            most = int(EVERY_CHARACTER_MOTIONS.of((info.context or {})["settings"]))
            named = len(dict.fromkeys(self.motions))
            if named > most:
                raise TooManyMotions(f"every_character renders every character once per motion, one motion after "
                                     f"the other: at most {most} motions (DOODLEPOD_SCENE_MAX_MOTIONS), {named} "
                                     "named; send the others in requests of their own")
        if self.every_character and (self.joints is not None or self.bbox is not None or self.bvh is not None):
            raise BadRequest("every_character finds every character itself: send no joints, bbox or bvh with it "
                             "(POST /scenes takes the boxes and joints of several characters)")
        if self.every_character and self.format == "glb":
            raise BadRequest("glb holds one character's rig: it cannot hold every character of the photo")
        _frames_need_a_clip(self)
        _mp4_needs_an_even_size(self)
        return self


class SceneForm(RequestModel):
    """POST /scenes: the photo (a multipart form) and optionally the characters the client found on it; or
    (JSON) characters that exist. ``motions``: one for all, or one per character; ``background``: text or a
    picture file."""

    model_config = ConfigDict(extra="forbid")
    media = ("form", "json")
    image: SceneImage = None
    characters: SceneCharacters = None
    motions: Motions = []
    background: SceneBackground = None

    @model_validator(mode="after")
    def _photo_or_characters(self) -> SceneForm:
        if self.image is None:
            if not self.characters or "id" not in self.characters[0]:
                raise BadRequest("send the photo as the multipart field 'image' (and optionally the characters "
                                 "found on it), or JSON {\"characters\": [character ids]}")
        elif self.characters and "id" in self.characters[0]:
            raise BadRequest("with a photo, 'characters' are the boxes and joints found on it, not ids")
        return self


class SceneEdit(RequestModel):
    """PATCH /scenes/{sid}: at least one of ``characters`` (changes), ``add``, ``motion``, ``background``."""

    model_config = ConfigDict(extra="forbid")
    media = ("json", "form")
    characters: CharacterChanges = None
    add: CharacterAdds = None
    motion: OneMotion = None
    background: SceneBackground = None

    @model_validator(mode="after")
    def _one_change(self) -> SceneEdit:
        if self.characters is None and self.add is None and self.motion is None and self.background is None:
            raise BadRequest("nothing to change: send characters, add, motion or background")
        return self


class SceneRenderRequest(RequestModel):
    """POST /scenes/{sid}/animations: the file to make (``size``: the canvas's longer side)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "description": "The render's work (characters x frames x canvas pixels) is at most `x-max-work-mpx` "
                       "million (422 `scene_too_large`).", **schema_bounds(**{
                           "x-max-work-mpx": Bound("DOODLEPOD_SCENE_MAX_WORK_MPX")})})
    media = ("json", "form")
    format: Format = Field(None, validate_default=True)
    size: RenderSize = Field(None, validate_default=True)
    max_frames: MaxFrames = None
    callback_url: CallbackUrl = ""

    @model_validator(mode="after")
    def _checks(self) -> SceneRenderRequest:
        if self.format == "glb":
            raise BadRequest("glb holds one character's rigged mesh, not a scene: animate each character as glb "
                             "(POST /characters/{id}/animations), or ask for joints")
        _mp4_needs_an_even_size(self)
        return self


class LegacyRequest(RequestModel):
    """POST /: the old mobile client's JSON."""

    media = ("json",)
    image_in_json = True
    file: Base64Image
    joints: Joints = None
    bbox: Bbox = None


class VideoForm(RequestModel):
    """POST /motions: a video of a person, for a motion of the client's own."""

    video: VideoFile
    start: VideoStart = None
    end: VideoEnd = None
    callback_url: CallbackUrl = ""

    @model_validator(mode="after")
    def _window_fits(self, info: ValidationInfo) -> VideoForm:
        """What can be checked without the video: the end after the start, the window within the limit
        (a start past the video's end is the job's to find)."""
        start, end = self.start or 0.0, self.end
        if end is None:
            return self
        if end <= start:
            raise BadRequest(f"'end' ({end:g} s) must come after 'start' ({start:g} s)")
        limit = float(VIDEO_SECONDS.of((info.context or {})["settings"]))
        if end - start > limit + 1e-6:
            raise BadRequest(f"the window {start:g}-{end:g} s is {end - start:.2f} s long; at most {limit:g} s of a "
                             "video are used (DOODLEPOD_VIDEO_MAX_SECONDS): choose a shorter window")
        return self


class CharacterForm(RequestModel):
    """POST /characters: the drawing (a multipart form, or the bare image), optionally with the character's
    joints and box."""

    media = ("form", "image")
    image: ImageFile
    joints: Joints = None
    bbox: Bbox = None


class CharacterEdit(RequestModel):
    """PATCH /characters/{cid}: at least one of `bbox`, `joints` and `mask` (a file: multipart only), no other
    field; a new `bbox` and a `mask` go in two requests (the box makes a new texture grid)."""

    model_config = ConfigDict(extra="forbid")
    media = ("json", "form")
    bbox: Bbox = None
    joints: JointMoves = None
    mask: MaskFile = None

    @model_validator(mode="after")
    def _one_change(self) -> CharacterEdit:
        if self.bbox is None and self.joints is None and self.mask is None:
            raise BadRequest("nothing to change: send bbox, joints or a mask")
        if self.bbox is not None and self.mask is not None:
            raise BadRequest("a new bbox makes a new texture grid: send the bbox first, then a mask of the new "
                             "texture's size")
        return self


class RenderRequest(RequestModel):
    """POST /characters/{cid}/animations: what to render (JSON, or a form that may carry a `bvh` clip)."""

    media = ("json", "form")
    motions: Motions = []
    format: Format = Field(None, validate_default=True)
    size: RenderSize = Field(None, validate_default=True)
    max_frames: MaxFrames = None
    bvh: BvhFile = None
    start_frame: FrameIndex = None
    end_frame: FrameIndex = None
    callback_url: CallbackUrl = ""

    @model_validator(mode="after")
    def _checks(self) -> RenderRequest:
        _frames_need_a_clip(self)
        _mp4_needs_an_even_size(self)
        return self


#: Every request model, in the order the document lists them.
MODELS: tuple[type[RequestModel], ...] = (AnimateForm, LegacyRequest, VideoForm, CharacterForm, CharacterEdit,
                                          RenderRequest, SceneForm, SceneEdit, SceneRenderRequest)


class _Schemas(GenerateJsonSchema):
    """JSON Schema 2020-12 without pydantic's titles (the component's name is its title)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def components() -> dict[str, Any]:
    """The request schemas of the document (``components.schemas``), generated from the models and
    the named field types, with bounds at the settings' defaults (``x-bounds`` marks them)."""
    from .bounds import default_settings, resolve

    out: dict[str, Any] = {}
    for name, tp in COMPONENTS.items():
        schema = TypeAdapter(tp).json_schema(ref_template=REF, schema_generator=_Schemas)
        out.update(schema.pop("$defs", {}))
        out[name] = schema
    _, top = models_json_schema([(m, "validation") for m in MODELS], ref_template=REF, schema_generator=_Schemas)
    out.update(top.get("$defs", {}))
    out = {name: _tidy(schema) for name, schema in out.items()}
    used = {*COMPONENTS, *(m.__name__ for m in MODELS), *re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(out))}
    return resolve({name: schema for name, schema in out.items() if name in used},  # not a type a marker hid
                   default_settings())


def _tidy(node: Any) -> Any:
    """Markers become references; titles and defaults go (defaults are settings: the prose names them)."""
    if isinstance(node, list):
        return [_tidy(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _tidy(v) for k, v in node.items() if k not in ("title", "default")}
    if "x-component" in out:  # the type's own keywords are in its component
        return {"$ref": REF.format(model=out["x-component"])}
    return out
