"""The rasteriser's named steps draw exactly what its definition says.

The reference below is the definition written plainly (as the rasteriser was before it was split
into steps and sped up): every sample point, moved by its triangle's affine map, written at the four
splat offsets in draw order (body parts back to front, each part's joints in order or reversed, and
inside a joint all points at one offset before the next offset), then 1-pixel slits closed over the
whole canvas. The fast steps must give the same frames, pixel for pixel, with and without threads and
where points reach the canvas edge (clipping).
"""
import numpy as np
import pytest

import animator
from animator.api import RenderOptions, Rig, pose_clip
from animator.canvas import place
from animator.rasterize import SPLAT, _affine_coefficients, rasterize
from tests.conftest import AD_EXAMPLES, FAIR


def reference_frame(sprite, coef, width, height, order, reversed_, background):
    qx, qy = sprite.local
    a, b, c, d, e, g, half = np.repeat(coef[:, sprite.run_tri], sprite.run_len, axis=1)
    x = np.clip(a * qx + b * qy + c, 0.5, width - 1.5)
    y = np.clip(d * qx + e * qy + g, 0.5, height - 1.5)
    idx = np.stack([(y + half * np.float32(4 * dy)).astype(np.int32) * width
                    + (x + half * np.float32(4 * dx)).astype(np.int32) for dx, dy in SPLAT])
    out = np.full(height * width, background, np.uint8)
    for p in order:
        spans = sprite.groups[p]
        for s0, s1 in (reversed(spans) if reversed_[p] else spans):
            out[idx[:, s0:s1].ravel()] = np.tile(sprite.colour[s0:s1], len(SPLAT))
    o = out.reshape(height, width)
    mid = o[1:-1, 1:-1]
    for _ in range(8):
        hole = mid == background
        up = (o[:-2, 1:-1] != background) & (o[2:, 1:-1] != background)
        side = ((o[1:-1, :-2] != background) & (o[1:-1, 2:] != background)) | up
        hole &= side
        if not hole.any():
            break
        fill_up = hole & up
        mid[fill_up] = o[:-2, 1:-1][fill_up]
        hole &= ~fill_up
        mid[hole] = o[1:-1, :-2][hole]
    return o


@pytest.fixture(scope="module")
def clip():
    ch = animator.load_character(AD_EXAMPLES / "characters" / "char1")
    opts = RenderOptions(width=300, height=300, fps="native")
    motion = pose_clip(ch, animator.load_motion_config(AD_EXAMPLES / "config" / "motion" / "dab.yaml"),
                       animator.load_retarget_config(FAIR), opts.fps)
    motion = motion.select(np.arange(0, motion.n_frames, 17), motion.frame_time_s * 17)
    rig = Rig.build(ch, motion, opts.mesh_cells)
    verts, bounds = rig.deform(motion)
    placement = place(bounds, motion.positions[:, motion.joint_names.index("root")], 300, 300, None)
    sprite = rig.sprite(motion, placement.scale, opts, colours=opts.colours)
    return sprite, placement.to_canvas(verts), motion


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shift", [0.0, 40.0], ids=["inside", "over the edge"])
def test_fast_steps_equal_the_definition(clip, threads, shift):
    sprite, verts, motion = clip
    verts = np.asarray(verts + [shift, -shift], np.float32)  # shifted: part of the body off the canvas
    order, rev = motion.part_order, motion.part_reversed
    frames = list(rasterize(sprite, verts, 300, 300, order, rev, threads=threads))
    coef = _affine_coefficients(sprite, verts)
    assert len(frames) == len(verts) >= 10
    for f, got in enumerate(frames):
        want = reference_frame(sprite, coef[f], 300, 300, order[f], rev[f], sprite.transparent)
        assert np.array_equal(got, want), f"frame {f}: {int((got != want).sum())} pixels differ"
