"""What the command's subcommands share: option types and builders, the output format a file's name
says, and a motion named on the command line.

``render`` (:mod:`animator.cli.main`) and ``scene`` (:mod:`animator.cli.scene`) build their parsers
from the builders here (:func:`add_output`, :func:`add_frames`, :func:`add_reports`), so an option both
take is written once, with one type and one help text. Neither subcommand imports the other.
"""
from __future__ import annotations

import argparse
import os
import sys

EXIT_OK, EXIT_INPUT, EXIT_USAGE, EXIT_WRITE = 0, 1, 2, 3


# --- option types ----------------------------------------------------------------------------------

def size(text: str) -> tuple[int, int]:
    """``WxH``, or ``N`` for a square N x N canvas."""
    try:
        parts = [int(v) for v in text.lower().split("x")]
        w, h = parts * 2 if len(parts) == 1 else parts
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT like 500x500 (or 500), got {text!r}") from None
    if not (16 <= w <= 4096 and 16 <= h <= 4096):
        raise argparse.ArgumentTypeError(f"width and height must be 16..4096, got {text!r}")
    return w, h


def fps(text: str) -> float | str:
    if text.strip().lower() == "native":
        return "native"
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'native', got {text!r}") from None
    if not 0 < v <= 1000:
        raise argparse.ArgumentTypeError(f"must be > 0 (and at most 1000), got {text!r}")
    return v


def colour(text: str) -> tuple[int, int, int] | None:
    t = text.strip().lower()
    named = {"none": None, "transparent": None, "white": (255, 255, 255), "black": (0, 0, 0)}
    if t in named:
        return named[t]
    try:
        if t.startswith("#") and len(t) == 7:
            return int(t[1:3], 16), int(t[3:5], 16), int(t[5:7], 16)
        r, g, b = (int(v) for v in t.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected none, white, black, #RRGGBB or R,G,B, got {text!r}") from None
    if not all(0 <= v <= 255 for v in (r, g, b)):
        raise argparse.ArgumentTypeError(f"colour components must be 0..255, got {text!r}")
    return r, g, b


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return v


# --- option builders -------------------------------------------------------------------------------

def add_output(p: argparse.ArgumentParser, output_help: str) -> None:
    """``-o/--output`` and ``--format`` (one of the library's formats; default: from the output's name)."""
    from animator.formats import FORMATS

    p.add_argument("--output", "-o", metavar="OUT", help=output_help)
    p.add_argument("--format", "-f", choices=tuple(FORMATS),
                   help="gif (transparent, default), webp (animated, lossless, transparent), mp4 (H.264 on a "
                        "white background; needs imageio-ffmpeg), apng (animated PNG, alpha, exact timing), "
                        "webm (VP9 with alpha), frames (zip of RGBA PNGs + frames.json), sheet (zip of a "
                        "sprite sheet + JSON Hash atlas), joints (per-frame joints, JSON, as --dump-joints) "
                        "or glb (glTF 2.0: textured mesh, skin, animation). From -o's extension: .png apng, "
                        ".json joints; .zip needs --format")


def add_frames(p: argparse.ArgumentParser) -> None:
    """``--fps`` and ``--max-frames``."""
    p.add_argument("--fps", type=fps, default=None, metavar="N|native",
                   help="output frame rate (default 25, true speed in GIFs) or 'native' for every BVH frame")
    p.add_argument("--max-frames", type=positive_int, metavar="N", help="at most N frames (the duration is kept)")


def add_reports(p: argparse.ArgumentParser, joints_help: str) -> None:
    """``--dump-joints`` and ``--stats``: files written beside the animation."""
    p.add_argument("--dump-joints", metavar="FILE.json", help=joints_help)
    p.add_argument("--stats", metavar="FILE.json",
                   help="also write frames, duration, bytes and per-stage timings (ms) as JSON")


# --- what an output's name and a motion's name say -------------------------------------------------

def formats_named_by(path: str) -> list[str]:
    """The formats an output file's name fits: ``x.sheet.zip`` sheet (the server's download names:
    format, then extension), ``x.gif`` gif, ``x.png`` apng, ``x.json`` joints, ``x.zip`` frames or
    sheet; [] for a name that says no format (``x.mov``)."""
    from animator.formats import FORMATS

    name = os.path.basename(path).lower()
    stem, ext = os.path.splitext(name)
    ext = ext.lstrip(".")
    inner = os.path.splitext(stem)[1].lstrip(".")
    if inner in FORMATS and FORMATS[inner][1] == ext:  # sheet.zip, frames.zip, joints.json, apng.png
        return [inner]
    if ext in FORMATS:
        return [ext]
    return [fmt for fmt, (_, e) in FORMATS.items() if e == ext]


def format_of(path: str, asked: str | None = None) -> str:
    """The format to write ``path`` in: ``asked`` (--format) or the one its name says. Exits with a
    usage error when the name says another format than ``asked``, or (without ``asked``) says none
    or fits several (``.zip``): a file's name never says another format than the file holds."""
    from animator.formats import FORMATS

    named = formats_named_by(path)
    if asked and asked in named:
        return asked
    if asked and named:
        ext = FORMATS[asked][1]
        plain = ext == asked or asked in ("apng", "joints")  # .png, .json say them; .sheet.zip, .frames.zip
        hint = os.path.splitext(path)[0] + (f".{ext}" if plain else f".{asked}.{ext}")
        usage_error(f"-o {path} is named as {' or '.join(named)} but --format {asked} writes {asked}: "
                    f"name it e.g. {hint} (or drop --format)")
    if asked:  # a name that says no format (a.bin, /dev/stdout): --format says it
        return asked
    if len(named) == 1:
        return named[0]
    if named:  # .zip: PNG frames or a sprite sheet
        usage_error(f"a .{FORMATS[named[0]][1]} output can be {' or '.join(named)}: say which with --format "
                    f"(or name it .{named[0]}.zip)")
    known = ", ".join(dict.fromkeys("." + e for _, e in FORMATS.values()))
    usage_error(f"-o {path}: the extension names no format this command writes ({known}; "
                ".frames.zip, .sheet.zip): rename it or pass --format")
    raise AssertionError("unreachable")


def usage_error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def motion_files(motion: str, retarget: str | None) -> tuple[str, str | None]:
    """--motion and --retarget as files: a library name becomes its motion and retarget configs (an
    explicit --retarget still wins); raises AnimatorError for a name the library lacks."""
    from animator.cli.library import looks_like_a_name, resolve

    if os.path.exists(motion) or not looks_like_a_name(motion):
        return motion, retarget
    entry = resolve(motion)
    return str(entry.motion), retarget or (str(entry.retarget) if entry.retarget else None)
