"""Stored documents: a resource's record (a character, a scene) kept as JSON beside its files, with
the time it expires; how one is written, read back and told apart from an expired one."""
from __future__ import annotations

import json
import time
from dataclasses import asdict, fields
from datetime import datetime, timezone
from typing import Any, Protocol, TypeVar

from .deadline import Deadline
from .errors import NotFound

D = TypeVar("D", bound="JsonDocument")


class JsonDocument:
    """A dataclass stored as compact JSON; reading ignores fields a newer version of the app added."""

    expires_at: float

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()  # type: ignore[call-overload]

    @classmethod
    def from_json(cls: type[D], data: bytes) -> D:
        values: dict[str, Any] = json.loads(data)
        return cls(**{f.name: values[f.name] for f in fields(cls) if f.name in values})  # type: ignore[arg-type]


class TaggedStore(Protocol):
    def get_tagged(self, key: str, deadline: Deadline) -> tuple[bytes, str] | None: ...


def load(store: TaggedStore, key: str | None, cls: type[D], what: str, deadline: Deadline) -> tuple[D, str]:
    """The document at ``key`` (None: an id that cannot name one) and its storage tag; :class:`NotFound`
    when it is unknown or expired. ``what``: how the answer names it ("character 1a2b...")."""
    got = store.get_tagged(key, deadline) if key is not None else None
    if got is None:
        raise NotFound(f"no {what[:80]}: unknown, deleted, or expired")
    record = cls.from_json(got[0])
    if record.expires_at <= time.time():
        raise NotFound(f"{what} expired at {iso(record.expires_at)} and is being deleted")
    return record, got[1]


def iso(t: float) -> str:
    """A Unix time as ISO 8601 UTC to the second (``2026-11-27T16:40:53Z``)."""
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
