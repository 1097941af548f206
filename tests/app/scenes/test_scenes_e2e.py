"""Scenes end to end over real HTTP: gunicorn with gevent workers, the render process pool, a real
TorchServe on loopback serving the fake models, local storage.

Faked, and why: the two models (no weights can be downloaded here). The detector answers the boxes of
the scene fixture photo's four characters (tests/fixtures/scene_photo.py) plus a near-duplicate of one
(non-maximum suppression drops it) and a low-scoring box (the scene's score threshold drops it); the
pose model answers every crop with the same keypoints as fractions of the crop (char1's).
"""
from __future__ import annotations

import io
import json

import pytest
import requests
from PIL import Image

from tests.fixtures.scene_photo import answer_key, make_scene_photo
from tests.support import stack
from tests.support.answers import assert_error

pytestmark = [pytest.mark.timeout(900), pytest.mark.e2e]


@pytest.fixture(scope="module")
def photo():
    image, pasted = make_scene_photo()
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, "PNG")
    return buf.getvalue(), answer_key(pasted)


@pytest.fixture(scope="module")
def server(torchserve, photo):
    _, key = photo
    boxes = [{"bbox": k["box"], "score": round(0.95 - 0.05 * i, 2), "category": "drawn_humanoid"}
             for i, k in enumerate(key)]
    l, t, r, b = key[1]["box"]
    boxes.append({"bbox": [l + 6, t + 4, r + 3, b - 2], "score": 0.7, "category": "drawn_humanoid"})  # char1 again
    boxes.append({"bbox": [5, 5, 60, 80], "score": 0.3, "category": "drawn_humanoid"})                # a smudge
    c1 = key[1]
    fractions = [[(c1["joints"][j][0] - l) / (r - l), (c1["joints"][j][1] - t) / (b - t)] for j in stack.COCO_FROM_AD]
    torchserve.set_control(detector={"mode": "boxes", "boxes": boxes}, pose={"mode": "fractions", "fractions": fractions})

    def env(workdir):
        return {"DOODLEPOD_TORCHSERVE_URL": torchserve.inference_url,
                "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": torchserve.management_url,
                "DOODLEPOD_RENDER_PROCESSES": "1", "DOODLEPOD_TORCHSERVE_RETRIES": "1", "DOODLEPOD_RENDER_SIZE": "160",
                "DOODLEPOD_RENDER_FPS": "8", "DOODLEPOD_LOCAL_DIR": str(workdir / "files")}

    with stack.app_server("dp-scenes-", env) as srv:
        yield srv


def _post_photo(server, photo, **fields):
    return requests.post(f"{server.url}/scenes", files={"image": ("page.png", photo[0], "image/png")},
                         data=fields, timeout=300)


def _joints_of(server, scene_id):
    out = requests.post(f"{server.url}/scenes/{scene_id}/animations", json={"format": "joints", "size": 200},
                        timeout=300)
    assert out.status_code == 200, out.text
    return requests.get(out.json()["animation"], timeout=30).json()


def test_the_photos_detections_and_the_same_boxes_sent_by_the_client_give_the_same_scene(server, photo):
    _, key = photo
    found = _post_photo(server, photo, motions="dab")
    assert found.status_code == 201, found.text
    scene = found.json()
    assert len(scene["characters"]) == 4
    reasons = sorted(s["reason"] for s in scene["skipped"])
    assert reasons == ["overlap"], scene["skipped"]                      # the smudge scored under 0.5
    assert sorted(d["kept"] for d in scene["detections"]) == [False, True, True, True, True]
    sent = _post_photo(server, photo, motions="dab", characters=json.dumps([{"bbox": k["box"]} for k in key]))
    assert sent.status_code == 201, sent.text
    other = sent.json()
    # the same characters, in the same places (detections come best first: the fixture's order)
    for a, b in zip(scene["characters"], other["characters"]):
        assert a["bbox"] == b["bbox"]
        ja = requests.get(f"{server.url}/characters/{a['id']}", timeout=30).json()["joints"]
        jb = requests.get(f"{server.url}/characters/{b['id']}", timeout=30).json()["joints"]
        assert ja == jb
    # the same scene: every character's joints in every frame on the canvas
    da, db = _joints_of(server, scene["id"]), _joints_of(server, other["id"])
    for ca, cb in zip(da["characters"], db["characters"]):
        assert ca["frames"] == cb["frames"] and ca["canvas"] == cb["canvas"]


def test_a_scene_renders_as_gif_over_http(server, photo):
    scene = _post_photo(server, photo, motions="dab,jumping,zombie,dab").json()
    out = requests.post(f"{server.url}/scenes/{scene['id']}/animations", data={"size": "240", "max_frames": "6"},
                        timeout=300)
    assert out.status_code == 200, out.text
    gif = Image.open(io.BytesIO(requests.get(out.json()["animation"], timeout=30).content))
    assert gif.size == (240, 180) and gif.n_frames == 6


def test_animate_keeps_its_answer_and_opts_in_to_every_character(server, photo):
    files = {"image": ("page.png", photo[0], "image/png")}
    plain = requests.post(f"{server.url}/animate", files=files, data={"motions": "dab"}, timeout=300)
    assert plain.status_code == 200, plain.text
    assert sorted(plain.json()) == ["animations", "character", "id", "timings_ms"]
    every = requests.post(f"{server.url}/animate", files=files, data={"motions": "dab", "every_character": "true"},
                          timeout=300)
    assert every.status_code == 200, every.text
    body = every.json()
    assert set(body) >= {"animations", "character", "id", "timings_ms"} and len(body["characters"]) == 4
    assert body["character"]["bbox"] == plain.json()["character"]["bbox"]   # the best detection, as without
    gif = Image.open(io.BytesIO(requests.get(body["animations"]["dab"], timeout=30).content))
    assert gif.size == (160, 120)          # the page's shape, the render size its longer side
    bad = requests.post(f"{server.url}/animate", files=files, data={"every_character": "maybe"}, timeout=60)
    assert_error(bad, 400, "bad_request")
    bad = requests.post(f"{server.url}/animate", files=files, data={"every_character": "true", "bbox": "[1,2,3,4]"},
                        timeout=60)
    assert_error(bad, 400, "bad_request")
