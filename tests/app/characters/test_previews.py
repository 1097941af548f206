"""POST /characters/{id}/animations with ``max_frames``: the quick previews the studio page shows.

In-process on the real app factory: the character is created with the client's box and joints, so
neither model is called (TorchServe is not running here) while segmenting, rigging and rendering
are real.
"""
from __future__ import annotations

import io

import pytest
from PIL import Image

from tests.support.characters import create_char1


@pytest.fixture(scope="module")
def character(make_app):
    """(test client, character id) for char1's texture with its own joints, 64 px renders allowed."""
    client = make_app(render_size_min=64).test_client()
    return client, create_char1(client)[0]


def _frames(client, url: str) -> int:
    r = client.get(url[url.index("/files/"):])
    assert r.status_code == 200
    with Image.open(io.BytesIO(r.get_data())) as im:
        return im.n_frames


def test_max_frames_renders_the_clip_in_that_many_frames(character):
    client, cid = character
    r = client.post(f"/characters/{cid}/animations", json={"motions": ["dab"], "size": 64, "max_frames": 6})
    assert r.status_code == 200, r.get_json()
    short = r.get_json()["animations"]["dab"]
    assert _frames(client, short) == 6
    # a form field works the same, and the preview is cached apart from the full clip
    r = client.post(f"/characters/{cid}/animations", data={"motions": "dab", "size": "64", "max_frames": "6"})
    assert r.get_json()["cached"] == ["dab"] and r.get_json()["animations"]["dab"] == short
    full = client.post(f"/characters/{cid}/animations", json={"motions": ["dab"], "size": 64}).get_json()
    assert full["animations"]["dab"] != short and _frames(client, full["animations"]["dab"]) > 6


@pytest.mark.parametrize("bad", [0, -3, "x", 2.5, True, 10_001])
def test_max_frames_out_of_bounds_is_refused(character, bad):
    client, cid = character
    r = client.post(f"/characters/{cid}/animations", json={"motions": ["dab"], "size": 64, "max_frames": bad})
    assert r.status_code == 400
    assert r.get_json()["error"] == "bad_request" and "max_frames" in r.get_json()["message"]


def test_max_frames_cannot_exceed_the_operators_cap(make_app):
    from app.config import load_settings
    from app.errors import BadRequest
    from app.intake.shapes import parse_max_frames

    capped = load_settings({}, render_max_frames=50)
    assert parse_max_frames("50", capped) == 50
    with pytest.raises(BadRequest, match="from 1 to 50"):
        parse_max_frames(51, capped)


def test_thumbnails_are_rigged_on_a_coarser_mesh(app):
    """A 128 px preview needs no 300-cell mesh (its setup is most of a preview's time); 400 px does."""
    from animator import RenderOptions
    from app.render.pipeline import THUMBNAIL_MESH_CELLS

    pipeline = app.extensions["doodlepod"].pipeline
    assert pipeline.render_options("gif", 128).mesh_cells == THUMBNAIL_MESH_CELLS
    assert pipeline.render_options("gif", 400).mesh_cells == RenderOptions().mesh_cells  # the animator's default
