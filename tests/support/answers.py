"""Checks on the app's answers, for a Flask test client's responses and ``requests``' alike."""
from __future__ import annotations

import json
from typing import Any


def _text(resp: Any) -> str:
    return resp.get_data(as_text=True) if hasattr(resp, "get_data") else resp.text


def assert_error(resp: Any, status: int, code: str) -> dict[str, Any]:
    """``resp`` is the API's JSON error: ``status``, ``{"error": code, "message": text}`` with a message
    and no traceback, and an ``X-Request-ID`` to find its log line by. Returns the body."""
    text = _text(resp)
    assert resp.status_code == status, (resp.status_code, text[:500])
    assert resp.headers["Content-Type"].startswith("application/json"), resp.headers["Content-Type"]
    body = json.loads(text)
    assert body["error"] == code, body
    assert isinstance(body["message"], str) and body["message"] and "Traceback" not in body["message"], body
    assert resp.headers.get("X-Request-ID"), dict(resp.headers)
    return body
