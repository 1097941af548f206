"""``python -m animator scene``: several character folders animated together on one page.

    python -m animator scene CHAR_DIR [CHAR_DIR ...] [--at X,Y[,SCALE] ...] [--page PHOTO]
        [--background page|none|#RRGGBB|IMAGE] --motion M [--motion M ...] -o scene.gif

Each character folder is AnimatedDrawings' (char_cfg.yaml, texture.png, mask.png). ``--at`` gives,
per folder in order, where its texture's top-left corner lies on the page (page pixels) and how
many page pixels one texture pixel covers (default 1). Without ``--at`` the characters stand side by
side on the bottom of the page. ``--page`` is the photo they were cut from: the page's size, and
with ``--background page`` (the default when a photo is given) the background, characters taken
out. One ``--motion`` for all, or one per folder. See :mod:`animator.page_scene`. ``--write-ad FOLDER``
writes the scene as AnimatedDrawings' scene files (:mod:`animator.ad_scene`).
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from .common import EXIT_INPUT, EXIT_OK, EXIT_WRITE, add_frames, add_output, add_reports, format_of, motion_files
from .common import size as canvas_wh

#: The subcommand's help: the module's first paragraph, then its last two.
DESCRIPTION = __doc__.split("\n\n")[0]
EPILOG = __doc__.split("\n\n", 2)[2]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``scene``'s arguments (its parser is a subparser of :func:`animator.cli.main.build_parser`)."""
    from ..inpaint import DEFAULT_METHOD, METHODS

    p.add_argument("characters", nargs="+", metavar="CHAR_DIR", help="character folders (AnimatedDrawings' format)")
    p.add_argument("--at", action="append", type=_at, default=[], metavar="X,Y[,SCALE]",
                   help="where each character lies on the page, in the folders' order (page pixels)")
    p.add_argument("--page", metavar="PHOTO", help="the photo the characters were cut from")
    p.add_argument("--page-size", type=_size, metavar="WxH", help="the page's size without a photo")
    p.add_argument("--background", help="page (the photo, characters taken out; default with --page), none "
                   "(transparent; default without), #RRGGBB, or an image file")
    p.add_argument("--inpaint", choices=METHODS, default=DEFAULT_METHOD, help="how the page is filled in")
    p.add_argument("--motion", action="append", required=True, metavar="MOTION.yaml|CLIP.bvh|NAME",
                   help="motion config, BVH file or a library motion's name (dab, zombie, ...: python -m animator "
                        "--list-motions): once for every character, or once per character")
    add_output(p, "output file (.gif, .webp, .mp4, .png, .webm, .zip, .json); its extension picks the format "
                  "unless --format is given")
    p.add_argument("--write-ad", metavar="FOLDER",
                   help="also (or only, without -o) write the scene as AnimatedDrawings' scene files into FOLDER "
                   "(scene.yaml and what it names; see animator.ad_scene)")
    p.add_argument("--size", type=_canvas, metavar="N|WxH",
                   help="canvas size: N, the page's shape with its longer side N pixels (default 500), or "
                        "WIDTHxHEIGHT (the page is fitted inside, centred)")
    add_frames(p)
    add_reports(p, "also write every character's joints per frame (JSON)")


def _at(text: str) -> tuple[float, float, float]:
    try:
        parts = [float(v) for v in text.split(",")]
    except ValueError:
        parts = []
    if len(parts) not in (2, 3):
        raise argparse.ArgumentTypeError(f"expected X,Y or X,Y,SCALE, got {text!r}")
    return (parts[0], parts[1], parts[2] if len(parts) == 3 else 1.0)


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT, got {text!r}") from None
    return w, h


def _canvas(text: str) -> int | tuple[int, int]:
    """``--size``: ``N`` (the longer side, the page's shape) or ``WxH``, each side 16..4096 as the main
    command's."""
    if "x" not in text.lower():
        side = canvas_wh(text)[0]
        return side
    return canvas_wh(text)


def _read_rgb(path: str):
    import numpy as np
    from PIL import Image, ImageOps

    from ..errors import ConfigError

    try:
        with Image.open(path) as im:
            if im.width * im.height > 64_000_000:
                raise ConfigError(path, None, f"{im.width}x{im.height} is too large (64 megapixels at most)")
            return np.asarray(ImageOps.exif_transpose(im).convert("RGB"), np.uint8)
    except OSError as exc:
        raise ConfigError(path, None, f"not a readable image: {exc}") from None


def load(args: argparse.Namespace, parser: argparse.ArgumentParser):
    """The :class:`animator.page_scene.PageScene` the command line describes (AnimatorError on bad input)."""
    from ..auto_retarget import configs_for
    from ..character import load_character
    from ..page_scene import PageCharacter, PageScene

    n = len(args.characters)
    if args.at and len(args.at) != n:
        parser.error(f"--at: give one per character folder ({n}), got {len(args.at)}")
    if len(args.motion) not in (1, n):
        parser.error(f"--motion: give one for all or one per character folder ({n}), got {len(args.motion)}")
    if args.background == "page" and not args.page:
        parser.error("--background page needs --page PHOTO")
    chars = [load_character(c) for c in args.characters]
    motions = args.motion * n if len(args.motion) == 1 else args.motion
    configs = {m: configs_for(*motion_files(m, None)) for m in dict.fromkeys(motions)}
    photo = _read_rgb(args.page) if args.page else None
    if args.at:
        places = list(args.at)
    else:  # side by side, feet on the bottom of the page
        tallest = max(c.size[1] for c in chars)
        xs = [0]
        for c in chars[:-1]:
            xs.append(xs[-1] + c.size[0])
        places = [(float(x), float(tallest - c.size[1]), 1.0) for x, c in zip(xs, chars)]
    if photo is not None:
        page_size = (photo.shape[1], photo.shape[0])
    elif args.page_size:
        page_size = args.page_size
    else:
        page_size = (int(max(x + s * c.size[0] for (x, _, s), c in zip(places, chars))),
                     int(max(y + s * c.size[1] for (_, y, s), c in zip(places, chars))))
    background = _background(args, parser, photo)
    characters = [PageCharacter(c, *configs[m], origin=(x, y), scale=s, name=str(folder))
                  for c, m, (x, y, s), folder in zip(chars, motions, places, args.characters)]
    return PageScene(characters, page_size, background)


def _background(args: argparse.Namespace, parser: argparse.ArgumentParser, photo):
    from ..page_scene import Background

    choice = args.background or ("page" if photo is not None else "none")
    if choice == "page":
        if photo is None:
            parser.error("--background page needs --page PHOTO")
        return Background("page", image=photo, inpaint=args.inpaint)
    if choice == "none":
        return Background("none")
    if choice.startswith("#"):
        try:
            value = int(choice[1:], 16)
            if len(choice) != 7:
                raise ValueError
        except ValueError:
            parser.error(f"--background: a colour is #RRGGBB, got {choice!r}")
        return Background("colour", colour=((value >> 16) & 255, (value >> 8) & 255, value & 255))
    return Background("image", image=_read_rgb(choice))


def run(args: argparse.Namespace, parser: argparse.ArgumentParser, t0: float) -> int:
    """``scene``: the characters animated together, written (and/or AnimatedDrawings' scene files)."""
    from .. import RenderOptions
    from ..errors import AnimatorError
    from ..files import write_atomic
    from ..page_scene import canvas_size, render_page_scene

    if not args.output and not args.write_ad:
        parser.error("give -o OUT (the animation), --write-ad FOLDER (AnimatedDrawings' scene files), or both")
    try:
        scene = load(args, parser)
        fmt = args.format or (format_of(args.output) if args.output else "gif")
        size = args.size or 500
        width, height = canvas_size(scene.page_size, size) if isinstance(size, int) else size
        if args.write_ad:
            from ..ad_scene import ad_scene_files

            written = _write_folder(args.write_ad, ad_scene_files(scene, width, height, output=f"scene.{fmt}"))
            print(f"wrote {written} (AnimatedDrawings' scene files; render with python -m animator "
                  f"{args.write_ad}/scene.yaml)", file=sys.stderr)
            if not args.output:
                return EXIT_OK
        kw = {"fps": args.fps} if args.fps is not None else {}
        options = RenderOptions(width=width, height=height, format=fmt, max_frames=args.max_frames, **kw)
        result = render_page_scene(scene, options)
    except AnimatorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except OSError as exc:
        print(f"error: cannot write {exc.filename or args.write_ad}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_WRITE
    try:
        write_atomic(args.output, result.data)
        if args.dump_joints:
            from ..page_scene import joints_file

            write_atomic(args.dump_joints, joints_file(scene, result.motion, result.placements, width, height))
        if args.stats:
            stats = {"frames": result.frame_count, "duration_s": result.duration_s, "bytes": len(result.data),
                     "format": fmt, "width": width, "height": height, "order": result.order,
                     "travel_kept": result.travel_kept, "timings_ms": result.timings_ms,
                     "process_ms": (time.perf_counter() - t0) * 1e3}
            write_atomic(args.stats, json.dumps(stats, indent=1).encode())
    except OSError as exc:
        print(f"error: cannot write {exc.filename or args.output}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_WRITE
    print(f"wrote {args.output}: {len(scene.characters)} characters, {result.frame_count} frames, "
          f"{width}x{height}, {len(result.data)} bytes", file=sys.stderr)
    return EXIT_OK


def _write_folder(folder: str, files: dict[str, bytes]) -> str:
    """Write ``files`` (relative path -> bytes) under ``folder``; returns the scene file's path."""
    from pathlib import Path

    from ..files import write_atomic

    root = Path(folder)
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(str(root / name), data)
    return str(root / "scene.yaml")
