"""Exception types raised by :mod:`animator`.

Every error names the file (and, for config files, the field) that caused it, so a caller can show
``str(err)`` to a person as is.
"""
from __future__ import annotations

from pathlib import Path


class AnimatorError(Exception):
    """Base class of every error this library raises on bad input."""


class ConfigError(AnimatorError):
    """A config file (character, motion, retarget) is missing, unreadable or has a bad field."""

    def __init__(self, path: str | Path | None, field: str | None, message: str) -> None:
        self.path = str(path) if path is not None else None
        self.field = field
        self.message = message
        where = self.path or "<config>"
        if field:
            where += f": field '{field}'"
        super().__init__(f"{where}: {message}")

    def __reduce__(self):  # keep (path, field, message) across process-pool pickling
        return (type(self), (self.path, self.field, self.message))


class BVHError(ConfigError):
    """A BVH motion-capture file cannot be parsed or lacks a joint the configs need."""


class CharacterError(ConfigError):
    """A character (texture, mask, skeleton) is unusable: missing joints, empty mask, size mismatch."""


class RenderError(AnimatorError):
    """Rendering or encoding failed for a reason other than bad input (e.g. no codec for a format)."""


class NoPersonError(AnimatorError):
    """A video in which the pose model found no person (or too few frames with one) to make a motion."""


class VideoError(AnimatorError):
    """A video that cannot be read, or is longer or larger than the limits allow."""

    def __init__(self, path, message: str) -> None:
        self.path = str(path) if path is not None else None
        self.message = message
        super().__init__(f"{self.path or '<video>'}: {message}")

    def __reduce__(self):  # keep (path, message) across process-pool pickling
        return (type(self), (self.path, self.message))


class VideoTimeout(VideoError):
    """ffmpeg did not describe a video within its bound: a busy machine (or a stalled ffmpeg), not a
    broken file, so the same video may be read later."""


class OutputTooLarge(AnimatorError):
    """The file asked for would pass a bound of its format (e.g. a sprite sheet's pixels): bad input
    (the request's, not the renderer's fault); fewer frames or a smaller size fit."""
