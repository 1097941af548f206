"""Work orders: what a validated request asks the render side to do, one frozen model per kind of work.

A route reads its request once (:mod:`app.intake.models`), makes the order with :meth:`WorkOrder.of`
and hands that one object on: to the resource at once (a synchronous request), or to the queue
(``Prefer: respond-async``: :meth:`WorkOrder.to_json` is the job's payload; the render worker reads it
back with :meth:`WorkOrder.from_json`). Both paths run the same order, so what an async job renders is
what its synchronous twin would have rendered.

An order carries only what survives the queue (JSON: names, numbers, text); the rest of a request goes
elsewhere, and each order says where (:attr:`WorkOrder.apart`): the uploaded photo is the job's input,
``callback_url`` is the queue's, an uploaded clip is the synchronous path's own. :meth:`WorkOrder.of`
refuses a request field that is neither in the order nor in ``apart``: a field added to a request
model and forgotten here fails every request that sends it (and ``tests/app/test_orders.py``).

The field names are the job payloads' of before the orders (jobs queued by either version run on the
other). A shared module: it imports no room, only pydantic.
"""
from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict


class WorkOrder(BaseModel):
    """One kind of work, as the route validated it; ``kind`` names its job handler (app/worker.py)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    #: The job kind that carries it (a handler of the render worker).
    kind: ClassVar[str]
    #: The request fields that travel outside the order (see the module's text).
    apart: ClassVar[frozenset[str]] = frozenset({"callback_url"})
    #: Request field -> order field, where the order names it otherwise.
    renamed: ClassVar[dict[str, str]] = {}

    base_url: str  # where the stored files' URLs point (the request's own base)

    @classmethod
    def of(cls, fields: BaseModel, **given: Any) -> Any:
        """The order of a request's validated ``fields``: every field the order shares with them, and
        ``given`` (what the route adds or has converted). A request field that is neither raises
        ``TypeError`` (a programming error: the field is handled nowhere)."""
        values: dict[str, Any] = {}
        for name in type(fields).model_fields:
            target = cls.renamed.get(name, name)
            if target in given:
                continue
            if target in cls.model_fields:
                values[target] = getattr(fields, name)
            elif name not in cls.apart:
                raise TypeError(f"{type(fields).__name__}.{name} is in no {cls.__name__}: carry it in the order, "
                                "or name it in the order's `apart` with where it goes")
        return cls(**values, **given)

    def to_json(self) -> dict[str, Any]:
        """The job's payload."""
        return self.model_dump(mode="json")

    @classmethod
    def from_json(cls, payload: dict[str, Any]) -> Any:
        """The order a job's payload holds (checked as it was made)."""
        return cls.model_validate(payload)


class ClientJoint(BaseModel):
    """A joint the client placed, in the uploaded image's pixels (the skeleton list a client may send; made
    from the animator's ``Joint`` that the request's model holds, by its attributes)."""

    model_config = ConfigDict(frozen=True, extra="forbid", from_attributes=True)
    name: str
    loc: tuple[float, float]
    parent: str | None = None


class AnimateOrder(WorkOrder):
    """POST /animate (and POST /, the old mobile client): the photo's character, or with ``every_character``
    every character of the photo together, in each motion."""

    kind = "animate"
    apart = frozenset({"callback_url", "image", "file",   # the photo: the job's input, or the request's bytes
                       "bvh", "start_frame", "end_frame"})  # a client's clip: the synchronous path's own
    motions: tuple[str, ...]  # the motions' names, resolved once (defaults filled in)
    format: str
    size: int | None = None  # None: DOODLEPOD_RENDER_SIZE
    joints: tuple[ClientJoint, ...] | None = None
    bbox: tuple[float, float, float, float] | None = None
    every_character: bool = False


class CharacterOrder(WorkOrder):
    """POST /characters/{id}/animations: a stored character in each motion."""

    kind = "character_animations"
    apart = frozenset({"callback_url", "bvh", "start_frame", "end_frame"})
    character: str
    motions: tuple[str, ...]
    format: str
    size: int
    max_frames: int | None = None
    if_match: str | None = None  # the request's If-Match, checked against the version that renders


class SceneOrder(WorkOrder):
    """POST /scenes/{id}/animations: every character of a stored scene on its page."""

    kind = "scene_animations"
    scene: str
    format: str
    size: int
    max_frames: int | None = None
    if_match: str | None = None


class VideoOrder(WorkOrder):
    """POST /motions: a person's movement in a video, as the client's own motion."""

    kind = "motion_from_video"
    apart = frozenset({"callback_url", "video"})  # the video waits in the storage (``video_key``)
    renamed = {"start": "start_s", "end": "end_s"}
    client: str
    video_key: str = ""   # older jobs: the video is the job's input in Redis
    video_bytes: int = 0  # its size: charged to the client's storage share while it waits, given back after
    start_s: float | None = None
    end_s: float | None = None


#: Every order, by its job kind.
ORDERS: dict[str, type[WorkOrder]] = {o.kind: o for o in (AnimateOrder, CharacterOrder, SceneOrder, VideoOrder)}
