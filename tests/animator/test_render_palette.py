"""The clip's palette: near-equal colours merge (flat areas for GIF), distinct colours stay."""

import numpy as np
import pytest
from PIL import Image

import animator
from animator import ConfigError, RenderOptions, load_character
from animator.mesh import build_mesh
from animator.rasterize import merge_palette, prepare_sprite, rasterize, srgb_to_lab
from tests.conftest import AD_EXAMPLES, FAIR


def test_lab_of_known_colours():
    lab = srgb_to_lab(np.array([[255, 255, 255], [0, 0, 0], [255, 0, 0]], np.uint8))
    assert lab[0] == pytest.approx([100, 0, 0], abs=0.1)
    assert lab[1] == pytest.approx([0, 0, 0], abs=0.1)
    assert lab[2] == pytest.approx([53.24, 80.09, 67.20], abs=0.2)


def test_merge_joins_near_shades_and_keeps_distinct_colours():
    pal = np.array([[150, 148, 143], [147, 145, 140], [144, 140, 135],   # paper grain: dE < 3 apart
                    [60, 48, 110], [52, 40, 102],                         # marker streaks: dE ~ 5
                    [220, 40, 30], [40, 160, 60], [250, 220, 40]],        # red, green, yellow
                   np.uint8)
    counts = np.array([100, 300, 100, 50, 50, 20, 20, 20])
    lut, out = merge_palette(pal, counts, 10.0)
    assert len(out) == 5
    assert lut[0] == lut[1] == lut[2] and lut[3] == lut[4]
    assert len({lut[5], lut[6], lut[7], lut[0], lut[3]}) == 5
    # a merged colour is the population-weighted mean of its members
    assert np.abs(out[lut[1]].astype(int) - [147, 145, 140]).max() <= 1
    # every merged colour is close to what it replaces
    dist = np.sqrt(((srgb_to_lab(pal) - srgb_to_lab(out[lut])) ** 2).sum(-1))
    assert dist.max() < 10
    # 0 merges nothing
    lut0, out0 = merge_palette(pal, counts, 0.0)
    assert np.array_equal(lut0, np.arange(len(pal))) and np.array_equal(out0, pal)


def test_merge_does_not_collapse_a_gradient():
    # 16 steps of grey 8 levels apart (dE ~3 each, ~50 end to end): merging bands them, not flattens
    pal = np.array([[g, g, g] for g in range(60, 188, 8)], np.uint8)
    _, out = merge_palette(pal, np.ones(len(pal)), 10.0)
    assert 3 <= len(out) <= 8


@pytest.mark.parametrize("name", ["char1", "char3"])
def test_merged_sprite_stays_close_to_the_drawing(name):
    ch = load_character(AD_EXAMPLES / "characters" / name)
    rest = np.array([j.loc for j in ch.skeleton])
    mesh = build_mesh(ch.mask, keep_points=rest)
    groups = [list(g.char_joints) for g in animator.load_retarget_config(FAIR).char_bodypart_groups]
    joints = [(j.name, j.loc, j.parent) for j in ch.skeleton]
    plain = prepare_sprite(ch.texture, ch.mask, mesh, 0.6, joints, groups, colours=16, smooth=3)
    flat = prepare_sprite(ch.texture, ch.mask, mesh, 0.6, joints, groups, colours=16, smooth=3, merge=10)
    assert len(flat.palette) < len(plain.palette)
    assert flat.n_points == plain.n_points
    # same points, colour by colour: within the merge distance of the unmerged palette's colour
    de = np.sqrt(((srgb_to_lab(plain.palette[plain.colour]) - srgb_to_lab(flat.palette[flat.colour])) ** 2).sum(-1))
    assert np.percentile(de, 99) < 10 and de.mean() < 4
    # against the drawing itself (downsized the same way), the mean RGB error grows by a few levels
    # over the unmerged palette's (measured at scale 0.6: char1 2.6 -> 5.7, char3 8.7 -> 10.2):
    # what goes is the paper's grain, not the drawing's colours
    h, w = ch.mask.shape
    W, H = int(round(w * 0.6)), int(round(h * 0.6))
    rgba = ch.texture.copy()
    rgba[..., 3] = np.where(ch.mask, 255, 0)
    small = np.asarray(Image.fromarray(rgba).resize((W, H), Image.Resampling.BOX))
    errs = []
    for sprite in (plain, flat):
        frame = next(rasterize(sprite, (mesh.vertices * [W / w, H / h])[None], W, H))
        both = (frame != sprite.transparent) & (small[..., 3] >= 128)
        errs.append(np.abs(sprite.palette[frame[both]].astype(int) - small[..., :3][both].astype(int)).mean())
    assert errs[1] < errs[0] + 4, errs


def test_merge_option_is_checked():
    assert RenderOptions().merge == 10.0
    assert RenderOptions(merge=0).merge == 0.0
    for bad in (-1, 101, "x", True):
        with pytest.raises(ConfigError) as exc:
            RenderOptions(merge=bad)
        assert exc.value.field == "merge"


@pytest.mark.parametrize("stretch", [1.6, 1.9, 2.2])
def test_stretched_limbs_leave_no_slits(stretch):
    """Stretched past 1.5x, texels land more than a splat apart; a pixel left empty between two drawn
    ones (above and below, or left and right) must not show as a 1-pixel slit of background."""
    ch = load_character(AD_EXAMPLES / "characters" / "char1")
    rest = np.array([j.loc for j in ch.skeleton])
    mesh = build_mesh(ch.mask, keep_points=rest)
    groups = [list(g.char_joints) for g in animator.load_retarget_config(FAIR).char_bodypart_groups]
    sprite = prepare_sprite(ch.texture, ch.mask, mesh, 0.3, [(j.name, j.loc, j.parent) for j in ch.skeleton],
                            groups, colours=16, merge=10)
    h, w = ch.mask.shape
    verts = mesh.vertices * [0.3, 0.3 * stretch] + 4
    W, H = int(w * 0.3) + 8, int(h * 0.3 * stretch) + 8
    frame = next(rasterize(sprite, verts[None], W, H, threads=1))
    op = frame != sprite.transparent
    gap = ~op[1:-1, 1:-1]
    slit = gap & ((op[:-2, 1:-1] & op[2:, 1:-1]) | (op[1:-1, :-2] & op[1:-1, 2:]))
    assert op.sum() > 0.9 * stretch * sprite.texels
    assert slit.sum() == 0


def test_the_sprite_is_the_same_when_its_palette_is_made_in_a_thread(monkeypatch):
    """threads=2 makes the palette beside the sample points: the same sprite, field by field; and an
    error in that thread reaches the caller."""
    import dataclasses

    import animator.rasterize as rasterize

    ch = load_character(AD_EXAMPLES / "characters" / "char2")
    mesh = build_mesh(ch.mask, keep_points=np.array([j.loc for j in ch.skeleton]))
    groups = [list(g.char_joints) for g in animator.load_retarget_config(FAIR).char_bodypart_groups]
    joints = [(j.name, j.loc, j.parent) for j in ch.skeleton]
    one, two = (prepare_sprite(ch.texture, ch.mask, mesh, 0.45, joints, groups, colours=16, smooth=3, merge=10,
                               threads=t) for t in (1, 2))
    for f in dataclasses.fields(one):
        a, b = getattr(one, f.name), getattr(two, f.name)
        assert np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b, f.name

    def broken(*_):
        raise MemoryError("no memory for the palette")

    monkeypatch.setattr(rasterize, "_quantise", broken)
    with pytest.raises(MemoryError, match="palette"):
        prepare_sprite(ch.texture, ch.mask, mesh, 0.45, joints, groups, threads=2)
