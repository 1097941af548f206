"""Fit AnimatedDrawings' 16-joint skeleton to a drawn figure's mask (see docs/finder.md).

The mask is filled, smoothed and thinned to a one-pixel skeleton (a tree: a filled shape has no
holes); short side branches (fingers, hair, bumps of the outline) are pruned. The remaining ends
are the figure's extremities: the feet are the two lowest ends of distinct legs, the crotch is the
highest point of the path between them, the head is the end that rises highest above the crotch
near the figure's middle, the hands are the outermost ends left and right of the spine. Joints lie
on the skeleton's paths: the neck (AnimatedDrawings puts it on the nose) at the head's centre (the
widest point of the spine's top before the neck narrows), shoulders and hips where the limbs leave
the body, elbows and knees at the bend of each limb (or half way).

Coordinates: x right, y down, pixels of the mask's grid plus ``origin``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from ..character import SKELETON_JOINTS
from .thin import ends_and_junctions, thin

#: The mask is fitted on a grid whose longer side is at most this many pixels (speed; joints are
#: read to about 1% of the figure's size there). A cell is set when a stroke crosses it.
WORK_SIDE = 200
#: A branch from an end to its junction is a spur when length + DT(end) - DT(junction) < SPUR * size.
SPUR = 0.06
#: A limb's middle joint sits at the limb's sharpest bend when the bend strays this far (share of
#: the limb's chord) from the straight line; otherwise half way along the limb.
BEND = 0.12
#: ... looked for between this share of the limb from either end.
BEND_MARGIN = 0.2
#: Shoulders and hips sit this share of the body's local half-width (distance transform at the
#: spine) out from the spine along the limb.
SHOULDER_OUT = 0.75
HIP_OUT = 0.75
#: A spine thinner than this share of the figure's height is a stick figure's line.
THIN_SPINE = 0.035
#: At most BLOBS round blobs the thinning melted get a branch to their centre: those the skeleton
#: passes further than BLOB_MISS of their radius from.
BLOBS = 6
BLOB_MISS = 0.6
#: The head is told from a hand by its roundness: the widest point within this share of the
#: figure's height of the end (a head's end sits in its middle, a hand's on a thin arm).
HEAD_REACH = 0.12
#: A shape filling more than this share of its box is a block, not a figure with limbs.
SOLID = 0.75
#: A skeleton with more ends than this (after pruning) is not a person (a comb of ruled lines, a
#: tree, a scribble); the drawn people and AnimatedDrawings' examples have 4 to 8.
BRANCHY = 12
#: At most this many of the skeleton's ends are considered (the work's bound on a scribble).
MAX_ENDS = 24

_SQUARE = np.ones((3, 3), bool)


@dataclass(frozen=True)
class Fit:
    """A fitted skeleton: 16 joints (AnimatedDrawings' names), a confidence per joint in [0, 1],
    an overall score in [0, 1] (low when the shape is not person-like) and, then, why."""
    joints: dict[str, tuple[float, float]]
    confidence: dict[str, float]
    score: float
    reason: str | None = None

    def coco17(self) -> np.ndarray:
        """The skeleton as 17 COCO keypoints ``(x, y, score)`` (float64, (17, 3)) such that
        :func:`animator.skeleton.skeleton_from_coco` gives back these joints (nose = neck; eyes and
        ears on the neck with half its confidence; shoulders, elbows, wrists, hips, knees, ankles)."""
        j, c = self.joints, self.confidence
        rows = []
        for name in ("neck", "neck", "neck", "neck", "neck"):
            rows.append((*j[name], c[name]))
        pairs = (("left_shoulder", "right_shoulder"), ("left_elbow", "right_elbow"),
                 ("left_hand", "right_hand"), ("left_hip", "right_hip"), ("left_knee", "right_knee"),
                 ("left_foot", "right_foot"))
        for left, right in pairs:
            rows.append((*j[left], c[left]))
            rows.append((*j[right], c[right]))
        out = np.array(rows, dtype=np.float64)
        out[1:5, 2] *= 0.5
        return out


def fit_skeleton(mask: np.ndarray, origin: tuple[float, float] = (0, 0), *, work_side: int = WORK_SIDE) -> Fit:
    """Fit the 16 joints to a boolean mask of one drawn figure (see the module docstring).

    Args:
        mask: (H, W) boolean (or 0/non-zero) array, True on the figure.
        origin: added to every joint (e.g. the crop's top-left corner in the photo).
        work_side: the mask is fitted on a grid whose longer side is at most this (speed).
    """
    m = np.asarray(mask)
    if m.ndim != 2:
        raise ValueError(f"expected an (H, W) mask, got shape {m.shape}")
    m = m.astype(bool)
    ox, oy = float(origin[0]), float(origin[1])
    if m.sum() < 16:
        return _nothing(m, ox, oy, "the mask is empty")
    ys, xs = np.nonzero(m)
    top, left, bottom, right = ys.min(), xs.min(), ys.max() + 1, xs.max() + 1
    crop = m[top:bottom, left:right]
    f = max(1, -(-max(crop.shape) // work_side))  # ceil: the work grid's cell, in mask pixels
    work = _pool(crop, f)
    work = _largest(ndimage.binary_fill_holes(np.pad(work, 2)))

    def to_photo(p: tuple[float, float]) -> tuple[float, float]:
        x, y = p
        return (float((x - 2) * f + (f - 1) / 2.0 + left + ox), float((y - 2) * f + (f - 1) / 2.0 + top + oy))

    return _fit_work(work, to_photo)


def _nothing(m: np.ndarray, ox: float, oy: float, reason: str) -> Fit:
    h, w = m.shape
    centre = (ox + w / 2.0, oy + h / 2.0)
    return Fit({n: centre for n in SKELETON_JOINTS}, {n: 0.0 for n in SKELETON_JOINTS}, 0.0, reason)


def _pool(m: np.ndarray, f: int) -> np.ndarray:
    """The mask on a grid f times coarser: a cell is set when at least f of its f x f pixels are
    (a one-pixel stroke across the cell: thin strokes stay whole however far the mask is shrunk)."""
    if f == 1:
        return m.copy()
    h, w = m.shape
    hp, wp = -(-h // f) * f, -(-w // f) * f
    padded = np.zeros((hp, wp), bool)
    padded[:h, :w] = m
    return padded.reshape(hp // f, f, wp // f, f).sum(axis=(1, 3), dtype=np.int32) >= f


def _largest(m: np.ndarray) -> np.ndarray:
    labels, n = ndimage.label(m, structure=_SQUARE)
    if n <= 1:
        return m.astype(bool)
    sizes = np.bincount(labels.ravel())
    sizes[0] = 0
    return labels == int(np.argmax(sizes))


class _Tree:
    """The skeleton's pixels as a graph: node ids, positions (x, y), shortest paths."""

    def __init__(self, skel: np.ndarray):
        from scipy.sparse import coo_matrix  # loaded on first use: importing the finder stays light
        ys, xs = np.nonzero(skel)
        self.xy = np.stack([xs, ys], axis=1).astype(np.float64)
        self.n = len(xs)
        index = -np.ones(skel.shape, np.int64)
        index[ys, xs] = np.arange(self.n)
        self.index = index
        rows, cols, wts = [], [], []
        h, w = skel.shape
        for dy, dx, wt in ((0, 1, 1.0), (1, 0, 1.0), (1, 1, 2 ** 0.5), (1, -1, 2 ** 0.5)):
            a = index[0:h - dy, max(0, -dx):w - max(0, dx)]
            b = index[dy:h, max(0, dx):w + min(0, dx)]
            ok = (a >= 0) & (b >= 0)
            rows.append(a[ok])
            cols.append(b[ok])
            wts.append(np.full(int(ok.sum()), wt))
        r, c, wt = np.concatenate(rows), np.concatenate(cols), np.concatenate(wts)
        self.graph = coo_matrix((np.concatenate([wt, wt]), (np.concatenate([r, c]), np.concatenate([c, r]))),
                                shape=(self.n, self.n)).tocsr()
        self._cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def solve(self, sources: list[int]) -> None:
        todo = [s for s in sources if s not in self._cache]
        if not todo:
            return
        from scipy.sparse.csgraph import dijkstra

        dist, pred = dijkstra(self.graph, directed=False, indices=todo, return_predecessors=True)
        for k, s in enumerate(todo):
            self._cache[s] = (dist[k], pred[k])

    def dist(self, a: int) -> np.ndarray:
        self.solve([a])
        return self._cache[a][0]

    def path(self, a: int, b: int) -> np.ndarray:
        """Node ids from a to b (inclusive)."""
        self.solve([a])
        pred = self._cache[a][1]
        out = [b]
        while out[-1] != a:
            p = pred[out[-1]]
            if p < 0:
                return np.array([a], np.int64)
            out.append(int(p))
        return np.array(out[::-1], np.int64)


def _reach_blobs(skel: np.ndarray, dt: np.ndarray) -> np.ndarray:
    """Thinning melts a round blob at the end of a line (a stick figure's head) into the line: a
    branch is drawn from each such blob's centre (a peak of the distance transform the skeleton
    passes far from) straight to the nearest skeleton pixel."""
    if not skel.any():
        return skel
    peaks = (dt >= 3.0) & (dt == ndimage.maximum_filter(dt, size=5))
    ys, xs = np.nonzero(peaks)
    centres: list[tuple[int, int]] = []
    for k in np.argsort(-dt[ys, xs], kind="stable"):
        c = (int(ys[k]), int(xs[k]))
        if all(abs(c[0] - o[0]) + abs(c[1] - o[1]) > 4 for o in centres):
            centres.append(c)
            if len(centres) == BLOBS:
                break
    if not centres:
        return skel
    gap, (iy, ix) = ndimage.distance_transform_edt(~skel, return_indices=True)
    out = skel.copy()
    for cy, cx in centres:
        if gap[cy, cx] > BLOB_MISS * dt[cy, cx]:
            ty, tx = int(iy[cy, cx]), int(ix[cy, cx])
            n = int(max(abs(ty - cy), abs(tx - cx))) + 1
            out[np.round(np.linspace(cy, ty, n)).astype(int), np.round(np.linspace(cx, tx, n)).astype(int)] = True
    return thin(out) if not np.array_equal(out, skel) else out


def _per_label_max(values: np.ndarray, labels: np.ndarray, count: int) -> np.ndarray:
    """Per label 1..count, the largest value over its pixels (0 where none is positive)."""
    out = np.zeros(count + 1)
    sel = labels > 0
    np.maximum.at(out, labels[sel], values[sel])
    return out[1:]


def _prune(skel: np.ndarray, dt: np.ndarray, size: float) -> np.ndarray:
    """Remove side branches that reach less than ``SPUR * size`` past the body at their junction:
    length + DT(end) - DT(junction) (a few passes: fingers first, then what was their hand's branch
    is long and stays). A branch is the skeleton between an end and the pixels around a junction."""
    skel = skel.copy()
    for _ in range(4):
        ends, junctions = ends_and_junctions(skel)
        if not junctions.any() or ends.sum() <= 2:
            break
        near = ndimage.binary_dilation(junctions, _SQUARE)
        branches, count = ndimage.label(skel & ~near, structure=_SQUARE)
        if count == 0:
            break
        ids = np.arange(1, count + 1)
        with_end = np.bincount(branches[ends], minlength=count + 1)[1:] > 0
        length = np.bincount(branches.ravel(), minlength=count + 1)[1:].astype(np.float64) + 1.5
        # the radius at the junction a branch meets: the largest DT of the junction pixels next to it
        radius_at = ndimage.grey_dilation(np.where(junctions, dt, 0.0), size=(5, 5))
        reach = _per_label_max(radius_at, branches, count)
        at_end = _per_label_max(np.where(ends, dt, 0.0), branches, count)
        # how far the end's inscribed disc reaches past the junction's: a bump of the outline
        # barely does; a limb does, and so does a round head whose end sits in its middle
        spur = with_end & (reach > 0) & (length + at_end - reach < SPUR * size)
        if not spur.any():
            break
        drop = np.zeros(count + 1, bool)
        drop[ids[spur]] = True
        skel &= ~drop[branches]
        skel = _largest(skel)
        # the junction pixels left behind by a removed branch are thinned again next pass
        skel = thin(skel)
    return _largest(skel)


def _length(pts) -> float:
    a = np.asarray(pts, np.float64)
    if len(a) < 2:
        return 0.0
    return float(np.hypot(*np.diff(a, axis=0).T).sum())


def _arc(tree: _Tree, path: np.ndarray) -> np.ndarray:
    pts = tree.xy[path]
    if len(pts) < 2:
        return np.zeros(len(pts))
    return np.concatenate([[0.0], np.cumsum(np.hypot(*np.diff(pts, axis=0).T))])


def _at(tree: _Tree, path: np.ndarray, s: float) -> np.ndarray:
    """The point at arc length s along a path (clipped to its ends)."""
    arc = _arc(tree, path)
    pts = tree.xy[path]
    if len(pts) == 1:
        return pts[0].copy()
    s = float(np.clip(s, 0.0, arc[-1]))
    return np.array([np.interp(s, arc, pts[:, 0]), np.interp(s, arc, pts[:, 1])])


def _middle(tree: _Tree, path: np.ndarray, start: float, stop: float) -> tuple[np.ndarray, float]:
    """A limb's middle joint between arc lengths start and stop: the sharpest bend if the limb is
    bent (point furthest from the chord, more than BEND of the chord away), else half way.
    Returns the point and a confidence (1 for a clear bend or a straight limb)."""
    arc = _arc(tree, path)
    a, b = _at(tree, path, start), _at(tree, path, stop)
    # the bend is looked for in the limb's middle: a hooked hand or foot at its end is not an elbow
    margin = BEND_MARGIN * (stop - start)
    sel = (arc >= start + margin) & (arc <= stop - margin)
    chord = b - a
    length = float(np.hypot(*chord))
    if sel.sum() >= 3 and length > 1e-6:
        pts = tree.xy[path][sel]
        rel = pts - a
        dev = np.abs(rel[:, 0] * chord[1] - rel[:, 1] * chord[0]) / length
        k = int(np.argmax(dev))
        if dev[k] > BEND * length:
            return pts[k].copy(), 1.0
    return _at(tree, path, 0.5 * (start + stop)), 1.0


def _fit_work(work: np.ndarray, to_photo) -> Fit:
    dt = ndimage.distance_transform_edt(work)
    ys, xs = np.nonzero(work)
    height = float(ys.max() - ys.min() + 1)
    width = float(xs.max() - xs.min() + 1)
    size = max(height, width)
    cx, cy = float(xs.mean()), float(ys.mean())
    skel = _prune(_reach_blobs(thin(work), dt), dt, size)
    tree = _Tree(skel)
    ends_map, _ = ends_and_junctions(skel)
    end_ids = [int(tree.index[y, x]) for y, x in zip(*np.nonzero(ends_map))]
    if tree.n == 0:
        return _nothing_work(work, to_photo, "the mask has no skeleton")
    many_ends = len(end_ids)
    if not end_ids:
        end_ids = [0]
    if len(end_ids) > MAX_ENDS:  # a scribble: the ends farthest from the middle stand for it
        far = np.hypot(tree.xy[end_ids, 0] - cx, tree.xy[end_ids, 1] - cy)
        end_ids = [end_ids[k] for k in sorted(np.argsort(-far, kind="stable")[:MAX_ENDS])]
    tree.solve(end_ids)
    exy = tree.xy
    reasons: list[str] = []
    conf: dict[str, float] = {}

    # Feet: the lowest end in the lower half, then the lowest end on another leg (far along the
    # skeleton from the first); more legs than two: the two lowest of distinct legs are taken.
    lower = sorted([e for e in end_ids if exy[e, 1] > cy], key=lambda e: -exy[e, 1])
    feet: list[int] = []
    if lower:
        feet.append(lower[0])
        d0 = tree.dist(lower[0])
        for e in lower[1:]:
            if d0[e] > 0.2 * height:
                feet.append(e)
                break
    if len(feet) == 2:
        leg_path = tree.path(feet[0], feet[1])
        crotch = int(leg_path[int(np.argmin(exy[leg_path, 1]))])
    else:
        reasons.append("no two legs found" if not feet else "only one leg found")
        # the skeleton point nearest the mask's centroid stands in for the crotch
        crotch = int(np.argmin(np.hypot(exy[:, 0] - cx, exy[:, 1] - cy)))
    tree.solve([crotch])
    cpt = exy[crotch]
    leg_drop = float(np.mean(exy[feet, 1]) - cpt[1]) if len(feet) == 2 else 0.0

    # Head: among the other ends above the crotch (and round blobs on the skeleton), the one that is
    # most head-like: high, near the middle, and round (a wide blob at the top of its path: a hand at
    # the end of a thin arm is not).
    others = [e for e in end_ids if e not in feet]
    head = None
    cdist = tree.dist(crotch)

    def blob(e: int) -> float:
        p = tree.path(e, crotch)
        arc = _arc(tree, p)
        top = p[arc <= min(0.35 * arc[-1], HEAD_REACH * height)] if len(p) > 1 else p
        pts = tree.xy[top].astype(int)
        return float(dt[pts[:, 1], pts[:, 0]].max())

    # a round blob the skeleton passes through (a head that an arm drawn across it runs into)
    on_skel = np.where(skel, dt, 0.0)
    r_nodes = dt[exy[:, 1].astype(int), exy[:, 0].astype(int)]
    bulge = (on_skel == ndimage.maximum_filter(on_skel, size=7)) & (on_skel >= 2.5 * float(np.median(r_nodes)))
    blobs = [int(tree.index[y, x]) for y, x in zip(*np.nonzero(bulge))]
    blobs = sorted(blobs, key=lambda n: -r_nodes[n])[:3]
    above = [e for e in others + [b for b in blobs if b not in others and b not in feet]
             if cpt[1] - exy[e, 1] > 0.15 * height]
    if above:
        def head_cost(e: int) -> float:
            return ((exy[e, 1] - cpt[1]) + 1.0 * abs(exy[e, 0] - cpt[0]) - 2.5 * blob(e)) / height
        head = min(above, key=head_cost)
    if head is None:
        reasons.append("no head found above the body")
        top = int(np.argmin(exy[:, 1]))
        head_end = top if cpt[1] - exy[top, 1] > 0.15 * height else None
    else:
        head_end = head
    spine = tree.path(head_end, crotch) if head_end is not None else np.array([crotch])
    spine_set = set(spine.tolist())
    spine_arc = _arc(tree, spine)  # from the head end
    spine_len = float(spine_arc[-1]) if len(spine) > 1 else 0.0
    spine_pos = {int(n): float(spine_len - a) for n, a in zip(spine, spine_arc)}  # height above the crotch

    # Hands: the outermost ends left and right of the spine, above the crotch or joining the spine
    # well above it (a skirt's corners are low and join it low); more arms: the outermost per side.
    def joins(e: int) -> tuple[int, int]:
        p = tree.path(e, crotch)
        on = np.array([n in spine_set for n in p.tolist()])
        j = int(np.argmax(on)) if on.any() else len(p) - 1
        return j, int(p[j])

    arm_ends = [e for e in others if e != head
                and (exy[e, 1] < cpt[1] + 0.2 * leg_drop or spine_pos.get(joins(e)[1], 0.0) > 0.25 * spine_len)]
    spine_x = float(np.median(exy[spine, 0]))
    right_side = [e for e in arm_ends if exy[e, 0] < spine_x]
    left_side = [e for e in arm_ends if exy[e, 0] >= spine_x]
    hands = {
        "right": min(right_side, key=lambda e: exy[e, 0] - 0.3 * cdist[e]) if right_side else None,
        "left": max(left_side, key=lambda e: exy[e, 0] + 0.3 * cdist[e]) if left_side else None,
    }
    found_hands = [h for h in hands.values() if h is not None]
    if not found_hands:
        reasons.append("no arms found")
    elif len(found_hands) == 1:
        reasons.append("only one arm found")

    joints: dict[str, np.ndarray] = {}
    # Neck (AnimatedDrawings' neck joint sits on the nose): the head's centre.
    if head_end is not None and len(spine) > 1:
        joints["neck"], conf["neck"] = _head_centre(tree, spine, dt)
    else:
        joints["neck"], conf["neck"] = cpt.copy(), 0.0

    # Where the spine leaves the head (its first node outside the head's inscribed circle): an arm
    # that runs into the head (drawn across it) is taken to start there.
    spine_index = {int(n): k for k, n in enumerate(spine)}
    neck_base = 0
    if conf["neck"] > 0:
        radius = dt[int(joints["neck"][1]), int(joints["neck"][0])]
        away = np.hypot(exy[spine, 0] - joints["neck"][0], exy[spine, 1] - joints["neck"][1]) > radius
        neck_base = int(np.argmax(away)) if away.any() else 0

    # Arms.
    for side in ("right", "left"):
        h = hands[side]
        if h is None:
            continue
        p = tree.path(h, crotch)
        on_spine = np.array([n in spine_set for n in p.tolist()])
        j = int(np.argmax(on_spine)) if on_spine.any() else len(p) - 1
        if spine_index.get(int(p[j]), len(spine)) < neck_base:
            arm = tree.path(int(spine[neck_base]), h)
        else:
            arm = p[:j + 1][::-1]  # spine -> hand
        arc = _arc(tree, arm)
        out = min(SHOULDER_OUT * dt[int(tree.xy[arm[0], 1]), int(tree.xy[arm[0], 0])], 0.4 * arc[-1])
        joints[f"{side}_shoulder"] = _at(tree, arm, out)
        joints[f"{side}_elbow"], _ = _middle(tree, arm, out, arc[-1])
        joints[f"{side}_hand"] = tree.xy[h].copy()
        conf[f"{side}_shoulder"] = conf[f"{side}_elbow"] = conf[f"{side}_hand"] = 1.0

    # Legs. A stick figure's legs fork from a thin spine; the ink fills the fork's top (the pen's
    # width, the mask's closing), so the skeleton forks lower than the drawing: the crotch moves up
    # the spine to where it is as thin as the spine again.
    hip_node = crotch
    if len(feet) == 2 and len(spine) > 4:
        up = spine[::-1]  # crotch -> head
        r_up = dt[exy[up, 1].astype(int), exy[up, 0].astype(int)]
        arc_up = _arc(tree, up)
        mid = (arc_up > 0.3 * arc_up[-1]) & (arc_up < 0.7 * arc_up[-1])
        r_ref = float(np.median(r_up[mid])) if mid.any() else 0.0
        if 0 < r_ref < THIN_SPINE * height:
            k = 0
            while k + 1 < len(up) and r_up[k] > 1.3 * r_ref and arc_up[k + 1] < 0.15 * height:
                k += 1
            hip_node = int(up[k])
    hpt = exy[hip_node]
    if len(feet) == 2:
        order = sorted(feet, key=lambda e: exy[e, 0])  # the figure's right foot is on the image's left
        for side, f in zip(("right", "left"), order):
            leg = tree.path(hip_node, f)
            arc = _arc(tree, leg)
            out = min(HIP_OUT * dt[int(hpt[1]), int(hpt[0])], 0.4 * arc[-1])
            joints[f"{side}_hip"] = _at(tree, leg, out)
            joints[f"{side}_knee"], _ = _middle(tree, leg, out, arc[-1])
            joints[f"{side}_foot"] = tree.xy[f].copy()
            conf[f"{side}_hip"] = conf[f"{side}_knee"] = conf[f"{side}_foot"] = 1.0

    # What was not found sits on its parent (a limb folded to a point), confidence 0.
    if "right_hip" not in joints:
        for side in ("right", "left"):
            for part in ("hip", "knee", "foot"):
                joints[f"{side}_{part}"], conf[f"{side}_{part}"] = cpt.copy(), 0.0
    joints["root"] = joints["hip"] = 0.5 * (joints["right_hip"] + joints["left_hip"])
    conf["root"] = conf["hip"] = min(conf["right_hip"], conf["left_hip"]) if len(feet) == 2 else 0.0
    found = [s for s in ("right", "left") if f"{s}_shoulder" in joints]
    if found:
        shoulder_y = np.mean([joints[f"{s}_shoulder"] for s in found], axis=0)
    else:
        shoulder_y = _at(tree, spine[::-1], 0.6 * _arc(tree, spine)[-1]) if len(spine) > 1 else cpt.copy()
    for side in ("right", "left"):
        if f"{side}_shoulder" not in joints:
            for part in ("shoulder", "elbow", "hand"):
                joints[f"{side}_{part}"], conf[f"{side}_{part}"] = np.array(shoulder_y, float), 0.0
    joints["torso"] = 0.5 * (joints["right_shoulder"] + joints["left_shoulder"])
    conf["torso"] = 0.5 * (conf["right_shoulder"] + conf["left_shoulder"]) if found else 0.0

    score = float(np.mean([conf[n] for n in SKELETON_JOINTS]))
    # A person stands upright: head above the shoulders above the hips above the feet.
    if not reasons:
        order_ok = (joints["neck"][1] < joints["torso"][1] < joints["root"][1] + 0.05 * height
                    and joints["root"][1] < min(joints["right_foot"][1], joints["left_foot"][1]))
        if not order_ok:
            reasons.append("the parts are not stacked like a standing person's")
            score *= 0.5
    fill = float(work.sum()) / (height * width)
    if fill > SOLID:
        reasons.append("a solid block: no limbs stand out of it")
    if many_ends > BRANCHY:
        reasons.append(f"too many branches for a person ({many_ends} ends)")
    if reasons:
        score = min(score, 0.3)
    out_joints = {n: to_photo((float(joints[n][0]), float(joints[n][1]))) for n in SKELETON_JOINTS}
    return Fit(out_joints, {n: float(conf[n]) for n in SKELETON_JOINTS}, round(score, 4),
               "; ".join(reasons) if reasons else None)


def _head_centre(tree: _Tree, spine: np.ndarray, dt: np.ndarray) -> tuple[np.ndarray, float]:
    """The widest point of the spine's top before it narrows into a neck (head end -> crotch).

    Without a narrowing in the top 60% of the spine: the point a fifth of the way down."""
    pts = tree.xy[spine]
    r = dt[pts[:, 1].astype(int), pts[:, 0].astype(int)]
    arc = _arc(tree, spine)
    limit = int(np.searchsorted(arc, 0.6 * arc[-1]))
    best = 0
    for i in range(1, max(2, limit)):
        if r[i] > r[best]:
            best = i
        elif r[i] < 0.6 * r[best] and r[best] > 1.5:
            return pts[best].copy(), 1.0
    return _at(tree, spine, 0.2 * arc[-1]), 0.5


def _nothing_work(work: np.ndarray, to_photo, reason: str) -> Fit:
    ys, xs = np.nonzero(work)
    c = to_photo((float(xs.mean()), float(ys.mean())))
    return Fit({n: c for n in SKELETON_JOINTS}, {n: 0.0 for n in SKELETON_JOINTS}, 0.0, reason)
