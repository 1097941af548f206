"""Request fields the hostile pass found taken loosely (app/intake/shapes.py, app/http/api.py), in process
on Flask's test client: PATCH joints of the wrong types, a box of strings, a deadline already past."""
from __future__ import annotations

import pytest

from tests.support.characters import create_char1


@pytest.fixture
def client(make_app):
    return make_app().test_client()


@pytest.mark.parametrize("moved", ['"12"', '["1", "2"]', '[true, false]', '[449, "278"]', '[1, 2, 3]', '{"x": 1}'])
def test_patch_joints_must_be_two_numbers(client, moved):
    cid, _, _ = create_char1(client)
    r = client.patch(f"/characters/{cid}", data=f'{{"joints": {{"neck": {moved}}}}}',
                     content_type="application/json")
    assert r.status_code == 400 and r.get_json()["error"] == "bad_request", (moved, r.get_json())
    assert client.get(f"/characters/{cid}").get_json()["version"] == 1      # nothing stored


def test_a_box_of_strings_or_booleans_is_refused(client):
    cid, _, _ = create_char1(client)
    for box in ('["0", "0", "100", "100"]', "[true, 0, 100, 100]"):
        r = client.patch(f"/characters/{cid}", data=f'{{"bbox": {box}}}', content_type="application/json")
        assert r.status_code == 400 and r.get_json()["error"] == "bad_request", (box, r.get_json())


def test_a_deadline_already_past_is_504_not_a_negative_408(client):
    r = client.post("/characters", data=b"x" * 100, headers={"X-Deadline-Seconds": "2e-308"},
                    content_type="image/png")
    assert r.status_code == 504 and r.get_json()["error"] == "deadline_exceeded", r.get_json()
    assert "within -" not in r.get_json()["message"]
