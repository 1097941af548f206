"""Characters a person can correct: upload once, fix the box, mask or joints, render any motion.

A character is a document plus files in the storage backend (local disk or S3), never in a
worker's memory, so any worker of any pod serves any step. The document is
``characters/<id>/character.json`` (one JSON object; swapped last, conditionally), never served
by ``/files``. The files live under ``character-files/<files key>/``, a random key unrelated to
the id, so a shared file URL (an animation link) reveals nothing that reaches the document::

    image.png               the work image: the upload oriented, flattened on white, downsized
    g<N>-<hex>/texture.png  the crop the app works on (made by version N)
    g<N>-<hex>/mask.png     white on the character, same grid as the texture
    g<N>-<hex>/tinted.png   the crop with the mask tinted (the overlay's background, internal)
    r<N>-<hex>/overlay.png  the crop with the mask tinted, the box and the skeleton drawn
    r<N>-<hex>/anim/<motion>-<size>px-<fps>fps.<ext>   animations of version N (the render cache)

Atomic edits: an edit reads the document (and its storage tag), writes the new version's files
into fresh folders, then replaces the document only if it is unchanged since it was read (S3
conditional writes / a lock file on local disk). A reader or a render racing an edit therefore
sees one whole version. Files a version no longer needs are pruned two versions later, so a
render of the version just replaced still finds its files.

Coordinates: the API speaks *image pixels* (the uploaded image after EXIF orientation, x right,
y down). The app works in *work pixels* (``work = image * work.scale``) and the character lives in
*texture pixels* (work pixels minus the box's top-left corner):
``image = texture.offset + texture_xy * texture.scale``.
"""
from __future__ import annotations

import contextvars
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from werkzeug.http import parse_etags

from .. import coordinates, documents, metrics
from ..deadline import Deadline
from ..documents import JsonDocument
from ..errors import (
    BadRequest,
    EditConflict,
    JointsOutsideImage,
    NotFound,
    VersionMismatch,
)
from ..motions.library import Motion
from ..orders import CharacterOrder
from ..render import steps
from ..render.pipeline import file_suffix
from ..storage.backends import Conflict

if TYPE_CHECKING:
    from animator.api import RenderOptions

log = logging.getLogger("doodlepod.characters")

PREFIX = "characters/"
FILES_PREFIX = "character-files/"
DOCUMENT = "character.json"
#: Tries of an edit that lost the race for the document to another edit (without If-Match).
EDIT_TRIES = 3
#: Stored files of a character; the public ones appear in the document's ``urls``.
FILE_NAMES = {"texture": "texture.png", "mask": "mask.png", "overlay": "overlay.png", "tinted": "tinted.png"}
PUBLIC_FILES = ("image", "texture", "mask", "overlay")


def new_id() -> str:
    return uuid.uuid4().hex


def valid_id(text: str) -> bool:
    return len(text) == 32 and all(c in "0123456789abcdef" for c in text)


@dataclass
class Record(JsonDocument):
    """The stored document (the public one is :meth:`public`)."""

    id: str
    version: int
    created_at: float                 # unix seconds
    expires_at: float
    image: dict[str, int]             # uploaded image: width, height (image pixels)
    work_scale: float                 # work pixels per image pixel
    box: list[int]                    # [l, t, r, b] work pixels: the texture's grid
    texture_size: list[int]           # [width, height] texture pixels
    detections: list[dict[str, Any]]  # [{"box": [l, t, r, b] work pixels, "score"}]
    skeleton: list[list[Any]]         # [[name, [x, y] texture pixels, parent], ...]
    files: dict[str, str]             # image, texture, mask, overlay -> storage key
    rev: str                          # this version's folder (overlay, animations)
    keep: list[str] = field(default_factory=list)  # folders the previous version uses
    files_key: str = ""               # the files' folder under FILES_PREFIX ("": older documents, under PREFIX)

    # -- coordinates --------------------------------------------------------------------------
    def to_image(self, x: float, y: float) -> list[float]:
        k = self.work_scale
        return [round((x + self.box[0]) / k, 2), round((y + self.box[1]) / k, 2)]

    def public(self, url: Callable[[str], str]) -> dict[str, Any]:
        k = self.work_scale
        return {
            "id": self.id,
            "version": self.version,
            "created_at": documents.iso(self.created_at),
            "expires_at": documents.iso(self.expires_at),
            "image": dict(self.image),
            "texture": {"width": self.texture_size[0], "height": self.texture_size[1],
                        "offset": [round(self.box[0] / k, 2), round(self.box[1] / k, 2)],
                        "scale": round(1.0 / k, 6)},
            "detections": [{"bbox": [round(v / k, 1) for v in d["box"]], "score": round(float(d["score"]), 4)}
                           for d in self.detections],
            "bbox": [round(v / k, 1) for v in self.box],
            "joints": {name: self.to_image(*loc) for name, loc, _ in self.skeleton},
            "skeleton": [{"name": name, "loc": self.to_image(*loc), "parent": parent}
                         for name, loc, parent in self.skeleton],
            "urls": {name: url(self.files[name]) for name in PUBLIC_FILES},
        }

    def joints(self) -> list[tuple[str, tuple[float, float], str | None]]:
        return [(n, (float(loc[0]), float(loc[1])), p) for n, loc, p in self.skeleton]


def _folder(kind: str, version: int) -> str:
    return f"{kind}{version}-{uuid.uuid4().hex[:8]}"


def _folder_version(name: str) -> int | None:
    head = name.split("-", 1)[0]
    return int(head[1:]) if len(head) > 1 and head[0] in "gr" and head[1:].isdigit() else None


@dataclass
class Edit:
    """What a PATCH changes (each None when unchanged)."""

    bbox: list[float] | None = None
    joints: list | dict | None = None  # animator Joints (a new skeleton) or {name: (x, y)} moves; image pixels
    mask: bytes | None = None        # PNG, texture grid

    def kind(self) -> str:
        return "bbox" if self.bbox is not None else "mask" if self.mask is not None else "joints"


class Characters:
    """The characters API's steps over the pipeline's steps and the storage backend."""

    def __init__(self, settings, pipeline, storage) -> None:
        self.settings = settings
        self.pipeline = pipeline
        self.storage = storage

    # -- storage ------------------------------------------------------------------------------
    def _key(self, cid: str, name: str) -> str:
        """A key of the document's folder (``name`` = DOCUMENT)."""
        return f"{PREFIX}{cid}/{name}"

    def _file_key(self, record: Record, name: str) -> str:
        """A key of the character's files (``name`` '' for the folder itself)."""
        return files_folder(record) + name

    def load(self, cid: str, deadline: Deadline) -> tuple[Record, str]:
        """The current document and its storage tag; :class:`NotFound` if unknown or expired."""
        key = self._key(cid, DOCUMENT) if valid_id(cid) else None
        return documents.load(self.storage, key, Record, f"character {cid[:64]}", deadline)

    def _put(self, key: str, data: bytes, deadline: Deadline, content_type: str = "image/png") -> None:
        self.storage.put(key, data, content_type, deadline)

    # -- create -------------------------------------------------------------------------------
    def create(self, image: bytes, joints: list | None, bbox: list[float] | None, deadline: Deadline,
               timings: dict[str, float], found: list[str] | None = None) -> Record:
        """decode -> detect -> segment -> pose -> rig, skipping what the client sent; store version 1.
        ``found`` collects the codes of the finders that placed the box or joints
        (:func:`app.render.pipeline.warnings_of`)."""
        return self.create_on(self.pipeline.decode(image, deadline, timings), joints, bbox, deadline, timings,
                              found=found)

    def create_on(self, img: Any, joints: list | None, bbox: list[float] | None, deadline: Deadline,
                  timings: dict[str, float], detection: Any = None, found: list[str] | None = None) -> Record:
        """:meth:`create` on an image already decoded (:meth:`Pipeline.decode`); ``detection`` (a
        :class:`Detection` of this image, e.g. one of a scene's) stands in for the detector."""
        p = self.pipeline
        height, width = img.rgb.shape[:2]
        size = {"width": int(img.image_size[0]), "height": int(img.image_size[1])}
        detections: list[dict[str, Any]] = []
        if joints is not None:
            coordinates.check_inside(joints, (size["width"], size["height"]), JointsOutsideImage)
        if detection is not None:
            box = detection.box
            detections = [{"box": list(detection.box), "score": detection.score}]
        elif bbox is not None:
            box = coordinates.client_box(bbox, img.scale, width, height)
        elif joints is not None:
            work_joints = coordinates.joints_to_work(joints, img.scale)
            box = coordinates.box_for_client(None, work_joints, img.scale, width, height)
        else:
            boxes = p.detect(img, deadline, timings, found)
            detections = [{"box": list(d.box), "score": d.score} for d in boxes]
            box = boxes[0].box
        crop = p.segment(img, box, deadline, timings)
        skeleton = (coordinates.joints_to_texture(joints, img.scale, box) if joints is not None
                    else p.pose(crop.png, deadline, timings, found))
        cid = new_id()
        now = time.time()
        record = Record(id=cid, version=1, created_at=now, expires_at=now + self.settings.expiry_hours * 3600,
                        image=size, work_scale=float(img.scale), box=[int(v) for v in box],
                        texture_size=[int(crop.texture.shape[1]), int(crop.texture.shape[0])],
                        detections=detections, skeleton=_skeleton_rows(skeleton), files={},
                        rev=_folder("r", 1), files_key=new_id())
        files = self._rig_files(record, deadline, timings, texture=crop.texture, mask=crop.mask)
        with p.stage(timings, "store"):
            record.files["image"] = self._file_key(record, "image.png")
            try:
                self._put(record.files["image"], img.png, deadline)
                self._store_files(record, files, deadline)
                self.storage.put_if(self._key(cid, DOCUMENT), record.to_json(), "application/json", deadline, None)
            except BaseException:
                self._discard(record, [""])  # nothing was published: remove what was written
                raise
        metrics.CHARACTER_EDITS.labels(change="create").inc()
        log.info("character %s created: box=%s detections=%d", cid, record.box, len(detections))
        return record

    def _rig_files(self, record: Record, deadline: Deadline, timings: dict[str, float], **given: Any) -> dict[str, Any]:
        """The rig step for a stored character: check the skeleton on the mask, make the overlay and
        encode what changed (:func:`steps.character_files` in a render process)."""
        with self.pipeline.stage(timings, "rig"):
            out = self.pipeline.pool.run(partial(steps.character_files, **given), record.joints(),
                                         deadline=deadline, stage="rig")
        record.texture_size = [int(out["size"][0]), int(out["size"][1])]
        return out

    def _store_files(self, record: Record, files: dict[str, Any], deadline: Deadline) -> list[str]:
        """Write the files the rig step made into new folders of ``record``'s version (texture, mask
        and tinted crop into a grid folder when any changed; the overlay into the version's folder);
        point ``record.files`` at them. Returns the folders written."""
        written = [record.rev]
        changed = [name for name in ("texture", "mask", "tinted") if files.get(name) is not None]
        if changed:
            grid = _folder("g", record.version)
            written.append(grid)
            for name in changed:
                record.files[name] = self._file_key(record, f"{grid}/{FILE_NAMES[name]}")
        record.files["overlay"] = self._file_key(record, f"{record.rev}/{FILE_NAMES['overlay']}")
        try:
            _together(*[(lambda n=name: self._put(record.files[n], files[n], deadline))
                        for name in (*changed, "overlay")])
        except BaseException:
            self._discard(record, written)
            raise
        return written

    def _discard(self, record: Record, folders: list[str]) -> None:
        """Best effort: delete folders an edit wrote but will not publish (the expiry catches the rest)."""
        for folder in folders:
            try:
                self.storage.delete_prefix(self._file_key(record, folder), Deadline(10))
            except Exception:  # noqa: BLE001 - housekeeping must not hide the error being raised
                log.warning("character %s: could not delete unpublished folder %s", record.id, folder)

    # -- edit ---------------------------------------------------------------------------------
    def edit(self, cid: str, change: Edit, if_match: str | None, deadline: Deadline,
             timings: dict[str, float], found: list[str] | None = None) -> Record:
        """Apply ``change`` as version + 1, running only the steps it affects. With ``if_match``, a
        document changed meanwhile answers 412; without, a lost race is retried on the new version.
        A new box without joints gets the skeleton the pose model (or the ink finder) fits in it;
        ``found`` collects the finders' codes, as :meth:`create`'s."""
        self.pipeline.check_disk()
        for _ in range(EDIT_TRIES):
            record, tag = self.load(cid, deadline)
            check_version(if_match, "character", cid, record.version, REAPPLY)
            new, written = self._apply(record, change, deadline, timings, found)
            try:
                with self.pipeline.stage(timings, "swap"):
                    self.storage.put_if(self._key(cid, DOCUMENT), new.to_json(), "application/json", deadline, tag)
            except Conflict:  # certainly not written (any other error may have been: keep the files)
                self._discard(new, written)
                if if_match is not None:
                    raise VersionMismatch(f"character {cid} changed while this edit ran; GET it again") from None
                log.info("character %s: edit lost a race for version %d; retrying", cid, new.version)
                continue
            metrics.CHARACTER_EDITS.labels(change=change.kind()).inc()
            self._prune(new, deadline)
            return new
        raise EditConflict(f"character {cid} is being edited by others; retry")

    def _apply(self, old: Record, change: Edit, deadline: Deadline, timings: dict[str, float],
               found: list[str] | None = None) -> tuple[Record, list[str]]:
        p = self.pipeline
        new = Record(**{**asdict(old), "version": old.version + 1, "rev": _folder("r", old.version + 1),
                        "files": dict(old.files), "keep": _folders_of(old)})
        given: dict[str, Any] = {}
        joints = _edited_joints(old, change.joints)
        if joints is not None:
            coordinates.check_inside(joints, (old.image["width"], old.image["height"]), JointsOutsideImage)
        if change.bbox is not None:
            work_png = self._get(old, "image", deadline)
            wh = (round(old.image["width"] * old.work_scale), round(old.image["height"] * old.work_scale))
            box = coordinates.client_box(change.bbox, old.work_scale, *wh)
            crop = p.segment_stored(work_png, box, deadline, timings)
            box = crop.box
            new.box = [int(v) for v in box]
            given = {"texture": crop.texture, "mask": crop.mask}
            skeleton = (coordinates.joints_to_texture(joints, old.work_scale, box) if joints is not None
                        else p.pose(crop.png, deadline, timings, found))
            new.skeleton = _skeleton_rows(skeleton)
        else:
            if joints is not None:
                new.skeleton = _skeleton_rows(coordinates.joints_to_texture(joints, old.work_scale, old.box))
            if change.mask is not None:  # read, checked against the texture and stored by the rig step
                given = {"texture_png": self._get(old, "texture", deadline), "mask_bytes": change.mask,
                         "new_mask": True}
            else:                        # only the skeleton moved: no image to decode
                tinted, mask_bytes = _together(lambda: self._get(old, "tinted", deadline),
                                               lambda: self._get(old, "mask", deadline))
                given = {"tinted": tinted, "mask_bytes": mask_bytes}
        files = self._rig_files(new, deadline, timings, **given)
        with p.stage(timings, "store"):
            written = self._store_files(new, files, deadline)
        return new, written

    def _get(self, record: Record, name: str, deadline: Deadline) -> bytes:
        data = self.storage.get(record.files[name], deadline)
        if data is None:
            raise NotFound(f"character {record.id} lost its {name} (expired or deleted meanwhile)")
        return data

    def _prune(self, record: Record, deadline: Deadline) -> None:
        """Delete folders of versions older than the previous one that neither version uses."""
        keep = set(_folders_of(record)) | set(record.keep)
        try:
            for name in self.storage.list_folders(self._file_key(record, ""), deadline):
                v = _folder_version(name)
                if v is not None and v < record.version - 1 and name not in keep:
                    self.storage.delete_prefix(self._file_key(record, name), deadline)
        except Exception:  # pruning is housekeeping: the expiry sweep or lifecycle rule catches leftovers
            log.warning("character %s: pruning old versions failed", record.id, exc_info=True)

    # -- render -------------------------------------------------------------------------------
    def animation_key(self, record: Record, motion: Motion, options: RenderOptions) -> str:
        """Where the animation of ``motion`` for ``record``'s version is stored: the render cache's
        key names everything the file depends on (a client's own clip by its content's hash, a library
        motion by its files' hash: a changed clip or cut renders anew)."""
        clip = getattr(motion, "sha256", None)
        name = f"{motion.name}-{clip[:16]}" if clip else motion.name
        file_name = f"{name}-{options.width}px-{self.pipeline.file_tag(options)}.{file_suffix(options.format)}"
        return self._file_key(record, f"{record.rev}/anim/{file_name}")

    def render(self, order: CharacterOrder, motions: Sequence[Motion], deadline: Deadline,
               timings: dict[str, float], slot: Callable[[], AbstractContextManager[Any]],
               progress: Callable[[dict[str, Any]], None] | None = None) -> tuple[Record, dict[str, str], list[str]]:
        """URLs of ``motions`` (the order's, resolved, and a client's clip) for the current version:
        stored ones at once (cache hits), the others rendered in parallel in the process pool (holding
        ``slot()`` while rendering; a slot it yields that has a ``check()``, background work's, is
        checked while the renders run). ``order.max_frames`` renders each clip in at most that many
        frames (a preview). ``progress``: see :meth:`Pipeline.render`. Returns the record,
        ``{motion: url}`` in the asked order and the names that were cache hits."""
        record, _ = self.load(order.character, deadline)
        check_version(order.if_match, "character", order.character, record.version)
        options = self.pipeline.render_options(order.format, order.size, order.max_frames)
        base_url = order.base_url
        keys = {m.name: self.animation_key(record, m, options) for m in motions}
        urls: dict[str, str] = {}
        stored = _together(*[(lambda k=keys[m.name]: self.storage.exists(k, deadline)) for m in motions])
        hits = [m.name for m, found in zip(motions, stored) if found]
        for name in hits:
            urls[name] = self.storage.url(keys[name], base_url)
        metrics.ANIMATION_CACHE.labels(result="hit").inc(len(hits))
        misses = [m for m in motions if m.name not in urls]
        if misses:
            metrics.ANIMATION_CACHE.labels(result="miss").inc(len(misses))
            self.pipeline.check_disk()
            with slot() as held:
                texture_png, mask_bytes = _together(lambda: self._get(record, "texture", deadline),
                                                    lambda: self._get(record, "mask", deadline))

                written: list[str] = []

                def store(motion: Motion, out: dict[str, Any]) -> str:
                    self._still_there(record, written, deadline)
                    written.append(keys[motion.name])
                    self.storage.put(keys[motion.name], out["data"], out["mime"], deadline)
                    return self.storage.url(keys[motion.name], base_url)

                urls.update(self.pipeline.render((texture_png, mask_bytes, record.joints()), misses, options,
                                                 deadline, timings, store, task=steps.render_stored,
                                                 progress=progress, interrupt=getattr(held, "check", None)))
                self._still_there(record, written, deadline)
        return record, {m.name: urls[m.name] for m in motions}, hits

    def _still_there(self, record: Record, written: list[str], deadline: Deadline) -> None:
        """Raise NotFound, after deleting what this render wrote, if the character was deleted while it
        rendered (checked after each write too: a write racing the DELETE is removed here). The
        exception stops the render's other motions (:meth:`Pipeline.render` abandons them)."""
        if self.storage.exists(self._key(record.id, DOCUMENT), deadline):
            return
        for key in written:
            try:
                self.storage.delete(key, Deadline(10))
            except Exception:  # noqa: BLE001 - the expiry sweep catches what is left
                log.warning("character %s: could not delete %s after the character was deleted", record.id, key)
        log.info("character %s was deleted while rendering: render stopped, %d file(s) removed", record.id,
                 len(written))
        raise NotFound(f"character {record.id} was deleted while this render ran")

    # -- delete -------------------------------------------------------------------------------
    def delete(self, cid: str, deadline: Deadline) -> int:
        """Delete the document first (renders in flight notice it and remove what they write), then the files."""
        got = self.storage.get_tagged(self._key(cid, DOCUMENT), deadline) if valid_id(cid) else None
        if got is None:
            raise NotFound(f"no character {cid[:64]}: unknown, deleted, or expired")
        record = Record.from_json(got[0])
        count = self.storage.delete_prefix(self._key(cid, ""), deadline)
        count += self.storage.delete_prefix(self._file_key(record, ""), deadline)
        log.info("character %s deleted (%d files)", cid, count)
        return count


def _together(*calls: Callable[[], Any]) -> list[Any]:
    """Run storage calls (network round trips to S3) side by side on the gevent loop; plainly, one
    after the other, outside gevent. The first error raised is re-raised."""
    from ..loop import under_gevent

    if not under_gevent() or len(calls) < 2:
        return [call() for call in calls]
    import gevent

    # each call's error is caught in its greenlet and re-raised here: an error left to end a greenlet is
    # also printed by gevent's hub as an unhandled traceback on stderr (for a plain 504, say)
    # each in a copy of this context: what the calls store is metered for the client (app/shares.py)
    greenlets = [gevent.spawn(contextvars.copy_context().run, _outcome, call) for call in calls]
    try:
        gevent.joinall(greenlets)
    finally:
        gevent.killall([g for g in greenlets if not g.dead])
    for failed, value in (g.value for g in greenlets):
        if failed:
            raise value
    return [value for _, value in (g.value for g in greenlets)]


def _outcome(call: Callable[[], Any]) -> tuple[bool, Any]:
    """``(False, result)``, or ``(True, the exception)`` when ``call`` raised one."""
    try:
        return False, call()
    except Exception as exc:  # noqa: BLE001 - handed to the caller, which re-raises it
        return True, exc


def version_matches(if_match: str, version: int) -> bool:
    """``If-Match`` (or ``If-None-Match``) against a version: ``*``, or any listed entity tag equal to it, weak
    or strong (parsed by Werkzeug)."""
    return parse_etags(if_match).contains_weak(str(version))


#: What a stale edit's 412 advises.
REAPPLY = "; GET it again and reapply your change"


def check_version(if_match: str | None, kind: str, rid: str, version: int, advice: str = "") -> None:
    """412 ``version_mismatch`` unless ``if_match`` is absent or names ``version`` (:func:`version_matches`)."""
    if if_match is not None and not version_matches(if_match, version):
        raise VersionMismatch(f"{kind} {rid} is at version {version}, not {if_match.strip()}{advice}")


def files_folder(record: Record) -> str:
    """The folder (ending in /) of ``record``'s files: under FILES_PREFIX by its files key (under the
    document's folder for documents written before files had a key of their own)."""
    return f"{FILES_PREFIX}{record.files_key}/" if record.files_key else f"{PREFIX}{record.id}/"


def _folders_of(record: Record) -> list[str]:
    prefix = files_folder(record)
    names = {key[len(prefix):].split("/", 1)[0] for key in record.files.values() if key.startswith(prefix)}
    names.add(record.rev)
    return sorted(n for n in names if _folder_version(n) is not None)


def _edited_joints(old: Record, joints: list | dict | None) -> list | None:
    """The skeleton an edit asks for, in image pixels: a new one, or the old one with some joints moved."""
    if not isinstance(joints, dict):
        return joints
    from animator import Joint
    unknown = sorted(set(joints) - {name for name, _, _ in old.skeleton})
    if unknown:
        raise BadRequest(f"'joints': no joint named {', '.join(unknown)} in this character's skeleton")
    k = old.work_scale
    return [Joint(name, joints.get(name) or ((loc[0] + old.box[0]) / k, (loc[1] + old.box[1]) / k), parent)
            for name, loc, parent in old.skeleton]


def _skeleton_rows(skeleton: list) -> list[list[Any]]:
    return [[j.name, [round(float(j.loc[0]), 3), round(float(j.loc[1]), 3)], j.parent] for j in skeleton]


