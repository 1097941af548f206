"""The API's reference (public): GET /openapi.json, /openapi.yaml and the page GET /docs.

The document is ``openapi.yaml`` beside this module (every route, header and answer, written by
hand) plus the request schemas, generated from the request models (:mod:`app.intake.models`), and
the error codes, generated from the error classes (:mod:`app.http.codes`), when it is first served;
tests/app/http/test_openapi_contract.py holds it to the code. Its bounds are written as the settings'
defaults and marked ``x-bounds: {keyword: SOURCE}`` (:mod:`app.intake.bounds`); :func:`spec` answers
the document with each marked value taken from the running settings (or the Python constant named),
so a deployment that raises ``DOODLEPOD_MAX_UPLOAD_MB`` publishes its own limit.

The page is HTML from its template (``app/templates/reference.html``, on the studio's base), CSS and
one vanilla-JS module in ``app/static/docs/`` that fetches
``/openapi.json`` and renders it (no build step, no CDN), under the studio's Content-Security-Policy.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from flask import Blueprint, Response

from ..intake.bounds import resolve
from ..intake.models import components
from ..services import services
from .studio import serve_page, serve_static

bp = Blueprint("reference", __name__)

SPEC_PATH = Path(__file__).resolve().with_name("openapi.yaml")
STATIC = Path(__file__).resolve().parents[1] / "static" / "docs"


def hand_written() -> dict[str, Any]:
    """``openapi.yaml`` as it is: the paths, the prose, the answers and the headers."""
    return yaml.safe_load(SPEC_PATH.read_text())


@lru_cache(maxsize=1)
def written() -> dict[str, Any]:
    """The document at the settings' defaults: ``openapi.yaml`` with the request schemas generated from
    the request models (:func:`app.intake.models.components`) and the error codes' from the error
    classes (:func:`app.http.codes.schemas`); callers must not change it."""
    from . import codes  # here: `python -m app.http.codes` imports app.http first

    document = hand_written()
    schemas = document["components"]["schemas"]
    generated = {**components(), **codes.schemas()}
    twice = sorted(set(schemas) & set(generated))
    if twice:
        raise ValueError(f"openapi.yaml writes schemas the code generates: {', '.join(twice)}")
    schemas.update(generated)
    return document


@lru_cache(maxsize=4)
def _served(settings_key: str) -> tuple[bytes, bytes]:
    document = resolve(written(), services().settings)
    return (json.dumps(document, separators=(",", ":")).encode(),
            yaml.safe_dump(document, sort_keys=False, allow_unicode=True).encode())


def spec() -> tuple[bytes, bytes]:
    """The served document as (JSON, YAML) bytes, made once per settings."""
    return _served(repr(sorted(services().settings.values.items())))


@bp.get("/openapi.json")
def openapi_json() -> Response:
    return _document(spec()[0], "application/json")


@bp.get("/openapi.yaml")
def openapi_yaml() -> Response:
    return _document(spec()[1], "application/yaml")


def _document(body: bytes, content_type: str) -> Response:
    response = Response(body, content_type=content_type)
    response.headers["Cache-Control"] = "no-cache"
    response.headers["Access-Control-Allow-Origin"] = "*"  # client generators and gateways read it cross-origin
    return response


@bp.get("/docs")
def page() -> Response:
    return serve_page("reference.html")


@bp.get("/docs/<path:name>")
def asset(name: str) -> Response:
    return serve_static(STATIC, name)
