"""Characters the in-process tests create through the API."""
from __future__ import annotations

import json
from typing import Any

import yaml
from PIL import Image

from tests.conftest import CHAR1


def char1_joints_and_box() -> tuple[dict[str, list[float]], list[int]]:
    """char1's own joints (its char_cfg.yaml) and the whole texture as its box, in image pixels."""
    cfg = yaml.safe_load((CHAR1 / "char_cfg.yaml").read_text())
    joints = {j["name"]: j["loc"] for j in cfg["skeleton"]}
    with Image.open(CHAR1 / "texture.png") as im:
        box = [0, 0, im.width, im.height]
    return joints, box


def create_char1(client: Any) -> tuple[str, dict[str, list[float]], list[int]]:
    """``POST /characters`` of char1's texture with its own joints and the whole image as the box, on a
    Flask test client: (character id, joints, box), in image pixels."""
    joints, box = char1_joints_and_box()
    r = client.post("/characters", data={"image": ((CHAR1 / "texture.png").open("rb"), "char1.png", "image/png"),
                                         "joints": json.dumps(joints), "bbox": json.dumps(box)})
    assert r.status_code == 201, r.get_json()
    return r.get_json()["id"], joints, box


def post_char1(url: str) -> str:
    """``POST /characters`` of char1 (its own joints, the whole texture as the box) to the server at
    ``url`` over real HTTP: the new character's id. No model is asked."""
    import requests

    joints, box = char1_joints_and_box()
    r = requests.post(f"{url}/characters", timeout=120,
                      files={"image": ("char1.png", (CHAR1 / "texture.png").read_bytes(), "image/png")},
                      data={"joints": json.dumps(joints), "bbox": json.dumps(box)})
    assert r.status_code == 201, r.text
    return r.json()["id"]
