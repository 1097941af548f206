"""The one call the app and the CLI make: :func:`render` a character with a motion into a file.

Stages (each timed, in milliseconds, in :attr:`RenderResult.timings_ms`):

``retarget``  pose the character's skeleton for every BVH frame of the clip, then pick the output
              frames (:mod:`animator.frame_rate`);
``setup``     once per character: the mesh, the ARAP operators (:mod:`animator.mesh`,
              :mod:`animator.arap`);
``deform``    ARAP for all output frames at once, the character's bounds per frame and the canvas
              placement (:mod:`animator.canvas`);
``sprite``    the texture downsized to the output scale, one palette for the clip, the sample points
              and their body parts (:func:`animator.rasterize.prepare_sprite`);
``rasterize`` the frames (:func:`animator.rasterize.rasterize`);
``encode``    the file: GIF, WebP, MP4, APNG, WebM, PNG frames or a sprite sheet
              (:mod:`animator.formats`). The ``joints`` and ``glb`` formats draw no frames: they
              are written from the rig and the motion after ``deform`` (no ``sprite``/``rasterize``).

Frames are rasterised and encoded as a stream, so memory stays flat whatever the clip's length.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Iterator, Union

import numpy as np

from .character import Character
from .clock import Clock, FrameCount, Progress, TimedFrames
from .errors import ConfigError
from .formats import FORMATS, RIG_FORMATS, encode, encode_rig

log = logging.getLogger("animator")

Fps = Union[float, int, str, None]

def _is_int(value: Any, lo: int, hi: int | None = None) -> bool:
    """``value`` is an integer (not a bool) in ``lo..hi`` (``hi`` None: no upper bound)."""
    return (not isinstance(value, bool) and isinstance(value, (int, np.integer)) and value >= lo
            and (hi is None or value <= hi))


def _default_fps() -> float:
    from .frame_rate import DEFAULT_FPS

    return DEFAULT_FPS


@dataclass
class RenderOptions:
    """How to render. Every field has a sane default; bad values raise :class:`ConfigError`.

    Attributes:
        width, height: canvas size in pixels (MP4 needs even sizes).
        fps: output frames per second (default 25: 4 cs per GIF frame, true speed), or ``'native'``
            to keep every BVH frame of the clip.
        max_frames: optional cap on the number of frames (the duration is kept, frames get longer).
        format: one of :data:`animator.FORMATS`: ``'gif'``, ``'webp'``, ``'mp4'``, ``'apng'``,
            ``'webm'``, ``'frames'``, ``'sheet'``, ``'joints'`` or ``'glb'`` (:mod:`animator.formats`).
        colours: palette size for the whole clip, 2..255 (fewer: smaller GIFs, flatter shading).
        smooth: median filter size applied to the downsized texture before quantising (0: off).
        flatten: majority filter size over the quantised texture (0: off; it erases 1-pixel lines).
        merge: palette colours closer than this CIE76 colour difference (delta E in L*a*b*) are merged
            into one (0: off). Default 10: the grain of the paper and the streaks of a marker become
            flat areas, which a GIF stores far more cheaply (char1 + dab at 500x500: 7.1 -> 2.0 MB),
            while colours a viewer tells apart stay apart (a just-noticeable difference is about 2;
            the colours of a drawing lie much further apart).
        tolerance: GIF only: a pixel whose new colour is within this RGB distance of what is already
            on screen is left alone (0 = exact frames). Default: 16 with an opaque ``background``
            0 with a transparent one, where it cannot pay: a transparent GIF redraws the whole
            character whenever its outline shrinks (it can only clear pixels by disposing a
            rectangle). MP4 and WebP ignore it.
        margin: free border around the character in canvas pixels (default 4% of the shorter side).
        mesh_cells: about how many mesh cells cover the character (more: smoother bends, slower).
        background: RGB colour behind the character, or None (default) for a transparent
            background in GIF and WebP (MP4, which has no transparency, then uses white). An opaque
            background lets GIF frames store only what changed (a transparent GIF must redraw the
            whole character whenever its outline shrinks); with the flat colours of ``merge`` a full
            redraw compresses nearly as well, so it saves little (dab at 500x500: ~12%).
        threads: worker threads for rasterising and GIF compression, and 2 or more runs the
            rig's two ARAP operators and the sprite's palette and geometry side by side
            (a :class:`concurrent.futures.ThreadPoolExecutor`); they overlap only work that releases the GIL; 1 inside a
            process pool that already fills the cores.
        processes: a transparent GIF's frames are made in up to this many processes (this one and
            forked children, :mod:`animator.parallel`), each with one thread; the file is the same
            byte for byte. 1 (default) inside a process pool that already fills the cores.
    """

    width: int = 500
    height: int = 500
    fps: Fps = field(default_factory=_default_fps)
    max_frames: int | None = None
    format: str = "gif"
    colours: int = 16
    smooth: int = 3
    flatten: int = 0
    merge: float = 10.0
    tolerance: float | None = None
    margin: float | None = None
    mesh_cells: int = 300
    background: tuple[int, int, int] | None = None
    threads: int = 2
    processes: int = 1

    def __post_init__(self) -> None:
        for name in ("width", "height"):
            _require_int(name, getattr(self, name), 16, 4096)
        self.format = _format_option(self.format)
        self.fps = _fps_option(self.fps)
        if self.max_frames is not None and not _is_int(self.max_frames, 1):
            raise ConfigError("options", "max_frames", f"must be a positive integer, got {self.max_frames!r}")
        _require_int("colours", self.colours, 2, 255)
        self.merge = _merge_option(self.merge)
        if self.tolerance is not None and (isinstance(self.tolerance, bool)
                                           or not isinstance(self.tolerance, (int, float))
                                           or not 0 <= self.tolerance <= 442):
            raise ConfigError("options", "tolerance", f"must be a number from 0 to 442, got {self.tolerance!r}")
        if self.margin is not None and (not isinstance(self.margin, (int, float)) or self.margin < 0
                                        or 2 * self.margin >= min(self.width, self.height) - 8):
            raise ConfigError("options", "margin",
                              f"must be >= 0 and leave room for the character, got {self.margin!r}")
        _require_int("mesh_cells", self.mesh_cells, 8, 5000)
        _require_int("threads", self.threads, 1, 64)
        _require_int("processes", self.processes, 1, 64)
        if self.background is not None:
            self.background = _background_option(self.background)


def _require_int(name: str, value: Any, lo: int, hi: int) -> None:
    """Raise ConfigError unless option ``name`` is an integer (not a bool) in ``lo..hi``."""
    if not _is_int(value, lo, hi):
        raise ConfigError("options", name, f"must be an integer from {lo} to {hi}, got {value!r}")


def _format_option(value: Any) -> str:
    """The output format's name, lower case, without a leading dot (``'.GIF'`` -> ``'gif'``)."""
    fmt = str(value).lower().lstrip(".")
    if fmt not in FORMATS:
        raise ConfigError("options", "format", f"must be one of {', '.join(FORMATS)}, got {value!r}")
    return fmt


def _fps_option(value: Fps) -> Fps:
    """``'native'``, None (the default rate) or frames per second as a float in (0, 1000]."""
    if isinstance(value, str) and value.strip().lower() == "native":
        return "native"
    if value is None:
        return None
    try:
        fps = float(value)
    except (TypeError, ValueError):
        raise ConfigError("options", "fps", f"must be a positive number or 'native', got {value!r}") from None
    if not (0 < fps <= 1000):
        raise ConfigError("options", "fps", f"must be a positive number (at most 1000) or 'native', got {value!r}")
    return fps


def _merge_option(value: Any) -> float:
    """The palette merge distance (CIE76 delta E) as a float in 0..100."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not 0 <= float(value) <= 100:
        raise ConfigError("options", "merge", f"must be a colour difference from 0 to 100, got {value!r}")
    return float(value)


def _background_option(value: Any) -> tuple[int, int, int]:
    """A background colour as three ints 0..255."""
    try:
        bg = tuple(value)
    except TypeError:
        bg = ()
    if len(bg) != 3 or not all(isinstance(c, (int, np.integer)) and 0 <= c <= 255 for c in bg):
        raise ConfigError("options", "background", f"must be None or three integers 0..255, got {value!r}")
    return tuple(int(c) for c in bg)  # type: ignore[return-value]


@dataclass
class RenderResult:
    """What :func:`render` produced.

    Attributes:
        data: the encoded file.
        mime: its MIME type (``image/gif``, ``image/webp``, ``video/mp4``).
        extension: file extension without the dot.
        frame_count: number of frames.
        duration_s: playing time of the clip, seconds (frames x frame time).
        timings_ms: stage -> milliseconds (see the module docstring), plus ``total``.
        motion: the posed skeleton per output frame (:class:`animator.retarget.Motion2D`), in the
            drawing's own pixels (y down).
        scale: canvas pixels per drawing pixel (one value for the whole clip).
        offsets: (F, 2) canvas offset per frame: canvas = scale * drawing + offsets[f].
    """

    data: bytes
    mime: str
    extension: str
    frame_count: int
    duration_s: float
    timings_ms: dict[str, float]
    motion: Any
    scale: float = 1.0
    offsets: np.ndarray | None = None


#: A drawing is never drawn larger than this many canvases (its rest pose's larger side): a skeleton
#: that folds the character to a point would otherwise ask for an unbounded scale.
MAX_CANVASES = 2.0


def max_scale(mask: np.ndarray, width: int, height: int) -> float:
    """Largest scale (canvas pixels per drawing pixel) :func:`render` uses for ``mask``: the mask's
    larger side at most :data:`MAX_CANVASES` times the canvas's larger side."""
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    extent = max(rows[-1] - rows[0] + 1, cols[-1] - cols[0] + 1) if len(rows) else 1
    return MAX_CANVASES * max(width, height) / float(extent)


def render(character: Character, motion_cfg: Any, retarget_cfg: Any,
           options: RenderOptions | None = None, rigs: Any = None, progress: Progress = None) -> RenderResult:
    """Animate ``character`` with the clip of ``motion_cfg`` as ``retarget_cfg`` maps it.

    Args:
        character: the rigged drawing (:func:`animator.load_character`).
        motion_cfg: :func:`animator.load_motion_config` result (BVH clip and frame range).
        retarget_cfg: :func:`animator.load_retarget_config` result.
        options: :class:`RenderOptions` (defaults: 500x500 GIF at 25 fps).
        rigs: an :class:`animator.rig_cache.RigCache` that keeps the character's rig and sprite for
            later renders (and gives those of an earlier one); the file is the same with or without.
        progress: called in this process with (frames done, frames in the clip): ``(0, F)`` once
            the clip is posed, then after each frame made (frames made in other processes count
            when their run is joined), ``(F, F)`` last. Every call, so throttle in the callback.
    Raises:
        ConfigError, BVHError, CharacterError: bad input (the message names the file and field).
        RenderError: the output cannot be produced (e.g. no MP4 codec, canvas too small).
    """
    opts = _check_options(options)
    clock = Clock()

    motion = pose_clip(character, motion_cfg, retarget_cfg, opts.fps, opts.max_frames)
    clock.lap("retarget")
    count = FrameCount(progress, motion.n_frames)

    rig = rigs.rig(character, motion, opts.mesh_cells) if rigs is not None else \
        Rig.build(character, motion, opts.mesh_cells, opts.threads)
    clock.lap("setup")

    verts, bounds = rig.deform(motion)
    placement = _placement(character, motion, bounds, opts)
    canvas_verts = placement.to_canvas(verts)
    clock.lap("deform")
    log.info("deform: %d frames; scale %.3f canvas px per drawing px", motion.n_frames, placement.scale)
    if opts.format in RIG_FORMATS:  # the rig and its motion, no frames drawn
        result = _rig_export(character, rig, motion, verts, placement, opts, clock)
        count.finish()
        return result

    colours = _sprite_colours(opts)
    sprite = rig.sprite(motion, placement.scale, opts, colours) if rigs is None else \
        rigs.sprite(rig, motion, placement.scale, opts, colours)
    palette, keep, fill = _palette_on_background(sprite, opts)
    clock.lap("sprite")

    data, timed = _frames_to_bytes(sprite, canvas_verts, motion, opts, palette, keep, fill, count)
    count.finish()
    clock.frames_lap(timed.ms)
    timings = clock.timings()
    mime, ext = FORMATS[opts.format]
    log.info("rasterize: %.1f ms (%.2f ms/frame); encode: %.1f ms; %s %d bytes",
             timed.ms, timed.ms / motion.n_frames, timings["encode"], opts.format.upper(), len(data))
    return RenderResult(data=data, mime=mime, extension=ext, frame_count=motion.n_frames,
                        duration_s=motion.duration_s, timings_ms=timings, motion=motion,
                        scale=placement.scale, offsets=placement.offsets)


def _rig_export(character: Character, rig: "Rig", motion: Any, verts: np.ndarray, placement: Any,
                opts: RenderOptions, clock: "Clock") -> "RenderResult":
    """The ``joints`` or ``glb`` file (:func:`animator.formats.encode_rig`) after the deform step:
    the skeleton per frame, or the skinned mesh with skin weights fitted to ARAP's ``verts``."""
    data = encode_rig(opts.format, character, rig.mesh, motion, placement.scale, placement.offsets,
                      opts.width, opts.height, deformed=verts)
    clock.lap("encode")
    timings = clock.timings()
    mime, ext = FORMATS[opts.format]
    log.info("encode: %.1f ms; %s %d bytes (no frames drawn)", timings["encode"], opts.format.upper(), len(data))
    return RenderResult(data=data, mime=mime, extension=ext, frame_count=motion.n_frames,
                        duration_s=motion.duration_s, timings_ms=timings, motion=motion,
                        scale=placement.scale, offsets=placement.offsets)


def _placement(character: Character, motion: Any, bounds: np.ndarray, opts: RenderOptions):
    """One scale and per-frame offsets that keep every deformed pose on the canvas (:func:`canvas.place`);
    the view follows the root joint (or the bounds' centre without one) on a clip that travels far."""
    from .canvas import place

    root = motion.positions[:, motion.joint_names.index("root")] if "root" in motion.joint_names \
        else (bounds[:, :2] + bounds[:, 2:]) / 2
    return place(bounds, root, opts.width, opts.height, opts.margin,
                 max_scale=max_scale(character.mask, opts.width, opts.height))


def _sprite_colours(opts: RenderOptions) -> int:
    """The drawing's palette size: one index fewer with an opaque background, which takes a palette entry."""
    return min(opts.colours, 254) if opts.background is not None else opts.colours


def _palette_on_background(sprite: Any, opts: RenderOptions) -> tuple[np.ndarray, int, int | None]:
    """(palette, keep, fill): the sprite's palette and its "unchanged" index; with an opaque background
    (not MP4) the background becomes one more palette colour ``fill`` and the index after it means
    "unchanged"."""
    palette, keep, fill = sprite.palette, sprite.transparent, None
    if opts.background is not None and opts.format != "mp4":
        fill = len(palette)
        palette = np.vstack([palette, np.array(opts.background, np.uint8)[None]])
        keep = fill + 1
    return palette, keep, fill


def _frames_to_bytes(sprite: Any, canvas_verts: np.ndarray, motion: Any, opts: RenderOptions,
                     palette: np.ndarray, keep: int, fill: int | None,
                     count: "FrameCount | None" = None) -> tuple[bytes, "TimedFrames"]:
    """Rasterise and encode the frames: a transparent GIF over several processes where asked, else as one
    stream here. Returns the file and the rasteriser's timer; ``count`` counts the frames made."""
    count = count if count is not None else FrameCount(None, motion.n_frames)
    if opts.processes > 1 and opts.format == "gif" and opts.background is None:
        data, timed = _gif_in_processes(sprite, canvas_verts, motion, opts, palette, keep, count)
        if data is not None:
            return data, timed
        count.restart()
    timed = TimedFrames(rasterize_frames(sprite, canvas_verts, motion, opts, fill), count.add)
    return encode_frames(timed, palette, keep, motion.n_frames, motion.frame_time_s, opts), timed


def _check_options(options: RenderOptions | None) -> RenderOptions:
    opts = options if options is not None else RenderOptions()
    if not isinstance(opts, RenderOptions):
        raise ConfigError("options", None, f"expected RenderOptions, got {type(opts).__name__}")
    return opts


def pose_clip(character: Character, motion_cfg: Any, retarget_cfg: Any, fps: Fps = None,
              max_frames: int | None = None):
    """Step 1: the character's skeleton posed at the output frames (a :class:`Motion2D`, drawing pixels)."""
    from .frame_rate import plan_frames
    from .retarget import retarget

    full = retarget(character, motion_cfg, retarget_cfg)
    start = int(full.source_frames[0])
    plan = plan_frames(full.n_frames, full.frame_time_s, start=start, fps=fps, max_frames=max_frames)
    motion = full if len(plan.indices) == full.n_frames else full.select(plan.indices - start, plan.frame_time_s)
    log.info("retarget: %d of %d BVH frames, %.4g s per frame, %.2f s", motion.n_frames, full.n_frames,
             motion.frame_time_s, motion.duration_s)
    return motion


@dataclass
class Rig:
    """Step 2, once per character: its mesh and ARAP deformer, handles in the motion's joint order."""

    character: Character
    mesh: Any
    arap: Any
    #: the mask's outline points bound to the mesh (triangle vertices, barycentric weights), made by
    #: the first :meth:`deform`
    outline: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)

    @classmethod
    def build(cls, character: Character, motion: Any, mesh_cells: int = 300, threads: int = 1) -> "Rig":
        from .arap import ARAP
        from .mesh import build_mesh

        names = [j.name for j in character.skeleton]
        rest = np.array([j.loc for j in character.skeleton], dtype=np.float64)
        rest_m = rest[[names.index(n) for n in motion.joint_names]]
        mesh = build_mesh(character.mask, keep_points=rest, target_cells=mesh_cells)
        arap = ARAP(mesh, rest_m, threads=threads)
        log.info("setup: mesh of %d vertices, %d triangles (cell %d px); ARAP with %d handles",
                 len(mesh.vertices), len(mesh.triangles), mesh.cell, int(arap.used.sum()))
        return cls(character, mesh, arap)

    def deform(self, motion: Any, pad: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
        """Step 3: mesh vertices per frame (F, V, 2) and the character's box per frame (F, 4:
        xmin, ymin, xmax, ymax, padded by ``pad``), drawing pixels."""
        from .mesh import point_bounds
        from .rasterize import mask_outline

        mesh, F = self.mesh, motion.n_frames
        if self.outline is None:
            tri, bary = mesh.locate(mask_outline(self.character.mask, max_points=1000))
            ok = tri >= 0
            self.outline = mesh.triangles[tri[ok]], bary[ok]     # (n, 3) vertices, (n, 3) weights
        verts = np.empty((F, len(mesh.vertices), 2))
        for a in range(0, F, 128):                               # batches bound the temporary memory
            verts[a:a + 128] = self.arap.solve(motion.positions[a:a + 128])
        lo, hi = point_bounds(verts, *self.outline)
        return verts, np.concatenate([lo - pad, hi + pad], axis=1)

    def sprite(self, motion: Any, scale: float, opts: RenderOptions, colours: int):
        """Step 4: the texture's sample points at ``scale`` canvas px per drawing px, one palette."""
        from .rasterize import prepare_sprite

        c = self.character
        joints = [(j.name, j.loc, j.parent) for j in c.skeleton]
        sprite = prepare_sprite(c.texture, c.mask, self.mesh, scale, joints, motion.part_joints, colours=colours,
                                smooth=opts.smooth, flatten=opts.flatten, merge=opts.merge,
                                threads=opts.threads)
        log.info("sprite: %d texels, %d colours", sprite.texels, len(sprite.palette))
        return sprite


def rasterize_frames(sprite: Any, canvas_verts: np.ndarray, motion: Any, opts: RenderOptions,
                     fill: int | None) -> Iterator[np.ndarray]:
    """Step 5: the palette-index frames, body parts in the motion's draw order."""
    from .rasterize import rasterize

    order, rev = motion.part_order, motion.part_reversed
    if order is None or order.ndim != 2 or order.shape[1] != len(sprite.groups):
        order, rev = None, None  # no body-part groups in the config: one group, drawn as is
    return rasterize(sprite, canvas_verts, opts.width, opts.height, order, rev, threads=opts.threads, fill=fill)


def _gif_in_processes(sprite: Any, canvas_verts: np.ndarray, motion: Any, opts: RenderOptions,
                      palette: np.ndarray, transparent: int,
                      count: "FrameCount | None" = None) -> tuple[bytes | None, "TimedFrames"]:
    """Steps 5 and 6 for a transparent GIF in up to ``opts.processes`` processes (None: render in
    one); the timer counts this process's own rasterising."""
    from dataclasses import replace

    from .formats.gif import GifWriter, gif_delays
    from .parallel import gif_in_processes

    one = replace(opts, threads=1)
    order, rev = motion.part_order, motion.part_reversed
    timers: list[TimedFrames] = []

    def frames_of(a: int, b: int) -> Iterator[np.ndarray]:
        part = motion if order is None else _FrameSlice(order[a:b], rev[a:b])
        timers.append(TimedFrames(rasterize_frames(sprite, canvas_verts[a:b], part, one, None)))
        return timers[-1]

    gif = GifWriter(palette, transparent, gif_delays(motion.n_frames, motion.frame_time_s),
                    tolerance=_gif_tolerance(opts))
    data = gif_in_processes(gif, frames_of, motion.n_frames, opts.processes,
                            on_frames=None if count is None else count.add)
    timed = TimedFrames(iter(()))
    timed.ms = sum(t.ms for t in timers)
    return data, timed


@dataclass
class _FrameSlice:
    """The draw order of a run of frames, as :func:`rasterize_frames` reads it from a motion."""

    part_order: np.ndarray
    part_reversed: np.ndarray


def _gif_tolerance(opts: RenderOptions) -> float:
    """``opts.tolerance``, or its default: 16 on an opaque background, 0 on a transparent one."""
    if opts.tolerance is not None:
        return float(opts.tolerance)
    return 16.0 if opts.background is not None else 0.0


def encode_frames(frames: Any, palette: np.ndarray, keep: int, n_frames: int, frame_time_s: float,
                  opts: RenderOptions) -> bytes:
    """Step 6: the file of the palette-index frames (``keep``: transparent / unchanged index) in a
    format made from frames (:func:`animator.formats.encode`)."""
    data, _, _ = encode(frames, opts.format, palette, keep, frame_time_s, n_frames, tolerance=_gif_tolerance(opts),
                        threads=opts.threads, background=opts.background)
    return data


__all__ = ["Progress", "RenderOptions", "RenderResult", "Rig", "encode_frames", "pose_clip", "rasterize_frames",
           "render"]
