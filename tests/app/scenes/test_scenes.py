"""The scenes API in process (the real app factory, local storage, a real render pool; no model server:
characters come from client-sent boxes and joints). The model server's several boxes are in
test_scenes_e2e.py.

The photo is tests/fixtures/scene_photo.py's: four example characters on paper; its answer key gives
the boxes and joints a client would send.
"""
from __future__ import annotations

import io
import json
from functools import lru_cache

import numpy as np
import pytest
from PIL import Image

from tests.fixtures.scene_photo import answer_key, make_scene_photo


@lru_cache(maxsize=None)
def _photo():
    photo, pasted = make_scene_photo()
    buf = io.BytesIO()
    Image.fromarray(photo).save(buf, "PNG")
    return buf.getvalue(), answer_key(pasted)


def _client_characters(names=("char3", "char1", "char2")):
    _, key = _photo()
    return [{"bbox": k["box"], "joints": k["joints"]} for k in key if k["name"] in names]


@pytest.fixture(scope="module")
def client(make_app):
    return make_app(render_fps="10", scene_max_characters=4, scene_max_work_mpx=200.0).test_client()


def _create(client, characters=None, **fields):
    data = {"image": (io.BytesIO(_photo()[0]), "page.png", "image/png"), **fields}
    if characters is not None:
        data["characters"] = json.dumps(characters)
    return client.post("/scenes", data=data, content_type="multipart/form-data")


def _error(resp, status, code):
    assert resp.status_code == status, resp.get_data(as_text=True)[:500]
    body = resp.get_json()
    assert body["error"] == code, body
    return body


@pytest.fixture(scope="module")
def scene(client):
    resp = _create(client, _client_characters(), motions="dab,jumping,dab")
    assert resp.status_code == 201, resp.get_data(as_text=True)
    return resp.get_json()


def test_a_scene_from_client_boxes_keeps_every_character_where_it_was_drawn(client, scene):
    _, key = _photo()
    by_name = {k["name"]: k for k in key}
    assert [c["motion"] for c in scene["characters"]] == ["dab", "jumping", "dab"]
    assert scene["background"] == {"kind": "page"} and scene["image"] == {"width": 1000, "height": 750}
    for c, name in zip(scene["characters"], ("char3", "char1", "char2")):
        # the app crops to the drawing inside the box it was sent (segmentation), never outside it
        box = by_name[name]["box"]
        assert box[0] - 2 <= c["bbox"][0] and c["bbox"][2] <= box[2] + 2, (name, c["bbox"], box)
        assert box[1] - 2 <= c["bbox"][1] and c["bbox"][3] <= box[3] + 2, (name, c["bbox"], box)
        ch = client.get(f"/characters/{c['id']}").get_json()
        for joint, (x, y) in by_name[name]["joints"].items():
            assert abs(ch["joints"][joint][0] - x) < 1.5 and abs(ch["joints"][joint][1] - y) < 1.5
    got = client.get(f"/scenes/{scene['id']}")
    assert got.status_code == 200 and got.headers["ETag"] == '"1"'


def test_a_scene_renders_with_progress_answered_and_cached(client, scene):
    resp = client.post(f"/scenes/{scene['id']}/animations", json={"format": "gif", "size": 200, "max_frames": 4})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    body = resp.get_json()
    assert (body["width"], body["height"]) == (200, 150) and body["cached"] is False
    gif = client.get(body["animation"].split("localhost", 1)[-1])
    assert gif.status_code == 200
    im = Image.open(io.BytesIO(gif.data))
    assert im.size == (200, 150) and im.n_frames == 4
    again = client.post(f"/scenes/{scene['id']}/animations", json={"format": "gif", "size": 200, "max_frames": 4})
    assert again.get_json()["cached"] is True and again.get_json()["animation"] == body["animation"]


def test_patch_moves_a_character_changes_motions_and_background(client, scene):
    sid = scene["id"]
    first = scene["characters"][0]
    resp = client.patch(f"/scenes/{sid}", json={"characters": [{"id": first["id"], "at": [100, 50]}],
                                                "motion": "zombie", "background": "#336699"},
                        headers={"If-Match": '"1"'})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    body = resp.get_json()
    assert body["version"] == 2 and body["background"] == {"kind": "colour", "colour": "#336699"}
    moved = body["characters"][0]
    assert moved["moved"] is True and moved["bbox"][:2] == [100.0, 50.0]
    assert {c["motion"] for c in body["characters"]} == {"zombie"}
    _error(client.patch(f"/scenes/{sid}", json={"motion": "dab"}, headers={"If-Match": '"1"'}), 412,
           "version_mismatch")
    # drop one, then put it back where it was drawn
    resp = client.patch(f"/scenes/{sid}", json={"characters": [{"id": first["id"], "drop": True}]})
    assert [c["id"] for c in resp.get_json()["characters"]] == [c["id"] for c in scene["characters"][1:]]
    resp = client.patch(f"/scenes/{sid}", json={"add": [{"id": first["id"], "motion": "dab"}]})
    assert resp.get_json()["characters"][-1]["bbox"] == first["bbox"]
    # an uploaded picture as the background
    pic = io.BytesIO()
    Image.fromarray(np.full((40, 80, 3), (20, 160, 40), np.uint8)).save(pic, "PNG")
    resp = client.patch(f"/scenes/{sid}", data={"background": (io.BytesIO(pic.getvalue()), "sky.png", "image/png")},
                        content_type="multipart/form-data")
    assert resp.status_code == 200 and resp.get_json()["background"]["kind"] == "image"
    out = client.post(f"/scenes/{sid}/animations", json={"format": "webp", "size": 160, "max_frames": 2}).get_json()
    frame = np.asarray(Image.open(io.BytesIO(client.get(out["animation"].split("localhost", 1)[-1]).data))
                       .convert("RGB")).astype(int)
    assert np.abs(frame[:4, :4].reshape(-1, 3).mean(axis=0) - (20, 160, 40)).max() < 12


def test_a_scene_of_existing_characters(client, scene):
    ids = [c["id"] for c in scene["characters"][:2]]
    resp = client.post("/scenes", json={"characters": [{"id": ids[0], "motion": "jumping"}, ids[1]],
                                        "background": "none"})
    assert resp.status_code == 201, resp.get_data(as_text=True)
    body = resp.get_json()
    assert [c["id"] for c in body["characters"]] == ids and body["characters"][0]["motion"] == "jumping"
    assert body["background"] == {"kind": "none"}


def test_bounds_and_bad_requests_answer_clear_4xx(client, scene):
    sid = scene["id"]
    five = _client_characters(("char1", "char2", "char3", "char4")) * 2
    _error(_create(client, five[:5]), 422, "too_many_characters")
    _error(_create(client, [{"box": [1, 2, 3, 4]}]), 400, "bad_request")
    _error(_create(client, _client_characters(), motions="no_such_motion"), 400, "unknown_motion")
    _error(_create(client, _client_characters(), motions="dab,dab"), 400, "bad_request")
    _error(_create(client, _client_characters(), background="#12345"), 400, "bad_request")
    _error(client.get("/scenes/" + "0" * 32), 404, "not_found")
    _error(client.get("/scenes/nope"), 404, "not_found")
    _error(client.post(f"/scenes/{sid}/animations", json={"format": "glb"}), 400, "bad_request")
    _error(client.post(f"/scenes/{sid}/animations", json={"size": 100000}), 400, "bad_request")
    # 3 characters x every frame of a long clip x 1024 px: over the work bound of this app (200 Mpx-frames)
    body = _error(client.post(f"/scenes/{sid}/animations", json={"size": 1024}), 422, "scene_too_large")
    assert "max_frames" in body["message"]
    _error(client.patch(f"/scenes/{sid}", json={}), 400, "bad_request")
    _error(client.patch(f"/scenes/{sid}", json={"characters": [{"id": "x" * 32, "at": [1, 2]}]}), 400, "bad_request")
    _error(client.patch(f"/scenes/{sid}", json={"characters": [{"id": scene["characters"][0]["id"],
                                                                "at": [1, "a"]}]}), 400, "bad_request")
    _error(client.post("/scenes", json={"characters": ["0" * 32]}), 404, "not_found")
    twice = scene["characters"][0]["id"]
    _error(client.post("/scenes", json={"characters": [twice, twice]}), 400, "bad_request")


def test_delete(client):
    resp = _create(client, _client_characters(("char4",)))
    sid = resp.get_json()["id"]
    assert client.delete(f"/scenes/{sid}").status_code == 204
    _error(client.get(f"/scenes/{sid}"), 404, "not_found")


def test_every_character_is_bounded_like_a_request_of_several_motions(client):
    """Issue 41 S5: every_character renders a scene per motion, one after the other under one slot;
    two such requests naming every motion held the pod for minutes. At most
    DOODLEPOD_SCENE_MAX_MOTIONS (3), refused before the photo is looked at, sync or async."""
    for headers in ({}, {"Prefer": "respond-async"}):
        data = {"image": (io.BytesIO(_photo()[0]), "page.png", "image/png"), "every_character": "true",
                "motions": "dab,jumping,zombie,wave_hello"}
        body = _error(client.post("/animate", data=data, content_type="multipart/form-data", headers=headers),
                      422, "too_many_motions")
        assert "DOODLEPOD_SCENE_MAX_MOTIONS" in body["message"] and "4 named" in body["message"]


def _character_on(client, page_size, offset, zoom=1.0):
    """A character (char1, its texture scaled by ``zoom``) on a white page of ``page_size``, with its joints."""
    from tests.support import stack

    rgb, joints = stack.load_fixture_character("char1")
    tex = Image.fromarray(rgb)
    if zoom != 1.0:
        tex = tex.resize((max(1, round(tex.width * zoom)), max(1, round(tex.height * zoom))))
    page = Image.new("RGB", page_size, (255, 255, 255))
    page.paste(tex, offset)
    placed = {k: [v[0] * zoom + offset[0], v[1] * zoom + offset[1]] for k, v in joints.items()}
    box = [offset[0], offset[1], offset[0] + tex.width, offset[1] + tex.height]
    made = client.post("/characters", data={"image": (io.BytesIO(stack.encode(page)), "d.png"),
                                            "joints": json.dumps(placed), "bbox": json.dumps(box)},
                       content_type="multipart/form-data")
    assert made.status_code == 201, made.get_data(as_text=True)[:300]
    return made.get_json()["id"]


def test_a_character_drawn_far_larger_than_the_page_is_priced_and_refused_before_the_render(client):
    """Issue 41 S2/S3: a character from a 5000 px photo on the page of a 64 px one would be drawn
    hundreds of canvas pixels per texture pixel (its mask resampled at ~91,000 px, the sprite past the
    animator's bound): the scene's price, each character's drawn texels at its canvas scale, is
    known before the render and refused with the bound named; a normal scene of the same photos renders."""
    import time

    small = _character_on(client, (64, 66), (6, 3), zoom=0.1)        # char1 (508x602) at 51x60 px
    large = _character_on(client, (5000, 5000), (400, 100), zoom=8.0)  # at 4064x4816 px
    made = client.post("/scenes", json={"characters": [small, {"id": large, "at": [0, 0]}], "motions": "dab",
                                        "background": "page"})
    assert made.status_code == 201, made.get_data(as_text=True)[:300]
    sid = made.get_json()["id"]
    t0 = time.perf_counter()
    body = _error(client.post(f"/scenes/{sid}/animations", json={"format": "gif", "max_frames": 3}),
                  422, "scene_too_large")
    assert "million texels" in body["message"] and "per character" in body["message"]
    assert time.perf_counter() - t0 < 5


def test_a_scene_sheet_that_cannot_fit_is_refused_before_the_render_saying_what_fits(client):
    """A sprite sheet of a scene is priced on its canvas (the page's shape) before any work, queued or not."""
    resp = _create(client, _client_characters(("char1",)), motions="zombie")
    assert resp.status_code == 201, resp.get_data(as_text=True)
    sid = resp.get_json()["id"]
    for headers in ({}, {"Prefer": "respond-async"}):
        body = _error(client.post(f"/scenes/{sid}/animations", json={"format": "sheet", "size": 1024}, headers=headers),
                      422, "output_too_large")
        assert 256 < body["fits"]["size"] < 1024 and body["fits"]["max_frames"] > 0, body
        assert f"size {body['fits']['size']} or smaller" in body["message"], body["message"]
