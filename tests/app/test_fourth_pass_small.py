"""Issue 41's small findings S13-S16 and S18, in process (the real app factory, local storage, a real render
pool; no model server: characters come from client-sent boxes and joints). S17 (the docs) is
tests/app/http/test_docs_name_the_routes.py; S11 tests/app/test_connection_cap_e2e.py."""
from __future__ import annotations

import io
import json
import math

import pytest
from pydantic import BaseModel

from animator.video.decode import VideoInfo, VideoLimits, window
from app.characters.preparation import ModelPreparation
from app.intake.shapes import VideoStart
from tests.app.scenes.test_scenes import _client_characters, _create
from tests.support import stack

CLIENT = "a-127.0.0.1"   # the test client's identity (its address, no token)


@pytest.fixture(scope="module")
def app(make_app):
    return make_app(render_fps="10", scene_max_characters=4, scene_max_work_mpx=200.0, client_storage_mb=500.0)


@pytest.fixture(scope="module")
def client(app):
    return app.test_client()


def _error(resp, status, code):
    assert resp.status_code == status, resp.get_data(as_text=True)[:500]
    body = resp.get_json()
    assert body["error"] == code, body
    return body


@pytest.fixture(scope="module")
def scene(client):
    resp = _create(client, _client_characters(("char1", "char2")), motions="dab")
    assert resp.status_code == 201, resp.get_data(as_text=True)
    return resp.get_json()


def test_s13_a_scenes_document_is_never_a_public_file(client, scene):
    sid = scene["id"]
    assert client.get(f"/scenes/{sid}").status_code == 200
    for key in (f"scenes/{sid}/scene.json", f"scenes/{sid}/", f"scene-files/x/../../scenes/{sid}/scene.json"):
        _error(client.get(f"/files/{key}"), 404, "not_found")
    page = scene["page"] if isinstance(scene.get("page"), str) else None
    if page:   # the page itself, under the scene's files key, is public: the studio shows it
        assert client.get(page.split("localhost", 1)[-1]).status_code == 200


def test_s14_one_character_named_twice_in_a_patch_is_refused_not_put_in_twice(client, scene):
    sid = scene["id"]
    first = scene["characters"][0]["id"]
    resp = client.patch(f"/scenes/{sid}", json={"characters": [{"id": first, "drop": True}]})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    version = resp.get_json()["version"]
    body = _error(client.patch(f"/scenes/{sid}", json={"add": [{"id": first}, {"id": first, "motion": "dab"}]}),
                  400, "bad_request")
    assert "named twice" in body["message"]
    second = scene["characters"][1]["id"]
    _error(client.patch(f"/scenes/{sid}", json={"characters": [{"id": second, "drop": True},
                                                                {"id": second, "drop": True}]}),
           400, "bad_request")
    now = client.get(f"/scenes/{sid}").get_json()
    assert now["version"] == version and [c["id"] for c in now["characters"]] == [second]
    resp = client.patch(f"/scenes/{sid}", json={"add": [{"id": first}]})
    assert [c["id"] for c in resp.get_json()["characters"]] == [second, first]


@pytest.mark.parametrize("size", ["１０２４", "²", "1_000", "٣٠٠", " 3e2"])
def test_s15_a_size_in_other_digits_is_refused_in_our_words(client, scene, size):
    image, _ = stack.page_with_character("char1", (400, 400), (0, 0))
    body = _error(client.post("/animate", data={"image": (io.BytesIO(stack.encode(image)), "d.png", "image/png"),
                                                "size": size}, content_type="multipart/form-data"),
                  400, "bad_request")
    assert body["message"].startswith("'size' must be an integer number of pixels"), body
    body = _error(client.post(f"/scenes/{scene['id']}/animations", data={"size": size}), 400, "bad_request")
    assert body["message"].startswith("'size' must be an integer number of pixels"), body
    # a JSON number is still a number; ASCII digits in a form still are
    assert "'size' must be from" in _error(client.post(f"/scenes/{scene['id']}/animations", json={"size": 1}),
                                           400, "bad_request")["message"]


def test_s18_a_window_starting_at_minus_zero_reads_as_zero():
    class Window(BaseModel):
        start: VideoStart = None

    start = Window.model_validate({"start": "-0"}).start
    assert start == 0.0 and math.copysign(1.0, start) == 1.0                    # the form's -0 is 0
    info = VideoInfo(size=(64, 64), fps=10.0, duration_s=30.0)
    assert window(info, VideoLimits(), start_s=-0.0, end_s=20.0).describe() == "0-20 s of the 30.0 s video"


def test_s18_deleting_a_scene_gives_its_bytes_back_to_the_clients_share(app, client):
    shares = app.extensions["doodlepod"].shares
    before = shares.ledger.usage(CLIENT)[0]
    resp = _create(client, _client_characters(("char3",)), motions="dab")
    assert resp.status_code == 201, resp.get_data(as_text=True)
    sid, characters = resp.get_json()["id"], [c["id"] for c in resp.get_json()["characters"]]
    stored = shares.ledger.usage(CLIENT)[0] - before
    assert stored > 0
    assert client.delete(f"/scenes/{sid}").status_code == 204
    for cid in characters:   # the scene's characters are characters of their own: deleted apart
        assert client.delete(f"/characters/{cid}").status_code == 204
    assert shares.ledger.usage(CLIENT)[0] - before <= 0, (stored, shares.ledger.usage(CLIENT)[0] - before)


def test_s16_a_photo_for_models_that_are_not_there_is_refused_before_a_slot_or_a_decode(make_app, tmp_path):
    state = tmp_path / "models-state.json"
    state.write_text(json.dumps({"state": "preparing", "detail": "compiling", "retry_after_s": 120}))
    assert ModelPreparation(str(state)).read()["state"] == "preparing"
    app = make_app(models_state_file=str(state), finder_fallback=False)
    svc = app.extensions["doodlepod"]
    taken: list[str] = []
    acquire, decode = svc.slots.acquire, svc.pipeline.decode
    svc.slots.acquire = lambda *a, **k: taken.append("slot") or acquire(*a, **k)
    svc.pipeline.decode = lambda *a, **k: taken.append("decode") or decode(*a, **k)
    client = app.test_client()
    page, joints = stack.page_with_character("char1", (600, 700), (20, 20))
    photo = stack.encode(page)
    for path, data in (("/animate", {}), ("/characters", {}), ("/animate", {"every_character": "true"}),
                       ("/scenes", {})):
        resp = client.post(path, data={"image": (io.BytesIO(photo), "p.png", "image/png"), **data},
                           content_type="multipart/form-data")
        _error(resp, 503, "models_unavailable")
        assert resp.headers["Retry-After"] == "120"
    assert taken == []
    # a drawing with its joints needs no model: it goes on (a slot, a decode)
    resp = client.post("/animate", data={"image": (io.BytesIO(photo), "p.png", "image/png"), "motions": "dab",
                                         "joints": json.dumps({k: list(v) for k, v in joints.items()})},
                       content_type="multipart/form-data")
    assert resp.status_code == 200, resp.get_data(as_text=True)[:300]
    assert taken[:2] == ["slot", "decode"]
