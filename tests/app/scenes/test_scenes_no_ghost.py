"""A moved or dropped character leaves no ghost: the page background takes every drawing out where it
was drawn, whatever its motion or its new place, and nothing else.

The photo is made here: generated paper grain (tests/fixtures/scene_photo.py's :func:`paper`) with
three drawings pasted in the LEFT half of the page at known places, so the true paper under each drawing
is known. The scene is made through the API (the real app, a real render pool; client-sent boxes and
joints, no model server), every character's ``at`` is PATCHed to the empty RIGHT half, the scene is
rendered as lossless PNG frames, and every frame is measured at each drawn place against the true paper
(scaled to the canvas the same way): under 2 % of the drawing's pixels still ink, mean difference under
10 grey levels. Before the fix the hole was made where each character stands now, so each drawn place
kept its drawing (20-77 grey levels off).
"""
from __future__ import annotations

import io
import json
import zipfile
from functools import lru_cache

import numpy as np
import pytest
from PIL import Image

from tests.fixtures.scene_photo import SIZE, make_scene_photo, paper

#: (example character, scale, x, y): every drawing in the left half of the 1000x750 page (x < 500)
LEFT_HALF = (
    ("char3", 0.40, 20, 30),     # 226 x 219
    ("char4", 0.60, 300, 60),    # 130 x 285
    ("char1", 0.45, 40, 420),    # 229 x 271
    ("char2", 0.55, 290, 470),   # 183 x 216
)
#: where each goes: the right half, clear of every drawn place
RIGHT_HALF = {"char3": [560, 30], "char4": [850, 60], "char1": [560, 420], "char2": [800, 470]}
CANVAS = 500                    # the render's longer side: the 1000x750 page at half size
INK = 40                        # grey levels darker than the true paper: still ink


@lru_cache(maxsize=None)
def _photo():
    photo, pasted = make_scene_photo(LEFT_HALF)
    buf = io.BytesIO()
    Image.fromarray(photo).save(buf, "PNG")
    return buf.getvalue(), pasted


def _grey(rgb: np.ndarray) -> np.ndarray:
    return rgb[..., :3].astype(np.float64) @ np.array([0.299, 0.587, 0.114])


def _on_canvas(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    return np.asarray(Image.fromarray(image).resize(size, Image.Resampling.LANCZOS))


@pytest.fixture(scope="module")
def client(make_app):
    return make_app(render_fps="10", scene_max_characters=4, scene_max_work_mpx=400.0).test_client()


def _scene(client, names):
    png, pasted = _photo()
    chars = [{"bbox": p.box, "joints": p.joints} for p in pasted if p.name in names]
    resp = client.post("/scenes", data={"image": (io.BytesIO(png), "page.png", "image/png"),
                                        "characters": json.dumps(chars),
                                        "motions": ",".join(["dab", "jumping_jacks", "wave_hello"][:len(chars)])},
                       content_type="multipart/form-data")
    assert resp.status_code == 201, resp.get_data(as_text=True)
    body = resp.get_json()
    return body, {n: c for n, c in zip([p.name for p in pasted if p.name in names], body["characters"])}


def _frames(client, sid: str) -> list[np.ndarray]:
    resp = client.post(f"/scenes/{sid}/animations", json={"format": "frames", "size": CANVAS, "max_frames": 6})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    data = client.get(resp.get_json()["animation"].split("localhost", 1)[-1]).data
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        names = sorted(n for n in z.namelist() if n.endswith(".png"))
        frames = [np.asarray(Image.open(io.BytesIO(z.read(n))).convert("RGBA")) for n in names]
    # the page's shape, sides even: the 500x375 page lies on its top 375 rows (a row of paper below)
    assert len(frames) == 6 and frames[0].shape[:2] == (376, 500)
    return [f[:375] for f in frames]


def _drawn_place(frames, pasted_one):
    """(largest fraction of the drawing's pixels still ink over the frames, largest mean grey difference
    from the true paper) at where ``pasted_one`` was drawn."""
    w, h = frames[0].shape[1], frames[0].shape[0]
    true_paper = _grey(_on_canvas(paper(SIZE), (w, h)))
    mask = np.asarray(Image.fromarray(pasted_one.mask.astype(np.uint8) * 255).resize((w, h),
                                                                                  Image.Resampling.BILINEAR)) > 127
    ink, diff = 0.0, 0.0
    for f in frames:
        g = _grey(f)
        ink = max(ink, float((g[mask] < true_paper[mask] - INK).mean()))
        diff = max(diff, float(np.abs(g[mask] - true_paper[mask]).mean()))
    return ink, diff


def test_every_character_moved_away_leaves_the_paper_where_it_was_drawn(client):
    names = ("char3", "char4", "char1")
    scene, by_name = _scene(client, names)
    pasted = {p.name: p for p in _photo()[1]}
    # as drawn: each drawn place shows its character (the measure can see a drawing)
    still = _frames(client, scene["id"])
    for n in names:
        ink, diff = _drawn_place(still, pasted[n])
        assert ink > 0.05 and diff > 15, (n, ink, diff)
    resp = client.patch(f"/scenes/{scene['id']}", json={"characters": [
        {"id": by_name[n]["id"], "at": RIGHT_HALF[n]} for n in names]})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    assert all(c["moved"] and c["bbox"][0] >= 500 for c in resp.get_json()["characters"])
    frames = _frames(client, scene["id"])
    for n in names:
        ink, diff = _drawn_place(frames, pasted[n])
        assert ink < 0.02 and diff < 10, (n, f"{ink:.1%} still ink, {diff:.1f} grey levels from the paper")
    # and the moved characters are on the right half: ink there in every frame
    right = _grey(frames[0][:, 260:])
    assert (right < 120).sum() > 500


def test_a_dropped_characters_drawing_is_taken_out_unless_the_scene_keeps_it(client):
    names = ("char3", "char4", "char1")
    scene, by_name = _scene(client, names)
    pasted = {p.name: p for p in _photo()[1]}
    sid = scene["id"]
    resp = client.patch(f"/scenes/{sid}", json={"characters": [{"id": by_name["char4"]["id"], "drop": True}]})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    body = resp.get_json()
    assert [d["id"] for d in body["dropped"]] == [by_name["char4"]["id"]]
    assert body["dropped"][0]["drawing"] == "taken out"               # the default
    ink, diff = _drawn_place(_frames(client, sid), pasted["char4"])
    assert ink < 0.02 and diff < 10, (f"{ink:.1%} still ink, {diff:.1f} grey levels from the paper")
    # the person's choice: the dropped drawing stays on the page, as drawn
    resp = client.patch(f"/scenes/{sid}", json={"characters": [{"id": by_name["char4"]["id"], "drop": True,
                                                                "keep_drawing": True}]})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    assert resp.get_json()["dropped"][0]["drawing"] == "kept"
    frames = _frames(client, sid)
    ink, diff = _drawn_place(frames, pasted["char4"])
    assert ink > 0.05 and diff > 15, (ink, diff)
    photo = _grey(_on_canvas(np.asarray(Image.open(io.BytesIO(_photo()[0])).convert("RGB")), (500, 375)))
    mask = np.asarray(Image.fromarray(pasted["char4"].mask.astype(np.uint8) * 255).resize(
        (500, 375), Image.Resampling.BILINEAR)) > 127
    # the photo's own drawing, unmoved: far nearer the photo than the paper (the rest: the palette's rounding)
    assert np.abs(_grey(frames[0])[mask] - photo[mask]).mean() < diff / 3, (
        np.abs(_grey(frames[0])[mask] - photo[mask]).mean(), diff)
    # put back into the scene, it is no longer a dropped drawing
    resp = client.patch(f"/scenes/{sid}", json={"add": [{"id": by_name["char4"]["id"]}]})
    assert resp.status_code == 200 and resp.get_json()["dropped"] == []


def test_a_drawing_the_detector_missed_is_added_from_the_page_by_its_box_and_joints(client):
    """PATCH add ``{"bbox", "joints"}``: a new character cut from the scene's own stored page (no photo sent
    again: a reloaded page has none), standing where it was drawn; moved, it too leaves the paper."""
    scene, _ = _scene(client, ("char3", "char4", "char1"))
    sid = scene["id"]
    p = {p.name: p for p in _photo()[1]}["char2"]
    resp = client.patch(f"/scenes/{sid}", json={"add": [{"bbox": p.box, "joints": p.joints, "motion": "dab"}]})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    added = resp.get_json()["characters"][-1]
    assert len(resp.get_json()["characters"]) == 4 and added["motion"] == "dab" and not added["moved"]
    assert all(abs(a - b) <= 3 for a, b in zip(added["bbox"], p.box)), (added["bbox"], p.box)
    ch = client.get(f"/characters/{added['id']}").get_json()
    assert ch["image"] == {"width": 1000, "height": 750}
    assert max(abs(ch["joints"][j][0] - x) + abs(ch["joints"][j][1] - y) for j, (x, y) in p.joints.items()) < 3
    resp = client.patch(f"/scenes/{sid}", json={"characters": [{"id": added["id"], "at": RIGHT_HALF["char2"]}]})
    assert resp.status_code == 200
    ink, diff = _drawn_place(_frames(client, sid), p)
    assert ink < 0.02 and diff < 10, (f"{ink:.1%} still ink, {diff:.1f} grey levels from the paper")
    # bounds before any work: the scene's limit (4 here), a box that is no list
    resp = client.patch(f"/scenes/{sid}", json={"add": [{"bbox": p.box}]})
    assert resp.status_code == 422 and resp.get_json()["error"] == "too_many_characters"
    resp = client.patch(f"/scenes/{sid}", json={"add": [{"bbox": "left", "joints": p.joints}]})
    assert resp.status_code == 400 and resp.get_json()["error"] == "bad_request"
    resp = client.patch(f"/scenes/{sid}", json={"add": [{"bbox": p.box, "colour": "red"}]})
    assert resp.status_code == 400 and resp.get_json()["error"] == "bad_request"
