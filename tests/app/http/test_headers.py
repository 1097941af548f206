"""Request headers read through Werkzeug's parsers (Authorization, Prefer, Priority, If-Match,
If-None-Match), in a real request context of the app."""
from __future__ import annotations

import pytest

from app.characters.resource import version_matches
from app.http.api import bearer_token, request_priority
from app.http.jobs import wants_async
from app.render.admission import BACKGROUND, RENDER


@pytest.mark.parametrize("header, token", [("Bearer abc", "abc"), ("bearer  abc ", "abc"), ("Bearer abc==", "abc=="),
                                           ("Bearer", ""), ("Basic dXNlcjpwYXNz", ""), (None, "")])
def test_the_bearer_token(app, header, token):
    with app.test_request_context(headers={"Authorization": header} if header else {}):
        assert bearer_token() == token


@pytest.mark.parametrize("values, asked", [(["respond-async"], True), (["wait=10, Respond-Async"], True),
                                           (["wait=10", "respond-async; x=1"], True), (["return=minimal"], False),
                                           (['foo="respond-async"'], False), ([], False)])
def test_prefer_respond_async(app, values, asked):
    with app.test_request_context(headers=[("Prefer", v) for v in values]):
        assert wants_async() is asked


@pytest.mark.parametrize("header, priority", [("u=7", BACKGROUND), ("i, u=6", BACKGROUND), ("u=3", RENDER),
                                              ("u=7x", RENDER), ("", RENDER)])
def test_priority_urgency(app, header, priority):
    with app.test_request_context(headers={"Priority": header}):
        assert request_priority() == priority


@pytest.mark.parametrize("header, matches", [('"2"', True), ('W/"2"', True), ("*", True), ('"1", "2"', True),
                                             ('"3"', False), ("", False)])
def test_entity_tags_against_a_version(header, matches):
    assert version_matches(header, 2) is matches
