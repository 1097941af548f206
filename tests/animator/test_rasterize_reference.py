"""The compiled rasteriser draws exactly what its definition says.

The reference below is the definition written plainly in numpy float32 (as the rasteriser was before
it was compiled): per triangle its affine map and splat half-offset, every sample point moved by its
triangle's map, written at the four splat offsets in draw order (body parts back to front, each
part's joints in order or reversed, and inside a joint all points at one offset before the next
offset), then 1-pixel slits closed over the whole canvas. The kernel must give the same frames, pixel
for pixel, with and without threads and where points reach the canvas edge (clipping).
"""
import numpy as np
import pytest

import animator
from animator.api import RenderOptions, Rig, pose_clip
from animator.canvas import place
from animator.rasterize import SPLAT, rasterize
from tests.conftest import AD_EXAMPLES, FAIR


def affine_coefficients(sprite, verts):
    """Per frame and triangle, (F, 7, T) float32 rows a, b, c, d, e, g, h: canvas x = a qx + b qy + c,
    y = d qx + e qy + g for a point (qx, qy) from the triangle's first rest vertex, and h the splat
    half-offset: 1/4 (3s - 2) px for the stretch s (largest singular value of the map, per texel), in
    [1/4, 1/2]."""
    tv, inv = sprite.tri_verts, sprite.tri_inv.astype(np.float32)
    x, y = verts[..., 0], verts[..., 1]
    x0, y0 = x[:, tv[:, 0]], y[:, tv[:, 0]]
    ex1, ey1 = x[:, tv[:, 1]] - x0, y[:, tv[:, 1]] - y0
    ex2, ey2 = x[:, tv[:, 2]] - x0, y[:, tv[:, 2]] - y0
    m00, m01 = ex1 * inv[:, 0, 0] + ex2 * inv[:, 1, 0], ex1 * inv[:, 0, 1] + ex2 * inv[:, 1, 1]
    m10, m11 = ey1 * inv[:, 0, 0] + ey2 * inv[:, 1, 0], ey1 * inv[:, 0, 1] + ey2 * inv[:, 1, 1]
    fro = m00 * m00 + m01 * m01 + m10 * m10 + m11 * m11
    det = m00 * m11 - m01 * m10
    smax = np.sqrt(np.maximum((fro + np.sqrt(np.maximum(fro * fro - 4 * det * det, 0))) / 2, 0))
    s = np.maximum(smax / np.float32(sprite.texel_scale), 1)
    return np.stack([m00, m01, x0, m10, m11, y0, np.minimum(3 * s - 2, 2) / 4], axis=1).astype(np.float32)


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
def test_kernel_equals_the_definition(clip, threads, shift):
    sprite, verts, motion = clip
    verts = np.asarray(verts + [shift, -shift], np.float32)  # shifted: part of the body off the canvas
    order, rev = motion.part_order, motion.part_reversed
    frames = list(rasterize(sprite, verts, 300, 300, order, rev, threads=threads))
    coef = affine_coefficients(sprite, verts)
    assert len(frames) == len(verts) >= 10
    for f, got in enumerate(frames):
        want = reference_frame(sprite, coef[f], 300, 300, order[f], rev[f], sprite.transparent)
        assert np.array_equal(got, want), f"frame {f}: {int((got != want).sum())} pixels differ"


def test_kernel_equals_the_definition_on_stretched_and_torn_meshes(clip):
    """Every vertex moved at random, up to 3 px, on meshes scaled by 1 to 1.6: each triangle gets its
    own stretch, so half-offsets take many values between 1/4 and 1/2 px and slits open everywhere."""
    sprite, verts, motion = clip
    rng = np.random.default_rng(7)
    centre = np.array([150.0, 150.0])
    stretched = []
    for f, scale in enumerate(np.linspace(1.0, 1.6, 7)):
        v = (verts[f] - centre) * [scale, 1.0 + (scale - 1.0) / 2] + centre
        stretched.append(v + rng.uniform(-3, 3, v.shape))
    stretched = np.asarray(stretched, np.float32)
    order, rev = motion.part_order[:7], motion.part_reversed[:7]
    coef = affine_coefficients(sprite, stretched)
    halves = np.unique(coef[:, 6])
    assert len(halves) > 1000 and halves.min() == 0.25 and halves.max() == 0.5
    for f, got in enumerate(rasterize(sprite, stretched, 300, 300, order, rev, threads=1)):
        want = reference_frame(sprite, coef[f], 300, 300, order[f], rev[f], sprite.transparent)
        assert np.array_equal(got, want), f"frame {f}: {int((got != want).sum())} pixels differ"
