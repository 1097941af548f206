"""Our retarget() against joint positions recorded from the real AnimatedDrawings code.

The fixtures in ``tests/fixtures/ad_reference/`` were produced by running AnimatedDrawings' own
``AnimatedDrawing`` / ``Retargeter`` frame by frame, the way its video render controller does (see
that folder's README.md); they hold AnimatedDrawings' rig joints per rendered frame, converted to the
drawing's pixels (y down) and rounded to 0.01 px, its BVH frame per rendered frame and its body-part
draw order. AnimatedDrawings itself is not needed to run these tests.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from animator.character import load_character
from animator.config import load_motion_config, load_retarget_config
from animator.retarget import retarget
from tests.conftest import FIXTURES, REPO

REFERENCES = sorted((FIXTURES / "ad_reference").glob("*.json"))

#: Positions agree to AnimatedDrawings' float32 arithmetic (~1e-3 px) plus the fixtures' rounding (0.005 px per axis).
TOL_PX = 0.02


def _character(ref: dict, tmp_path: Path):
    """The reference's character; ``char_cfg`` (if any) replaces the folder's char_cfg.yaml (same drawing)."""
    folder = FIXTURES / ref["character"]
    if "char_cfg" in ref:
        for name in ("mask.png", "texture.png"):
            shutil.copy(folder / name, tmp_path / name)
        shutil.copy(FIXTURES / ref["char_cfg"], tmp_path / "char_cfg.yaml")
        folder = tmp_path
    return load_character(folder)


def _load(path: Path, tmp_path: Path):
    ref = json.loads(path.read_text())
    motion = retarget(_character(ref, tmp_path), load_motion_config(FIXTURES / ref["motion_cfg"]),
                      load_retarget_config(FIXTURES / ref["retarget_cfg"]))
    cols = [motion.joint_names.index(n) for n in ref["joints"]]
    return ref, motion, motion.positions[:, cols], np.asarray(ref["frames"], dtype=np.float64)


def test_the_references_cover_both_retarget_configs_several_characters_and_edge_cases():
    refs = {p.stem: json.loads(p.read_text()) for p in REFERENCES}
    assert {Path(r["retarget_cfg"]).stem for r in refs.values()} >= {"fair1_ppf", "cmu1_pfp"}
    assert len({r["character"] for r in refs.values()}) >= 3
    assert any(r["source_frames"][0] > 0 for r in refs.values())
    # a Mixamo-style clip (prefixed names, +y up, Z Y X rotations, frame_time override), a drawing whose
    # runtime check drops the neck mapping, and one whose joints list siblings in another order
    assert {"char1_mixamo_style", "char1_low_neck", "char1_reversed_siblings"} <= set(refs)
    assert refs["char1_mixamo_style"]["frame_time_s"] == 0.05


@pytest.mark.parametrize("path", REFERENCES, ids=[p.stem for p in REFERENCES])
def test_joint_positions_match_animated_drawings(path: Path, tmp_path: Path):
    ref, motion, ours, theirs = _load(path, tmp_path)
    assert ours.shape == theirs.shape
    err = np.linalg.norm(ours - theirs, axis=-1)
    f, j = np.unravel_index(err.argmax(), err.shape)
    assert err.max() < TOL_PX, f"frame {f} joint {ref['joints'][j]}: ours {ours[f, j]} vs AnimatedDrawings {theirs[f, j]}"


@pytest.mark.parametrize("path", REFERENCES, ids=[p.stem for p in REFERENCES])
def test_frame_indices_and_timing_match_animated_drawings(path: Path, tmp_path: Path):
    """Output frame i shows the BVH frame AnimatedDrawings renders at its frame i (start + i, no off-by-one)."""
    ref, motion, ours, theirs = _load(path, tmp_path)
    assert motion.source_frames.tolist() == ref["source_frames"]
    assert motion.frame_time_s == pytest.approx(ref["frame_time_s"], rel=1e-9)
    # and the comparison is sharp enough to see a one-frame slip
    slipped = np.linalg.norm(ours[1:] - theirs[:-1], axis=-1)
    assert slipped.max() > 10 * TOL_PX


@pytest.mark.parametrize("path", REFERENCES, ids=[p.stem for p in REFERENCES])
def test_draw_order_matches_animated_drawings(path: Path, tmp_path: Path):
    """Body-part groups back to front, and which groups draw their joints reversed, as AnimatedDrawings sorts them.

    AnimatedDrawings sorts float32 depths, we sort float64 ones: where two groups' depths are within
    float32 noise of each other (or one is within it of 0) the order may legitimately differ, so
    such frames must be near-ties in our depths, and rare.
    """
    ref, motion, _, _ = _load(path, tmp_path)
    order = np.asarray(ref["part_order"])
    rev = np.asarray(ref["part_reversed"])
    depths = motion.part_depths
    differ = np.flatnonzero((order != motion.part_order).any(axis=1))
    for f in differ:
        swapped = order[f][order[f] != motion.part_order[f]]
        d = depths[f, swapped]
        assert d.max() - d.min() < 1e-4, f"frame {f}: AnimatedDrawings {order[f]} vs ours {motion.part_order[f]}, depths {depths[f]}"
    rdiff = np.argwhere(rev != motion.part_reversed)
    for f, g in rdiff:
        assert abs(depths[f, g]) < 1e-4, f"frame {f} group {g}: depth {depths[f, g]}"
    assert len(differ) + len(rdiff) <= max(1, len(order) // 100)


def test_cli_dump_joints_at_native_fps_matches_animated_drawings(tmp_path: Path):
    """``python -m animator ... --fps native --dump-joints`` writes the same poses, frame for frame."""
    import subprocess
    import sys

    path = FIXTURES / "ad_reference" / "char2_jumping_jacks.json"
    ref = json.loads(path.read_text())
    dump = tmp_path / "joints.json"
    subprocess.run([sys.executable, "-m", "animator", str(FIXTURES / ref["character"]),
                    "--motion", str(FIXTURES / ref["motion_cfg"]), "--retarget", str(FIXTURES / ref["retarget_cfg"]),
                    "-o", str(tmp_path / "out.gif"), "--fps", "native", "--size", "200x200", "--dump-joints", str(dump)],
                   check=True, cwd=REPO, capture_output=True, timeout=300)
    ours = json.loads(dump.read_text())
    cols = [ours["joints"].index(n) for n in ref["joints"]]
    got = np.asarray(ours["frames"], dtype=np.float64)[:, cols]
    want = np.asarray(ref["frames"], dtype=np.float64)
    assert got.shape == want.shape
    assert np.linalg.norm(got - want, axis=-1).max() < TOL_PX
