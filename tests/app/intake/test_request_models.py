"""Request models (app/intake/models.py) read through the one adapter (app/intake/read.py).

The same fields read the same from a JSON body and from a form; what the generated schema allows the
model takes and what it refuses the model refuses; each refusal is the API's error with its stable
code, and it comes before any work (these requests name a character that does not exist: the
fields are refused before the 404).
"""
from __future__ import annotations

import io
import json

import pytest
from jsonschema import Draft202012Validator

from app import config
from app.intake.models import RenderRequest, components
from app.intake.read import read
from tests.support.answers import assert_error

NOBODY = "0" * 32
RENDER = f"/characters/{NOBODY}/animations"


def _read_render(app, **kwargs):
    with app.test_request_context(RENDER, method="POST", **kwargs):
        return read(RenderRequest)


def test_a_json_body_and_a_form_read_the_same(app):
    as_json = _read_render(app, json={"motions": ["dab", "zombie,jumping"], "format": "WEBP", "size": 96,
                                      "max_frames": 8})
    as_form = _read_render(app, data={"motions": ["dab", "zombie,jumping"], "format": "WEBP", "size": "96",
                                      "max_frames": "8"})
    as_multipart = _read_render(app, data={"motions": "dab,zombie,jumping", "format": "webp", "size": "96",
                                           "max_frames": "8"}, content_type="multipart/form-data")
    assert as_json == as_form == as_multipart
    assert as_json.motions == ["dab", "zombie", "jumping"] and as_json.format == "webp" and as_json.size == 96


def test_absent_fields_take_the_running_settings(make_app):
    app = make_app(default_format="mp4", render_size=200)
    fields = _read_render(app, json={})
    assert (fields.format, fields.size, fields.max_frames, fields.motions, fields.bvh) == ("mp4", 200, None, [], None)


def _schema_of(name: str) -> Draft202012Validator:
    from app.intake.bounds import resolve

    schemas = resolve(components(), config.load_settings({}))
    return Draft202012Validator({"$ref": f"#/components/schemas/{name}", "components": {"schemas": schemas}})


@pytest.mark.parametrize("body, ok", [
    ({}, True), ({"motions": "dab"}, True), ({"motions": ["dab", "zombie"], "size": 64, "format": "gif"}, True),
    ({"max_frames": 1}, True), ({"size": 1024, "format": "webm"}, True),
    ({"size": 63}, False), ({"size": 1025}, False), ({"size": "big"}, False), ({"max_frames": 0}, False),
    ({"max_frames": 10_001}, False), ({"format": "avi"}, False), ({"motions": [1, 2]}, False),
    ({"motions": {"dab": 1}}, False),
])
def test_the_generated_schema_and_the_model_agree(app, body, ok):
    schema_ok = _schema_of("RenderRequest").is_valid(body)
    try:
        _read_render(app, json=body)
        model_ok = True
    except Exception as exc:  # the API's own error
        assert getattr(exc, "code", None) == "bad_request", exc
        model_ok = False
    assert schema_ok == model_ok == ok, body


@pytest.mark.parametrize("body", [{"bbox": [1, 2, 3, 4]}, {"joints": {"neck": [1, 2]}}, {"bbox": "[1, 2, 3, 4]"}])
def test_an_edit_the_schema_allows_is_read(app, body):
    assert _schema_of("CharacterEdit").is_valid(body)
    with app.test_request_context(f"/characters/{NOBODY}", method="PATCH", json=body):
        from app.intake.models import CharacterEdit
        fields = read(CharacterEdit)
    assert fields.bbox == [1, 2, 3, 4] or fields.joints == {"neck": (1.0, 2.0)}


@pytest.mark.parametrize("kwargs, code, words", [
    ({"json": {"format": "avi"}}, "bad_request", "format must be one of"),
    ({"json": {"size": 65, "format": "mp4"}}, "bad_request", "MP4 needs an even size"),
    ({"json": {"size": True}}, "bad_request", "'size' must be an integer"),
    ({"json": {"motions": 3}}, "bad_request", "'motions' must be a list"),
    ({"json": ["dab"]}, "bad_request", "expected a JSON object"),
    ({"data": "{not json", "content_type": "application/json"}, "bad_request", "not valid JSON"),
    ({"json": {"callback_url": "http://example.org/hook"}}, "bad_request", "Prefer: respond-async"),
    ({"data": {"start_frame": "3"}}, "bad_request", "none was sent"),
    ({"data": {"bvh": "HIERARCHY", "start_frame": "-1"}}, "bad_request", "'start_frame' must be >= 0"),
    ({"data": {"photo": (io.BytesIO(b"x"), "p.png")}}, "bad_request", "unknown file field(s): photo; send 'bvh'"),
    ({"data": {"bvh": (io.BytesIO(b""), "x.bvh")}}, "invalid_motion", "the file is empty"),
    ({"json": {"motions": "x" * 70_000}}, "too_large", "'motions' is over the limit"),
])
def test_refusals_keep_their_codes_and_come_before_any_work(client, kwargs, code, words):
    status = {"bad_request": 400, "invalid_motion": 422, "too_large": 413}[code]
    body = assert_error(client.post(RENDER, **kwargs), status, code)
    assert words in body["message"], body


def test_async_requests_refuse_a_clip(client):
    for path in (RENDER, "/animate"):
        clip = {"bvh": (io.BytesIO(b"HIERARCHY\n"), "x.bvh")}
        refused = client.post(path, data=clip, headers={"Prefer": "respond-async"})
        assert "cannot be sent with 'Prefer: respond-async'" in assert_error(refused, 400, "bad_request")["message"]


def test_an_edit_names_what_it_takes(client):
    body = assert_error(client.patch(f"/characters/{NOBODY}", json={"bbox": [0, 0, 9, 9], "colour": "red"}),
                        400, "bad_request")
    assert "unknown field(s): colour" in body["message"] and "bbox, joints, mask" in body["message"]
    assert "nothing to change" in assert_error(client.patch(f"/characters/{NOBODY}", json={}), 400,
                                               "bad_request")["message"]
    assert_error(client.patch(f"/characters/{NOBODY}", data={"mask": (io.BytesIO(b""), "m.png")}), 400, "bad_mask")


def test_the_old_client_and_the_photo_routes_say_what_is_missing(client):
    assert 'expected JSON {"file": "<base64 image>"}' in assert_error(client.post("/", json={}), 400,
                                                                      "bad_request")["message"]
    assert 'expected JSON {"file"' in assert_error(client.post("/", json={"file": 7}), 400,
                                                   "bad_request")["message"]
    for path in ("/animate", "/characters"):
        for kwargs in ({"data": {"motions": "dab"}}, {"json": {"image": "aGVsbG8="}}):
            message = assert_error(client.post(path, **kwargs), 400, "bad_request")["message"]
            assert "multipart form field 'image'" in message, (path, kwargs)
    video = assert_error(client.post("/motions", data={"callback_url": ""}), 400, "bad_request")["message"]
    assert "field 'video'" in video
    assert json.loads(json.dumps(components()))  # the schemas are plain JSON
