"""GET /studio: the studio page, a person's client of the character API, served by the app itself.

The page is HTML rendered from its Jinja template (``app/templates/studio.html``: one base,
``base.html``, holds the head and the header of the app's three pages) with CSS and JavaScript
modules in ``app/static/studio/`` (no build step, no CDN: pods and tests have no internet). It is
public like the probes: it holds nothing secret, and the API calls it makes carry the bearer token
the person pastes into it. ``GET /`` from a browser (``Accept: text/html``) redirects here; other
clients' ``GET /`` keeps its 405 (``POST /`` is the old mobile client's endpoint, unchanged).
"""
from __future__ import annotations

from pathlib import Path

from flask import Blueprint, Response, make_response, redirect, render_template, request, send_from_directory, url_for
from werkzeug.exceptions import MethodNotAllowed

bp = Blueprint("studio", __name__)

STATIC = Path(__file__).resolve().parents[1] / "static" / "studio"
#: The motion credits page (every clip's source, CMU trial, licence, loop measure), linked from the picker.
CREDITS = Path(__file__).resolve().parents[2] / "docs" / "motions.md"

#: The page loads only its own files; images and videos may come from S3 (presigned URLs), and
#: fetch() reaches S3 for the mask it paints on.
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'", "script-src 'self'", "style-src 'self'", "img-src 'self' data: blob: http: https:",
    "media-src 'self' blob: http: https:", "connect-src 'self' http: https:", "object-src 'none'",
    "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'",
])


@bp.get("/studio")
def page() -> Response:
    return serve_page("studio.html")


@bp.get("/studio/")
def page_slash() -> Response:
    """``/studio/`` (a typed or pasted address) is the page too; its relative links need ``/studio``."""
    return redirect(url_for("studio.page"), code=301)


@bp.get("/studio/credits")
def credits() -> Response:
    """docs/motions.md as a page: the motions' credits and CMU's acknowledgement (app/http/credits.py)."""
    from . import credits as page_of_credits

    return _guarded(page_of_credits.page())


@bp.get("/studio/credits/files/<path:name>")
def credits_file(name: str) -> Response:
    """A licence file of the motion library that the credits page links (plain text)."""
    from . import credits as page_of_credits

    return _guarded(page_of_credits.file(name))


def _guarded(response: Response) -> Response:
    response.headers["X-Content-Type-Options"] = "nosniff"
    if response.mimetype == "text/html":
        response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        response.headers["Referrer-Policy"] = "no-referrer"
    return response


@bp.get("/studio/<path:name>")
def asset(name: str) -> Response:
    return _static(name)


@bp.get("/")
def root() -> Response:
    """A browser opening the app's address lands on the studio; API clients see POST / only."""
    if any(kind == "text/html" and q > 0 for kind, q in request.accept_mimetypes):
        return redirect(url_for("studio.page"), code=302)
    raise MethodNotAllowed(valid_methods=["POST"], description="POST / is the old mobile client's "
                           "endpoint (JSON {\"file\": base64}); the studio page is at GET /studio")


def _static(name: str) -> Response:
    return serve_static(STATIC, name)


def serve_page(template: str) -> Response:
    """One of the app's pages (the studio, its scenes page, the API reference), rendered from its
    template in ``app/templates/``, under their policy."""
    response = make_response(render_template(template))
    response.add_etag()
    return _revalidated(response.make_conditional(request))


def serve_static(folder: Path, name: str) -> Response:
    """A file the app's pages load (scripts, styles, images), under their policy."""
    return _revalidated(send_from_directory(folder, name, max_age=0))


def _revalidated(response: Response) -> Response:
    # no-cache: revalidated (ETag) on every load, so a deploy shows the new page at once
    response.headers["Cache-Control"] = "no-cache"
    return _guarded(response)
