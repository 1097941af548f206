"""POST /animate honours `size` (issue 33 item 12): `-F size=800` was ignored silently (a 400x400
result). In-process app with its render process pool; the character's joints and box are the
client's (no model is called); the animation is read back by Pillow.
"""
from __future__ import annotations

import io
import json
from urllib.parse import urlsplit

import pytest
import yaml
from PIL import Image

from tests.conftest import CHAR1


def _form(**fields):
    cfg = yaml.safe_load((CHAR1 / "char_cfg.yaml").read_text())
    joints = {j["name"]: j["loc"] for j in cfg["skeleton"]}
    with Image.open(CHAR1 / "texture.png") as im:
        box = [0, 0, im.width, im.height]
    return {"image": ((CHAR1 / "texture.png").open("rb"), "char1.png", "image/png"), "motions": "dab",
            "joints": json.dumps(joints), "bbox": json.dumps(box), **fields}


def _read(client, url: str) -> Image.Image:
    r = client.get(urlsplit(url).path)
    assert r.status_code == 200, url
    return Image.open(io.BytesIO(r.data))


@pytest.fixture(scope="module")
def client(make_app):
    return make_app(render_max_frames=4).test_client()


def test_the_size_asked_for_is_the_size_made(client):
    r = client.post("/animate", data=_form(size="232"))
    assert r.status_code == 200, r.get_json()
    with _read(client, r.get_json()["animations"]["dab"]) as im:
        assert im.size == (232, 232)


@pytest.mark.parametrize("size, fmt, says", [("5000", "gif", "from 64 to"), ("ten", "gif", "integer"),
                                             ("233", "mp4", "even size")])
def test_a_size_out_of_bounds_is_refused_not_ignored(client, size, fmt, says):
    r = client.post("/animate", data=_form(size=size, format=fmt))
    assert r.status_code == 400 and r.get_json()["error"] == "bad_request", r.get_json()
    assert says in r.get_json()["message"]
