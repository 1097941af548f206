"""A request bound named once, by where its value comes from: a setting or a Python constant.

The request shapes (:mod:`app.intake.shapes`) check a field against ``Bound(...).of(settings)``, and
mark the same bound in their JSON Schema as ``x-bounds: {keyword: SOURCE}``; :func:`resolve` sets each
marked keyword from a settings object: the settings' defaults in the written document
(:func:`app.intake.models.components`), the running settings' in the served one
(:mod:`app.http.reference`), so a deployment that raises ``DOODLEPOD_RENDER_SIZE_MAX`` publishes and
enforces the same limit.
"""
from __future__ import annotations

import copy
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


def schema_bounds(**keywords: Bound) -> dict[str, Any]:
    """The ``x-bounds`` marking JSON Schema ``keywords`` (set by :func:`resolve`)."""
    return {"x-bounds": {k: b.source for k, b in keywords.items()}}


def resolve(document: Any, settings: Any) -> Any:
    """A copy of ``document`` with every keyword an ``x-bounds`` marks set from ``settings``."""
    out = copy.deepcopy(document)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for keyword, source in (node.get("x-bounds") or {}).items():
                node[keyword] = bound_value(source, settings)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(out)
    return out
