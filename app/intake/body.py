"""What a request may send, read and bounded before any work starts.

* :func:`buffer_body` reads the whole body first, under a time limit and the size limit, and hands
  it back to Flask as an in-memory stream. The routes take a render slot only after that, so a slow
  upload (or a client that sends nothing) never holds one; a body over the limit is refused whether
  its length was declared or it came chunked.
* :func:`parse_json` decodes a JSON text bounded in size, nesting depth, breadth (values in all)
  and number length, so a field can neither exhaust the parser (JSON nested 100,000 deep, or
  millions of empty lists side by side, which ``json.loads`` takes seconds of the event loop to
  build) nor smuggle a value the code below cannot take (a 400-digit integer, ``NaN``). Depth and
  breadth are counted in one pass that stops at the first bound passed, before anything is decoded.
"""
from __future__ import annotations

import io
import json
import re
from typing import Any

from ..errors import BadRequest, RequestTimeout, TooLarge
from ..loop import time_limit

#: Deepest nesting of arrays and objects accepted in a JSON field or body (the joints' skeleton
#: list form needs 4).
MAX_JSON_DEPTH = 10
#: Longest number literal accepted in JSON, in characters (a pixel coordinate needs a handful).
MAX_NUMBER_CHARS = 32
#: Most structural tokens (brackets, commas, colons, strings) accepted in one JSON text: a scene's
#: edit with every character's joints needs a few thousand.
MAX_JSON_TOKENS = 20_000

_CHUNK = 64 * 1024
#: A JSON string literal (escapes included) or one structural character; the string part is written so
#: that the regex engine never backtracks.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},:]')


def _size(limit: int) -> str:
    return f"{limit / 2**20:g} MiB" if limit >= 2**20 else f"{limit / 1024:g} KiB"


#: An unread body at most this large is left for gunicorn to drain (keeping the connection alive).
DRAIN_AT_MOST = 64 * 1024


def stop_reading_unread(environ: dict[str, Any]) -> None:
    """After an error answer given before the body was read (a rate limit, a share, a bad header):
    stop reading a large body, as :func:`buffer_body` does for one it refuses."""
    if environ.get("doodlepod.body_read"):
        return
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > DRAIN_AT_MOST or (not length and environ.get("HTTP_TRANSFER_ENCODING")):
        _stop_reading(environ)


def _stop_reading(environ: dict[str, Any]) -> None:
    """Read nothing more from this connection (gunicorn's socket): the unread body of a refused request
    is then not drained on the event loop after the answer (19 MiB bodies refused back to back held
    another client's requests 40-55 s), and the connection closes once the answer is sent."""
    import socket

    sock = environ.get("gunicorn.socket")
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RD)
        except OSError:
            pass


def buffer_body(environ: dict[str, Any], limit: int, timeout_s: float) -> bytes:
    """Read the request's whole body now and put it back in ``environ`` as an in-memory stream.

    Raises :class:`TooLarge` as soon as the body (declared or chunked) passes ``limit`` bytes, and
    :class:`RequestTimeout` when it has not all arrived within ``timeout_s`` seconds. gunicorn then
    drains the unread rest for at most its keep-alive time (5 s) before it closes the connection.
    """
    declared = environ.get("CONTENT_LENGTH") or ""
    if declared:
        try:
            length = int(declared)
        except ValueError:
            raise BadRequest("Content-Length is not a number") from None
        if length > limit:
            _stop_reading(environ)
            raise TooLarge(f"request body of {length} bytes is over the limit of {_size(limit)}")
    stream = environ.get("wsgi.input")
    chunks: list[bytes] = []
    size = 0
    if stream is not None:
        late = RequestTimeout(f"the request body did not arrive within {timeout_s:.3g} s")
        with time_limit(timeout_s, late):
            while True:
                chunk = stream.read(_CHUNK)
                if not chunk:
                    break
                size += len(chunk)
                if size > limit:
                    _stop_reading(environ)
                    raise TooLarge(f"request body over the limit of {_size(limit)}")
                chunks.append(chunk)
    body = b"".join(chunks)
    environ["doodlepod.body_read"] = True
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    environ.pop("HTTP_TRANSFER_ENCODING", None)
    environ.pop("wsgi.input_terminated", None)
    return body


def json_shape(text: str, stop_depth: int = MAX_JSON_DEPTH, stop_tokens: int = MAX_JSON_TOKENS) -> tuple[int, int]:
    """(deepest nesting of arrays/objects, structural tokens) of the JSON ``text``, strings skipped
    as one token each, in one pass that stops once either passes its bound."""
    depth = deepest = tokens = 0
    for m in _TOKEN.finditer(text):
        tokens += 1
        if tokens > stop_tokens:
            break
        c = m.group()[0]
        if c in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > stop_depth:
                    break
        elif c in "]}":
            depth -= 1
    return deepest, tokens


def json_depth(text: str, stop_above: int = MAX_JSON_DEPTH) -> int:
    """Deepest nesting of arrays/objects in the JSON ``text`` (strings skipped); counting stops
    once it passes ``stop_above``."""
    return json_shape(text, stop_above, len(text) + 1)[0]


def parse_json(text: str | bytes, name: str, max_bytes: int | None = None) -> Any:
    """Decode the JSON ``text`` of field ``name`` within the bounds above (and ``max_bytes``).

    Raises :class:`TooLarge` (over ``max_bytes``) or :class:`BadRequest` naming ``name``.
    """
    if max_bytes is not None and isinstance(text, bytes) and len(text) > max_bytes:
        raise TooLarge(f"'{name}' is over the limit of {max_bytes / 1024:g} KiB")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise BadRequest(f"'{name}' is not UTF-8 text") from None
    if max_bytes is not None and len(text) > max_bytes:
        raise TooLarge(f"'{name}' is over the limit of {max_bytes / 1024:g} KiB")
    depth, tokens = json_shape(text)
    if depth > MAX_JSON_DEPTH:
        raise BadRequest(f"'{name}' is nested deeper than {MAX_JSON_DEPTH} levels")
    if tokens > MAX_JSON_TOKENS:
        raise TooLarge(f"'{name}' has more than {MAX_JSON_TOKENS} JSON tokens (brackets, commas, strings)")
    try:
        return json.loads(text, parse_int=_number(int), parse_float=_number(float), parse_constant=_no_constant)
    except _NumberError as exc:
        raise BadRequest(f"'{name}': {exc}") from None
    except (ValueError, RecursionError):
        raise BadRequest(f"'{name}' is not valid JSON") from None


class _NumberError(Exception):
    pass


def _number(kind: type):
    def parse(literal: str):
        if len(literal) > MAX_NUMBER_CHARS:
            raise _NumberError(f"a number of {len(literal)} characters is too long (at most {MAX_NUMBER_CHARS})")
        return kind(literal)
    return parse


def _no_constant(literal: str):
    raise _NumberError(f"{literal} is not a number")
