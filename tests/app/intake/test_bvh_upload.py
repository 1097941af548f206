"""A client's own BVH clip on POST /animate (multipart field ``bvh``, optional ``start_frame`` and
``end_frame``): rendered with retarget and motion configs derived from the clip, bounded by the
DOODLEPOD_BVH_MAX_* settings, and a bad clip answered 422 naming the field and the line.

In-process (Flask's test client on the real create_app, real render processes); the client sends
the joints, so no model server is needed.
"""
from __future__ import annotations

import io
import json
import logging
import os
from pathlib import Path

import pytest
import yaml
from PIL import Image

from tests.conftest import BVH_DIR, CHAR1
from tests.support.answers import assert_error

DAB = (BVH_DIR / "fair1" / "dab.bvh").read_bytes()
JJ = (BVH_DIR / "cmu1" / "jumping_jacks.bvh").read_bytes()


@pytest.fixture(scope="module")
def page() -> tuple[bytes, str]:
    texture = Image.open(CHAR1 / "texture.png").convert("RGB")
    sheet = Image.new("RGB", (600, 680), "white")
    sheet.paste(texture, (40, 30))
    buf = io.BytesIO()
    sheet.save(buf, format="PNG")
    skeleton = yaml.safe_load((CHAR1 / "char_cfg.yaml").read_text())["skeleton"]
    return buf.getvalue(), json.dumps({j["name"]: [j["loc"][0] + 40, j["loc"][1] + 30] for j in skeleton})


def _post(client, page, bvh: bytes | None, name: str = "clip.bvh", **form):
    data, joints = page
    fields = {"image": (io.BytesIO(data), "drawing.png", "image/png"), "joints": joints, **form}
    if bvh is not None:
        fields["bvh"] = (io.BytesIO(bvh), name, "application/octet-stream")
    return client.post("/animate", data=fields)


def _message(resp, status: int, code: str) -> str:
    return assert_error(resp, status, code)["message"]


def _scratch(app) -> list:
    return sorted(p.name for p in (Path(app.extensions["doodlepod"].pipeline.scratch_dir) / "uploads").glob("upload-*"))


def test_an_uploaded_clip_is_rendered_with_derived_configs(app, client, page, caplog):
    with caplog.at_level(logging.INFO, logger="doodlepod.bvh"):
        resp = _post(client, page, JJ, start_frame="10", end_frame="70")
    # parsing and checking ran in a render process, not on the request's (gevent) loop
    checked = [r for r in caplog.records if r.name == "doodlepod.bvh" and "checked in pid" in r.getMessage()]
    assert checked and f"pid {os.getpid()}" not in checked[0].getMessage()
    assert "60 frames" in checked[0].getMessage() and "CMU" in checked[0].getMessage()
    assert resp.status_code == 200, resp.get_data(as_text=True)
    anims = resp.json["animations"]
    assert list(anims) == ["upload"]          # only the clip: no default motions when a bvh is sent
    gif = client.get(anims["upload"].replace("http://localhost", ""))
    assert gif.status_code == 200
    with Image.open(io.BytesIO(gif.data)) as im:
        total_ms = 0
        for k in range(im.n_frames):
            im.seek(k)
            total_ms += im.info["duration"]
    assert abs(total_ms - 60 * 33.33) <= 40     # 60 BVH frames at 30 fps, whatever the output rate
    assert _scratch(app) == []                 # the clip's file is gone with the request


def test_a_clip_and_library_motions_together(app, client, page):
    resp = _post(client, page, DAB, motions="zombie", end_frame="60")
    assert resp.status_code == 200, resp.get_data(as_text=True)
    assert list(resp.json["animations"]) == ["zombie", "upload"]
    # a request that fails after the clip was saved leaves nothing behind either
    _message(_post(client, page, DAB, motions="nope"), 400, "unknown_motion")
    assert _scratch(app) == []


def test_the_clip_may_come_as_a_text_field(client, page):
    data, joints = page
    resp = client.post("/animate", data={"image": (io.BytesIO(data), "drawing.png", "image/png"), "joints": joints,
                                         "bvh": JJ.decode(), "end_frame": "30"})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    assert list(resp.json["animations"]) == ["upload"]


def test_a_bad_clip_is_422_naming_the_field_and_line(app, client, page):
    lines = JJ.decode().splitlines()
    k = next(i for i, ln in enumerate(lines) if "OFFSET" in ln and i > 5)
    lines[k] = lines[k].replace("OFFSET", "OFFSET x")
    msg = _message(_post(client, page, "\n".join(lines).encode()), 422, "invalid_motion")
    assert "'bvh'" in msg and f"line {k + 1}" in msg and "OFFSET" in msg
    rows = DAB.decode().splitlines()
    rows[200] = rows[200] + " 1.0"
    msg = _message(_post(client, page, "\n".join(rows).encode()), 422, "invalid_motion")
    assert "line 201" in msg and "values" in msg
    assert "'bvh'" in _message(_post(client, page, b"\x89PNG\r\n\x1a\n\0\0"), 422, "invalid_motion")
    assert _scratch(app) == []


def test_an_unrecognised_skeleton_is_422_listing_what_is_missing(client, page):
    bird = DAB.replace(b"ForeArm", b"Wing")
    msg = _message(_post(client, page, bird, "bird.bvh"), 422, "invalid_motion")
    assert "bird.bvh" in msg and "no left forearm" in msg and "no right forearm" in msg


def test_frame_range_fields(client, page):
    assert "start_frame" in _message(_post(client, page, DAB, start_frame="339"), 422, "invalid_motion")
    assert "end_frame" in _message(_post(client, page, DAB, start_frame="20", end_frame="20"), 422, "invalid_motion")
    assert "end_frame" in _message(_post(client, page, DAB, end_frame="400"), 422, "invalid_motion")
    assert "start_frame" in _message(_post(client, page, DAB, start_frame="ten"), 400, "bad_request")
    assert "bvh" in _message(_post(client, page, None, start_frame="3", motions="dab"), 400, "bad_request")


def test_limits_are_settings(make_app, page):
    client = make_app(bvh_max_mb=0.2, bvh_max_frames=100).test_client()
    assert "DOODLEPOD_BVH_MAX_MB" in _message(_post(client, page, DAB), 413, "too_large")  # 225 KB
    msg = _message(_post(client, page, JJ), 422, "invalid_motion")                        # 125 frames
    assert "at most 100 frames" in msg and "line 186" in msg
    client = make_app(bvh_max_joints=36, bvh_max_seconds=3.0).test_client()
    msg = _message(_post(client, page, JJ), 422, "invalid_motion")                        # 38 joints
    assert "38 joints" in msg and "at most 36" in msg
    msg = _message(_post(client, page, DAB, start_frame="0", end_frame="200"), 422, "invalid_motion")  # 6.7 s
    assert "DOODLEPOD_BVH_MAX_SECONDS" in msg
