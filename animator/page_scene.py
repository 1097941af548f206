"""Scenes made from a drawn page: several characters, each moving where and as large as it was drawn.

A child draws a family, or a dog beside a girl, on one sheet. Each figure becomes a character of its
own (cut from the photo: texture, mask, skeleton); a :class:`PageScene` keeps where each lay on the
page and animates them all together on the page they were drawn on.

Coordinates. *Page pixels*: the photo's (x right, y down). A character's texture lies on the page at
``page = origin + scale * texture_xy`` (its box: ``origin`` to ``origin + scale * (width, height)``,
the texture's grid stretched onto it). The canvas shows the whole page: ``canvas = fit * page + pad``
with ``fit`` the largest that keeps the page inside the canvas and ``pad`` centring it (a canvas of
the page's own shape, :func:`canvas_size`, has no bands). So a character's drawing pixel lands at
``canvas = (fit * scale) * texture_xy + (fit * origin + pad)``: its scale and offset in the canvas,
the same for every frame, as long as it does not walk out of the canvas (below).

Order: characters are drawn back to front by the bottom of their box on the page (nearer the bottom
of the page is nearer the viewer; ties in list order).

Time: each character is posed at the output frames exactly as a render of it alone at the same fps
would be (:func:`animator.api.pose_clip`); the scene lasts as long as the longest clip and a shorter
clip starts again (a child's scene loops). Frame time: the first character's. ``max_frames`` caps
the scene's frames (each clip then sampled at the longer frame time, the duration kept).

Walking: a clip that carries the character (its root moves) is played as drawn while the character
stays in the canvas. Where the clip's travel along an axis would carry it out, that travel is
scaled down just enough to keep every pose of the clip inside (1.0: untouched; 0.0: it walks on the
spot); a pose that is itself larger than the room left is shifted back in, frame by frame.

Backgrounds (:class:`Background`): ``page``: the photo with every drawing taken out *where it was
drawn* and the paper filled in (:mod:`animator.inpaint`, OpenCV's Navier-Stokes by default), made at
the canvas size. Where it was drawn is :meth:`PageCharacter.drawn_place`: its ``drawn_at`` (or, without
one, ``origin``: it stands where it was drawn), whatever its motion or its new place; a character cut
from another photo (``on_page`` False) takes nothing out; drawings that no longer take part (a
character dropped from the scene) are taken out too when listed in :attr:`PageScene.taken_out`, and
stay on the paper when not. Nothing else of the photo changes.
``colour``: a plain colour; ``image``: any picture, scaled to cover the canvas and centred;
``none``: transparent where the format has transparency (GIF, WebP, APNG, WebM, PNG frames, sheet;
an MP4 is then white).

Formats: every frame format (GIF, WebP, MP4, APNG, WebM, PNG frames, sprite sheet) and ``joints``
(every character's joint tracks with its canvas scale and offsets, no frames drawn). ``glb`` does
not make sense for a scene: it is one character's rigged mesh, with no place for a background or
for several textures; render each character to glTF instead.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .api import Progress, RenderOptions, RenderResult, Rig, encode_frames, pose_clip
from .canvas import Placement
from .character import Character
from .errors import ConfigError

log = logging.getLogger("animator")

#: Most characters in one page scene (each costs a mesh, an ARAP solve and a sprite).
MAX_CHARACTERS = 16
#: Largest page side, pixels (the photo as the app keeps it is far smaller).
MAX_PAGE_SIDE = 8192
BACKGROUNDS = ("page", "colour", "image", "none")


@dataclass
class PageCharacter:
    """One character of a page scene: the rigged drawing, its motion, and where it lies on the page."""

    character: Character
    motion_cfg: Any                 # animator.config.MotionConfig
    retarget_cfg: Any               # animator.config.RetargetConfig
    origin: tuple[float, float]     # page pixels of the texture's top-left corner
    scale: float = 1.0              # page pixels per texture pixel
    name: str = ""
    #: page pixels of the texture's top-left corner where it was drawn on the page's photo, when it was
    #: moved (None: at ``origin``); the page background takes the drawing out there
    drawn_at: tuple[float, float] | None = None
    #: False: cut from another photo, so nothing of the page is its drawing (nothing taken out for it)
    on_page: bool = True

    def drawn_place(self) -> Drawing | None:
        """Its drawing where it lies on the page's photo (None: not drawn on this page)."""
        if not self.on_page:
            return None
        return Drawing(self.character.mask, self.drawn_at if self.drawn_at is not None else self.origin, self.scale)

    def box(self) -> tuple[float, float, float, float]:
        """[left, top, right, bottom] of its texture on the page, page pixels."""
        w, h = self.character.size
        x, y = self.origin
        return (x, y, x + self.scale * w, y + self.scale * h)

    def mask_box(self) -> tuple[float, float, float, float]:
        """[left, top, right, bottom] of its mask (the drawing itself) on the page, page pixels."""
        m = self.character.mask
        rows, cols = np.flatnonzero(m.any(axis=1)), np.flatnonzero(m.any(axis=0))
        x, y = self.origin
        s = self.scale
        return (x + s * cols[0], y + s * rows[0], x + s * (cols[-1] + 1), y + s * (rows[-1] + 1))


@dataclass
class Drawing:
    """A drawing on the page's photo: its ``mask`` (a texture's grid, (h, w) bool) lying at
    ``page = origin + scale * mask_xy``."""

    mask: np.ndarray
    origin: tuple[float, float]
    scale: float = 1.0


@dataclass
class Background:
    """What the characters move on (see the module docstring): ``kind`` is one of :data:`BACKGROUNDS`."""

    kind: str = "page"
    colour: tuple[int, int, int] | None = None  # kind "colour"
    image: np.ndarray | None = None             # (H, W, 3) uint8: the page photo ("page") or the picture ("image")
    inpaint: str = "ns"                          # kind "page": the method of animator.inpaint


@dataclass
class PageScene:
    """Characters on one page (see the module docstring)."""

    characters: list[PageCharacter]
    page_size: tuple[int, int]      # (width, height) page pixels
    background: Background = field(default_factory=Background)
    #: drawings of the photo that are no character of the scene but are taken out of the page (a dropped
    #: character's, say); at most MAX_CHARACTERS
    taken_out: list[Drawing] = field(default_factory=list)


@dataclass
class PageSceneResult(RenderResult):
    """A page scene's render: as :class:`animator.RenderResult` (``motion`` is the list of each
    character's posed motion over the scene's frames, ``scale`` their mean canvas scale) plus each
    character's canvas placement (``canvas = scale * drawing + offsets[f]``), the back-to-front
    drawing order, the fraction of each clip's travel kept per axis, and the canvas size."""

    placements: list[Placement] = field(default_factory=list)
    order: list[int] = field(default_factory=list)
    travel_kept: list[tuple[float, float]] = field(default_factory=list)
    width: int = 0
    height: int = 0

    def joints(self, k: int) -> np.ndarray:
        """Character ``k``'s joints per frame in canvas pixels, (F, J, 2) in its motion's joint order."""
        return self.placements[k].to_canvas(self.motion[k].positions)


def canvas_size(page_size: tuple[int, int], longest: int = 500) -> tuple[int, int]:
    """A canvas of the page's shape whose longer side is ``longest`` (sides even, for MP4)."""
    pw, ph = page_size
    k = longest / max(pw, ph)
    return max(16, 2 * round(pw * k / 2)), max(16, 2 * round(ph * k / 2))


def page_fit(page_size: tuple[int, int], width: int, height: int) -> tuple[float, np.ndarray]:
    """(fit, pad): ``canvas = fit * page + pad``, the whole page in the canvas, centred."""
    pw, ph = page_size
    fit = min(width / pw, height / ph)
    return fit, np.array([(width - fit * pw) / 2, (height - fit * ph) / 2])


def z_order(characters: list[PageCharacter]) -> list[int]:
    """Indices back to front: by the bottom of each box on the page, ties in list order."""
    return sorted(range(len(characters)), key=lambda i: (characters[i].box()[3], i))


def check_scene(scene: PageScene) -> None:
    """Raise :class:`ConfigError` on a scene that cannot be rendered (before any work)."""
    n = len(scene.characters)
    if not 1 <= n <= MAX_CHARACTERS:
        raise ConfigError("scene", "characters", f"from 1 to {MAX_CHARACTERS} characters, got {n}")
    pw, ph = scene.page_size
    if not all(isinstance(v, (int, np.integer)) and 1 <= v <= MAX_PAGE_SIDE for v in (pw, ph)):
        raise ConfigError("scene", "page_size",
                          f"must be two integers from 1 to {MAX_PAGE_SIDE}, got {scene.page_size}")
    for k, ch in enumerate(scene.characters):
        x, y = ch.origin
        if not (all(math.isfinite(float(v)) for v in (x, y, ch.scale)) and ch.scale > 0):
            raise ConfigError("scene", f"characters[{k}]", "origin and scale must be finite, scale above 0")
        left, top, right, bottom = ch.mask_box()
        if right <= 0 or bottom <= 0 or left >= pw or top >= ph:
            raise ConfigError("scene", f"characters[{k}]", f"{ch.name or 'the character'} lies outside the "
                              f"{pw}x{ph} page (its drawing spans {left:.0f},{top:.0f} to {right:.0f},{bottom:.0f})")
        if ch.drawn_at is not None and not all(math.isfinite(float(v)) for v in ch.drawn_at):
            raise ConfigError("scene", f"characters[{k}]", "drawn_at must be finite")
    if len(scene.taken_out) > MAX_CHARACTERS:
        raise ConfigError("scene", "taken_out", f"at most {MAX_CHARACTERS} drawings, got {len(scene.taken_out)}")
    for k, d in enumerate(scene.taken_out):
        if not (all(math.isfinite(float(v)) for v in (*d.origin, d.scale)) and d.scale > 0
                and getattr(d.mask, "ndim", 0) == 2):
            raise ConfigError("scene", f"taken_out[{k}]", "a mask (2-D), a finite origin and a scale above 0")
    bg = scene.background
    if bg.kind not in BACKGROUNDS:
        raise ConfigError("scene", "background", f"must be one of {', '.join(BACKGROUNDS)}, got {bg.kind!r}")
    if bg.kind in ("page", "image") and (bg.image is None or bg.image.ndim != 3 or bg.image.shape[2] < 3):
        raise ConfigError("scene", "background", f"a {bg.kind} background needs an RGB image")
    if bg.kind == "page" and bg.image is not None and bg.image.shape[1::-1] != tuple(scene.page_size):
        raise ConfigError("scene", "background", f"the page photo is {bg.image.shape[1]}x{bg.image.shape[0]}, "
                          f"the page {pw}x{ph}")
    if bg.kind == "colour" and bg.colour is None:
        raise ConfigError("scene", "background", "a colour background needs a colour")


def keep_in_frame(bounds: np.ndarray, travel: np.ndarray, scale: float, base: np.ndarray, width: int,
                  height: int) -> tuple[np.ndarray, tuple[float, float]]:
    """(offsets (F, 2), fraction of the travel kept per axis) for a character whose drawing-pixel
    ``bounds`` (F, 4) include the clip's ``travel`` (F, 2: root minus its first position), drawn at
    ``canvas = scale * drawing + offsets[f]`` with ``base`` its offset as drawn (module docstring)."""
    F = len(bounds)
    offsets = np.repeat(np.asarray(base, np.float64)[None], F, axis=0)
    kept = []
    for ax, size in enumerate((width, height)):
        t = travel[:, ax]
        lo = scale * (bounds[:, ax] - t) + base[ax]          # the pose's box without the travel, canvas
        hi = scale * (bounds[:, ax + 2] - t) + base[ax]
        st = scale * t
        limits = [1.0]
        with np.errstate(divide="ignore", invalid="ignore"):
            out = st > 1e-9                                   # travelling right / down: hi + c*st <= size
            limits += list((size - hi[out]) / st[out])
            back = st < -1e-9                                 # left / up: lo + c*st >= 0
            limits += list(lo[back] / -st[back])
        c = float(np.clip(min(limits), 0.0, 1.0))
        kept.append(c)
        lo_c, hi_c = lo + c * st, hi + c * st
        shift = np.where(lo_c < 0, -lo_c, 0.0) + np.where(hi_c > size, size - hi_c, 0.0)
        too_big = (hi_c - lo_c) > size
        shift[too_big] = (size - (hi_c + lo_c)[too_big]) / 2   # a pose larger than the canvas: centred
        offsets[:, ax] += c * st - scale * t + shift
    return offsets, (kept[0], kept[1])


def _timeline(motions: list[Any], max_frames: int | None = None) -> tuple[list[Any], int, float]:
    """Every motion over the scene's frames, the frame count, the frame time: the longest clip's length
    at the first clip's frame time (shorter clips start again); ``max_frames`` caps the count (frames
    get longer, the duration holds)."""
    dt = motions[0].frame_time_s
    duration = max(m.n_frames * m.frame_time_s for m in motions)
    F = max(1, int(round(duration / dt)))
    if max_frames is not None and F > max_frames:
        F, dt = int(max_frames), duration / max_frames
    out = []
    for m in motions:
        if m.n_frames == F and abs(m.frame_time_s - dt) < 1e-12:
            out.append(m)
            continue
        idx = np.floor(np.arange(F) * dt / m.frame_time_s + 1e-9).astype(np.int64) % m.n_frames
        out.append(m.select(idx, dt))
    return out, F, dt


def page_background(scene: PageScene, width: int, height: int, fit: float, pad: np.ndarray) -> np.ndarray | None:
    """The background as an (height, width, 3) uint8 image, or None (a colour, or transparent). A
    ``page`` background takes out every drawing where it was drawn (:func:`drawn_on_canvas`), not
    where its character stands now."""
    from PIL import Image

    bg = scene.background
    if bg.kind == "image":
        assert bg.image is not None
        img = Image.fromarray(np.ascontiguousarray(bg.image[..., :3], np.uint8))
        k = max(width / img.width, height / img.height)
        w, h = max(width, round(img.width * k)), max(height, round(img.height * k))
        img = img.resize((w, h), Image.Resampling.LANCZOS)
        x, y = (w - width) // 2, (h - height) // 2
        return np.asarray(img.crop((x, y, x + width, y + height)), np.uint8)
    if bg.kind != "page":
        return None
    from . import inpaint

    assert bg.image is not None
    pw, ph = scene.page_size
    page = Image.fromarray(np.ascontiguousarray(bg.image[..., :3], np.uint8))
    size = (max(1, round(pw * fit)), max(1, round(ph * fit)))
    small = np.asarray(page.resize(size, Image.Resampling.LANCZOS), np.uint8)
    canvas = np.empty((height, width, 3), np.uint8)
    canvas[:] = np.median(small.reshape(-1, 3), axis=0).astype(np.uint8)   # bands beside the page: paper colour
    x0, y0 = int(round(pad[0])), int(round(pad[1]))
    canvas[y0:y0 + size[1], x0:x0 + size[0]] = small[:height - y0, :width - x0]
    return inpaint.remove(canvas, drawn_on_canvas(scene, width, height, fit, pad), bg.inpaint)


def drawn_on_canvas(scene: PageScene, width: int, height: int, fit: float, pad: np.ndarray) -> np.ndarray:
    """Where the page's photo shows a drawing to take out, (height, width) bool on the canvas: every
    character's drawing where it was drawn (:meth:`PageCharacter.drawn_place`) and the scene's
    ``taken_out`` drawings."""
    hole = np.zeros((height, width), bool)
    drawings = [d for d in (ch.drawn_place() for ch in scene.characters) if d is not None] + list(scene.taken_out)
    for d in drawings:
        hole |= mask_on_canvas(d.mask, fit * d.scale, fit * np.asarray(d.origin, np.float64) + pad, width, height)
    return hole


def mask_on_canvas(mask: np.ndarray, scale: float, offset: np.ndarray, width: int, height: int) -> np.ndarray:
    """A drawing's ``mask`` where ``canvas = scale * drawing + offset`` puts it, (height, width) bool."""
    from PIL import Image

    h, w = mask.shape
    ox, oy = float(offset[0]), float(offset[1])
    x0, y0 = math.floor(ox), math.floor(oy)
    x1, y1 = math.ceil(ox + scale * w), math.ceil(oy + scale * h)
    out = np.zeros((height, width), bool)
    if x1 <= 0 or y1 <= 0 or x0 >= width or y0 >= height or x1 <= x0 or y1 <= y0:
        return out
    # resample the mask onto the canvas pixels it covers, [cx0, cx1) x [cy0, cy1) (pixel centres mapped
    # back): only the window's, never the whole drawing at its scale (a character drawn 90,000 px
    # wide on a 400 px canvas would otherwise be resampled whole)
    cx0, cy0 = max(0, x0), max(0, y0)
    cx1, cy1 = min(width, x1), min(height, y1)
    img = Image.fromarray(mask.astype(np.uint8) * 255)
    a = (1 / scale, 0, (cx0 - ox) / scale, 0, 1 / scale, (cy0 - oy) / scale)
    part = np.asarray(img.transform((cx1 - cx0, cy1 - cy0), Image.Transform.AFFINE, a, Image.Resampling.BILINEAR))
    out[cy0:cy1, cx0:cx1] = part > 127
    return out


def render_page_scene(scene: PageScene, options: RenderOptions | None = None,
                      progress: Progress = None) -> PageSceneResult:
    """Render every character of ``scene`` moving on its background.

    ``options``: as for :func:`animator.render`; its ``width`` x ``height`` is the canvas (the page is
    fitted inside it, centred: :func:`canvas_size` gives a canvas of the page's own shape) and its
    ``background`` is replaced by the scene's. ``progress(frames done, frames total)`` as for
    :func:`animator.render`. Timings: ``retarget``, ``setup``, ``deform``, ``background``, ``sprite``,
    ``rasterize``, ``encode``, ``total``.
    """
    from dataclasses import replace

    from .clock import Clock, FrameCount, TimedFrames
    from .formats import FORMATS
    from .scene import layered_frames, sprites_on_one_palette

    base = options or RenderOptions()
    if base.format == "glb":
        raise ConfigError("options", "format", "glb holds one character's rigged mesh, not a scene: render each "
                          "character to glTF, or ask for joints (every character's joint tracks)")
    check_scene(scene)
    bg = scene.background
    colour = bg.colour if bg.kind == "colour" else (255, 255, 255) if bg.kind in ("page", "image") else None
    opts = replace(base, background=colour)
    W, H = opts.width, opts.height
    clock = Clock()

    motions, F, dt = _timeline([pose_clip(ch.character, ch.motion_cfg, ch.retarget_cfg, opts.fps)
                                for ch in scene.characters], opts.max_frames)
    clock.lap("retarget")
    count = FrameCount(progress, F)
    rigs = [Rig.build(ch.character, m, opts.mesh_cells, opts.threads) for ch, m in zip(scene.characters, motions)]
    clock.lap("setup")

    fit, pad = page_fit(scene.page_size, W, H)
    placements, kept, canvases = [], [], []
    for ch, m, rig in zip(scene.characters, motions, rigs):
        verts, bounds = rig.deform(m)
        s = fit * ch.scale
        root = m.positions[:, m.joint_names.index("root")] if "root" in m.joint_names else \
            (bounds[:, :2] + bounds[:, 2:]) / 2
        offsets, k = keep_in_frame(bounds, root - root[:1], s, fit * np.asarray(ch.origin, np.float64) + pad, W, H)
        pl = Placement(s, offsets, W, H, 0.0)
        placements.append(pl)
        kept.append(k)
        canvases.append(pl.to_canvas(verts))
    order = z_order(scene.characters)
    clock.lap("deform")
    log.info("page scene: %d characters, %d frames, back to front %s; travel kept %s", len(rigs), F,
             [scene.characters[i].name or i for i in order], [tuple(round(v, 2) for v in k) for k in kept])
    result_kw = dict(frame_count=F, duration_s=F * dt, motion=motions,
                     scale=float(np.mean([p.scale for p in placements])), placements=placements, order=order,
                     travel_kept=kept, width=W, height=H)
    if opts.format == "joints":
        data = joints_file(scene, motions, placements, W, H)
        clock.lap("encode")
        count.finish()
        mime, ext = FORMATS["joints"]
        return PageSceneResult(data=data, mime=mime, extension=ext, timings_ms=clock.timings(), **result_kw)

    bg_img = page_background(scene, W, H, fit, pad)
    clock.lap("background")
    sprites, bases, palette, keep, bg_idx = sprites_on_one_palette(
        W, H, bg_img, opts, rigs, motions, [p.scale for p in placements])
    clock.lap("sprite")
    layers = [(motions[i], sprites[i], canvases[i], bases[i]) for i in order]
    timed = TimedFrames(layered_frames(W, H, layers, bg_idx, F, opts.threads), count.add)
    data = encode_frames(timed, palette, keep, F, dt, opts)
    count.finish()
    clock.frames_lap(timed.ms)
    mime, ext = FORMATS[opts.format]
    return PageSceneResult(data=data, mime=mime, extension=ext, timings_ms=clock.timings(), **result_kw)


def joints_file(scene: PageScene, motions: list[Any], placements: list[Placement], width: int,
                 height: int) -> bytes:
    """``{"characters": [{"character": name, ...the joints document...}]}`` (:mod:`animator.formats.joints`),
    each with its canvas scale and per-frame offsets."""
    import json

    from .formats.joints import joints_document

    docs = [{"character": ch.name or str(k),
             **joints_document(m, ch.character.skeleton, pl.scale, pl.offsets, width, height)}
            for k, (ch, m, pl) in enumerate(zip(scene.characters, motions, placements))]
    return json.dumps({"characters": docs}, separators=(",", ":")).encode()


__all__ = ["BACKGROUNDS", "Background", "Drawing", "MAX_CHARACTERS", "PageCharacter", "PageScene",
           "PageSceneResult", "canvas_size", "check_scene", "drawn_on_canvas", "keep_in_frame", "mask_on_canvas",
           "page_background", "page_fit", "joints_file", "render_page_scene", "z_order"]
