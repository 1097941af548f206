"""A request bound named once, by where its value comes from: a setting or a Python constant.

The request shapes (:mod:`app.intake.shapes`) check a field against ``Bound(...).of(settings)``, and
write the same bound into their JSON Schema as the settings' default plus ``x-bounds: {keyword:
SOURCE}``; the served OpenAPI document (:mod:`app.http.reference`) replaces each marked value with
the running settings' own, so a deployment that raises ``DOODLEPOD_RENDER_SIZE_MAX`` publishes and
enforces the same limit.
"""
from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .. import config


def bound_value(source: str, settings: Any) -> Any:
    """The value an ``x-bounds`` SOURCE names under ``settings``.

    A name with the settings' prefix is a setting (``*_MB`` and ``*_KB`` in bytes), ``module:NAME`` a Python constant
    (a dict gives its keys, a compiled regex its pattern), ``A or B`` the first of them that is set.
    """
    value: Any = None
    for option in (s.strip() for s in source.split(" or ")):
        if option.startswith("DOODLEPOD_"):
            value = getattr(settings, option.removeprefix("DOODLEPOD_").lower())
            if option.endswith("_MB"):
                value = int(value * 2**20)
            elif option.endswith("_KB"):
                value = int(value * 1024)
            elif isinstance(value, float) and value.is_integer():
                value = int(value)
        else:
            module, _, name = option.partition(":")
            value = getattr(importlib.import_module(module), name)
            if isinstance(value, dict):
                value = list(value)
            elif isinstance(value, re.Pattern):
                value = value.pattern
        if value:
            return value
    return value


@lru_cache(maxsize=1)
def default_settings() -> Any:
    """The settings with no environment: the values the written document carries."""
    return config.load_settings({})


@dataclass(frozen=True)
class Bound:
    """One bound of a field, by its SOURCE (see :func:`bound_value`)."""

    source: str

    def of(self, settings: Any) -> Any:
        return bound_value(self.source, settings)

    @property
    def default(self) -> Any:
        return bound_value(self.source, default_settings())


def schema_bounds(**keywords: Bound) -> dict[str, Any]:
    """JSON Schema keywords at their default values, and the ``x-bounds`` that names their sources."""
    return {**{k: b.default for k, b in keywords.items()}, "x-bounds": {k: b.source for k, b in keywords.items()}}
