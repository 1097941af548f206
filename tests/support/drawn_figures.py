"""Drawn people with known joints, on photographed paper: the finder's test and bench set.

:func:`random_skeleton` draws a standing person's 16 joints (AnimatedDrawings' names, the neck joint
on the head's centre as AnimatedDrawings' pose model puts it on the nose) from a seed;
:func:`draw_figure` draws it in a style: ``stick`` (pen lines, a round head), ``filled`` (one
colour, capsules for limbs, an oval body), ``outlined`` (the same silhouette's outline in pen, with a
face), ``crayon`` (a light colour scribbled in, a pencil outline over part of it) and ``dress``
(outlined, a triangle skirt down to the knees). :func:`make_photo` puts one or several figures on a
sheet of paper and photographs it: perspective, a lamp's gradient, a shadow, paper grain, sometimes
the table around the sheet, blur, JPEG. Everything is deterministic for a seed.

The truth for each figure, in the photo's pixels: ``box`` (l, t, r, b; right/bottom exclusive: the
box of its pixels on the photo), ``joints`` {name: (x, y)}, ``mask`` (bool, photo size).

Where the drawing does not say, the joints follow these rules: a stick figure's shoulders both sit
where its arms leave the spine, its hips where its legs leave it; a figure with a body has its
shoulders where the arms join the body and its hips at the top of each leg; hands and feet are the
ends of the forearm and shin (wrist, ankle), not of a drawn foot or hand.
"""
from __future__ import annotations

import io
import math
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

STYLES = ("stick", "filled", "outlined", "crayon", "dress")
INKS = ((25, 25, 30), (30, 40, 140), (20, 90, 40), (150, 20, 20), (60, 60, 60), (110, 40, 120))
LIGHT = ((250, 200, 60), (240, 140, 60), (120, 190, 240), (150, 220, 120), (240, 150, 190))


@dataclass
class Drawn:
    style: str
    box: tuple[int, int, int, int]
    joints: dict[str, tuple[float, float]]
    mask: np.ndarray


def random_skeleton(rng: np.random.Generator, style: str) -> tuple[dict[str, np.ndarray], dict]:
    """Joints of a standing person 1.0 high (crotch at the origin, y down) and the body's sizes."""
    rh = rng.uniform(0.07, 0.12)              # head radius
    lt = rng.uniform(0.24, 0.32)              # crotch to shoulders' line
    neck = rng.uniform(0.02, 0.06)
    ll = rng.uniform(0.36, 0.46)              # leg
    la = rng.uniform(0.28, 0.40)              # arm
    stick = style == "stick"
    tw = 0.0 if stick else rng.uniform(0.08, 0.14)     # body's half width
    hw = 0.0 if stick else rng.uniform(0.45, 0.75) * tw
    sy = -lt
    j: dict[str, np.ndarray] = {}
    j["neck"] = np.array([rng.uniform(-0.02, 0.02), sy - neck - rh])
    for side, sgn in (("right", -1.0), ("left", 1.0)):
        sh = np.array([sgn * 0.85 * tw, sy + (0.0 if stick else 0.25 * rh)])
        a1 = math.radians(rng.uniform(20, 160))
        a2 = a1 + math.radians(rng.uniform(-60, 60))
        a2 = min(max(a2, math.radians(15)), math.radians(175))
        el = sh + 0.5 * la * np.array([sgn * math.sin(a1), math.cos(a1)])
        ha = el + 0.5 * la * np.array([sgn * math.sin(a2), math.cos(a2)])
        hp = np.array([sgn * hw, 0.0])
        b1 = math.radians(rng.uniform(2, 30))
        b2 = b1 + math.radians(rng.uniform(-12, 20))
        kn = hp + 0.5 * ll * np.array([sgn * math.sin(b1), math.cos(b1)])
        ft = kn + 0.5 * ll * np.array([sgn * math.sin(b2), math.cos(b2)])
        j[f"{side}_shoulder"], j[f"{side}_elbow"], j[f"{side}_hand"] = sh, el, ha
        j[f"{side}_hip"], j[f"{side}_knee"], j[f"{side}_foot"] = hp, kn, ft
    j["torso"] = 0.5 * (j["right_shoulder"] + j["left_shoulder"])
    j["root"] = j["hip"] = 0.5 * (j["right_hip"] + j["left_hip"])
    sizes = {"rh": rh, "tw": tw, "hw": hw, "sy": sy,
             "arm": rng.uniform(0.028, 0.05), "leg": rng.uniform(0.035, 0.06)}
    return j, sizes


def _pt(p, scale, off):
    return (float(p[0] * scale + off[0]), float(p[1] * scale + off[1]))


def draw_figure(rng: np.random.Generator, style: str, height: float) -> tuple[np.ndarray, np.ndarray, dict]:
    """(ink darkness (H, W, 3) float in [0, 1] to multiply the paper by 1 - darkness, the figure's
    mask (H, W) bool, joints in the canvas's pixels)."""
    j, s = random_skeleton(rng, style)
    ss = 2  # supersampling
    scale = height * ss
    pts = np.array(list(j.values()))
    pad = 0.1
    lo = pts.min(axis=0) - pad
    hi = pts.max(axis=0) + pad
    lo[1] = min(lo[1], j["neck"][1] - s["rh"] - 0.05)
    w_px, h_px = int((hi[0] - lo[0]) * scale), int((hi[1] - lo[1]) * scale)
    off = -lo * scale
    sil = Image.new("L", (w_px, h_px), 0)
    d = ImageDraw.Draw(sil)
    P = {k: _pt(v, scale, off) for k, v in j.items()}
    rh = s["rh"] * scale
    hx, hy = P["neck"]
    ink = rng.choice(len(INKS))
    stroke = max(2 * ss, int(height * ss * rng.uniform(0.008, 0.016)))
    art = Image.new("L", (w_px, h_px), 0)      # how dark the pen/fill is, 0..255
    colour = np.array(INKS[ink], float)
    if style == "stick":
        a = ImageDraw.Draw(art)
        a.ellipse((hx - rh, hy - rh, hx + rh, hy + rh), outline=255, width=stroke)
        neck_base = _pt(np.array([0.0, s["sy"]]), scale, off)
        top = (hx, hy + rh)
        crotch = P["root"]
        a.line([top, neck_base, crotch], fill=255, width=stroke, joint="curve")
        for side in ("right", "left"):
            a.line([neck_base, P[f"{side}_elbow"], P[f"{side}_hand"]], fill=255, width=stroke, joint="curve")
            a.line([crotch, P[f"{side}_knee"], P[f"{side}_foot"]], fill=255, width=stroke, joint="curve")
        for k in ("right_hand", "left_hand", "right_foot", "left_foot"):
            x, y = P[k]
            a.ellipse((x - stroke / 2, y - stroke / 2, x + stroke / 2, y + stroke / 2), fill=255)
        sil = art.copy()
        d = ImageDraw.Draw(sil)
        d.ellipse((hx - rh, hy - rh, hx + rh, hy + rh), fill=255)
        j["right_shoulder"] = j["left_shoulder"] = j["torso"] = np.array([0.0, s["sy"]])
    else:
        tw, hw = s["tw"] * scale, s["hw"] * scale
        sy = P["torso"][1]
        cy = P["root"][1]
        cx = P["root"][0]
        body = [(cx - tw, sy - 0.1 * rh), (cx + tw, sy - 0.1 * rh), (cx + max(hw * 1.3, 0.8 * tw), cy + 0.3 * hw),
                (cx - max(hw * 1.3, 0.8 * tw), cy + 0.3 * hw)]
        d.polygon(body, fill=255)
        d.ellipse((cx - tw, sy - 0.1 * rh - 0.5 * tw, cx + tw, sy - 0.1 * rh + 0.5 * tw), fill=255)
        d.ellipse((hx - rh, hy - rh, hx + rh, hy + rh), fill=255)
        d.line([(hx, hy), (P["torso"][0], sy)], fill=255, width=int(0.6 * rh))
        aw, lw = max(3, int(s["arm"] * scale)), max(3, int(s["leg"] * scale))
        for side, sgn in (("right", -1), ("left", 1)):
            d.line([P[f"{side}_shoulder"], P[f"{side}_elbow"], P[f"{side}_hand"]], fill=255, width=aw, joint="curve")
            d.line([P[f"{side}_hip"], P[f"{side}_knee"], P[f"{side}_foot"]], fill=255, width=lw, joint="curve")
            for k, r in ((f"{side}_hand", 0.8 * aw), (f"{side}_elbow", 0.5 * aw), (f"{side}_knee", 0.5 * lw)):
                x, y = P[k]
                d.ellipse((x - r, y - r, x + r, y + r), fill=255)
            fx, fy = P[f"{side}_foot"]
            toe = fx + sgn * 1.1 * lw  # a shoe pointing outwards
            d.ellipse((min(fx, toe) - 0.6 * lw, fy - 0.5 * lw, max(fx, toe) + 0.6 * lw, fy + 0.6 * lw), fill=255)
        if style == "dress":
            knee_y = 0.5 * (P["right_knee"][1] + P["left_knee"][1])
            hem = cy + 0.6 * (knee_y - cy)
            spread = tw * rng.uniform(1.6, 2.4)
            d.polygon([(cx - tw, sy + 0.4 * (cy - sy)), (cx + tw, sy + 0.4 * (cy - sy)),
                       (cx + spread, hem), (cx - spread, hem)], fill=255)
        m = np.asarray(sil) > 127
        if style == "filled":
            art = sil
        elif style in ("outlined", "dress"):
            from scipy import ndimage
            inner = ndimage.binary_erosion(m, iterations=stroke)
            edge = m & ~inner
            a = Image.fromarray((edge * 255).astype(np.uint8))
            ImageDraw.Draw(a).ellipse((hx - 0.35 * rh, hy - 0.2 * rh, hx - 0.15 * rh, hy), fill=255)
            ImageDraw.Draw(a).ellipse((hx + 0.15 * rh, hy - 0.2 * rh, hx + 0.35 * rh, hy), fill=255)
            ImageDraw.Draw(a).arc((hx - 0.4 * rh, hy - 0.1 * rh, hx + 0.4 * rh, hy + 0.5 * rh), 20, 160,
                                  fill=255, width=max(1, stroke // 2))
            art = a
        else:  # crayon: a light colour scribbled in (strokes of varying pressure), a pencil outline on part
            from scipy import ndimage
            colour = np.array(LIGHT[rng.choice(len(LIGHT))], float)
            noise = rng.random((h_px // 6 + 1, w_px // 6 + 1))
            noise = np.asarray(Image.fromarray((noise * 255).astype(np.uint8)).resize((w_px, h_px),
                                                                                       Image.Resampling.BILINEAR))
            streak = 0.5 + 0.5 * np.sin((np.arange(w_px)[None, :] + np.arange(h_px)[:, None]) * 0.5 / ss)
            press = np.clip(0.55 + 0.35 * noise / 255.0 + 0.2 * streak - 0.1, 0, 1)
            fill = (m * press * 255).astype(np.uint8)
            art = Image.fromarray(fill)
            inner = ndimage.binary_erosion(m, iterations=max(1, stroke // 2))
            edge = m & ~inner
            keep = rng.random() < 0.7
            if keep:
                yy = np.arange(h_px)[:, None]
                part = (yy < h_px * rng.uniform(0.4, 1.0))
                outline = edge & part
            else:
                outline = np.zeros_like(edge)
    art_a = np.asarray(art.resize((w_px // ss, h_px // ss), Image.Resampling.BOX), float) / 255.0
    mask = np.asarray(sil.resize((w_px // ss, h_px // ss), Image.Resampling.BOX)) > 100
    dark = 1.0 - colour / 255.0
    darkness = art_a[..., None] * dark[None, None, :]
    if style == "crayon":
        darkness *= rng.uniform(0.8, 1.0)
        if outline.any():
            o = np.asarray(Image.fromarray((outline * 255).astype(np.uint8)).resize((w_px // ss, h_px // ss),
                                                                                     Image.Resampling.BOX), float) / 255.0
            darkness = np.maximum(darkness, o[..., None] * 0.65)
    joints = {k: (float((v[0] * scale + off[0]) / ss), float((v[1] * scale + off[1]) / ss)) for k, v in j.items()}
    return darkness, mask, joints


def _paper(rng: np.random.Generator, w: int, h: int) -> np.ndarray:
    from scipy.ndimage import gaussian_filter

    base = np.array([rng.uniform(225, 250), rng.uniform(220, 245), rng.uniform(205, 235)])
    fine = gaussian_filter(rng.standard_normal((h, w)), 0.8) * rng.uniform(2, 6)
    coarse = gaussian_filter(rng.standard_normal((h, w)), 6.0) * rng.uniform(10, 30)
    return base[None, None, :] + (fine + coarse)[..., None]


def _homography(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    a = []
    for (x, y), (u, v) in zip(src, dst):
        a.append([x, y, 1, 0, 0, 0, -u * x, -u * y, -u])
        a.append([0, 0, 0, x, y, 1, -v * x, -v * y, -v])
    _, _, vt = np.linalg.svd(np.array(a, float))
    hm = vt[-1].reshape(3, 3)
    return hm / hm[2, 2]


def _apply(hm: np.ndarray, x: float, y: float) -> tuple[float, float]:
    p = hm @ np.array([x, y, 1.0])
    return float(p[0] / p[2]), float(p[1] / p[2])


def make_photo(seed: int, style: str | None = None, figures: int | None = None,
               size: tuple[int, int] = (960, 720), lined: bool = False) -> tuple[np.ndarray, list[Drawn]]:
    """A photo (H, W, 3) uint8 of a sheet with ``figures`` drawn people (1 to 3; random if None) in
    ``style`` (random per figure if None), and the truth per figure. ``lined``: a ruled sheet
    (pale blue lines across it, a red margin line), drawn on over the lines."""
    rng = np.random.default_rng(seed)
    w, h = size
    if rng.random() < 0.3:
        w, h = h, w
    n = int(figures if figures is not None else rng.choice([1, 1, 1, 2, 3]))
    page = _paper(rng, w, h)
    if lined:
        gap = rng.uniform(0.035, 0.06) * h
        for y in np.arange(rng.uniform(0.5, 1.5) * gap, h, gap):
            page[int(y):int(y) + 2] *= np.array([0.72, 0.8, 0.95])
        margin = int(rng.uniform(0.08, 0.14) * w)
        page[:, margin:margin + 2] *= np.array([0.95, 0.6, 0.6])
    light_dir = rng.uniform(0, 2 * math.pi)
    yy, xx = np.mgrid[0:h, 0:w] / max(w, h)
    light = 1.0 - rng.uniform(0.05, 0.25) * (0.5 + 0.5 * (np.cos(light_dir) * xx + np.sin(light_dir) * yy))
    if rng.random() < 0.5:  # a soft shadow (the phone, a hand) somewhere on the sheet
        sx, sy_ = rng.uniform(0, 1, 2)
        light -= rng.uniform(0.08, 0.2) * np.exp(-((xx - sx) ** 2 + (yy - sy_) ** 2) / rng.uniform(0.01, 0.05))
    slots = []
    figs: list[tuple[str, np.ndarray, dict]] = []
    masks = []
    for k in range(n):
        st = style or STYLES[rng.choice(len(STYLES))]
        fh = (rng.uniform(0.45, 0.7) if n == 1 else rng.uniform(0.28, 0.45)) * h
        darkness, fmask, fj = draw_figure(rng, st, fh)
        while fmask.shape[0] > 0.9 * h or fmask.shape[1] > 0.9 * w / n:
            fh *= 0.85
            darkness, fmask, fj = draw_figure(rng, st, fh)
        fh_px, fw_px = fmask.shape
        for _ in range(50):
            x0 = int(rng.uniform(0.04 * w, max(0.04 * w + 1, w - fw_px - 0.04 * w)))
            y0 = int(rng.uniform(0.04 * h, max(0.04 * h + 1, h - fh_px - 0.04 * h)))
            box = (x0, y0, x0 + fw_px, y0 + fh_px)
            if all(box[2] < b[0] or box[0] > b[2] or box[3] < b[1] or box[1] > b[3] for b in slots):
                break
        else:
            continue
        if box[2] > w or box[3] > h:
            continue
        slots.append(box)
        region = page[y0:y0 + fh_px, x0:x0 + fw_px]
        region *= 1.0 - darkness
        full = np.zeros((h, w), bool)
        full[y0:y0 + fh_px, x0:x0 + fw_px] = fmask
        masks.append(full)
        figs.append((st, full, {n_: (x + x0, y + y0) for n_, (x, y) in fj.items()}))
    page *= light[..., None]
    # the photograph: the sheet seen at a slant, sometimes with the table around it
    src = np.array([[0, 0], [w, 0], [w, h], [0, h]], float)
    table = rng.random() < 0.35
    inset = rng.uniform(0.03, 0.08) if table else -rng.uniform(0.0, 0.04)
    dst = src + np.array([[1, 1], [-1, 1], [-1, -1], [1, -1]]) * inset * np.array([w, h])
    dst += rng.uniform(-0.03, 0.03, (4, 2)) * np.array([w, h])
    hm = _homography(src, dst)
    inv = np.linalg.inv(hm)
    coeffs = tuple((inv / inv[2, 2]).ravel()[:8])
    img = Image.fromarray(np.clip(page, 0, 255).astype(np.uint8))
    photo = np.asarray(img.transform((w, h), Image.Transform.PERSPECTIVE, coeffs, Image.Resampling.BILINEAR),
                       float)
    on_paper = np.asarray(Image.new("L", (w, h), 255).transform((w, h), Image.Transform.PERSPECTIVE, coeffs,
                                                                 Image.Resampling.BILINEAR), float)[..., None] / 255
    tone = np.array([rng.uniform(60, 140), rng.uniform(50, 110), rng.uniform(30, 90)])
    from scipy.ndimage import gaussian_filter
    wood = tone[None, None, :] + gaussian_filter(rng.standard_normal((h, w)), (1.0, 12.0))[..., None] * 40
    photo = photo * on_paper + wood * (1 - on_paper)
    photo += rng.normal(0, rng.uniform(1.0, 3.0), photo.shape)
    out = Image.fromarray(np.clip(np.round(photo), 0, 255).astype(np.uint8))
    out = out.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 1.2)))
    buf = io.BytesIO()
    out.save(buf, "JPEG", quality=int(rng.uniform(55, 92)))
    rgb = np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB"))
    truth = []
    for st, full, fj in figs:
        wm = np.asarray(Image.fromarray(full.astype(np.uint8) * 255).transform(
            (w, h), Image.Transform.PERSPECTIVE, coeffs, Image.Resampling.NEAREST)) > 127
        ys, xs = np.nonzero(wm)
        if len(xs) == 0:
            continue
        box = (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)
        truth.append(Drawn(st, box, {k: _apply(hm, *v) for k, v in fj.items()}, wm))
    return rgb, truth
