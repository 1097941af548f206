"""Command line: ``python -m animator CHARACTER_DIR --motion M.yaml --retarget R.yaml -o out.gif``.

Run ``python -m animator --help`` for the options. Exit codes: 0 done, 1 bad input or the output
cannot be produced (one line on stderr), 2 bad command line, 3 the output file cannot be written.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

EXIT_OK, EXIT_INPUT, EXIT_USAGE, EXIT_WRITE = 0, 1, 2, 3

DESCRIPTION = """\
Animate a drawn character with a motion-capture clip and write a GIF, WebP or MP4.

Reads AnimatedDrawings' formats unchanged: a character folder (char_cfg.yaml with the skeleton in
the drawing's pixels, texture.png, mask.png), a motion config (BVH clip, frame range, up axis,
forward vectors, scale) and a retarget config (projection groups, body-part groups, root offset,
joint mapping). A motion config's BVH path is tried relative to the working directory, then to the
config's folder and its parents.
"""

EPILOG = """\
coordinates:
  Skeletons (char_cfg.yaml and --dump-joints) are in the drawing's own pixels: origin at the
  texture's top-left corner, x to the right, y down, before any canvas placement. The character is
  drawn at one scale for the whole clip, chosen so that every pose fits the canvas with the margin.
  Jumps and sways play in a fixed view; when a clip travels so far that showing all of it would
  shrink the character below 70%, the view follows the root joint along that axis.

frames:
  --fps 25 (default) plays at true speed in a GIF (4 cs per frame; GIF delays are whole
  hundredths of a second). --fps native keeps every BVH frame of the config's range, so output
  frame i is BVH frame start_frame_idx + i. --max-frames caps the count (frames get longer, the
  duration holds).

exit codes:
  0  the file was written
  1  bad input (a config, the BVH or the character) or the output cannot be produced
     (e.g. no MP4 codec): one line on stderr says which file and field
  2  bad command line
  3  the output file (or --dump-joints file) cannot be written

environment:
  OPENBLAS_NUM_THREADS  BLAS threads (default 1: the matrices are small)

example (from tests/fixtures/animated_drawings):
  python -m animator examples/characters/char1 \\
      --motion examples/config/motion/dab.yaml \\
      --retarget examples/config/retarget/fair1_ppf.yaml -o dab.gif
"""


def _size(text: str) -> tuple[int, int]:
    """``WxH``, or ``N`` for a square N x N canvas."""
    try:
        parts = [int(v) for v in text.lower().split("x")]
        w, h = parts * 2 if len(parts) == 1 else parts
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT like 500x500 (or 500), got {text!r}") from None
    if not (16 <= w <= 4096 and 16 <= h <= 4096):
        raise argparse.ArgumentTypeError(f"width and height must be 16..4096, got {text!r}")
    return w, h


def _fps(text: str) -> float | str:
    if text.strip().lower() == "native":
        return "native"
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'native', got {text!r}") from None
    if not 0 < v <= 1000:
        raise argparse.ArgumentTypeError(f"must be > 0 (and at most 1000), got {text!r}")
    return v


def _colour(text: str) -> tuple[int, int, int] | None:
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


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return v


def build_parser() -> argparse.ArgumentParser:
    script = os.path.basename(sys.argv[0])  # doodlepod-animate, or __main__.py under python -m animator
    prog = "python -m animator" if script in ("__main__.py", "") else script
    p = argparse.ArgumentParser(prog=prog, description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("character", metavar="CHARACTER_DIR",
                   help="character folder with char_cfg.yaml, texture.png and mask.png")
    p.add_argument("--motion", "-m", required=True, metavar="MOTION.yaml", help="motion config (BVH clip and frame range)")
    p.add_argument("--retarget", "-r", required=True, metavar="RETARGET.yaml",
                   help="retarget config (how the BVH skeleton maps onto the drawing)")
    p.add_argument("--output", "-o", required=True, metavar="OUT",
                   help="output file; its extension picks the format unless --format is given")
    from animator.encode import FORMATS

    p.add_argument("--format", "-f", choices=tuple(FORMATS),
                   help="gif (transparent, default), webp (animated, lossless, transparent) or mp4 "
                        "(H.264 on a white background; needs imageio-ffmpeg)")
    p.add_argument("--size", type=_size, default=(500, 500), metavar="WxH",
                   help="canvas size in pixels: WIDTHxHEIGHT, or one number for a square (default 500x500)")
    p.add_argument("--fps", type=_fps, default=None, metavar="N|native",
                   help="output frame rate (default 25, true speed in GIFs) or 'native' for every BVH frame")
    p.add_argument("--max-frames", type=_positive_int, metavar="N", help="at most N frames (the duration is kept)")
    p.add_argument("--colours", "--colors", type=int, default=None, metavar="N",
                   help="palette size for the whole clip, 2..255 (default 16; more for very colourful drawings)")
    p.add_argument("--merge", type=float, default=None, metavar="DELTA_E",
                   help="merge palette colours closer than this colour difference (CIE delta E; default 10: "
                        "paper grain and marker streaks become flat, files 2-3x smaller; 0: off, every shade kept)")
    p.add_argument("--background", type=_colour, default=None, metavar="COLOUR",
                   help="none (default: transparent GIF/WebP; MP4 uses white), white, black, #RRGGBB or "
                        "R,G,B. An opaque background lets GIF frames store only what changed (dab at "
                        "500x500: 1.74 MB on white, 1.98 MB transparent)")
    p.add_argument("--tolerance", type=float, default=None, metavar="RGB",
                   help="GIF: leave a pixel alone when its new colour is within this RGB distance of the "
                        "one on screen (default 16 with --background, else 0 = exact frames)")
    p.add_argument("--margin", type=float, default=None, metavar="PX",
                   help="free border around the character in canvas pixels (default 4%% of the shorter "
                        "side); larger: a smaller character and a smaller file")
    p.add_argument("--dump-joints", metavar="FILE.json",
                   help='also write the posed skeleton per output frame: {"joints": [names], "frames": '
                        '[[[x, y], ...], ...]} in the drawing\'s pixels (y down)')
    p.add_argument("--stats", metavar="FILE.json",
                   help="also write frames, duration, bytes and per-stage timings (ms) as JSON")
    p.add_argument("-v", "--verbose", action="count", default=0, help="log progress and timings (-vv: debug)")
    return p


def main(argv: list[str] | None = None) -> int:
    t0 = time.perf_counter()
    args = build_parser().parse_args(argv)
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    log = logging.getLogger("animator")
    log.setLevel(logging.DEBUG if args.verbose > 1 else logging.INFO if args.verbose else logging.WARNING)

    import animator
    from animator.errors import AnimatorError
    from animator.files import write_atomic as _write

    fmt = args.format
    if fmt is None:
        ext = os.path.splitext(args.output)[1].lower().lstrip(".")
        fmt = ext if ext in animator.FORMATS else "gif"
    try:
        # options left unset on the command line keep RenderOptions' defaults
        kw = {name: getattr(args, name) for name in ("fps", "colours", "margin", "merge", "background", "tolerance")
              if getattr(args, name) is not None}
        options = animator.RenderOptions(width=args.size[0], height=args.size[1], max_frames=args.max_frames,
                                         format=fmt, **kw)
        t = time.perf_counter()
        character = animator.load_character(args.character)
        motion_cfg = animator.load_motion_config(args.motion)
        retarget_cfg = animator.load_retarget_config(args.retarget)
        load_ms = (time.perf_counter() - t) * 1e3
        result = animator.render(character, motion_cfg, retarget_cfg, options)
    except AnimatorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    try:
        _write(args.output, result.data)
        if args.dump_joints:
            import json

            _write(args.dump_joints, json.dumps(result.motion.to_json()).encode())
        if args.stats:
            import json

            stats = {"frames": result.frame_count, "duration_s": result.duration_s, "bytes": len(result.data),
                     "format": fmt, "scale": result.scale,
                     "timings_ms": {"load": load_ms, **result.timings_ms},
                     "process_ms": (time.perf_counter() - t0) * 1e3}
            _write(args.stats, json.dumps(stats, indent=1).encode())
    except OSError as exc:
        print(f"error: cannot write {exc.filename or args.output}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_WRITE
    timings = {"load": load_ms, **result.timings_ms}
    log.info("wrote %s: %d frames, %.2f s, %d bytes; %s; whole run %.0f ms", args.output, result.frame_count,
             result.duration_s, len(result.data), ", ".join(f"{k} {v:.0f} ms" for k, v in timings.items()),
             (time.perf_counter() - t0) * 1e3)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
