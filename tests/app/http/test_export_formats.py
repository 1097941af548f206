"""POST /characters/{id}/animations and POST /animate in every export format: one URL per motion,
served with the format's type, cached per format, within the same size and frame bounds.

In-process on the real app factory (Flask's test client, real render processes, local storage); the
character comes with its own box and joints, so neither model is called."""
from __future__ import annotations

import io
import json
import re
import zipfile

import pytest
from PIL import Image

import animator
from tests.conftest import CHAR1
from tests.support.characters import create_char1

NEW_FORMATS = ("apng", "webm", "frames", "sheet", "joints", "glb")


@pytest.fixture(scope="module")
def character(make_app):
    client = make_app(render_size_min=64).test_client()
    cid, joints, box = create_char1(client)
    return client, cid, joints, box


def _get(client, url: str):
    r = client.get(url[url.index("/files/"):])
    assert r.status_code == 200, url
    return r


def _check(fmt: str, data: bytes, frames: int) -> None:
    """The file read back by its own kind of reader."""
    if fmt == "apng":
        assert Image.open(io.BytesIO(data)).n_frames == frames
    elif fmt == "webm":
        assert data[:4] == b"\x1aE\xdf\xa3" and b"webm" in data[:64]
    elif fmt == "frames":
        doc = json.loads(zipfile.ZipFile(io.BytesIO(data)).read("frames.json"))
        assert doc["frame_count"] == frames
    elif fmt == "sheet":
        atlas = json.loads(zipfile.ZipFile(io.BytesIO(data)).read("sheet.json"))
        assert len(atlas["frames"]) == frames
    elif fmt == "joints":
        assert len(json.loads(data)["frames"]) == frames
    else:
        assert data[:4] == b"glTF"


@pytest.mark.parametrize("fmt", NEW_FORMATS)
def test_each_format_is_one_url_per_motion_served_as_its_type(character, fmt):
    client, cid, _, _ = character
    body = {"motions": ["dab", "zombie"], "format": fmt, "size": 64, "max_frames": 5}
    r = client.post(f"/characters/{cid}/animations", json=body)
    assert r.status_code == 200, r.get_json()
    answer = r.get_json()
    assert answer["format"] == fmt and sorted(answer["animations"]) == ["dab", "zombie"] and answer["cached"] == []
    mime, ext = animator.FORMATS[fmt]
    for url in answer["animations"].values():
        assert url.endswith(f".{ext}")
        got = _get(client, url)
        assert got.mimetype == mime
        _check(fmt, got.get_data(), 5)
    again = client.post(f"/characters/{cid}/animations", json=body).get_json()
    assert again["cached"] == ["dab", "zombie"] and again["animations"] == answer["animations"]


def test_the_cache_key_holds_the_format(character):
    client, cid, _, _ = character
    urls = {fmt: client.post(f"/characters/{cid}/animations",
                             json={"motions": ["dab"], "format": fmt, "size": 64, "max_frames": 3}
                             ).get_json()["animations"]["dab"] for fmt in ("frames", "sheet", "gif")}
    assert len(set(urls.values())) == 3
    assert urls["frames"].endswith(".frames.zip") and urls["sheet"].endswith(".sheet.zip")
    assert urls["gif"].endswith(".gif")


@pytest.mark.parametrize("fmt", NEW_FORMATS)
@pytest.mark.parametrize("field,value", [("size", 5000), ("size", 10), ("max_frames", 0), ("max_frames", 10_001)])
def test_size_and_frame_bounds_hold_for_every_format(character, fmt, field, value):
    client, cid, _, _ = character
    r = client.post(f"/characters/{cid}/animations", json={"motions": ["dab"], "format": fmt, field: value})
    assert r.status_code == 400 and r.get_json()["error"] == "bad_request" and field in r.get_json()["message"]


def test_an_unknown_format_lists_the_new_ones(character):
    client, cid, _, _ = character
    r = client.post(f"/characters/{cid}/animations", json={"motions": ["dab"], "format": "fbx"})
    assert r.status_code == 400 and all(f in r.get_json()["message"] for f in NEW_FORMATS)


@pytest.mark.parametrize("fmt", ["sheet", "glb"])
def test_animate_answers_the_format_too(character, fmt):
    client, _, joints, box = character
    r = client.post("/animate", data={"image": ((CHAR1 / "texture.png").open("rb"), "char1.png", "image/png"),
                                      "joints": json.dumps(joints), "bbox": json.dumps(box), "format": fmt,
                                      "motions": "dab"})
    assert r.status_code == 200, r.get_json()
    url = r.get_json()["animations"]["dab"]
    got = _get(client, url)
    assert got.mimetype == animator.FORMATS[fmt][0]
    assert url.endswith({"sheet": ".sheet.zip", "glb": ".glb"}[fmt])


def test_a_sheet_over_its_bound_is_422_output_too_large():
    from animator.errors import OutputTooLarge as Animator
    from app.errors import from_animator

    err = from_animator(Animator("a sprite sheet of these 900 frames would hold over 67108864 pixels"))
    assert (err.status, err.code) == (422, "output_too_large")


def test_the_sheet_bound_stops_packing_as_soon_as_it_is_passed():
    import numpy as np

    from animator.errors import OutputTooLarge
    from animator.formats.sheet import pack_sheet

    served = []

    def frames():
        for i in range(50):
            served.append(i)
            f = np.zeros((40, 40, 4), np.uint8)
            f[5:35, 5:35 - (i % 7)] = 255       # 7 distinct frames (repeats are aliases), <= 900 px each
            yield f

    with pytest.raises(OutputTooLarge, match="fewer frames"):
        pack_sheet(frames(), 50, 0.04, max_pixels=5 * 900)
    assert len(served) <= 7      # the sixth distinct frame passes 5 frames of pixels


@pytest.mark.parametrize("respond_async", [False, True])
def test_a_sheet_that_cannot_fit_is_refused_before_the_render_saying_what_fits(character, respond_async):
    """Issue 43: a zombie sheet at 1024 px failed after the whole render (17-27 s). The server prices it
    before any work (app/render/sheet_price.py), synchronous or queued alike, and names what fits: the
    page shows that, it keeps no rule of its own."""
    client, cid, _, _ = character
    headers = {"Prefer": "respond-async"} if respond_async else {}
    r = client.post(f"/characters/{cid}/animations", json={"motions": ["zombie"], "format": "sheet", "size": 1024},
                    headers=headers)
    assert r.status_code == 422, r.get_json()
    answer = r.get_json()
    assert answer["error"] == "output_too_large"
    from animator.formats.sheet import MAX_PIXELS
    from app.render.sheet_price import sheet_pixels

    frames = int(re.search(r"zombie \((\d+) frames\)", answer["message"]).group(1))   # at this app's frame rate
    size, most = answer["fits"]["size"], answer["fits"]["max_frames"]
    assert sheet_pixels(frames, size, size) <= MAX_PIXELS < sheet_pixels(frames, size + 1, size + 1), answer
    assert sheet_pixels(most, 1024, 1024) <= MAX_PIXELS < sheet_pixels(most + 1, 1024, 1024), answer
    assert f"size {size} or smaller" in answer["message"] and f"max_frames {most} or fewer" in answer["message"]
    assert "frames format" in answer["message"]
    # a size the price allows is not refused before the render (a short clip: rendered here)
    r = client.post(f"/characters/{cid}/animations", json={"motions": ["jumping_jacks"], "format": "sheet",
                                                            "size": 64, "max_frames": 3})
    assert r.status_code == 200, r.get_json()


def test_the_sheet_price_names_sizes_and_frames_that_fit():
    from animator.formats.sheet import MAX_PIXELS
    from app.errors import OutputTooLarge
    from app.render.sheet_price import check_sheet, sheet_pixels

    for canvas in ((1024, 1024), (1024, 768), (600, 1000)):
        with pytest.raises(OutputTooLarge) as info:
            check_sheet("sheet", {"the scene": 466}, canvas)
        fits = info.value.details["fits"]
        longer = max(canvas)
        scaled = [round(v * fits["size"] / longer) for v in canvas]
        check_sheet("sheet", {"the scene": 466}, tuple(scaled))                 # that size fits
        assert sheet_pixels(466, *[(v * (fits["size"] + 2)) / longer for v in canvas]) > MAX_PIXELS
        check_sheet("sheet", {"the scene": fits["max_frames"]}, canvas)          # those frames fit
        with pytest.raises(OutputTooLarge):
            check_sheet("sheet", {"the scene": fits["max_frames"] + 1}, canvas)
    check_sheet("gif", {"dab": 10_000}, (1024, 1024))                            # other formats: no such bound
