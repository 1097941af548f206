"""The field types of the scenes' requests (POST/PATCH /scenes, POST /animate's ``every_character``),
in the manner of :mod:`app.intake.shapes`: the schema a client reads and the parser the server runs.

Coordinates are image pixels of the page (see :mod:`app.scenes.resource`).
"""
from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, ValidationInfo, WithJsonSchema

from ..errors import BadRequest, TooManyCharacters
from .bounds import Bound, schema_bounds
from .shapes import (
    _BINARY,
    COMPONENTS,
    FilePart,
    _absent,
    _as_json_text,
    _is_file,
    _json_value,
    _settings,
    named,
    parse_bbox,
    parse_image,
    skeleton_of,
)

CHARACTERS_CAP = Bound("DOODLEPOD_SCENE_MAX_CHARACTERS")
_ID_LENGTH = 64


def _point(value: Any, where: str) -> list[float] | None:
    if value is None:
        return None
    ok = isinstance(value, list) and len(value) == 2 and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and abs(v) <= 1e6 for v in value)
    if not ok:
        raise BadRequest(f"'{where}' must be [x, y] (image pixels of the page) or null (where it was drawn)")
    return [float(value[0]), float(value[1])]


def _motion(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip() or "," in value or len(value) > 200:
        raise BadRequest(f"'{where}' must be one motion name (GET /motions lists them)")
    return value.strip()


def character_ref(c: Any, where: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    """``{"id", "motion"?, "at"?, "drop"?}`` (a bare id is ``{"id"}``), checked; fields outside ``allowed``
    are refused."""
    if isinstance(c, str):
        c = {"id": c}
    if not isinstance(c, dict) or not isinstance(c.get("id"), str):
        raise BadRequest(f"'{where}' must be {{\"id\": character id, ...}}")
    unknown = set(c) - set(allowed)
    if unknown:
        raise BadRequest(f"'{where}': unknown field(s) {', '.join(sorted(map(str, unknown))[:5])}; "
                         f"known: {', '.join(allowed)}")
    out: dict[str, Any] = {"id": c["id"][:_ID_LENGTH]}
    if "motion" in c:
        out["motion"] = _motion(c["motion"], f"{where}.motion")
    if "at" in c:
        out["at"] = _point(c["at"], f"{where}.at")
    for flag in ("drop", "keep_drawing"):
        if flag in c:
            if not isinstance(c[flag], bool):
                raise BadRequest(f"'{where}.{flag}' must be true or false")
            out[flag] = c[flag]
    if out.get("keep_drawing") and not out.get("drop"):
        raise BadRequest(f"'{where}.keep_drawing' goes with drop: true (whether the dropped drawing stays on the page)")
    return out


def _bounded_list(raw: Any, name: str, info: ValidationInfo, shape: str) -> list:
    value = _json_value(raw, name, _settings(info))
    if not isinstance(value, list) or not value:
        raise BadRequest(f"'{name}' must be a non-empty list of {shape}")
    bound = CHARACTERS_CAP.of(_settings(info))
    if len(value) > bound:
        raise TooManyCharacters(f"{len(value)} characters in '{name}'; a scene holds at most {bound}")
    return value


# --- POST /scenes: the characters ----------------------------------------------------------------

class ClientCharacter(BaseModel):
    """A character the client found itself: its box and/or joints, image pixels."""

    model_config = ConfigDict(extra="forbid")
    bbox: Annotated[list[float], Field(json_schema_extra={"x-component": "Box"})] = None  # type: ignore[assignment]
    joints: Annotated[Any, Field(json_schema_extra={"x-component": "Joints"})] = None


class CharacterRef(BaseModel):
    """A character that exists, and its place in the scene."""

    model_config = ConfigDict(extra="forbid")
    id: str
    motion: Annotated[str, Field(json_schema_extra={"x-component": "MotionName"})] = None  # type: ignore[assignment]
    at: Annotated[list[float] | None, Field(min_length=2, max_length=2, description=(
        "The new top-left corner of its box, image pixels of the page; null: where it was drawn."))] = None


def parse_scene_characters(raw: Any, info: ValidationInfo) -> list[dict[str, Any]] | None:
    """A photo's characters sent by the client (``[{"bbox"?, "joints"?}]``), or characters that exist
    (``[id or {"id", "motion"?, "at"?}]``); at most DOODLEPOD_SCENE_MAX_CHARACTERS (422 beyond)."""
    if _absent(raw):
        return None
    value = _bounded_list(raw, "characters", info, '{"bbox"?, "joints"?} or {"id", "motion"?, "at"?}')
    sent = [isinstance(c, dict) and "id" not in c for c in value]
    if all(sent):
        out = []
        for k, c in enumerate(value):
            unknown = set(c) - {"bbox", "joints"}
            if unknown or not c:
                raise BadRequest(f"'characters[{k}]' takes bbox and/or joints, got {sorted(map(str, c))[:5]}")
            out.append({"bbox": parse_bbox(c.get("bbox"), info),
                        "joints": None if _absent(c.get("joints")) else skeleton_of(c["joints"])})
        return out
    if any(sent):
        raise BadRequest("'characters': either boxes and joints found on the photo, or ids of characters, not both")
    return [character_ref(c, f"characters[{k}]", ("id", "motion", "at")) for k, c in enumerate(value)]


_Characters = Annotated[list[ClientCharacter | CharacterRef | str], Field(
    min_length=1, json_schema_extra=schema_bounds(maxItems=CHARACTERS_CAP))]
SceneCharacters = named("SceneCharacters", Annotated[
    list | None, PlainValidator(parse_scene_characters, json_schema_input_type=_Characters | _as_json_text(
        "SceneCharacterList", "The characters")),
    Field(description="With the photo: the characters the client found, `[{\"bbox\"?, \"joints\"?}]` in image "
                      "pixels (without it every detection makes one). Without a photo (JSON): characters that exist, "
                      "`[id or {\"id\", \"motion\"?, \"at\"?}]`. At most `DOODLEPOD_SCENE_MAX_CHARACTERS` "
                      "(422 `too_many_characters`).")])
COMPONENTS["SceneCharacterList"] = _Characters


# --- PATCH /scenes/{sid} -------------------------------------------------------------------------

class CharacterChange(CharacterRef):
    """A character of the scene: a new motion, a new place, or out of the scene."""

    drop: bool = Field(False, description="Take the character out of the scene.")
    keep_drawing: bool = Field(False, description=(
        "With `drop`: its drawing stays on the page background, as drawn (default false: taken out, the paper "
        "filled in). Sent again with `drop` for a character already dropped, it changes that choice."))


def parse_character_changes(raw: Any, info: ValidationInfo) -> list[dict[str, Any]] | None:
    if _absent(raw):
        return None
    value = _bounded_list(raw, "characters", info, '{"id", "motion"?, "at"?, "drop"?, "keep_drawing"?}')
    return [character_ref(c, f"characters[{k}]", ("id", "motion", "at", "drop", "keep_drawing"))
            for k, c in enumerate(value)]


def parse_character_adds(raw: Any, info: ValidationInfo) -> list[dict[str, Any]] | None:
    """Characters joining: existing ones (``{"id", "motion"?, "at"?}``) or new ones cut from the scene's
    own page (``{"bbox", "joints"?, "motion"?}``, image pixels of the page: a drawing the detector missed)."""
    if _absent(raw):
        return None
    value = _bounded_list(raw, "add", info, '{"id", "motion"?, "at"?} or {"bbox", "joints"?, "motion"?}')
    out = []
    for k, c in enumerate(value):
        if isinstance(c, dict) and "id" not in c and "bbox" in c:
            unknown = set(c) - {"bbox", "joints", "motion"}
            if unknown:
                raise BadRequest(f"'add[{k}]': unknown field(s) {', '.join(sorted(map(str, unknown))[:5])}; "
                                 "a new character from the page takes bbox, joints and motion")
            item = {"bbox": parse_bbox(c["bbox"], info),
                    "joints": None if _absent(c.get("joints")) else skeleton_of(c["joints"])}
            if "motion" in c:
                item["motion"] = _motion(c["motion"], f"add[{k}].motion")
            out.append(item)
        else:
            out.append(character_ref(c, f"add[{k}]", ("id", "motion", "at")))
    return out


_Changes = Annotated[list[CharacterChange], Field(json_schema_extra=schema_bounds(maxItems=CHARACTERS_CAP))]
class NewOnPage(BaseModel):
    """A new character cut from the scene's own page: its box and optionally its joints (image pixels of the
    page) and motion."""

    model_config = ConfigDict(extra="forbid")
    bbox: Annotated[list[float], Field(json_schema_extra={"x-component": "Box"})]
    joints: Annotated[Any, Field(json_schema_extra={"x-component": "Joints"})] = None
    motion: Annotated[str, Field(json_schema_extra={"x-component": "MotionName"})] = None  # type: ignore[assignment]


_Adds = Annotated[list[CharacterRef | NewOnPage], Field(json_schema_extra=schema_bounds(maxItems=CHARACTERS_CAP))]
CharacterChanges = Annotated[list | None, PlainValidator(
    parse_character_changes, json_schema_input_type=_Changes | _as_json_text("SceneChanges", "The changes")),
    Field(description="Characters of the scene to change: a motion, `at` (a new top-left corner of the box; null: "
                      "where it was drawn), or `drop`.")]
CharacterAdds = Annotated[list | None, PlainValidator(
    parse_character_adds, json_schema_input_type=_Adds | _as_json_text("SceneAdds", "The characters")),
    Field(description="Characters to put in the scene: ones that exist (`{\"id\", \"motion\"?, \"at\"?}`), or "
                      "new ones cut from the scene's own page (`{\"bbox\", \"joints\"?, \"motion\"?}`, image pixels "
                      "of the page: a drawing the detector missed; without joints the pose model places them).")]
COMPONENTS["SceneChanges"] = _Changes
COMPONENTS["SceneAdds"] = _Adds


def parse_one_motion(raw: Any, info: ValidationInfo) -> str | None:
    if _absent(raw):
        return None
    return _motion(raw, "motion")


OneMotion = Annotated[str | None, PlainValidator(parse_one_motion, json_schema_input_type=str),
                      Field(description="Every character's motion (a motion name of GET /motions).")]


# --- the background ------------------------------------------------------------------------------

def parse_background(raw: Any, info: ValidationInfo) -> dict[str, Any] | None:
    """``page``, ``none``, ``#rrggbb``, or a picture (a file part): ``{"kind", "colour"?, "picture"?}``."""
    if _absent(raw):
        return None
    if _is_file(raw):
        data = raw.read()
        if not data:
            raise BadRequest("the 'background' file is empty")
        return {"kind": "image", "picture": data}
    if raw in ("page", "none"):
        return {"kind": raw}
    if raw == "image":
        raise BadRequest("an image background needs the picture: send it as the multipart file 'background'")
    if isinstance(raw, str) and len(raw) == 7 and raw[0] == "#":
        try:
            v = int(raw[1:], 16)
            return {"kind": "colour", "colour": [(v >> 16) & 255, (v >> 8) & 255, v & 255]}
        except ValueError:
            pass
    raise BadRequest(f"'background' must be page, none, a colour #rrggbb or a picture file, got {str(raw)[:40]!r}")


_BackgroundText = Annotated[str, Field(pattern="^(page|none|#[0-9a-fA-F]{6})$")]
SceneBackground = Annotated[dict | None, PlainValidator(parse_background, json_schema_input_type=_BackgroundText),
                            FilePart(), WithJsonSchema({
                                "anyOf": [{"type": "string", "pattern": "^(page|none|#[0-9a-fA-F]{6})$"}, _BINARY],
                                "description": "`page` (the photo with the characters taken out and the paper filled "
                                               "in), `none` (transparent), a colour `#rrggbb`, or a picture (a "
                                               "multipart file)."})]


# --- POST /animate's opt-in ----------------------------------------------------------------------

def parse_every_character(raw: Any, info: ValidationInfo) -> bool:
    if _absent(raw):
        return False
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise BadRequest(f"'every_character' must be true or false, got {text[:20]!r}")


#: Most motions a POST /animate with ``every_character`` may name: each is a scene render of every
#: character, one after the other under one render slot.
EVERY_CHARACTER_MOTIONS = Bound("DOODLEPOD_SCENE_MAX_MOTIONS")

EveryCharacter = Annotated[bool, PlainValidator(parse_every_character, json_schema_input_type=Literal[
    "true", "false", "1", "0", "yes", "no"]), Field(description=(
        "true: every character of the photo together on its page (a scene, see POST /scenes), each animation with "
        "every character doing that motion; the answer also lists `characters` and `skipped`. No joints, bbox or "
        "bvh with it; at most `x-max-motions` motions (422 `too_many_motions`). Default false: the answer is as "
        "without it."), json_schema_extra=schema_bounds(**{"x-max-motions": EVERY_CHARACTER_MOTIONS}))]


# --- the photo -----------------------------------------------------------------------------------

def parse_optional_image(raw: Any, info: ValidationInfo) -> bytes | None:
    """The photo of POST /scenes (a file part), or None: a JSON request names characters that exist."""
    if _absent(raw):
        return None
    return parse_image(raw, info)


SceneImage = Annotated[bytes | None, PlainValidator(parse_optional_image), FilePart(),
                       WithJsonSchema({"x-component": "ImageFile"})]
