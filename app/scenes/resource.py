"""Scenes: every character of one photo, animated together where they were drawn, on their page.

A scene is a document ``scenes/<id>/scene.json`` plus files under ``scene-files/<files key>/`` (the
page: the photo's work image; an uploaded background; ``r<N>-<hex>/anim/...`` the renders of version
N). Its characters are ordinary characters (app/characters/resource.py): made from the photo's
detections, from boxes and joints a client sent, or named by id; each can be fixed through
``PATCH /characters/{id}`` as usual, and a scene render always uses each character's current version.

Coordinates: the API speaks the page's *image pixels* (the uploaded photo after EXIF orientation).
A character stands where it was drawn (its texture's box on its own photo) unless the scene moved it
(``at``: its box's new top-left corner, image pixels of the page). Renders happen in the page's
*work pixels* (``work = image * page_scale``), see :mod:`animator.page_scene`.

The page background (kind ``page``) takes every drawing out *where it was drawn*, wherever its
character stands now: each character's entry says whether it was drawn on this page (``drawn``: made
from this scene's photo, or an existing character whose photo is this page) and a dropped character's
drawing is taken out too unless the PATCH that dropped it kept it (``keep_drawing``; the scene's
``dropped`` list keeps its mask and place, copied, so it does not depend on the character living on).

Edits are atomic as characters' are: a PATCH writes version + 1 only if the document is unchanged
since it was read (``If-Match`` for the client's own check).
"""
from __future__ import annotations

import json
import logging
import math
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .. import documents
from ..characters.resource import REAPPLY, check_version, new_id, valid_id
from ..characters.resource import Record as CharacterRecord
from ..deadline import Deadline
from ..documents import JsonDocument
from ..errors import (
    ApiError,
    BadRequest,
    ClientError,
    EditConflict,
    NotFound,
    RenderTooLarge,
    SceneTooLarge,
    TooManyCharacters,
    VersionMismatch,
)
from ..orders import AnimateOrder, SceneOrder
from ..render.pipeline import expected_frames, file_suffix, progress_report
from ..render.sheet_price import check_sheet
from ..storage.backends import Conflict
from .detections import keep

if TYPE_CHECKING:
    from animator.api import RenderOptions

log = logging.getLogger("doodlepod.scenes")

PREFIX = "scenes/"
FILES_PREFIX = "scene-files/"
DOCUMENT = "scene.json"
EDIT_TRIES = 3


def colour_text(rgb: list[int]) -> str:
    return "#" + "".join(f"{int(c):02x}" for c in rgb)


@dataclass
class SceneRecord(JsonDocument):
    """The stored document (the public one is :meth:`Scenes.public`)."""

    id: str
    version: int
    created_at: float
    expires_at: float
    image: dict[str, int]                 # the page: the uploaded photo's width, height (image pixels)
    page_scale: float                     # work pixels of the stored page per image pixel
    characters: list[dict[str, Any]]      # [{"id": character id, "motion": name, "at": [x, y] | None}]
    background: dict[str, Any]            # {"kind": page|colour|image|none, "colour"?: [r, g, b]}
    files: dict[str, str]                 # page, background (uploaded picture) -> storage key
    files_key: str
    rev: str                              # this version's renders folder
    detections: list[dict[str, Any]] = field(default_factory=list)  # [{"bbox" (image px), "score", "kept"}]
    #: characters dropped from the scene that were drawn on its page: [{"id", "mask" (storage key of a copy),
    #: "origin" (work px), "scale", "size" [w, h] texture px, "kept": the drawing stays on the page}]
    dropped: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class SceneEdit:
    """What a PATCH changes (None: unchanged)."""

    characters: list[dict[str, Any]] | None = None  # [{"id", "motion"?, "at"? ([x, y] or None: as drawn), "drop"?}]
    add: list[dict[str, Any]] | None = None         # [{"id", "motion"?, "at"?}]: existing characters joining
    motion: str | None = None                       # every character's motion
    background: dict[str, Any] | None = None        # {"kind", "colour"?}
    background_png: bytes | None = None             # an uploaded picture (kind image)


def drawn_here(entry: dict[str, Any]) -> bool:
    """Whether a scene's character entry was drawn on the scene's page (documents before the flag: yes)."""
    return bool(entry.get("drawn", True))


def _placement(page: SceneRecord, char: CharacterRecord, at: list[float] | None) -> tuple[list[float], float]:
    """(origin, scale) of a character's texture on the page's work pixels (see the module docstring)."""
    k_char, k_page = char.work_scale, page.page_scale
    scale = k_page / k_char                              # page work px per texture px
    if at is not None:
        origin = [at[0] * k_page, at[1] * k_page]
    else:                                                # where it was drawn on its own photo
        origin = [char.box[0] / k_char * k_page, char.box[1] / k_char * k_page]
    return origin, scale


class Scenes:
    """The scenes API's steps over the characters' steps, the pipeline and the storage."""

    def __init__(self, settings, pipeline, storage, characters) -> None:
        self.settings = settings
        self.pipeline = pipeline
        self.storage = storage
        self.characters = characters

    # -- storage ------------------------------------------------------------------------------
    def _key(self, sid: str) -> str:
        return f"{PREFIX}{sid}/{DOCUMENT}"

    def _file_key(self, record: SceneRecord, name: str) -> str:
        return f"{FILES_PREFIX}{record.files_key}/{name}"

    def load(self, sid: str, deadline: Deadline) -> tuple[SceneRecord, str]:
        key = self._key(sid) if valid_id(sid) else None
        return documents.load(self.storage, key, SceneRecord, f"scene {sid[:64]}", deadline)

    def _new(self, img: Any, page_png: bytes, characters: list[dict[str, Any]], background: dict[str, Any],
             background_png: bytes | None, detections: list[dict[str, Any]], deadline: Deadline) -> SceneRecord:
        now = time.time()
        record = SceneRecord(id=new_id(), version=1, created_at=now,
                             expires_at=now + self.settings.expiry_hours * 3600,
                             image={"width": int(img[0]), "height": int(img[1])}, page_scale=float(img[2]),
                             characters=characters, background=background, files={}, files_key=new_id(),
                             rev=f"r1-{uuid.uuid4().hex[:8]}", detections=detections)
        record.files["page"] = self._file_key(record, "page.png")
        self.storage.put(record.files["page"], page_png, "image/png", deadline)
        if background_png is not None:
            record.files["background"] = self._file_key(record, f"background-{uuid.uuid4().hex[:8]}.png")
            self.storage.put(record.files["background"], background_png, "image/png", deadline)
        self.storage.put_if(self._key(record.id), record.to_json(), "application/json", deadline, None)
        log.info("scene %s created: %d characters, background %s", record.id, len(characters), background["kind"])
        return record

    # -- create -------------------------------------------------------------------------------
    def _motions_for(self, n: int, motions: list[str] | None) -> list[str]:
        """Each character's motion: the one asked for all, one per character, or the default motions in turn."""
        if motions and len(motions) not in (1, n):
            raise BadRequest(f"'motions': one for every character or one each ({n}), got {len(motions)}")
        if motions:
            return motions * n if len(motions) == 1 else list(motions)
        defaults = list(self.settings.default_motions)
        return [defaults[i % len(defaults)] for i in range(n)]

    def from_photo(self, image: bytes, clients: list[dict[str, Any]] | None, motions: list[str] | None,
                   background: dict[str, Any], background_png: bytes | None, deadline: Deadline,
                   timings: dict[str, float], found: list[str] | None = None
                   ) -> tuple[SceneRecord, list[dict[str, Any]]]:
        """A scene from a photo: every detection (above the score threshold, after non-maximum
        suppression, at most DOODLEPOD_SCENE_MAX_CHARACTERS) or every client-sent ``{"bbox"?,
        "joints"?}`` becomes a character. Returns the scene and the detections that made none
        (``{"bbox", "score", "reason"}``: overlap, limit, or the error that stopped it). ``found``
        collects the codes of the ink finders that found the boxes or joints (no trained models)."""
        s = self.settings
        img = self.pipeline.decode(image, deadline, timings)
        made: list[CharacterRecord] = []
        skipped: list[dict[str, Any]] = []
        detections: list[dict[str, Any]] = []
        if clients is not None:
            for c in clients:
                made.append(self.characters.create_on(img, c.get("joints"), c.get("bbox"), deadline, timings))
        else:
            boxes = self.pipeline.detect(img, deadline, timings, found)   # NoCharacter (422) when none
            boxes = boxes[:1] + [d for d in boxes[1:] if d.score >= s.scene_min_score]
            kept, dropped = keep(boxes, s.scene_max_overlap, s.scene_max_characters)
            detections = [{"bbox": [round(v / img.scale, 1) for v in d.box], "score": round(float(d.score), 4),
                           "kept": d in kept} for d in sorted(boxes, key=lambda d: -d.score)]
            skipped += [{"bbox": [round(v / img.scale, 1) for v in d.box], "score": round(float(d.score), 4),
                         "reason": why} for d, why in dropped]
            first_error: ApiError | None = None
            for d in kept:
                try:
                    made.append(self.characters.create_on(img, None, None, deadline, timings, detection=d,
                                                          found=found))
                except ClientError as exc:   # e.g. no skeleton in that box: the others still make a scene
                    first_error = first_error or exc
                    skipped.append({"bbox": [round(v / img.scale, 1) for v in d.box],
                                    "score": round(float(d.score), 4), "reason": exc.code})
            if not made:
                raise first_error or NotFound("no character could be made from the photo")
        names = self._motions_for(len(made), motions)
        chars = [{"id": r.id, "motion": m, "at": None, "drawn": True} for r, m in zip(made, names)]
        record = self._new((img.image_size[0], img.image_size[1], img.scale), img.png, chars, background,
                           background_png, detections, deadline)
        return record, skipped

    def from_characters(self, ids: list[dict[str, Any]], motions: list[str] | None, background: dict[str, Any],
                        background_png: bytes | None, deadline: Deadline) -> SceneRecord:
        """A scene of existing characters (``[{"id", "motion"?, "at"?}]``); the page is the first one's photo."""
        if len({c["id"] for c in ids}) != len(ids):
            raise BadRequest("'characters': each character once (a scene shows every character where it was drawn)")
        records = [self.characters.load(c["id"], deadline)[0] for c in ids]
        first = records[0]
        page_png = self.characters._get(first, "image", deadline)
        names = self._motions_for(len(ids), motions)
        chars = [{"id": r.id, "motion": c.get("motion") or m, "at": c.get("at"),
                  "drawn": k == 0 or self._same_photo(r, page_png, deadline)}
                 for k, (r, c, m) in enumerate(zip(records, ids, names))]
        size = (first.image["width"], first.image["height"], first.work_scale)
        return self._new(size, page_png, chars, background, background_png, [], deadline)

    def _same_photo(self, char: CharacterRecord, page_png: bytes, deadline: Deadline) -> bool:
        """Whether ``char`` was cut from the photo whose work image is ``page_png`` (the same stored bytes)."""
        return self.characters._get(char, "image", deadline) == page_png

    # -- read ---------------------------------------------------------------------------------
    def public(self, record: SceneRecord, deadline: Deadline, url: Callable[[str], str]) -> dict[str, Any]:
        """The document clients see: each character with its box on the page (image pixels) and links."""
        chars = []
        for c in record.characters:
            entry: dict[str, Any] = {"id": c["id"], "motion": c["motion"], "moved": c.get("at") is not None}
            try:
                ch, _ = self.characters.load(c["id"], deadline)
            except NotFound:
                entry["missing"] = True
                chars.append(entry)
                continue
            origin, scale = _placement(record, ch, c.get("at"))
            k = record.page_scale
            w, h = ch.texture_size
            entry["bbox"] = [round(origin[0] / k, 1), round(origin[1] / k, 1), round((origin[0] + scale * w) / k, 1),
                             round((origin[1] + scale * h) / k, 1)]
            entry["version"] = ch.version
            entry["urls"] = {name: url(ch.files[name]) for name in ("texture", "mask", "overlay")}
            chars.append(entry)
        bg = dict(record.background)
        if "colour" in bg:
            bg["colour"] = colour_text(bg["colour"])
        if "background" in record.files and bg["kind"] == "image":
            bg["url"] = url(record.files["background"])
        k = record.page_scale
        dropped = [{"id": d["id"], "drawing": "kept" if d["kept"] else "taken out",
                    "bbox": [round(d["origin"][0] / k, 1), round(d["origin"][1] / k, 1),
                             round((d["origin"][0] + d["scale"] * d["size"][0]) / k, 1),
                             round((d["origin"][1] + d["scale"] * d["size"][1]) / k, 1)]} for d in record.dropped]
        return {"id": record.id, "version": record.version, "created_at": documents.iso(record.created_at),
                "expires_at": documents.iso(record.expires_at), "image": dict(record.image), "characters": chars,
                "dropped": dropped, "background": bg, "detections": list(record.detections),
                "urls": {"page": url(record.files["page"])}}

    # -- edit ---------------------------------------------------------------------------------
    def edit(self, sid: str, change: SceneEdit, if_match: str | None, motions_known: Callable[[str], bool],
             deadline: Deadline) -> SceneRecord:
        """Apply ``change`` as version + 1. New characters from the page (``add`` items with a ``bbox``) are
        made first (once, not per try of the document's swap); the caller holds a render slot for them."""
        if any("bbox" in item for item in change.add or []):
            change.add = self._made_on_page(sid, change.add or [], if_match, deadline)
        for _ in range(EDIT_TRIES):
            record, tag = self.load(sid, deadline)
            check_version(if_match, "scene", sid, record.version, REAPPLY)
            new = self._apply(record, change, motions_known, deadline)
            try:
                self.storage.put_if(self._key(sid), new.to_json(), "application/json", deadline, tag)
            except Conflict:
                if if_match is not None:
                    raise VersionMismatch(f"scene {sid} changed while this edit ran; GET it again") from None
                continue
            return new
        raise EditConflict(f"scene {sid} is being edited by others; retry")

    def _made_on_page(self, sid: str, items: list[dict[str, Any]], if_match: str | None,
                      deadline: Deadline) -> list[dict[str, Any]]:
        """``add`` with each ``{"bbox", "joints"?}`` item made into a character cut from the scene's page
        (``{"id", "motion"?, "drawn": True}``). The bounds are checked before any is made."""
        record, _ = self.load(sid, deadline)
        check_version(if_match, "scene", sid, record.version, REAPPLY)
        if len(record.characters) + len(items) > self.settings.scene_max_characters:
            raise TooManyCharacters(f"a scene holds at most {self.settings.scene_max_characters} characters")
        page_png = self.storage.get(record.files["page"], deadline)
        timings: dict[str, float] = {}
        img = self.pipeline.decode(page_png, deadline, timings)
        # the page is the photo's work image: the characters speak the photo's image pixels, as its others do
        img = replace(img, image_size=(record.image["width"], record.image["height"]),
                      scale=record.page_scale * img.scale, png=page_png if img.scale == 1.0 else img.png)
        out = []
        for item in items:
            if "bbox" not in item:
                out.append(item)
                continue
            made = self.characters.create_on(img, item.get("joints"), item["bbox"], deadline, timings)
            log.info("scene %s: character %s cut from its page, box %s", sid, made.id, made.box)
            out.append({"id": made.id, "drawn": True, **({"motion": item["motion"]} if "motion" in item else {})})
        return out

    def _apply(self, old: SceneRecord, change: SceneEdit, motions_known: Callable[[str], bool],
               deadline: Deadline) -> SceneRecord:
        rev = f"r{old.version + 1}-{uuid.uuid4().hex[:8]}"
        new = SceneRecord(**{**asdict(old), "version": old.version + 1, "rev": rev,
                             "characters": [dict(c) for c in old.characters], "files": dict(old.files),
                             "dropped": [dict(d) for d in old.dropped]})
        for name, items in (("characters", change.characters), ("add", change.add)):
            ids = [item["id"] for item in items or []]
            twice = next((i for n, i in enumerate(ids) if i in ids[:n]), None)
            if twice is not None:   # a second add would put it in twice, a second drop remove it twice
                raise BadRequest(f"'{name}': character {str(twice)[:40]} is named twice")
        by_id = {c["id"]: c for c in new.characters}
        gone = {d["id"]: d for d in new.dropped}
        for item in change.characters or []:
            c = by_id.get(item["id"])
            if c is None and item["id"] in gone and item.get("drop"):   # dropped already: the drawing's choice
                gone[item["id"]]["kept"] = bool(item.get("keep_drawing", False))
                continue
            if c is None:
                raise BadRequest(f"'characters': scene {old.id} has no character {str(item['id'])[:40]}")
            if item.get("drop"):
                new.characters.remove(c)
                if drawn_here(c):
                    new.dropped.append(self._dropped_drawing(new, c["id"], bool(item.get("keep_drawing", False)),
                                                             deadline))
                continue
            if "motion" in item:
                c["motion"] = item["motion"]
            if "at" in item:
                c["at"] = item["at"]
        for item in change.add or []:
            if item["id"] in by_id:
                raise BadRequest(f"'add': character {item['id']} is already in the scene")
            joining, _ = self.characters.load(item["id"], deadline)           # 404 now
            back = gone.pop(item["id"], None)
            if back is not None:
                new.dropped.remove(back)
            drawn = item.get("drawn") or back is not None or self._same_photo(
                joining, self.storage.get(new.files["page"], deadline), deadline)
            new.characters.append({"id": item["id"], "motion": item.get("motion") or self.settings.default_motions[0],
                                   "at": item.get("at"), "drawn": drawn})
        if change.motion is not None:
            for c in new.characters:
                c["motion"] = change.motion
        for c in new.characters:
            if not motions_known(c["motion"]):
                raise BadRequest(f"unknown motion {c['motion'][:40]!r}; GET /motions lists them")
        if not new.characters:
            raise BadRequest("a scene keeps at least one character: DELETE the scene instead")
        if len(new.characters) > self.settings.scene_max_characters:
            raise TooManyCharacters(f"a scene holds at most {self.settings.scene_max_characters} characters")
        if change.background is not None:
            new.background = change.background
            if change.background_png is not None:
                new.files["background"] = self._file_key(new, f"background-{uuid.uuid4().hex[:8]}.png")
                self.storage.put(new.files["background"], change.background_png, "image/png", deadline)
            elif change.background["kind"] == "image" and "background" not in new.files:
                raise BadRequest("an image background needs the picture: send it as the multipart file 'background'")
        return new

    def _dropped_drawing(self, record: SceneRecord, cid: str, kept: bool, deadline: Deadline) -> dict[str, Any]:
        """A dropped character's drawing as the scene keeps it: its mask copied into the scene's files and
        where it was drawn (work pixels of the page)."""
        try:
            ch, _ = self.characters.load(cid, deadline)
        except NotFound:
            raise NotFound(f"character {cid} of scene {record.id} no longer exists: its drawing cannot be found "
                           "on the page") from None
        origin, scale = _placement(record, ch, None)
        key = self._file_key(record, f"dropped-{cid}-v{ch.version}.png")
        self.storage.put(key, self.characters._get(ch, "mask", deadline), "image/png", deadline)
        return {"id": cid, "mask": key, "origin": origin, "scale": scale, "size": list(ch.texture_size), "kept": kept}

    def delete(self, sid: str, deadline: Deadline) -> int:
        record, _ = self.load(sid, deadline)
        count = self.storage.delete_prefix(f"{PREFIX}{sid}/", deadline)
        count += self.storage.delete_prefix(self._file_key(record, ""), deadline)
        return count

    # -- render -------------------------------------------------------------------------------
    def plan(self, record: SceneRecord, library: dict[str, Any], order: SceneOrder) -> RenderOptions:
        """The render's options (canvas of the page's shape, longer side ``order.size``), checked against
        the work bound: characters x frames x canvas pixels (raises :class:`SceneTooLarge`)."""
        from dataclasses import replace

        from animator.page_scene import canvas_size

        page_w = max(1, round(record.image["width"] * record.page_scale))
        page_h = max(1, round(record.image["height"] * record.page_scale))
        width, height = canvas_size((page_w, page_h), order.size)
        options = replace(self.pipeline.render_options(order.format, order.size, order.max_frames),
                          width=width, height=height)
        fps = options.fps
        seconds = max(float(getattr(library[c["motion"]], "seconds", 0.0) or 10.0) for c in record.characters)
        frames = math.ceil(seconds * (fps if isinstance(fps, float) else 120.0))
        if options.max_frames:
            frames = min(frames, int(options.max_frames))
        work = len(record.characters) * frames * width * height
        bound = self.settings.scene_max_work_mpx * 1e6
        if work > bound:
            raise SceneTooLarge(f"this render would draw {len(record.characters)} characters x {frames} frames x "
                                f"{width}x{height} pixels = {work / 1e6:.0f} megapixel-frames, over the bound of "
                                f"{bound / 1e6:.0f}: ask for fewer frames (max_frames), a smaller size, or fewer "
                                "characters")
        check_sheet(order.format, {"the scene": frames}, (width, height))   # 422 output_too_large now
        return options

    def check_price(self, record: SceneRecord, chars: list[CharacterRecord], options: RenderOptions) -> None:
        """Refuse, before any work, a render whose characters drawn at their canvas scale pass the
        animator's sprite bound (422 ``scene_too_large``) or whose memory passes what one render process
        may use (422 ``render_too_large``): :mod:`app.scenes.price`."""
        from animator.rasterize import MAX_SPRITE_TEXELS

        from .price import price

        page = (max(1, round(record.image["width"] * record.page_scale)),
                max(1, round(record.image["height"] * record.page_scale)))
        textures = [((int(ch.texture_size[0]), int(ch.texture_size[1])), _placement(record, ch, c.get("at"))[1])
                    for c, ch in zip(record.characters, chars)]
        cost = price(textures, page, (options.width, options.height), options.max_frames or 0)
        for ch, texels in zip(chars, cost.texels):
            if texels > MAX_SPRITE_TEXELS:
                raise SceneTooLarge(f"character {ch.id} would be drawn with {texels / 1e6:.0f} million texels at this "
                                    f"scene's scale (its photo's pixels are much smaller than the page's), over the "
                                    f"bound of {MAX_SPRITE_TEXELS / 1e6:.1f} million per character: ask for a smaller "
                                    "size, or place it on a page of its own photo")
        limit = self.pipeline.pool.memory_limit_mb
        if limit and cost.memory_mb > limit:
            raise RenderTooLarge(f"this render would need about {cost.memory_mb:.0f} MiB ({sum(cost.texels) / 1e6:.1f} "
                                 f"million texels drawn), over the {limit:.0f} MiB a render process may use "
                                 "(DOODLEPOD_RENDER_PROCESS_MEMORY_MB): ask for a smaller size or fewer characters")

    def animation_key(self, record: SceneRecord, options: RenderOptions) -> str:
        """Where this version's render with ``options`` is stored (the name carries everything it depends
        on but the characters' versions, which :meth:`render` folds in)."""
        return self._file_key(record, f"{record.rev}/anim/scene-{options.width}x{options.height}-"
                                      f"{self.pipeline.file_tag(options)}.{file_suffix(options.format)}")

    def render(self, order: SceneOrder, library: dict[str, Any], deadline: Deadline, timings: dict[str, float],
               slot: Callable[[], AbstractContextManager[Any]],
               progress: Callable[[dict[str, Any]], None] | None = None,
               motion: str | None = None) -> tuple[SceneRecord, dict[str, Any]]:
        """The URL of the scene's animation (stored: at once; else rendered in one render process while
        holding ``slot()``); ``motion``: every character does this one instead of its own. Returns the
        record and ``{"url", "cached", "width", "height"}`` (and ``frames``, ``duration_s`` when rendered)."""
        from ..render import scene_steps

        sid, base_url = order.scene, order.base_url
        record, _ = self.load(sid, deadline)
        check_version(order.if_match, "scene", sid, record.version)
        if motion is not None:
            record.characters = [{**c, "motion": motion} for c in record.characters]
        unknown = [c["motion"] for c in record.characters if c["motion"] not in library]
        if unknown:
            raise BadRequest(f"motion(s) no longer in the library: {', '.join(unknown)}; PATCH the scene")
        options = self.plan(record, library, order)
        chars = []
        for c in record.characters:
            try:
                chars.append(self.characters.load(c["id"], deadline)[0])
            except NotFound:
                raise NotFound(f"character {c['id']} of scene {sid} no longer exists (deleted or expired); "
                               "PATCH the scene to drop it") from None
        # the name folds in each character's version and motion (a character fixed since, or a motion
        # given for this render only, renders anew)
        import hashlib

        given = hashlib.sha256(json.dumps([[ch.version, c["motion"], getattr(library[c["motion"]], "sha256", "")]
                                           for c, ch in zip(record.characters, chars)]).encode()).hexdigest()[:12]
        key = self.animation_key(record, options).replace("/anim/scene-", f"/anim/scene-{given}-")
        info = {"width": options.width, "height": options.height}
        if self.storage.exists(key, deadline):
            return record, {**info, "url": self.storage.url(key, base_url), "cached": True}
        self.check_price(record, chars, options)
        self.pipeline.check_disk()
        with slot() as held:
            payload = []
            for c, ch in zip(record.characters, chars):
                origin, scale = _placement(record, ch, c.get("at"))
                motion = library[c["motion"]]
                payload.append({"texture": self.characters._get(ch, "texture", deadline),
                                "mask": self.characters._get(ch, "mask", deadline), "joints": ch.joints(),
                                "origin": origin, "scale": scale, "motion": str(motion.motion_cfg),
                                "retarget": None if motion.retarget_cfg is None else str(motion.retarget_cfg),
                                "name": ch.id, "drawn_at": _placement(record, ch, None)[0] if drawn_here(c) else None})
            bg = record.background
            taken_out = [{"mask": self.storage.get(d["mask"], deadline), "origin": d["origin"], "scale": d["scale"]}
                         for d in record.dropped if not d["kept"]] if bg["kind"] == "page" else []
            page_png = self.storage.get(record.files["page"], deadline) if bg["kind"] == "page" else None
            bg_png = self.storage.get(record.files["background"], deadline) if bg["kind"] == "image" else None
            page_size = (max(1, round(record.image["width"] * record.page_scale)),
                         max(1, round(record.image["height"] * record.page_scale)))
            t0 = time.perf_counter()
            job = self.pipeline.pool.submit(scene_steps.render_scene, payload, page_png, page_size, bg, bg_png, options,
                                            taken_out)
            interrupt = getattr(held, "check", None)

            # the scene lasts as long as its longest clip: a total known before the render reports its own
            clips = [expected_frames(library[c["motion"]], options) for c in record.characters]
            expected = {"scene": None if None in clips else max(clips, default=None)}

            def tick() -> None:
                if interrupt is not None:
                    interrupt()
                if progress is not None:
                    progress(progress_report("rendering", [("scene", None, job)], expected))

            try:
                if progress is not None:
                    progress(progress_report("rendering", [("scene", None, job)], expected))
                out = self.pipeline.pool.wait(job, deadline, "animate:scene",
                                              tick if progress is not None or interrupt is not None else None)
            except BaseException:
                self.pipeline.pool.abandon([job])
                raise
            timings["animate:scene"] = round((time.perf_counter() - t0) * 1e3, 1)
            log.info("stage=animate:scene ms=%.1f frames=%d bytes=%d detail=%s", timings["animate:scene"],
                     out["frame_count"], len(out["data"]), {k: round(v, 1) for k, v in out["timings_ms"].items()})
            if progress is not None:
                progress(progress_report("storing", [("scene", out["frame_count"], job)]))
            self.storage.put(key, out["data"], out["mime"], deadline)
        return record, {**info, "url": self.storage.url(key, base_url), "cached": False,
                        "frames": out["frame_count"], "duration_s": round(out["duration_s"], 3)}

    # -- the mobile contract's opt-in ---------------------------------------------------------
    def animate_photo(self, order: AnimateOrder, image: bytes, library: dict[str, Any], deadline: Deadline,
                      timings: dict[str, float],
                      progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """POST /animate with ``every_character``: a scene of every character in the photo, rendered once
        per motion of ``order`` with every character doing it, ``order.size`` its longer side (default
        DOODLEPOD_RENDER_SIZE; the caller holds the render slot). Returns the
        answer's fields: ``id`` (the scene's), ``animations`` {motion: URL}, ``character`` (the best
        detection's box and joints, as without the opt-in), ``scene`` and ``skipped``."""
        from contextlib import nullcontext

        motions = list(order.motions)
        record, skipped = self.from_photo(image, None, motions[:1], {"kind": "page"}, None, deadline, timings)
        scene = SceneOrder(scene=record.id, format=order.format, size=order.size or self.settings.render_size,
                           base_url=order.base_url)
        animations: dict[str, str] = {}
        for name in motions:
            _, out = self.render(scene, library, deadline, timings, nullcontext, progress=progress, motion=name)
            animations[name] = out["url"]
        best, _ = self.characters.load(record.characters[0]["id"], deadline)
        public = best.public(lambda key: key)
        return {"id": record.id, "animations": animations,
                "character": {"bbox": public["bbox"], "joints": public["joints"]},
                "characters": [c["id"] for c in record.characters], "skipped": skipped}
