"""Draw the textured, deformed mesh into palette-indexed frames, back to front.

Rendering is forward mapping ("splatting") of the character's texels, which vectorises well in numpy:

* once per clip (:func:`prepare_sprite`): the texture is downsized to the output scale, its colours
  are quantised to one palette for the whole clip (at most 255 colours + 1 transparent index), and
  every texel becomes a sample point with its rest-mesh triangle, its body part (the bone nearest
  to it through the mesh, as AnimatedDrawings assigns triangles to joints) and its draw rank;
  points are sorted by draw rank and, within a rank, kept in runs of one triangle;
* per frame (:func:`rasterize`): each triangle's affine map (rest -> deformed, computed for all
  frames at once) moves its run of points (``np.repeat`` of the map's coefficients, no gathers),
  and their palette indices are written into the canvas in draw order, later writes winning. Each
  point is written at four canvas-aligned offsets (+-1/4 px): a rotated or stretched texel grid then
  leaves no holes, as with 2x2 supersampling, for a quarter of the position arithmetic (measured:
  same coverage as 2x2 samples at 0, 20 and 45 degrees; 1 write per point leaves 18% holes at 45).

Coordinates: texels and the rest mesh are in texture pixels (y down); deformed vertices passed to
:func:`rasterize` are already in canvas pixels (see :mod:`animator.canvas`). A sample point at canvas
(x, y) lands in pixel (floor(x), floor(y)).
"""
from __future__ import annotations

import logging
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
                   merge: float = 0.0) -> Sprite:
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
    """
    if not (1 <= colours <= MAX_COLOURS):
        raise RenderError(f"palette size must be 1..{MAX_COLOURS}, got {colours}")
    small, (x0, y0), (sx, sy) = _downsize_texture(texture, mask, scale, smooth, flatten)
    ty, tx = np.nonzero(small[..., 3] >= 128)
    if len(tx) == 0:
        raise RenderError(f"the character vanishes at scale {scale:.3g}: output too small")
    pal, tex_idx = _quantise(small, ty, tx, colours, merge, flatten)
    pts, colour, tri = _sample_points(mesh, tx + x0, ty + y0, tex_idx, sx, sy, supersample)
    part, rank, n_ranks, bdist = _body_parts(mesh, pts, tri, joints, part_joints)
    order, groups, key = _draw_order(part, rank, n_ranks, bdist, tri, len(mesh.triangles), len(part_joints))
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
    rgba[..., 3] = np.where(mask, 255, 0)
    img = Image.fromarray(rgba, "RGBA")
    if (tw, th) != (w, h):
        # Pillow resizes RGBA premultiplied, so colours outside the mask do not bleed in
        img = img.resize((x1 - x0, y1 - y0), Image.Resampling.BOX if scale < 1 else Image.Resampling.BILINEAR,
                         box=(x0 / sx, y0 / sy, x1 / sx, y1 / sy))
    else:
        img = img.crop((x0, y0, x1, y1))
    small = np.asarray(img)
    if smooth and smooth > 1:
        from PIL import ImageFilter

        inside = small[..., 3] >= 128
        rgb_full = np.array(small[..., :3])
        if inside.any():
            rgb_full[~inside] = np.median(rgb_full[inside], axis=0).astype(np.uint8)
        size = int(smooth) | 1
        if size == 3:
            rgb_full = median3(rgb_full)
        else:
            rgb_full = np.asarray(Image.fromarray(rgb_full, "RGB").filter(ImageFilter.MedianFilter(size)))
        small = np.dstack([rgb_full, small[..., 3]])
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


def _sample_points(mesh: Mesh, tx: np.ndarray, ty: np.ndarray, tex_idx: np.ndarray, sx: float, sy: float,
                   supersample: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``supersample``^2 points per texel, in texture pixels: (points (N, 2), palette index (N,),
    rest-mesh triangle (N,)); points in no triangle are dropped."""
    ss = int(supersample)
    off = (np.arange(ss) + 0.5) / ss
    ox, oy = np.meshgrid(off, off)
    px = (tx[:, None] + ox.ravel()[None, :]).ravel() / sx
    py = (ty[:, None] + oy.ravel()[None, :]).ravel() / sy
    colour = np.repeat(tex_idx, ss * ss)
    pts = np.stack([px, py], 1)
    tri, _ = mesh.locate(pts)
    ok = tri >= 0
    if not ok.all():
        pts, tri, colour = pts[ok], tri[ok], colour[ok]
    return pts, colour, tri


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
    bone = np.empty(len(pts), np.int64)
    bdist = np.empty(len(pts))
    for a in range(0, len(pts), 16384):
        bone[a:a + 16384], bdist[a:a + 16384] = nearest_bone(mesh, dist, pts[a:a + 16384], tri[a:a + 16384])
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
    """Yield the frames, in order, as (height, width) uint8 palette-index arrays.

    Args:
        sprite: from :func:`prepare_sprite`.
        vertices: (F, V, 2) deformed mesh vertices in canvas pixels, per frame.
        width, height: canvas size.
        part_order: (F, P) body parts back to front per frame (default: config order).
        part_reversed: (F, P) bool by part: draw that part's joints in reverse order.
        splat: canvas offsets at which each point is written; the default 2x2 pattern (+-1/4 px)
            leaves no holes where the mesh turns, like 2x2 supersampling, at a quarter of the
            position arithmetic. Where a triangle is stretched (its texels land more than a pixel
            apart) the offsets grow with the stretch, so stretched limbs get no holes either.
        threads: frames rendered in parallel (numpy releases the GIL in these loops).
        fill: palette index of the background (default: the sprite's transparent index).

    Each frame is made in four steps: the per-triangle affine maps of a block of frames
    (:func:`_affine_coefficients`), the canvas pixel of every point at every splat offset
    (:func:`_splat_pixels`), the writes in draw order (:func:`_draw`), and the closing of
    1-pixel slits (:func:`_close_slits`). Each yielded array is a fresh buffer. Points are
    clipped to the canvas (placement keeps them inside; this only guards against rounding).
    """
    import threading
    from concurrent.futures import ThreadPoolExecutor

    verts = np.asarray(vertices, dtype=np.float32)
    F = verts.shape[0]
    n_parts = len(sprite.groups)
    if part_order is None:
        part_order = np.tile(np.arange(n_parts), (F, 1))
    if part_reversed is None:
        part_reversed = np.zeros((F, n_parts), bool)
    layout = _SplatLayout(sprite, splat)
    lo, hi = verts.min(axis=1), verts.max(axis=1)                   # (F, 2) mesh bounds per frame
    inside = (lo >= 1).all(axis=1) & (hi[:, 0] <= width - 2) & (hi[:, 1] <= height - 2)
    background = sprite.transparent if fill is None else int(fill)
    block = 128  # frames whose per-triangle maps are computed together (bounds the memory)
    blocks: dict[int, np.ndarray] = {}
    local = threading.local()

    def frame(f: int) -> np.ndarray:
        if not hasattr(local, "scratch"):
            local.scratch = _Scratch(layout)
        pixels, box = _splat_pixels(sprite, layout, blocks[f // block][f % block], width, height, local.scratch,
                                    bool(inside[f]))
        out = np.full(height * width, background, np.uint8)
        _draw(out, layout, pixels, part_order[f], part_reversed[f])
        o = out.reshape(height, width)
        _close_slits(o, background, box)
        return o

    def ready(f: int) -> None:
        """Compute the block of frame f's maps if needed; drop blocks already done."""
        k = f // block
        if k not in blocks:
            blocks[k] = _affine_coefficients(sprite, verts[k * block:(k + 1) * block])
            for old in [j for j in blocks if j < k - 1]:
                del blocks[old]

    if threads <= 1 or F < 4:
        for f in range(F):
            ready(f)
            yield frame(f)
        return
    ahead = 2 * threads
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="raster") as pool:
        futures = []
        for f in range(min(F, ahead)):
            ready(f)
            futures.append(pool.submit(frame, f))
        for f in range(F):
            fr = futures[f].result()
            futures[f] = None  # type: ignore[call-overload]
            if f + ahead < F:
                ready(f + ahead)
                futures.append(pool.submit(frame, f + ahead))
            yield fr


class _SplatLayout:
    """What every frame of a clip shares: the splat offsets and the spans of points in draw order
    (a span: the points of one joint of one body part, ``sprite.groups``)."""

    def __init__(self, sprite: Sprite, splat: Sequence[tuple[float, float]]) -> None:
        self.dxs = sorted({float(d[0]) for d in splat})
        self.dys = sorted({float(d[1]) for d in splat})
        self.pick = [(self.dys.index(b), self.dxs.index(a)) for a, b in splat]
        self.groups = sprite.groups
        self.colour = sprite.colour
        self.n_points = sprite.n_points


class _Scratch:
    """Per-thread buffers of :func:`_splat_pixels`, reused from frame to frame."""

    def __init__(self, layout: _SplatLayout) -> None:
        N = layout.n_points
        self.x = np.empty(N, np.float32)
        self.y = np.empty(N, np.float32)
        self.t = np.empty(N, np.float32)
        self.cols = np.empty((len(layout.dxs), N), np.int32)
        self.rows = np.empty((len(layout.dys), N), np.int32)
        self.pixels = np.empty((len(layout.pick), N), np.intp)


def _splat_pixels(sprite: Sprite, layout: _SplatLayout, coef: np.ndarray, width: int, height: int,
                  scratch: _Scratch, inside: bool = False) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    """(S, N) flat canvas pixel index (row * width + column) of every point at each of the ``S``
    splat offsets, and the (row0, row1, col0, col1) inclusive box they cover.

    ``coef``: one frame's (7, T) affine maps from :func:`_affine_coefficients`. ``inside``: the
    frame's mesh lies at least 1 px inside the canvas, so clipping the points is skipped (it would
    change nothing: points lie inside their triangles and offsets are at most 1/2 px).
    """
    x, y, cols, rows = scratch.x, scratch.y, scratch.cols, scratch.rows
    qx, qy = sprite.local
    a, b, c, d, e, g, half = np.repeat(coef[:, sprite.run_tri], sprite.run_len, axis=1)
    np.multiply(a, qx, out=x)
    b *= qy
    x += b
    x += c
    np.multiply(d, qx, out=y)
    e *= qy
    y += e
    y += g
    if not inside:
        np.clip(x, 0.5, width - 1.5, out=x)  # keeps every offset write on the canvas
        np.clip(y, 0.5, height - 1.5, out=y)
    for offsets, pos, ints in ((layout.dxs, x, cols), (layout.dys, y, rows)):
        for k, off in enumerate(offsets):
            if off == 0.25 or off == -0.25:  # the default pattern: x +- half, rounded as x + (+-1 * half)
                (np.add if off > 0 else np.subtract)(pos, half, out=ints[k], casting="unsafe")
            else:
                np.multiply(half, 4 * off, out=scratch.t)
                scratch.t += pos
                np.copyto(ints[k], scratch.t, casting="unsafe")
    box = (int(rows[0].min()), int(rows[-1].max()), int(cols[0].min()), int(cols[-1].max()))
    rows *= width
    out = scratch.pixels
    for k, (r, c_) in enumerate(layout.pick):
        np.add(rows[r], cols[c_], out=out[k], casting="unsafe")
    return out, box


def _draw(out: np.ndarray, layout: _SplatLayout, pixels: np.ndarray, part_order: np.ndarray,
          part_reversed: np.ndarray) -> None:
    """Write the points' palette indices into the flat canvas ``out``, body parts back to front
    (``part_order``), each part's joints in config order or reversed, and inside a joint's span
    offset by offset; later writes win."""
    colour = layout.colour
    for p in part_order:
        g = layout.groups[p]
        for a, b in (reversed(g) if part_reversed[p] else g):
            v = colour[a:b]
            for px in pixels:
                out[px[a:b]] = v


def _close_slits(o: np.ndarray, background: int, box: tuple[int, int, int, int], passes: int = 8) -> None:
    """Fill, in place, 1-pixel slits that a limb stretched past 1.5x opens between drawn pixels.

    A background pixel between two drawn ones, above and below or left and right, takes the colour
    of the one above (or left); filling can enclose a neighbouring empty pixel of the same slit,
    hence up to ``passes`` passes. The first pass looks at the drawn ``box`` (inclusive rows, cols),
    as no slit lies outside it; a later pass looks only at the neighbours of the pixels the pass
    before filled, as only a filled neighbour can turn a pixel into a slit. Each pass judges every
    pixel on the canvas as it was before that pass. Pixels on the canvas's edge are never filled.
    """
    height, width = o.shape
    r0, r1, c0, c1 = box
    y0, y1, x0, x1 = max(r0 - 1, 0), min(r1 + 2, height), max(c0 - 1, 0), min(c1 + 2, width)
    if y1 - y0 < 3 or x1 - x0 < 3:
        return
    drawn = o[y0:y1, x0:x1] != background
    up = drawn[:-2, 1:-1] & drawn[2:, 1:-1]
    hole = drawn[1:-1, :-2] & drawn[1:-1, 2:]
    hole |= up
    hole &= ~drawn[1:-1, 1:-1]
    at = np.flatnonzero(hole)                   # 1-D search: far quicker than a 2-D np.nonzero
    from_up = up.ravel()[at]
    ys, xs = np.divmod(at, hole.shape[1])
    ys += y0 + 1
    xs += x0 + 1
    for p in range(passes):
        if not len(ys):
            return
        o[ys, xs] = np.where(from_up, o[ys - 1, xs], o[ys, xs - 1])
        if p == passes - 1:
            return
        # the next pass: the filled pixels' four neighbours off the canvas's edge (repeats are harmless)
        cy = np.concatenate([ys - 1, ys + 1, ys, ys])
        cx = np.concatenate([xs, xs, xs - 1, xs + 1])
        ok = (cy >= 1) & (cy <= height - 2) & (cx >= 1) & (cx <= width - 2)
        cy, cx = cy[ok], cx[ok]
        up = (o[cy - 1, cx] != background) & (o[cy + 1, cx] != background)
        hole = (o[cy, cx - 1] != background) & (o[cy, cx + 1] != background)
        hole |= up
        hole &= o[cy, cx] == background
        ys, xs, from_up = cy[hole], cx[hole], up[hole]


def _affine_coefficients(sprite: Sprite, verts: np.ndarray) -> np.ndarray:
    """Per frame and triangle: the affine map of the rest triangle onto the deformed one, as
    (n, 7, T) float32 rows a, b, c, d, e, g, h: canvas x = a qx + b qy + c, y = d qx + e qy + g for a
    point at (qx, qy) from the triangle's first rest vertex, and h the splat half-offset in pixels.

    h grows with the triangle's stretch s (largest singular value of the map, in texels per canvas
    pixel) from 1/4 px to 1/4 (3s - 2) px, at most 1/2 px (beyond, the 2x2 pattern's own middle
    would open): this closes the gaps between stretched texels (measured: no holes up to s = 1.3
    at any angle, few at 1.5) and stays inside each texel's own footprint.
    """
    tv, inv = sprite.tri_verts, sprite.tri_inv.astype(np.float32)
    x, y = verts[..., 0], verts[..., 1]
    x0, y0 = x[:, tv[:, 0]], y[:, tv[:, 0]]                        # (n, T) first vertex
    ex1, ey1 = x[:, tv[:, 1]] - x0, y[:, tv[:, 1]] - y0             # deformed edge columns
    ex2, ey2 = x[:, tv[:, 2]] - x0, y[:, tv[:, 2]] - y0
    # M = [e1 e2] @ inv(rest edges), element by element
    m00, m01 = ex1 * inv[:, 0, 0] + ex2 * inv[:, 1, 0], ex1 * inv[:, 0, 1] + ex2 * inv[:, 1, 1]
    m10, m11 = ey1 * inv[:, 0, 0] + ey2 * inv[:, 1, 0], ey1 * inv[:, 0, 1] + ey2 * inv[:, 1, 1]
    coef = np.empty((len(verts), 7, len(tv)), np.float32)
    coef[:, 0], coef[:, 1], coef[:, 2] = m00, m01, x0
    coef[:, 3], coef[:, 4], coef[:, 5] = m10, m11, y0
    fro = m00 * m00 + m01 * m01 + m10 * m10 + m11 * m11
    det = m00 * m11 - m01 * m10
    smax = np.sqrt(np.maximum((fro + np.sqrt(np.maximum(fro * fro - 4 * det * det, 0))) / 2, 0))
    s = np.maximum(smax / np.float32(sprite.texel_scale), 1)
    coef[:, 6] = np.minimum(3 * s - 2, 2) / 4
    return coef
