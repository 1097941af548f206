"""The built-in motion library: every motion renders on char1 and on a character with an unusual
skeleton through the library, its loop measure is what the clip gives, every clip carries its
licence and CMU's acknowledgement, and the credits page lists them all."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

import animator
from animator.api import RenderOptions
from animator.loop_seam import character_height_px, loop_gap_pct
from app.motions.library import BUILTIN_DIR, LibraryError, categories, load_library, load_motions
from app.render.steps import _configs, render_motion
from tests.conftest import AD_REFERENCE, CHAR1, REPO

ACKNOWLEDGEMENT = ("The data used in this project was obtained from mocap.cs.cmu.edu.",
                   "The database was created with funding from NSF EIA-0196217.")
LIBRARY = load_motions()
#: Render options that keep 72 renders fast while still going through every stage.
SMALL = RenderOptions(width=64, height=64, max_frames=3, threads=1)


@pytest.fixture(scope="module")
def low_neck_char(tmp_path_factory) -> animator.Character:
    """char1's drawing with a skeleton whose neck sits below the shoulders (AnimatedDrawings'
    runtime checks then drop the neck's mapping): not the 16-joint layout the photo pipeline makes."""
    folder = tmp_path_factory.mktemp("low_neck")
    for f in ("texture.png", "mask.png"):
        shutil.copy(CHAR1 / f, folder / f)
    shutil.copy(AD_REFERENCE / "char1_low_neck.yaml", folder / "char_cfg.yaml")
    return animator.load_character(folder)


def test_the_library_has_36_motions_in_four_categories_in_a_stable_order():
    cats = categories(LIBRARY)
    assert [c["name"] for c in cats] == ["dance", "funny", "jumping", "walking"]
    assert sum(len(c["motions"]) for c in cats) == len(LIBRARY) == 36
    assert all(len(c["motions"]) >= 8 for c in cats)
    assert categories(load_motions()) == cats  # the same order every time
    for m in LIBRARY.values():
        j = m.as_json()
        assert j["title"] and j["description"] and j["origin"] and j["licence"], m.name
        assert j["seconds"] > 1.0 and isinstance(j["travels"], bool) and j["loop_gap_pct"] is not None
    assert {"dab", "jumping", "zombie"} <= set(LIBRARY)  # the old client's defaults


@pytest.mark.parametrize("name", list(LIBRARY))
def test_every_motion_renders_on_char1_and_on_an_unusual_skeleton(name, low_neck_char):
    m = LIBRARY[name]
    motion_path, retarget_path = str(m.motion_cfg), None if m.retarget_cfg is None else str(m.retarget_cfg)
    for char in (animator.load_character(CHAR1), low_neck_char):
        out = render_motion(char, motion_path, retarget_path, SMALL)
        assert out["data"][:6] in (b"GIF89a", b"GIF87a") and out["frame_count"] == 3
        assert abs(out["duration_s"] - m.seconds) < 0.1 * m.seconds


@pytest.mark.parametrize("name", list(LIBRARY))
def test_the_recorded_loop_measure_is_what_the_clip_gives_on_char1(name):
    m = LIBRARY[name]
    char = animator.load_character(CHAR1)
    motion_cfg, retarget_cfg = _configs(str(m.motion_cfg), None if m.retarget_cfg is None else str(m.retarget_cfg))
    pos = animator.retarget(char, motion_cfg, retarget_cfg).positions
    root = [j.name for j in char.skeleton].index("root")
    gap = loop_gap_pct(pos, root, character_height_px(char))
    assert gap == pytest.approx(m.loop_gap_pct, abs=0.006)
    assert gap < 1.0, f"{name}: the jump from the last frame to the first is {gap:.2f}% of the character's height"
    travel = np.linalg.norm(pos[-1, root] - pos[0, root]) / character_height_px(char) * 100
    assert m.travels == (travel > 20.0), (name, travel)


def test_every_clip_has_a_licence_note_and_cmu_clips_the_acknowledgement():
    notes = (BUILTIN_DIR / "cmu" / "LICENSE-NOTES.md").read_text()
    readme = (BUILTIN_DIR / "cmu" / "README.md").read_text()
    assert all(line in readme and line in notes for line in ACKNOWLEDGEMENT)
    assert "MIT License" in (BUILTIN_DIR / "LICENSE").read_text()
    cmu = [m for m in LIBRARY.values() if BUILTIN_DIR / "cmu" in m.motion_cfg.parents]
    assert len(cmu) == 31
    index = (BUILTIN_DIR / "cmu" / "INDEX.md").read_text()
    for m in LIBRARY.values():
        if m in cmu:
            assert "LICENSE-NOTES.md" in m.licence and re.fullmatch(r"\d{2,3}_\d{2}", m.cmu_trial), m.name
            assert f"| {m.name} |" in index and f"| {m.cmu_trial} |" in index
            repo = m.origin.split("BVH from ")[1].split("@")[0]
            assert repo in notes, f"{m.name}: its source repository {repo} has no licence note"
        else:
            assert m.licence == "MIT (LICENSE)" and "AnimatedDrawings" in m.origin, m.name
    # nothing in the folder that the library does not list
    listed = {m.motion_cfg for m in cmu}
    assert set((BUILTIN_DIR / "cmu").glob("*/*.bvh")) == listed


def test_the_credits_page_lists_every_clip_with_its_trial_licence_and_loop_measure():
    page = (REPO / "docs" / "motions.md").read_text()
    assert all(line in page for line in ACKNOWLEDGEMENT)
    rows = {r.split("|")[1].strip().strip("`"): r for r in page.splitlines() if r.startswith("| `")}
    for m in LIBRARY.values():
        row = rows.get(m.name)
        assert row, f"{m.name} missing from docs/motions.md"
        assert f"{m.loop_gap_pct:.2f}" in row and (m.cmu_trial or "AnimatedDrawings") in row
        assert ("CMU" in row) == bool(m.cmu_trial) or "MIT" in row
    assert "mocap.cs.cmu.edu" in (REPO / "README.md").read_text()


def test_the_library_stays_small():
    size = sum(p.stat().st_size for sub in ("cmu", "loops") for p in (BUILTIN_DIR / sub).rglob("*") if p.is_file())
    assert size < 6 * 2**20


def test_auto_retarget_needs_a_bvh_clip(tmp_path):
    shutil.copy(BUILTIN_DIR / "loops" / "dab.yaml", tmp_path / "dab.yaml")
    shutil.copy(BUILTIN_DIR / "loops" / "dab.bvh", tmp_path / "dab.bvh")
    (tmp_path / "library.yaml").write_text(yaml.safe_dump(
        {"motions": {"dab": {"motion": "dab.yaml", "retarget": "auto"}}}))
    with pytest.raises(LibraryError, match=r"'dab': 'retarget: auto' needs a .bvh clip"):
        load_library(tmp_path, "x")
    (tmp_path / "library.yaml").write_text(yaml.safe_dump(
        {"motions": {"mine": {"motion": "dab.bvh", "retarget": "auto", "category": "party"}}}))
    merged = load_motions(tmp_path)
    assert merged["mine"].retarget_cfg is None and merged["mine"].as_json()["retarget_config"] == "auto"
    assert [c["name"] for c in categories(merged)] == ["dance", "funny", "jumping", "walking", "party"]


def test_a_changed_clip_gets_a_new_digest_and_preview_key(tmp_path):
    """Render caches (a character's animations, the reference previews) key on the clip's files."""
    from app.motions.previews import MotionPreviews

    shutil.copy(BUILTIN_DIR / "cmu" / "walking" / "walk.bvh", tmp_path / "walk.bvh")
    (tmp_path / "library.yaml").write_text(yaml.safe_dump({"motions": {"walk": {"motion": "walk.bvh",
                                                                                "retarget": "auto"}}}))

    class Pipeline:
        def render_options(self, fmt, size, max_frames=None):
            return RenderOptions(width=size, height=size, format=fmt, max_frames=max_frames)
    before = load_library(tmp_path, "x")["walk"]
    key_before = MotionPreviews(None, Pipeline()).key(before)
    text = (tmp_path / "walk.bvh").read_text()
    (tmp_path / "walk.bvh").write_text(text.replace("Frame Time: 0.0333333", "Frame Time: 0.04"))
    after = load_library(tmp_path, "x")["walk"]
    assert len(before.sha256) == 64 and after.sha256 != before.sha256
    assert MotionPreviews(None, Pipeline()).key(after) != key_before
    assert LIBRARY["dab"].sha256 and len({m.sha256 for m in LIBRARY.values()}) == len(LIBRARY)


def test_every_library_path_is_inside_the_library():
    for m in LIBRARY.values():
        for p in (m.motion_cfg, m.retarget_cfg):
            assert p is None or BUILTIN_DIR in Path(p).resolve().parents
