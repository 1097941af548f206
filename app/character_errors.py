"""Errors of the characters API (moved into app/errors.py once its hierarchy lands)."""
from __future__ import annotations

from .errors import ApiError


class CharacterNotFound(ApiError):
    """No character with this id: never made, deleted, or expired (DOODLEPOD_EXPIRY_HOURS)."""
    status, code = 404, "not_found"


class BadMask(ApiError):
    """The mask sent is not a readable PNG image."""
    status, code = 400, "bad_mask"


class MaskWrongSize(ApiError):
    """The mask is not of the texture's size (the document's ``texture.width`` x ``texture.height``)."""
    status, code = 422, "mask_wrong_size"


class JointsOutsideImage(ApiError):
    """Joints (or a box) sent lie outside the uploaded image."""
    status, code = 422, "joints_outside_image"


class VersionMismatch(ApiError):
    """``If-Match`` names a version that is no longer current: nothing was changed."""
    status, code = 412, "version_mismatch"


class EditConflict(ApiError):
    """Concurrent edits kept winning the race for this character; retry."""
    status, code = 409, "edit_conflict"


class BoxOutsideImage(ApiError):
    """The box sent is empty or lies outside the uploaded image."""
    status, code = 422, "bbox_outside_image"
