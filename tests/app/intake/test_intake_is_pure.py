"""Intake checks what was sent, never the network: a request model's validation does no DNS lookup and
takes no share (the address a callback_url names is checked when its job is submitted, app/http/jobs.py,
whose refusals tests/jobs/test_shares_egress.py holds)."""
from __future__ import annotations

import socket

import pytest

from app.config import load_settings
from app.errors import BadRequest
from app.intake.models import RenderRequest


def test_a_callback_url_is_read_without_a_lookup(monkeypatch):
    def no_lookup(*args, **kwargs):
        raise AssertionError(f"intake looked up {args[:1]}")

    monkeypatch.setattr(socket, "getaddrinfo", no_lookup)
    monkeypatch.setattr(socket, "gethostbyname", no_lookup)
    context = {"settings": load_settings({}, webhook_secret="s"), "respond_async": True}
    fields = RenderRequest.model_validate({"callback_url": "http://10.0.0.1.nip.io.invalid/hook"}, context=context)
    assert fields.callback_url == "http://10.0.0.1.nip.io.invalid/hook"
    with pytest.raises(BadRequest, match="http\\(s\\) URL"):   # its text is still checked here
        RenderRequest.model_validate({"callback_url": "gopher://x/"}, context=context)
