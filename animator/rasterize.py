"""Draw the textured, deformed mesh into palette-indexed frames, back to front.

Rendering is forward mapping ("splatting") of the character's texels:

* once per clip (:func:`prepare_sprite`): the texture is downsized to the output scale, its colours
  are quantised to one palette for the whole clip (at most 255 colours + 1 transparent index), and
  every texel becomes a sample point with its rest-mesh triangle, its body part (the bone nearest
  to it through the mesh, as AnimatedDrawings assigns triangles to joints) and its draw rank;
  points are sorted by draw rank and, within a rank, kept in runs of one triangle;
* per frame (:func:`rasterize`, drawn by the compiled kernel :mod:`animator._raster`): each
  triangle's affine map (rest -> deformed) moves its run of points, and their palette indices are
  written into the canvas in draw order, later writes winning. Each point is written at four
  canvas-aligned offsets (+-1/4 px): a rotated or stretched texel grid then leaves no holes, as with
  2x2 supersampling, for a quarter of the position arithmetic (measured: same coverage as 2x2
  samples at 0, 20 and 45 degrees; 1 write per point leaves 18% holes at 45). Last, 1-pixel slits
  that a strongly stretched limb opens are closed.

Coordinates: texels and the rest mesh are in texture pixels (y down); deformed vertices passed to
:func:`rasterize` are already in canvas pixels (see :mod:`animator.canvas`). A sample point at canvas
(x, y) lands in pixel (floor(x), floor(y)).
"""
from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from .errors import RenderError
from .mesh import Mesh, bone_distances, nearest_bone

log = logging.getLogger("animator")

#: Palette index of transparent pixels is the first index after the colours (always <= 255).
MAX_COLOURS = 255
#: Most texels a sprite may have (4096 x 4096): the render's largest array is bounded whatever the
#: scale asked for (the app's canvases need well under a tenth of it).
MAX_SPRITE_TEXELS = 4096 * 4096


@dataclass
class Sprite:
    """The character's sample points, ready for forward mapping.

    Attributes:
        palette: (K, 3) uint8 RGB colours; index K is transparent.
        transparent: the transparent palette index (== K).
        colour: (N,) uint8 palette index of each sample point, in draw-rank order.
        groups: per body part, per joint of that part (config order): (start, stop) slice of points.
        texels: number of character texels at output scale.
        local: (2, N) float32 rest position of each point relative to its triangle's first vertex.
        run_tri, run_len: points come in runs of the same triangle: (R,) triangle, (R,) length.
        tri_verts: (T, 3) int32 vertices of each mesh triangle.
        tri_inv: (T, 2, 2) inverse of each rest triangle's edge matrix [v1 - v0, v2 - v0].
        texel_scale: texels per texture pixel (the output scale the sprite was built for).
    """

    palette: np.ndarray
    transparent: int
    colour: np.ndarray
    groups: list[list[tuple[int, int]]]
    texels: int
    local: np.ndarray
    run_tri: np.ndarray
    run_len: np.ndarray
    tri_verts: np.ndarray
    tri_inv: np.ndarray
    texel_scale: float = 1.0

    @property
    def n_points(self) -> int:
        return int(self.colour.shape[0])


def mask_outline(mask: np.ndarray, max_points: int = 1000) -> np.ndarray:
    """Centres of (at most ``max_points``, evenly picked) boundary pixels of the mask, (N, 2)
    texture pixels (x, y).

    Used to find the character's bounding box in every frame cheaply: a deformed shape's extreme
    points lie on the image of its outline (pad the box by a pixel for the pixels' extent).
    """
    m = np.asarray(mask, bool)
    inner = m.copy()
    inner[1:, :] &= m[:-1, :]
    inner[:-1, :] &= m[1:, :]
    inner[:, 1:] &= m[:, :-1]
    inner[:, :-1] &= m[:, 1:]
    ys, xs = np.nonzero(m & ~inner)
    if len(xs) > max_points:
        keep = np.linspace(0, len(xs) - 1, max_points).astype(np.int64)
        ys, xs = ys[keep], xs[keep]
    return np.stack([xs, ys], 1) + 0.5


def prepare_sprite(texture: np.ndarray, mask: np.ndarray, mesh: Mesh, scale: float,
                   joints: Sequence[tuple[str, tuple[float, float], str | None]],
                   part_joints: Sequence[Sequence[str]], supersample: int = 1,
                   colours: int = MAX_COLOURS, smooth: int = 0, flatten: int = 0,
                   merge: float = 0.0, threads: int = 1) -> Sprite:
    """Build the sample points of a character for a given output scale.

    Args:
        texture: (H, W, 4) uint8 RGBA drawing.
        mask: (H, W) bool character mask.
        mesh: the rest mesh (texture pixels).
        scale: canvas pixels per texture pixel.
        joints: the skeleton as (name, (x, y) texture pixels, parent name or None), parents first.
        part_joints: the body-part groups' joint names (retarget ``char_bodypart_groups``).
        supersample: sample points per texel side (1 is enough with :data:`SPLAT` writes).
        colours: palette size (<= 255).
        smooth: size of a median filter applied to the downsized texture before quantising (0: off;
            3 or 5 flatten paper grain and pen noise, which GIF compresses badly, and keep edges).
        flatten: size of a majority (mode) filter over the quantised colours (0: off).
        threads: 2 or more: the palette is made in a second thread beside the sample points (the
            sprite is the same).
    """
    if not (1 <= colours <= MAX_COLOURS):
        raise RenderError(f"palette size must be 1..{MAX_COLOURS}, got {colours}")
    small, (x0, y0), (sx, sy) = _downsize_texture(texture, mask, scale, smooth, flatten)
    ty, tx = np.nonzero(small[..., 3] >= 128)
    if len(tx) == 0:
        raise RenderError(f"the character vanishes at scale {scale:.3g}: output too small")
    # the palette (Pillow's quantiser, which releases Python's lock) and the geometry do not depend
    # on each other: with threads, the palette is made in a second thread meanwhile
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="palette") as side:
        palette = side.submit(_quantise, small, ty, tx, colours, merge, flatten) if threads > 1 else None
        pts, texel, tri = _sample_points(mesh, tx + x0, ty + y0, sx, sy, supersample)
        part, rank, n_ranks, bdist = _body_parts(mesh, pts, tri, joints, part_joints)
        order, groups, key = _draw_order(part, rank, n_ranks, bdist, tri, len(mesh.triangles), len(part_joints))
        pal, tex_idx = palette.result() if palette is not None else _quantise(small, ty, tx, colours, merge, flatten)
    colour = tex_idx[texel]
    tri_o = tri[order]
    # runs of one triangle inside one span, for the per-triangle affine maps of rasterize()
    cut = np.flatnonzero(np.r_[True, (tri_o[1:] != tri_o[:-1]) | (key[1:] != key[:-1])])
    run_len = np.diff(np.r_[cut, len(tri_o)]).astype(np.int64)
    tv = mesh.triangles.astype(np.int32)
    rv = mesh.vertices[tv]                                           # (T, 3, 2)
    edges = np.stack([rv[:, 1] - rv[:, 0], rv[:, 2] - rv[:, 0]], axis=2)  # columns e1, e2
    local = (pts[order] - rv[tri_o, 0]).T.astype(np.float32)
    return Sprite(pal, len(pal), np.ascontiguousarray(colour[order]), groups, len(tx), np.ascontiguousarray(local),
                  tri_o[cut].astype(np.int32), run_len, tv, np.linalg.inv(edges), (sx + sy) / 2)


def _downsize_texture(texture: np.ndarray, mask: np.ndarray, scale: float, smooth: int,
                      flatten: int = 0) -> tuple[np.ndarray, tuple[int, int], tuple[float, float]]:
    """The drawing at output scale around its mask: ((h', w', 4) uint8 RGBA, alpha = the mask,
    median-filtered if ``smooth``; (x0, y0) texel of its top-left corner in the whole texture at
    that scale; (sx, sy) texels per texture pixel).

    Only the texels around the mask are made, so a small character on a large page costs its own
    size, not the page's; they are those of the whole resized texture, bit for bit.
    """
    from PIL import Image

    h, w = mask.shape
    tw, th = max(1, int(round(w * scale))), max(1, int(round(h * scale)))
    sx, sy = tw / w, th / h
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    if not len(rows):
        raise RenderError("the character's mask is empty")
    pad = 2 + max(int(smooth or 0), int(flatten or 0))  # the filters see the same neighbourhood
    x0, x1 = max(0, int(np.floor((cols[0] - 1) * sx)) - pad), min(tw, int(np.ceil((cols[-1] + 2) * sx)) + pad)
    y0, y1 = max(0, int(np.floor((rows[0] - 1) * sy)) - pad), min(th, int(np.ceil((rows[-1] + 2) * sy)) + pad)
    if (x1 - x0) * (y1 - y0) > MAX_SPRITE_TEXELS:
        raise RenderError(f"the character at scale {scale:.3g} would take {(x1 - x0) * (y1 - y0)} texels, "
                          f"over the limit of {MAX_SPRITE_TEXELS}")
    rgba = np.array(texture[..., :4], dtype=np.uint8, copy=True)
    rgba[..., 3] = np.asarray(mask, bool).view(np.uint8) * np.uint8(255)
    img = Image.fromarray(rgba, "RGBA")
    if (tw, th) != (w, h):
        # Pillow resizes RGBA premultiplied, so colours outside the mask do not bleed in
        img = img.resize((x1 - x0, y1 - y0), Image.Resampling.BOX if scale < 1 else Image.Resampling.BILINEAR,
                         box=(x0 / sx, y0 / sy, x1 / sx, y1 / sy))
    else:
        img = img.crop((x0, y0, x1, y1))
    small = np.asarray(img)
    if smooth and smooth > 1:
        # texels outside the mask take the median colour inside, so the filter sees no paper
        rgb_full = _raster_kernels().fill_outside(np.ascontiguousarray(small), 128)
        size = int(smooth) | 1
        if size == 3:
            rgb_full = median3(rgb_full)
        else:
            from PIL import ImageFilter

            rgb_full = np.asarray(Image.fromarray(rgb_full, "RGB").filter(ImageFilter.MedianFilter(size)))
        smoothed = np.empty(small.shape, np.uint8)
        smoothed[..., :3] = rgb_full
        smoothed[..., 3] = small[..., 3]
        small = smoothed
    return small, (x0, y0), (sx, sy)


#: Compare-exchange steps of a sorting network that leaves the median of 9 values in slot 4.
_MEDIAN9 = ((1, 2), (4, 5), (7, 8), (0, 1), (3, 4), (6, 7), (1, 2), (4, 5), (7, 8), (0, 3), (5, 8), (4, 7),
            (3, 6), (1, 4), (2, 5), (4, 7), (4, 2), (6, 4), (4, 2))


def median3(image: np.ndarray) -> np.ndarray:
    """3x3 median filter of an (H, W) or (H, W, C) uint8 image, each channel alone, edges
    replicated: the same values as Pillow's ``ImageFilter.MedianFilter(3)``, by a sorting network
    of element-wise minima and maxima instead of a sort per pixel."""
    img = np.asarray(image)
    h, w = img.shape[:2]
    padded = np.pad(img, ((1, 1), (1, 1)) + ((0, 0),) * (img.ndim - 2), mode="edge")
    v = [np.array(padded[dy:dy + h, dx:dx + w]) for dy in range(3) for dx in range(3)]
    for i, j in _MEDIAN9:
        low = np.minimum(v[i], v[j])
        np.maximum(v[i], v[j], out=v[j])
        v[i] = low
    return v[4]


def _quantise(small: np.ndarray, ty: np.ndarray, tx: np.ndarray, colours: int, merge: float,
              flatten: int) -> tuple[np.ndarray, np.ndarray]:
    """One palette for the whole clip: ((K, 3) uint8 palette, palette index of each texel (ty, tx))."""
    from PIL import Image

    rgb = small[ty, tx, :3]
    q = Image.fromarray(rgb[None, :, :], "RGB").quantize(colours, method=Image.Quantize.MEDIANCUT,
                                                       dither=Image.Dither.NONE)
    tex_idx = np.asarray(q, dtype=np.uint8)[0]
    qpal = np.array(q.getpalette()[: 3 * (int(tex_idx.max()) + 1)], dtype=np.uint8).reshape(-1, 3)
    if merge > 0:
        lut, qpal = merge_palette(qpal, np.bincount(tex_idx, minlength=len(qpal)), merge)
        tex_idx = lut[tex_idx]
    if flatten and flatten > 1:
        # majority vote of palette indices in a window: flat areas become truly flat (LZW-friendly)
        from PIL import ImageFilter

        plane = np.zeros(small.shape[:2], np.uint8)
        plane[ty, tx] = tex_idx
        plane = np.asarray(Image.fromarray(plane, "L").filter(ImageFilter.ModeFilter(int(flatten) | 1)))
        tex_idx = plane[ty, tx]
    return qpal, tex_idx


def _sample_points(mesh: Mesh, tx: np.ndarray, ty: np.ndarray, sx: float, sy: float,
                   supersample: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``supersample``^2 points per texel, in texture pixels: (points (N, 2), the index of each
    one's texel in ``tx``/``ty`` (N,), rest-mesh triangle (N,)); points in no triangle are dropped."""
    ss = int(supersample)
    off = (np.arange(ss) + 0.5) / ss
    ox, oy = np.meshgrid(off, off)
    px = (tx[:, None] + ox.ravel()[None, :]).ravel() / sx
    py = (ty[:, None] + oy.ravel()[None, :]).ravel() / sy
    texel = np.repeat(np.arange(len(tx)), ss * ss)
    pts = np.stack([px, py], 1)
    tri, _ = mesh.locate(pts)
    ok = tri >= 0
    if not ok.all():
        pts, tri, texel = pts[ok], tri[ok], texel[ok]
    return pts, texel, tri


def _body_parts(mesh: Mesh, pts: np.ndarray, tri: np.ndarray,
                joints: Sequence[tuple[str, tuple[float, float], str | None]],
                part_joints: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """Body part of each point: the nearest bone through the mesh -> its (child) joint -> part.

    Returns (part (N,), rank in the part's joint list + 1 (0: a joint in no group) (N,), number of
    ranks, distance to the nearest bone (N,) in texture pixels).
    """
    names = [j[0] for j in joints]
    loc = {j[0]: np.asarray(j[1], dtype=np.float64) for j in joints}
    parent = {j[0]: j[2] for j in joints}
    bone_joints = [n for n in names if parent[n] is not None]
    bones = np.array([[loc[parent[n]], loc[n]] for n in bone_joints])
    dist = bone_distances(mesh, bones)
    bone, bdist = nearest_bone(mesh, dist, pts, tri)
    bdist = bdist.astype(np.float64)
    part_of: dict[str, tuple[int, int]] = {}
    for p, js in enumerate(part_joints):
        for r, n in enumerate(js):
            part_of.setdefault(n, (p, r))
    # joints in no group draw with their nearest ancestor's group (else first in group 0)
    joint_part = np.zeros((len(bone_joints), 2), np.int64)
    for b, n in enumerate(bone_joints):
        k = n
        while k is not None and k not in part_of:
            k = parent[k]
        joint_part[b] = part_of.get(k, (0, -1)) if k is not None else (0, -1)
    n_ranks = max(len(js) for js in part_joints) + 1 if part_joints else 1
    return joint_part[bone, 0], joint_part[bone, 1] + 1, n_ranks, bdist


def _draw_order(part: np.ndarray, rank: np.ndarray, n_ranks: int, bdist: np.ndarray, tri: np.ndarray,
                n_triangles: int, n_parts: int) -> tuple[np.ndarray, list[list[tuple[int, int]]], np.ndarray]:
    """Order the points by part, then the part's joint order, then triangles farthest from their bone
    first (AnimatedDrawings sorts a joint's triangles so); points of a triangle stay together.

    Returns (order (N,), per part the (start, stop) spans of each rank, the sorted span keys (N,)).
    """
    span_key = part * n_ranks + rank
    tri_dist = np.bincount(tri, weights=bdist, minlength=n_triangles) / np.maximum(
        np.bincount(tri, minlength=n_triangles), 1)
    order = np.lexsort((tri, -tri_dist[tri], span_key))
    key = span_key[order]
    groups: list[list[tuple[int, int]]] = []
    for p in range(max(1, n_parts)):
        spans = []
        for r in range(n_ranks):
            k = p * n_ranks + r
            a, b = np.searchsorted(key, k, "left"), np.searchsorted(key, k, "right")
            if b > a:
                spans.append((int(a), int(b)))
        groups.append(spans)
    return order, groups, key


def srgb_to_lab(rgb: np.ndarray) -> np.ndarray:
    """CIE L*a*b* (D65) of sRGB colours, (..., 3) uint8 -> (..., 3) float64."""
    c = np.asarray(rgb, np.float64) / 255.0
    c = np.where(c > 0.04045, ((c + 0.055) / 1.055) ** 2.4, c / 12.92)
    m = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
    xyz = c @ m.T / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 216 / 24389, np.cbrt(xyz), (24389 / 27 * xyz + 16) / 116)
    return np.stack([116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]), 200 * (f[..., 1] - f[..., 2])], -1)


def merge_palette(palette: np.ndarray, counts: np.ndarray, delta_e: float) -> tuple[np.ndarray, np.ndarray]:
    """Merge palette colours closer than ``delta_e`` (CIE76 distance in L*a*b*), closest pair first.

    Returns (lut, merged palette): ``lut[i]`` is the merged index of old colour i. A merged colour is
    the population-weighted mean of its members (``counts``: texels per old colour).
    """
    pal = np.asarray(palette, np.uint8).reshape(-1, 3)
    w = np.asarray(counts, np.float64)[: len(pal)] + 1e-9
    lab = srgb_to_lab(pal)
    wt = w.copy()
    alive = np.ones(len(pal), bool)
    groups: list[list[int]] = [[i] for i in range(len(pal))]
    d = np.sqrt(((lab[:, None] - lab[None]) ** 2).sum(-1))
    np.fill_diagonal(d, np.inf)
    while alive.sum() > 1:
        i, j = np.unravel_index(int(np.argmin(d)), d.shape)
        if d[i, j] >= delta_e:
            break
        i, j = min(i, j), max(i, j)
        lab[i] = (lab[i] * wt[i] + lab[j] * wt[j]) / (wt[i] + wt[j])
        wt[i] += wt[j]
        groups[i] += groups[j]
        groups[j] = []
        alive[j] = False
        d[j, :] = d[:, j] = np.inf                     # j is gone; i moved: its distances anew
        row = np.sqrt(((lab - lab[i]) ** 2).sum(-1))
        row[~alive] = np.inf
        row[i] = np.inf
        d[i, :] = d[:, i] = row
    groups = [g for g in groups if g]
    lut = np.zeros(len(pal), np.uint8)
    out = np.empty((len(groups), 3), np.uint8)
    for g, members in enumerate(groups):
        lut[members] = g
        out[g] = np.round((pal[members] * w[members, None]).sum(0) / w[members].sum())
    return lut, out


#: Canvas-aligned sub-pixel offsets at which every sample point is written (see module doc).
SPLAT = ((-0.25, -0.25), (0.25, -0.25), (-0.25, 0.25), (0.25, 0.25))


def rasterize(sprite: Sprite, vertices: np.ndarray, width: int, height: int,
              part_order: np.ndarray | None = None, part_reversed: np.ndarray | None = None,
              splat: Sequence[tuple[float, float]] = SPLAT, threads: int = 2,
              fill: int | None = None) -> Iterator[np.ndarray]:
    """Yield the frames, in order, as (height, width) uint8 palette-index arrays (fresh buffers).

    Args:
        sprite: from :func:`prepare_sprite`.
        vertices: (F, V, 2) deformed mesh vertices in canvas pixels (x right, y down), per frame.
        width, height: canvas size in pixels.
        part_order: (F, P) body parts back to front per frame (default: config order).
        part_reversed: (F, P) bool by part: draw that part's joints in reverse order.
        splat: canvas offsets (dx, dy) in pixels at which each point is written; the default 2x2
            pattern (+-1/4 px) leaves no holes where the mesh turns, like 2x2 supersampling, at a
            quarter of the position arithmetic. Where a triangle is stretched (its texels land more
            than a pixel apart) the offsets grow with the stretch, up to 2x, so stretched limbs get
            no holes either.
        threads: frames drawn in parallel (the kernel runs without the GIL).
        fill: palette index of the background (default: the sprite's transparent index).

    Each frame is drawn by the compiled kernel (:class:`animator._raster.FrameKernel`): per
    triangle the affine map of its rest triangle onto its deformed one and its splat half-offset
    ``h`` = 1/4 px x (3 s - 2), s its stretch in canvas px per texel, clamped to [1/4, 1/2] px; per
    point its canvas position clipped to [0.5, size - 1.5] px (placement keeps points inside; this
    only guards against rounding and off-canvas scenes) and its palette index written at each
    offset, parts back to front, later writes winning; last, 1-pixel slits closed
    (:data:`SLIT_PASSES`). All arithmetic is float32 in a fixed order, so frames are the same on
    every machine.
    """
    verts = np.ascontiguousarray(vertices, dtype=np.float32)
    n_parts = len(sprite.groups)
    if verts.ndim != 3 or verts.shape[2] != 2:
        raise RenderError(f"vertices must be (frames, vertices, 2), got {verts.shape}")
    if not np.isfinite(verts).all():
        raise RenderError("the deformed mesh has vertices that are not finite numbers")
    F = verts.shape[0]
    order = np.tile(np.arange(n_parts), (F, 1)) if part_order is None else part_order
    rev = np.zeros((F, n_parts), bool) if part_reversed is None else part_reversed
    order = np.ascontiguousarray(order, dtype=np.int32).reshape(F, n_parts)
    rev = np.ascontiguousarray(rev, dtype=np.uint8).reshape(F, n_parts)
    kernel = frame_kernel(sprite, verts.shape[1], splat)
    background = sprite.transparent if fill is None else int(fill)

    def frame(f: int) -> np.ndarray:
        out = np.empty((height, width), np.uint8)
        kernel.draw(out, verts[f], order[f], rev[f], background, SLIT_PASSES)
        return out

    if threads <= 1 or F < 4:
        for f in range(F):
            yield frame(f)
        return
    from concurrent.futures import ThreadPoolExecutor

    ahead = 2 * threads
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="raster") as pool:
        futures = [pool.submit(frame, f) for f in range(min(F, ahead))]
        for f in range(F):
            fr = futures[f].result()
            futures[f] = None  # type: ignore[call-overload]
            if f + ahead < F:
                futures.append(pool.submit(frame, f + ahead))
            yield fr


#: Passes of slit closing: a background pixel between two drawn ones, above and below (or left and
#: right), takes the colour of the one above (or left); a pass judges every pixel as the canvas was
#: before it, and filling can turn a neighbour into a slit, hence several passes. Slits are what a
#: limb stretched past 1.5x opens between its drawn pixels; pixels on the canvas's edge stay.
SLIT_PASSES = 8


def frame_kernel(sprite: Sprite, n_vertices: int, splat: Sequence[tuple[float, float]] = SPLAT):
    """The compiled kernel (:class:`animator._raster.FrameKernel`) that draws ``sprite``'s frames
    from (``n_vertices``, 2) canvas-pixel meshes: its points, their runs of one triangle, and the
    spans of its body parts' joints in draw order."""
    spans = [span for part in sprite.groups for span in part]
    part_spans = np.cumsum([0] + [len(part) for part in sprite.groups])
    return _raster_kernels().FrameKernel(sprite.local, sprite.colour, sprite.run_tri, sprite.run_len, sprite.tri_verts,
                       sprite.tri_inv, np.float32(sprite.texel_scale), np.asarray(spans, np.int64).reshape(-1, 2),
                       part_spans, splat, n_vertices)


def _raster_kernels():
    """:mod:`animator._raster`, with a message that says how to build it where it is missing."""
    try:
        from . import _raster
    except ImportError as e:  # a checkout used in place (PYTHONPATH) before anything compiled the kernel
        raise ImportError("animator's compiled frame kernel is not built: `pip install -e .` or `python setup.py "
                          "build_ext --inplace` in the checkout builds it") from e
    return _raster

