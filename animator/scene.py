"""Scenes: several characters on a background, seen through a camera, read from AnimatedDrawings'
mvc config files (``python -m animator SCENE.yaml``).

A scene file has three sections, as in AnimatedDrawings (its defaults apply to what is left out):

``scene``       ``ANIMATED_CHARACTERS``: a list of ``{character_cfg, motion_cfg, retarget_cfg}``
                (``retarget_cfg`` may be left out: it is then derived from the BVH, see
                :mod:`animator.auto_retarget`). ``ADD_FLOOR`` and ``ADD_AD_RETARGET_BVH`` draw debug
                geometry in AnimatedDrawings' window and are ignored here.
``view``        ``WINDOW_DIMENSIONS`` [w, h], ``BACKGROUND_IMAGE`` (stretched to the window),
                ``CLEAR_COLOR`` [r, g, b, a] in 0..1 (alpha 0: transparent where no image),
                ``CAMERA_POS`` and ``CAMERA_FWD``; ``DRAW_AD_*`` and ``USE_MESA`` are ignored.
``controller``  ``MODE`` (``video_render``; ``interactive`` opens a window there, so here it needs
                an output path), ``OUTPUT_VIDEO_PATH`` (.gif, .mp4, or .webp);
                ``KEYBOARD_TIMESTEP`` and ``OUTPUT_VIDEO_CODEC`` are ignored (MP4 is H.264).

Ignored fields are logged; an unknown field is an error naming it.

Geometry, as AnimatedDrawings sets it up: a character's drawing is one unit per ``D = max(width,
height)`` pixels, y up, standing in the plane ``z = char_starting_location[2]``, its root joint at
``char_starting_location[:2]`` plus the clip's root motion. A drawing pixel ``(u, v)`` (y down) is
at world ``(sx + (u - rx) / D, sy + (ry - v) / D, sz)`` with ``(rx, ry)`` the root joint's pixel.
The camera sits at ``CAMERA_POS`` with its z axis along ``CAMERA_FWD`` (it looks the other way, as
an OpenGL camera does), its x axis ``up x fwd`` with up = +y; the projection is perspective with a
35-degree vertical field of view. Canvas pixels: origin top-left, y down.

Characters are drawn back to front by their distance from the camera along its view axis (ties in
file order). The scene lasts as long as its longest clip; a shorter clip holds its last pose, as in
AnimatedDrawings; time runs at the first character's frame time.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, NamedTuple

import numpy as np

from .api import Progress, RenderOptions, RenderResult, Rig, encode_frames
from .character import Character
from .config import MotionConfig, RetargetConfig, read_yaml, resolve_bvh_path
from .errors import ConfigError
from .formats import FORMATS, RIG_FORMATS

log = logging.getLogger("animator")

#: AnimatedDrawings' defaults (its ``mvc_base_cfg.yaml``) for what a scene file leaves out.
DEFAULTS: dict[str, dict[str, Any]] = {
    "scene": {"ADD_FLOOR": False, "ADD_AD_RETARGET_BVH": False},
    "view": {"CLEAR_COLOR": [1.0, 1.0, 1.0, 0.0], "BACKGROUND_IMAGE": None, "WINDOW_DIMENSIONS": [500, 500],
             "DRAW_AD_RIG": False, "DRAW_AD_TXTR": True, "DRAW_AD_COLOR": False, "DRAW_AD_MESH_LINES": False,
             "USE_MESA": False, "CAMERA_POS": [0.0, 0.7, 2.0], "CAMERA_FWD": [0.0, 0.5, 2.0]},
    "controller": {"MODE": "interactive", "KEYBOARD_TIMESTEP": 0.0333, "OUTPUT_VIDEO_PATH": "./output_video.mp4",
                   "OUTPUT_VIDEO_CODEC": "avc1"},
}
#: Fields that only matter to AnimatedDrawings' OpenGL window: accepted, logged, ignored.
IGNORED = {"scene": ("ADD_FLOOR", "ADD_AD_RETARGET_BVH"),
           "view": ("DRAW_AD_RIG", "DRAW_AD_TXTR", "DRAW_AD_COLOR", "DRAW_AD_MESH_LINES", "USE_MESA"),
           "controller": ("KEYBOARD_TIMESTEP", "OUTPUT_VIDEO_CODEC")}
_CHARACTER_KEYS = ("character_cfg", "motion_cfg", "retarget_cfg")
#: Most characters in one scene (each costs a mesh, an ARAP solve and a sprite).
MAX_CHARACTERS = 16
#: Vertical field of view of AnimatedDrawings' camera, degrees.
FOV_DEG = 35.0
_OUTPUT_EXTS = (".gif", ".mp4", ".webp")
#: Extra canvas pixels on every side of a character's frames (cropped; see render_scene).
_PAD = 2


@dataclass
class SceneCharacter:
    """One character of a scene with its configs (``retarget_cfg`` derived if the file has none)."""

    character: Character
    motion_cfg: MotionConfig
    retarget_cfg: RetargetConfig
    source: str  # the character_cfg path as written, for messages


@dataclass
class Camera:
    """AnimatedDrawings' perspective camera (see the module docstring), for a ``width`` x ``height`` canvas."""

    pos: np.ndarray
    fwd: np.ndarray
    width: int
    height: int

    def view_matrix(self) -> np.ndarray:
        """4x4 world -> camera transform (the inverse of the camera's placement)."""
        fwd = np.asarray(self.fwd, np.float64)
        tmp = np.array([0.0, 1.0, 0.0])
        if np.allclose(fwd, tmp) or np.allclose(fwd, -tmp):
            tmp[0] += 0.001
        right = np.cross(tmp, fwd)
        up = np.cross(fwd, right)
        rot = np.stack([v / np.linalg.norm(v) for v in (right, up, fwd)], axis=1)  # columns
        view = np.eye(4)
        view[:3, :3] = rot.T
        view[:3, 3] = -rot.T @ np.asarray(self.pos, np.float64)
        return view

    def projection_matrix(self, near: float = 0.1, far: float = 10000.0) -> np.ndarray:
        top = near * math.tan(math.radians(FOV_DEG) / 2)
        right = top * self.width / self.height
        m = np.zeros((4, 4))
        m[0, 0] = near / right
        m[1, 1] = near / top
        m[2, 2] = (far + near) / (near - far)
        m[2, 3] = 2 * far * near / (near - far)
        m[3, 2] = -1.0
        return m

    def project(self, world: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Canvas pixels (..., 2) (origin top-left, y down) and distance in front of the camera (...,)."""
        w = np.asarray(world, np.float64)
        cam = w @ self.view_matrix()[:3, :3].T + self.view_matrix()[:3, 3]
        clip = np.concatenate([cam, np.ones(cam.shape[:-1] + (1,))], axis=-1) @ self.projection_matrix().T
        depth = -cam[..., 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            ndc = clip[..., :2] / clip[..., 3:4]
        px = np.stack([(ndc[..., 0] + 1) / 2 * self.width, (1 - ndc[..., 1]) / 2 * self.height], axis=-1)
        return px, depth


@dataclass
class Scene:
    """A scene file, read and checked (see the module docstring)."""

    path: str
    characters: list[SceneCharacter]
    width: int
    height: int
    camera: Camera
    clear_color: tuple[float, float, float, float]
    background_image: np.ndarray | None = None  # (height, width, 3) uint8, already stretched to the window
    mode: str = "video_render"
    output_path: str | None = None
    ignored: list[str] = field(default_factory=list)
    given: list[str] = field(default_factory=list)  # "section.FIELD" the file sets (the rest are defaults)


def load_scene(path: str | Path) -> Scene:
    """Read an AnimatedDrawings mvc config; errors name the file and the field."""
    p = str(path)
    sections, ignored, given = _sections(p, read_yaml(path))
    scene, view, ctl = sections["scene"], sections["view"], sections["controller"]
    for k in ignored:
        log.warning("scene %s: %s ignored (it only applies to AnimatedDrawings' OpenGL window)", p, k)

    width, height = _window(p, view["WINDOW_DIMENSIONS"])
    clear = _clear_color(p, view["CLEAR_COLOR"])
    cam_pos = np.array(_numbers(p, "view.CAMERA_POS", view["CAMERA_POS"], 3))
    cam_fwd = np.array(_numbers(p, "view.CAMERA_FWD", view["CAMERA_FWD"], 3))
    if not np.linalg.norm(cam_fwd) > 0:
        raise ConfigError(p, "view.CAMERA_FWD", "must not be the zero vector")
    mode, out = _controller(p, ctl)
    background = None
    if view["BACKGROUND_IMAGE"] is not None:
        background = _background(p, view["BACKGROUND_IMAGE"], width, height)
    characters = _characters(p, scene.get("ANIMATED_CHARACTERS"))
    return Scene(path=p, characters=characters, width=width, height=height,
                 camera=Camera(cam_pos, cam_fwd, width, height), clear_color=tuple(clear),  # type: ignore[arg-type]
                 background_image=background, mode=mode, output_path=out, ignored=ignored, given=given)


def _sections(p: str, raw: Any) -> tuple[dict[str, dict[str, Any]], list[str], list[str]]:
    """(each section with AnimatedDrawings' defaults filled in, "section.FIELD"s that are ignored here,
    "section.FIELD"s the file sets); unknown sections and fields are errors."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(p, None, "a scene file must be a YAML mapping with scene, view and controller sections")
    unknown = [k for k in raw if k not in DEFAULTS]
    if unknown:
        raise ConfigError(p, str(unknown[0]), f"unknown section (expected {', '.join(DEFAULTS)})")
    sections: dict[str, dict[str, Any]] = {}
    ignored: list[str] = []
    set_fields: list[str] = []
    for name, defaults in DEFAULTS.items():
        given = raw.get(name) or {}
        if not isinstance(given, dict):
            raise ConfigError(p, name, f"must be a mapping, got {type(given).__name__}")
        allowed = set(defaults) | ({"ANIMATED_CHARACTERS"} if name == "scene" else set())
        bad = [k for k in given if k not in allowed]
        if bad:
            raise ConfigError(p, f"{name}.{bad[0]}", f"unknown field (known: {', '.join(sorted(allowed))})")
        ignored.extend(f"{name}.{k}" for k in IGNORED[name] if k in given)
        set_fields.extend(f"{name}.{k}" for k in given)
        sections[name] = {**defaults, **given}
    return sections, ignored, set_fields


def _clear_color(p: str, value: Any) -> list[float]:
    clear = _numbers(p, "view.CLEAR_COLOR", value, 4)
    if not all(0.0 <= v <= 1.0 for v in clear):
        raise ConfigError(p, "view.CLEAR_COLOR", f"values must be from 0 to 1, got {value!r}")
    return clear


def _controller(p: str, ctl: dict[str, Any]) -> tuple[str, str | None]:
    """(MODE, OUTPUT_VIDEO_PATH) from the controller section, checked."""
    mode = ctl["MODE"]
    if mode not in ("interactive", "video_render"):
        raise ConfigError(p, "controller.MODE", f"must be 'interactive' or 'video_render', got {mode!r}")
    out = ctl["OUTPUT_VIDEO_PATH"]
    if out is not None and (not isinstance(out, str) or Path(out).suffix.lower() not in _OUTPUT_EXTS):
        raise ConfigError(p, "controller.OUTPUT_VIDEO_PATH",
                          f"must be a path ending in {', '.join(_OUTPUT_EXTS)}, got {out!r}")
    return mode, out


def _characters(p: str, entries: Any) -> list[SceneCharacter]:
    """scene.ANIMATED_CHARACTERS: each entry's files found and loaded (at most MAX_CHARACTERS)."""
    from .auto_retarget import configs_for
    from .character import load_character

    if not isinstance(entries, list) or not entries:
        raise ConfigError(p, "scene.ANIMATED_CHARACTERS",
                          "must be a non-empty list of {character_cfg, motion_cfg, retarget_cfg}")
    if len(entries) > MAX_CHARACTERS:
        raise ConfigError(p, "scene.ANIMATED_CHARACTERS", f"at most {MAX_CHARACTERS} characters, got {len(entries)}")
    characters = []
    for k, e in enumerate(entries):
        files = _entry_files(p, f"scene.ANIMATED_CHARACTERS[{k}]", e)
        char = load_character(files["character_cfg"])
        motion_cfg, retarget_cfg = configs_for(files["motion_cfg"], files.get("retarget_cfg"))
        characters.append(SceneCharacter(char, motion_cfg, retarget_cfg, e["character_cfg"]))
    return characters


def _entry_files(p: str, f: str, e: Any) -> dict[str, str]:
    """The files one character entry ``f`` names, found beside the scene file or its parents
    (``retarget_cfg`` may be absent)."""
    if not isinstance(e, dict):
        raise ConfigError(p, f, "must be a mapping {character_cfg, motion_cfg, retarget_cfg}")
    bad = [key for key in e if key not in _CHARACTER_KEYS]
    if bad:
        raise ConfigError(p, f"{f}.{bad[0]}", f"unknown field (known: {', '.join(_CHARACTER_KEYS)})")
    files = {}
    for key in _CHARACTER_KEYS:
        if e.get(key) is None:
            if key == "retarget_cfg":
                continue
            raise ConfigError(p, f"{f}.{key}", "missing")
        if not isinstance(e[key], str):
            raise ConfigError(p, f"{f}.{key}", f"must be a file path, got {e[key]!r}")
        found = resolve_bvh_path(e[key], p)
        if found is None:
            raise ConfigError(p, f"{f}.{key}", f"file '{e[key]}' not found (looked in the working directory and "
                              f"in {Path(p).resolve().parent} and its parents)")
        files[key] = found
    return files


class _Placed(NamedTuple):
    """One scene character's deformed mesh through the camera."""

    canvas: np.ndarray  # (F, V, 2) canvas pixels per frame
    depth: float  # median distance in front of the camera (draw order: farthest first)
    scale: float  # canvas pixels per drawing pixel, the largest over the clip


def render_scene(scene: Scene, options: RenderOptions | None = None, progress: Progress = None) -> RenderResult:
    """Render every character of ``scene`` on its background, seen through its camera.

    ``options``: frame rate, format, palette and threads as for :func:`animator.render` (its
    width, height and background are the scene's: WINDOW_DIMENSIONS and the background image or
    CLEAR_COLOR). ``progress(frames done, frames total)`` as for :func:`animator.render`. Timings:
    ``retarget``, ``setup``, ``deform``, ``sprite``, ``rasterize`` (including the compositing),
    ``encode``, ``total``.
    """
    from .clock import Clock, FrameCount, TimedFrames

    base = options or RenderOptions()
    if base.format in RIG_FORMATS:
        raise ConfigError(scene.path, "format", f"{base.format} exports one character's rig: render the character "
                          "(CHARACTER_DIR --motion ...), or use --dump-joints for a scene's joint tracks")
    opts = RenderOptions(**{**base.__dict__, "width": scene.width, "height": scene.height,
                            "background": _opaque_background(scene)})
    clock = Clock()

    motions, frame_time_s = _timeline(scene, opts)
    F = motions[0].n_frames
    clock.lap("retarget")
    count = FrameCount(progress, F)

    rigs = [Rig.build(sc.character, m, opts.mesh_cells) for sc, m in zip(scene.characters, motions)]
    clock.lap("setup")

    placed = [_place(scene, sc, m, rig) for sc, m, rig in zip(scene.characters, motions, rigs)]
    clock.lap("deform")

    order = sorted(range(len(placed)), key=lambda i: -placed[i].depth)  # farthest first, ties in file order
    sprites, bases, palette, keep, bg = sprites_on_one_palette(scene.width, scene.height, scene.background_image,
                                                               opts, rigs, motions, [p.scale for p in placed])
    clock.lap("sprite")
    log.info("scene: %d characters, %d frames, %d colours (%s)", len(placed), F, len(palette),
             ", ".join(f"{scene.characters[i].source} at depth {placed[i].depth:.2f}" for i in order))

    layers = [(motions[i], sprites[i], placed[i].canvas, bases[i]) for i in order]
    timed = TimedFrames(layered_frames(scene.width, scene.height, layers, bg, F, opts.threads), count.add)
    data = encode_frames(timed, palette, keep, F, frame_time_s, opts)
    count.finish()
    clock.frames_lap(timed.ms)
    mime, ext = FORMATS[opts.format]
    return RenderResult(data=data, mime=mime, extension=ext, frame_count=F, duration_s=F * frame_time_s,
                        timings_ms=clock.timings(), motion=motions, scale=float(np.mean([p.scale for p in placed])))


def _timeline(scene: Scene, opts: RenderOptions) -> tuple[list[Any], float]:
    """Every character's motion at the output frames, and the output frame time (s): one timeline, the
    longest clip at the first character's frame time; shorter clips hold their last pose."""
    from .frame_rate import plan_frames
    from .retarget import retarget

    fulls = [retarget(sc.character, sc.motion_cfg, sc.retarget_cfg) for sc in scene.characters]
    dt = fulls[0].frame_time_s
    plan = plan_frames(max(m.n_frames for m in fulls), dt, fps=opts.fps, max_frames=opts.max_frames)
    t_out = plan.indices * dt
    motions = [m.select(np.minimum(np.round(t_out / m.frame_time_s).astype(np.int64), m.n_frames - 1),
                        plan.frame_time_s) for m in fulls]
    return motions, plan.frame_time_s


def _place(scene: Scene, sc: SceneCharacter, motion: Any, rig: Rig) -> _Placed:
    """Deform ``sc`` for every frame and project it through the scene's camera."""
    verts, _ = rig.deform(motion)
    canvas, depth = scene.camera.project(_to_world(verts, sc))
    if not (depth > 0.1).all():
        raise ConfigError(scene.path, "view.CAMERA_POS", f"character {sc.source} is (partly) behind the camera")
    return _Placed(canvas, float(np.median(depth)), _pixels_per_drawing_pixel(scene.camera, sc, motion))


def sprites_on_one_palette(width: int, height: int, background_image: np.ndarray | None, opts: RenderOptions,
                           rigs: list[Rig], motions: list[Any], scales: list[float]):
    """(sprites, palette offset of each, the shared palette, the "transparent / unchanged" index after it,
    the background as an index image of the ``width`` x ``height`` window): each rig's sprite at its
    scale (canvas px per drawing px) on one palette with the background (an (height, width, 3) image,
    or ``opts.background``'s colour, or transparent)."""
    bg_indices, palette, bg_fill, per_char = _shared_palette(background_image, opts, len(rigs))
    sprites, bases = [], []
    for rig, motion, scale in zip(rigs, motions, scales):
        sprite = rig.sprite(motion, scale, opts, colours=per_char)
        bases.append(len(palette))
        palette = np.vstack([palette, sprite.palette]) if len(palette) else sprite.palette
        sprites.append(sprite)
    # the index after the palette: transparent (no background) or "unchanged" in GIF deltas
    keep = len(palette)
    if bg_indices is not None:
        bg = bg_indices
    else:
        bg = np.full((height, width), keep if bg_fill is None else bg_fill, np.uint8)
    return sprites, bases, palette, keep, bg


def layered_frames(width: int, height: int, layers: list[tuple[Any, Any, np.ndarray, int]], bg: np.ndarray,
                   n_frames: int, threads: int) -> Iterator[np.ndarray]:
    """The window's index frames: the background, then each layer (motion, sprite, canvas vertices,
    palette offset) back to front. Characters may leave the window (a fixed camera): each is drawn on a
    canvas _PAD pixels larger on every side, where the rasterizer's clamp of off-canvas points lands,
    then cropped."""
    from .rasterize import rasterize

    gens = []
    w, h = width + 2 * _PAD, height + 2 * _PAD
    for m, sprite, canvas, base in layers:
        part_order, rev = m.part_order, m.part_reversed
        if part_order is None or part_order.ndim != 2 or part_order.shape[1] != len(sprite.groups):
            part_order, rev = None, None
        gens.append((rasterize(sprite, canvas + _PAD, w, h, part_order, rev, threads=threads),
                     sprite.transparent, base))
    inner = (slice(_PAD, _PAD + height), slice(_PAD, _PAD + width))
    for _ in range(n_frames):
        out = bg.copy()
        for gen, tr, b in gens:
            fr = next(gen)[inner]
            drawn = fr != tr
            out[drawn] = fr[drawn] + np.uint8(b)
        yield out


def _to_world(points: np.ndarray, sc: SceneCharacter) -> np.ndarray:
    """Drawing pixels (..., 2), y down, to AnimatedDrawings' world (..., 3) (module docstring)."""
    d = float(max(sc.character.size))
    rx, ry = next(j.loc for j in sc.character.skeleton if j.name == "root")
    sx, sy, sz = sc.retarget_cfg.char_starting_location
    pts = np.asarray(points, np.float64)
    return np.stack([sx + (pts[..., 0] - rx) / d, sy + (ry - pts[..., 1]) / d, np.full(pts.shape[:-1], sz)], axis=-1)


def _pixels_per_drawing_pixel(camera: Camera, sc: SceneCharacter, motion: Any) -> float:
    """The largest canvas size of one drawing pixel over the clip (the sprite's texel scale)."""
    root = motion.joint("root")
    probes = np.stack([root, root + [1.0, 0.0], root + [0.0, 1.0]], axis=1)   # (F, 3, 2)
    px, _ = camera.project(_to_world(probes, sc))
    step = np.linalg.norm(px[:, 1:] - px[:, :1], axis=-1)
    from .api import max_scale

    return float(np.clip(step.max(), 1e-3, max_scale(sc.character.mask, camera.width, camera.height)))


def _opaque_background(scene: Scene) -> tuple[int, int, int] | None:
    if scene.background_image is not None or scene.clear_color[3] > 0:
        return tuple(int(round(c * 255)) for c in scene.clear_color[:3])  # type: ignore[return-value]
    return None


def _shared_palette(background_image: np.ndarray | None, opts: RenderOptions, n_chars: int):
    """(background index image or None, palette so far, background fill index or None, colours per character).

    One GIF palette holds the background and every character: the image gets up to 128 colours,
    the characters share the rest (each at most ``opts.colours``); one index stays free for
    "transparent / unchanged".
    """
    from PIL import Image

    if background_image is not None:
        img = Image.fromarray(background_image, "RGB").quantize(128, method=Image.Quantize.MEDIANCUT,
                                                                    dither=Image.Dither.NONE)
        idx = np.asarray(img, np.uint8)
        pal = np.array(img.getpalette()[: 3 * (int(idx.max()) + 1)], np.uint8).reshape(-1, 3)
        per = max(2, min(opts.colours, (255 - len(pal)) // n_chars))
        return idx, pal, None, per
    if opts.background is not None:
        pal = np.array([opts.background], np.uint8)
        return None, pal, 0, max(2, min(opts.colours, 254 // n_chars))
    return None, np.zeros((0, 3), np.uint8), None, max(2, min(opts.colours, 255 // n_chars))


def _window(path: str, value: Any) -> tuple[int, int]:
    if (not isinstance(value, (list, tuple)) or len(value) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and 16 <= v <= 4096 for v in value)):
        raise ConfigError(path, "view.WINDOW_DIMENSIONS",
                          f"must be [width, height], integers from 16 to 4096, got {value!r}")
    return int(value[0]), int(value[1])


def _numbers(path: str, field_name: str, value: Any, n: int) -> list[float]:
    if (not isinstance(value, (list, tuple)) or len(value) != n
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)):
        raise ConfigError(path, field_name, f"must be a list of {n} numbers, got {value!r}")
    return [float(v) for v in value]


def _background(path: str, name: Any, width: int, height: int) -> np.ndarray:
    """The background image, EXIF-rotated and stretched to the window as AnimatedDrawings blits it."""
    from PIL import Image, ImageOps

    if not isinstance(name, str):
        raise ConfigError(path, "view.BACKGROUND_IMAGE", f"must be an image path or null, got {name!r}")
    found = resolve_bvh_path(name, path)
    if found is None:
        raise ConfigError(path, "view.BACKGROUND_IMAGE", f"file '{name}' not found")
    try:
        with Image.open(found) as im:
            if im.width * im.height > 64_000_000:
                raise ConfigError(path, "view.BACKGROUND_IMAGE",
                                  f"{im.width}x{im.height} is too large (64 megapixels at most)")
            img = ImageOps.exif_transpose(im).convert("RGB").resize((width, height), Image.Resampling.BILINEAR)
    except OSError as exc:
        raise ConfigError(path, "view.BACKGROUND_IMAGE", f"not a readable image: {exc}") from None
    return np.asarray(img, np.uint8)


__all__ = ["Camera", "DEFAULTS", "IGNORED", "MAX_CHARACTERS", "Scene", "SceneCharacter", "layered_frames", "load_scene",
           "render_scene", "sprites_on_one_palette"]
