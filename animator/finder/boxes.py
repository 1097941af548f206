"""Find the drawn figures on a photo of paper: their boxes, best first (see docs/finder.md).

1. work on a copy whose longer side is :data:`WORK_SIDE` pixels (box averaging);
2. ink: the darkest channel (a coloured stroke is dark in some channel), an adaptive threshold
   against a Gaussian-like local mean (uneven light, shadows), with hysteresis (faint parts of a
   line count when they join its darker parts), specks dropped;
3. strokes of one figure join: a closing with a square of :data:`JOIN` of the photo's side, then
   connected components (pieces);
   dense ink that reaches the photo's edge (a table, cloth, a sleeve) is cut away first, so that a
   figure drawn close to the sheet's edge does not join it (a second set of pieces); long straight
   lines across the sheet (a ruled page, a margin) likewise (a third set);
4. nearby pieces merge (a head drawn apart from its body, a face inside an outlined head, a hat),
   figures a page apart do not; a piece touching the photo's edge merges with nothing;
5. each piece is scored: its ink, its size on the page, its shape, less where it touches the
   photo's edge (the table, the paper's edge, a finger, a shadow).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

#: The photo is searched on a copy whose longer side is this many pixels.
WORK_SIDE = 400
#: Adaptive threshold: local mean's Gaussian sigma (share of the longer side) and the offset
#: (grey levels) below that mean that counts as ink.
LOCAL_SIGMA = 0.04
OFFSET = 14.0
#: ... and, connected to such ink, the fainter pixels this far below it (hysteresis).
WEAK = 6.0
#: Strokes closer than this share of the photo's longer side are joined into one piece.
JOIN = 0.012
#: Pieces merge when the gap between their boxes is below this share of the larger piece's size
#: (for a small piece next to a large one, MERGE_SMALL).
MERGE = 0.03
MERGE_SMALL = 0.12
#: Ruled lines: straight ink runs longer than this share of the photo's side.
RULED = 0.25
#: ... or thin ink on a slanted straight line holding this share of the photo's width (height).
LINE_COVER = 0.35
#: Edge clutter: ink denser than CLUTTER_DENSITY in a window of CLUTTER_WINDOW of the photo's side,
#: reaching the photo's edge.
CLUTTER_WINDOW = 0.03
CLUTTER_DENSITY = 0.5
#: A piece whose box covers more than this share of the photo is not penalised for touching its edge.
TIGHT_CROP = 0.7
#: The best pieces (this many) are checked for a person's shape: a skeleton fitted to the piece's
#: mask on a grid of PERSON_SIDE pixels; a piece's score is its box score times (0.3 + 0.7 x the fit's).
PERSON_CHECKS = 5
PERSON_SIDE = 96
#: A box whose IoU with a better box is above this is dropped.
NMS_OVERLAP = 0.5
#: At most this many pieces (the most ink) are merged and scored.
MAX_PIECES = 48
#: Pieces smaller than this share of the photo's longer side are not figures.
MIN_SIDE = 0.04


@dataclass(frozen=True)
class Figure:
    """A drawn figure's box on the photo: ``(left, top, right, bottom)`` pixels, right and bottom
    exclusive, and a score in [0, 1]."""
    box: tuple[int, int, int, int]
    score: float


def ink_mask(rgb: np.ndarray, sigma: float, offset: float = OFFSET, weak: float = WEAK) -> np.ndarray:
    """Ink on paper: the darkest channel's drop below its local mean (a Gaussian-like weighted mean
    of standard deviation ``sigma`` pixels), with hysteresis: pixels ``weak`` below it that are
    connected to pixels ``offset`` below it (a faint pencil line joined to its darker parts; the
    paper's grain, faint everywhere, stays out)."""
    img = np.asarray(rgb)
    gray = img[..., :3].min(axis=2).astype(np.float32) if img.ndim == 3 else img.astype(np.float32)
    # two passes of a box filter: a Gaussian's shape at a fraction of its cost
    n = max(3, int(round((6.0 * sigma * sigma + 1.0) ** 0.5)) | 1)
    local = ndimage.uniform_filter(ndimage.uniform_filter(gray, n, mode="nearest"), n, mode="nearest")
    drop = local - gray
    strong = ndimage.binary_opening(drop > offset, np.ones((2, 2), bool))  # sensor noise and grain
    labels, count = ndimage.label(drop > weak, structure=np.ones((3, 3), bool))
    if count == 0:
        return strong
    keep = np.zeros(count + 1, bool)
    keep[labels[strong]] = True
    keep[0] = False
    return keep[labels]


def _work_copy(rgb: np.ndarray) -> tuple[np.ndarray, float]:
    from PIL import Image

    h, w = rgb.shape[:2]
    scale = min(1.0, WORK_SIDE / max(h, w))
    if scale >= 1.0:
        return rgb[..., :3] if rgb.ndim == 3 else rgb, 1.0
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    img = Image.fromarray(np.ascontiguousarray(rgb[..., :3] if rgb.ndim == 3 else rgb))
    return np.asarray(img.resize(size, Image.Resampling.BOX)), scale


def _edge_clutter(ink: np.ndarray, side: int) -> np.ndarray:
    """Where ink is dense and reaches the photo's edge (a table, cloth, a sleeve: not paper), grown
    by a few strokes' widths: strokes that run into it are cut off there instead of joining it."""
    size = max(3, int(CLUTTER_WINDOW * side))
    dense = ndimage.uniform_filter(ink.astype(np.float32), size=size) > CLUTTER_DENSITY
    labels, count = ndimage.label(dense)
    if count == 0:
        return dense
    border = np.unique(np.concatenate([labels[0], labels[-1], labels[:, 0], labels[:, -1]]))
    core = np.isin(labels, border[border > 0])
    if not core.any():
        return core
    k = 2 * max(1, int(2 * JOIN * side)) + 1
    return ndimage.maximum_filter(core.view(np.uint8), size=k).astype(bool)


def _ruled_lines(ink: np.ndarray, side: int) -> np.ndarray:
    """Long straight lines across the sheet (a ruled or squared page, a margin): thin ink (at most
    a few pixels across) that holds a horizontal or vertical run of RULED of the side once thickened
    by 2 px across the run (a line tilted by up to ~5% in the photo still holds it), with its
    stubs half a run on, grown by two pixels into the ink around it. A figure's body, thick across
    the line, stays."""
    n = max(8, int(RULED * side))
    u8 = ink.view(np.uint8)
    out = np.zeros_like(ink)
    for axis in (1, 0):
        across = 1 - axis
        thin = ink & ~ndimage.maximum_filter1d(ndimage.minimum_filter1d(u8, 7, axis=across), 7,
                                                axis=across).astype(bool)
        thick = ndimage.maximum_filter1d(u8, 5, axis=across)
        run = ndimage.maximum_filter1d(ndimage.minimum_filter1d(thick, n, axis=axis), n, axis=axis)
        # and its stubs: the same line's thin ink up to half a run beyond where the run ended (between
        # a figure and the margin, between two figures)
        run = ndimage.maximum_filter1d(run, n, axis=axis)
        out |= run.astype(bool) & thin
        out |= _projected_lines(thin, axis)
    if not out.any():
        return out
    return ndimage.maximum_filter(out.view(np.uint8), size=5).astype(bool) & ink


def _projected_lines(thin: np.ndarray, axis: int) -> np.ndarray:
    """Thin ink on straight lines that run across most of the photo at a slant of up to ~6%: for
    each slant, the pixels are projected along it and the lines holding LINE_COVER of the photo's
    width (axis 1) or height (axis 0) in pixels are kept (a faint line broken into dashes still
    counts all its dashes)."""
    ys, xs = np.nonzero(thin)
    if len(ys) == 0:
        return np.zeros_like(thin)
    along, across = (xs, ys) if axis == 1 else (ys, xs)
    length = thin.shape[axis]
    hit = np.zeros(len(ys), bool)
    for slope in np.linspace(-0.06, 0.06, 13):
        line = np.round(across - along * slope).astype(np.int64)
        line -= line.min()
        count = np.bincount(line)
        full = count >= LINE_COVER * length
        if full.any():
            hit |= full[line]
    out = np.zeros_like(thin)
    out[ys[hit], xs[hit]] = True
    return out


@dataclass
class _Piece:
    box: list[int]        # l, t, r, b (work pixels, exclusive)
    ink: float            # ink pixels
    labels: list[int]

    @property
    def side(self) -> float:
        return float(max(self.box[2] - self.box[0], self.box[3] - self.box[1]))


def _gap(a: list[int], b: list[int]) -> float:
    dx = max(0, max(a[0], b[0]) - min(a[2], b[2]))
    dy = max(0, max(a[1], b[1]) - min(a[3], b[3]))
    return float(np.hypot(dx, dy))


def _merge(pieces: list[_Piece]) -> list[_Piece]:
    changed = True
    while changed and len(pieces) > 1:
        changed = False
        pieces.sort(key=lambda p: -p.ink)
        for i in range(len(pieces)):
            for j in range(i + 1, len(pieces)):
                a, b = pieces[i], pieces[j]
                big, small = (a, b) if a.side >= b.side else (b, a)
                limit = (MERGE_SMALL if small.side < 0.25 * big.side else MERGE) * big.side
                if _gap(a.box, b.box) <= limit:
                    a.box = [min(a.box[0], b.box[0]), min(a.box[1], b.box[1]),
                             max(a.box[2], b.box[2]), max(a.box[3], b.box[3])]
                    a.ink += b.ink
                    a.labels += b.labels
                    del pieces[j]
                    changed = True
                    break
            if changed:
                break
    return pieces


def find_figures(rgb: np.ndarray, max_figures: int = 8) -> list[Figure]:
    """Boxes of the drawn figures on a photo of paper, best first (at most ``max_figures``).

    Args:
        rgb: uint8 (H, W, 3) or (H, W, 4) (alpha ignored) or (H, W) grey photo.
    """
    img = np.asarray(rgb)
    if img.ndim not in (2, 3) or img.shape[0] < 8 or img.shape[1] < 8:
        return []
    work, scale = _work_copy(img)
    h, w = work.shape[:2]
    side = max(h, w)
    ink = ink_mask(work, sigma=LOCAL_SIGMA * side)
    pad = 2 * int(JOIN * side) + 2
    k = 2 * max(1, int(JOIN * side)) + 1  # a square closing (separable: fast)
    grown = ndimage.maximum_filter(np.pad(ink, pad).view(np.uint8), size=k)
    joined = ndimage.minimum_filter(grown, size=k)[pad:-pad, pad:-pad].astype(bool) | ink
    hypotheses = [joined]
    clutter = _edge_clutter(ink, side)
    if clutter.any():
        hypotheses.append(joined & ~clutter)
    ruled = _ruled_lines(ink, side)
    if ruled.any():
        unruled = ink & ~ruled
        grown = ndimage.maximum_filter(np.pad(unruled, pad).view(np.uint8), size=k)
        hypotheses.append(ndimage.minimum_filter(grown, size=k)[pad:-pad, pad:-pad].astype(bool) | unruled)
    candidates: list[tuple[_Piece, np.ndarray]] = []
    for hypothesis in hypotheses:
        candidates += _pieces(hypothesis, ink, w, h)
    rim = np.zeros((h, w), bool)  # the photo's rim: ink that lies mostly there frames the photo
    band = max(2, int(0.03 * side))
    rim[:band], rim[-band:], rim[:, :band], rim[:, -band:] = True, True, True, True
    scored = [(_score(p, w, h, _rim_share(p, labels, ink, rim)), p, labels)
              for p, labels in candidates if p.side >= MIN_SIDE * side]
    scored.sort(key=lambda t: -t[0])
    # person-likeness: the skeleton fitted to each of the best pieces' masks
    from .fit import fit_skeleton

    rescored = []
    for k, (base, p, labels) in enumerate(scored[:PERSON_CHECKS]):
        l, t, r, b = p.box
        member = np.zeros(int(labels.max()) + 1, bool)
        member[p.labels] = True
        piece = ndimage.binary_fill_holes(member[labels[t:b, l:r]])
        person = fit_skeleton(piece, work_side=PERSON_SIDE).score
        rescored.append((base * (0.3 + 0.7 * person), p))
    rescored += [(0.3 * base, p) for base, p, _ in scored[PERSON_CHECKS:]]
    rescored.sort(key=lambda t: -t[0])
    kept: list[tuple[float, _Piece]] = []
    for sc, p in rescored:
        if all(_overlap(p.box, q.box) < NMS_OVERLAP for _, q in kept):
            kept.append((sc, p))
    out = []
    for sc, p in kept[:max_figures]:
        l, t, r, b = p.box
        box = (int(np.floor(l / scale)), int(np.floor(t / scale)),
               min(img.shape[1], int(np.ceil(r / scale))), min(img.shape[0], int(np.ceil(b / scale))))
        out.append(Figure(box, round(float(sc), 4)))
    return out


def _pieces(joined: np.ndarray, ink: np.ndarray, w: int, h: int) -> list[tuple[_Piece, np.ndarray]]:
    """Connected pieces of ``joined`` (nearby ones merged), each with the label image they index."""
    labels, count = ndimage.label(joined, structure=np.ones((3, 3), bool))
    if count == 0:
        return []
    side = max(w, h)
    ink_count = np.bincount(labels[ink], minlength=count + 1)
    pieces = []
    for k, sl in enumerate(ndimage.find_objects(labels), start=1):
        if sl is None or ink_count[k] < 4:
            continue
        pieces.append(_Piece([sl[1].start, sl[0].start, sl[1].stop, sl[0].stop], float(ink_count[k]), [k]))
    pieces = [p for p in pieces if p.side >= 0.5 * MIN_SIDE * side]
    pieces = sorted(pieces, key=lambda p: -p.ink)[:MAX_PIECES]  # the work's bound on a noisy photo
    # what touches the photo's edge (the table, the sheet's edge, a shadow) merges with nothing
    edge = [p for p in pieces if _touches(p.box, w, h)]
    return [(p, labels) for p in _merge([p for p in pieces if not _touches(p.box, w, h)]) + edge]


def _overlap(a: list[int], b: list[int]) -> float:
    """Intersection over union of two boxes."""
    ix = max(0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - ix * iy
    return ix * iy / union if union > 0 else 0.0


def _touches(box: list[int], w: int, h: int) -> int:
    l, t, r, b = box
    return int(l <= 1) + int(t <= 1) + int(r >= w - 1) + int(b >= h - 1)


def _rim_share(p: _Piece, labels: np.ndarray, ink: np.ndarray, rim: np.ndarray) -> float:
    """The share of a piece's ink on the photo's rim (only worked out for pieces touching the edge)."""
    l, t, r, b = p.box
    if l > 1 and t > 1 and r < labels.shape[1] - 1 and b < labels.shape[0] - 1:
        return 0.0
    member = np.zeros(int(labels.max()) + 1, bool)
    member[p.labels] = True
    mine = member[labels[t:b, l:r]] & ink[t:b, l:r]
    return float((mine & rim[t:b, l:r]).sum()) / max(1.0, float(mine.sum()))


def _score(p: _Piece, w: int, h: int, rim_share: float = 0.0) -> float:
    l, t, r, b = p.box
    bw, bh = r - l, b - t
    side = max(w, h)
    # size: a figure fills a good part of the photo; a speck or a far-off doodle less
    size = min(1.0, max(bw, bh) / (0.35 * side))
    # ink: enough strokes for a figure, relative to its box (a long thin line has little)
    density = p.ink / max(1.0, bw * bh)
    amount = min(1.0, density / 0.04)
    # shape: a person is taller than wide or about square; a strip along the page is not
    aspect = bh / max(1.0, bw)
    shape = 1.0 if 0.5 <= aspect <= 4.0 else (0.5 if 0.25 <= aspect <= 8.0 else 0.15)
    # the photo's edge: the table, the paper's edge, a finger, a shadow; unless the piece fills the
    # photo (a photo cropped to the drawing) with its ink inside, not along the rim (a frame)
    tight = bw * bh > TIGHT_CROP * w * h and rim_share < 0.3 and _touches(p.box, w, h) < 4
    edge = 0.85 if tight else (1.0, 0.7, 0.4, 0.25, 0.15)[_touches(p.box, w, h)]
    return float(np.clip((0.55 * size + 0.25 * amount + 0.2) * shape * edge, 0.0, 1.0))
