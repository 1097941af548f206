"""Render benchmark: whole ``python -m animator`` processes, A/B against references in the same run.

Machines here differ 1.5-2.5x from one session to the next, and a shared machine's load changes by
the minute, so a figure only means something next to a reference measured in the same run, in
turn. This bench times, per row (default: char1 + dab, every BVH frame, 500x500 GIF):

* ``ours``: the working tree's ``python -m animator`` in a fresh process (interpreter start and
  imports included), measured from outside: wall time, CPU time (user + system) and peak resident
  memory of the child (``wait4``); stage timings from the child's ``--stats`` file.
* ``base``: with ``--baseline-ref REF``, the same command with the code at git ref ``REF``, checked
  out into a temporary ``git worktree`` (removed at the end); same inputs (this tree's fixtures).
* ``peer``: with ``--peer CMD``, any other renderer (e.g. an AnimatedDrawings install) as a shell
  command, timed the same way; ``--peer-output FILE`` names the file it writes, for its size.
* ``pillow``: the floor: the time Pillow alone needs to write our frames as a GIF
  (``Image.save(save_all=True)``, the frames decoded from our GIF beforehand, not timed), once
  after every round of the contenders, median printed.
* ``scene`` (``--scene``): a scene file (AnimatedDrawings' mvc format): char1 doing the dab and
  char2 the jumping jacks side by side on a background image, through AnimatedDrawings' default
  camera, ``python -m animator scene.yaml`` whole processes, beside the single-character row.

The contenders run in turn, the order rotating every repeat; medians are printed with the load
average and the ratios. Asserts nothing; with ``--baseline-ref`` it prints whether ours is at least
``--target`` times faster (whole process, wall) and its GIF no larger.

    python bench/render.py --baseline-ref 769e06a [--repeat 5] [--peer "CMD" --peer-output F]
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, load_avg
from worktree import Baseline, build_kernel, compile_tree

AD = REPO / "tests" / "fixtures" / "animated_drawings"
RETARGET = {"dab": "fair1_ppf", "zombie": "fair1_ppf", "wave_hello": "fair1_ppf", "jumping": "fair1_ppf",
            "jumping_jacks": "cmu1_pfp"}


def timed(cmd: list[str] | str, cwd: Path, env: dict | None = None, shell: bool = False) -> dict:
    """Run a command to its end: wall s, CPU s (user + system, its waited-for children included),
    peak resident MB (the largest process among it and its children)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, shell=shell, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{cmd if isinstance(cmd, str) else shlex.join(cmd)}: exit {code}: {err.strip()[-2000:]}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_mb": usage.ru_maxrss / 1024.0}


def animator_cmd(motion: str, fps: str, size: str, out: Path, stats: Path, extra: list[str]) -> list[str]:
    cmd = [sys.executable, "-m", "animator", "examples/characters/char1",
           "--motion", f"examples/config/motion/{motion}.yaml",
           "--retarget", f"examples/config/retarget/{RETARGET.get(motion, 'fair1_ppf')}.yaml",
           "-o", str(out), "--size", size, "--stats", str(stats)]
    if fps != "default":
        cmd += ["--fps", fps]
    return cmd + extra


def run_animator(code_root: Path, motion: str, fps: str, size: str, out_dir: Path, tag: str,
                 extra: list[str]) -> dict:
    out = out_dir / f"{tag}_{motion}.gif"
    stats = out_dir / f"{tag}_{motion}.json"
    env = dict(os.environ, PYTHONPATH=str(code_root))
    r = timed(animator_cmd(motion, fps, size, out, stats, extra), AD, env)
    s = json.loads(stats.read_text())
    data = out.read_bytes()
    r.update(bytes=len(data), md5=hashlib.md5(data).hexdigest(), frames=s["frames"],
             stages={k: float(v) for k, v in s["timings_ms"].items()}, path=out)
    return r


def pillow_floor(gif: Path) -> dict:
    """Seconds Pillow's ``save_all`` takes to write the frames of ``gif`` (decoded first, one
    palette, the same transparency, delays and loop), and the bytes it writes."""
    from PIL import GifImagePlugin, Image, ImageSequence

    GifImagePlugin.LOADING_STRATEGY = GifImagePlugin.LoadingStrategy.RGB_AFTER_DIFFERENT_PALETTE_ONLY
    with Image.open(gif) as im:
        info = dict(im.info)
        frames, delays = [], []
        for fr in ImageSequence.Iterator(im):
            delays.append(fr.info.get("duration", 0))
            frames.append(fr.copy())
    kw = {"save_all": True, "append_images": frames[1:], "duration": delays, "loop": info.get("loop", 0),
          "disposal": 2}
    if "transparency" in info:
        kw["transparency"] = info["transparency"]
    buf = io.BytesIO()
    t0 = time.perf_counter()
    c0 = time.process_time()
    frames[0].save(buf, "GIF", **kw)
    return {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "bytes": len(buf.getvalue()),
            "frames": len(frames), "mode": frames[-1].mode}


def pillow_floor_in_child(gif: Path) -> dict:
    """:func:`pillow_floor` in a process of its own, so that this one never holds the decoded
    frames (a contender started later would count them in its peak memory: it is forked from here)."""
    out = subprocess.run([sys.executable, __file__, "--floor-of", str(gif)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


#: Run in a child with PYTHONPATH at a code root: CPU seconds per stage of one render, each stage
#: alone on one thread (rasterising and GIF compression otherwise overlap on worker threads, which
#: blurs a per-stage split). Works with any of our revisions: it only relies on animator.render,
#: rasterize.rasterize and the GIF module's encode_gif and _lzw (animator.formats.gif, before that
#: animator.encode), which all have kept their signatures.
STAGES_CHILD = r"""
import json, os, sys, time
c0 = time.process_time()
import animator, animator.api, animator.rasterize as R
try:
    import animator.formats.gif as E
except ImportError:  # a revision before animator/formats/
    import animator.encode as E
imports = time.process_time() - c0
motion, fps, w, h = sys.argv[1:5]
t = time.process_time()
ch = animator.load_character("examples/characters/char1")
mc = animator.load_motion_config(f"examples/config/motion/{motion}.yaml")
rc = animator.load_retarget_config(f"examples/config/retarget/{sys.argv[5]}.yaml")
load = time.process_time() - t
cap = {}
real_r, real_e = R.rasterize, E.encode_gif
def spy_r(*a, **k):
    cap["r"] = (a, k)
    return real_r(*a, **k)
def spy_e(frames, *a, **k):
    cap["e"] = (a, k)
    return real_e(frames, *a, **k)
R.rasterize, E.encode_gif = spy_r, spy_e
opts = animator.RenderOptions(width=int(w), height=int(h), fps=fps if fps == "native" else float(fps), threads=1)
wall_clock = time.perf_counter
time.perf_counter = time.thread_time  # render's stage clock counts this thread's CPU, not the wall
res = animator.render(ch, mc, rc, opts)
time.perf_counter = wall_clock
R.rasterize, E.encode_gif = real_r, real_e
st = res.timings_ms
out = {"imports": imports * 1e3, "load": load * 1e3}
for k in ("retarget", "setup", "deform", "sprite"):
    out[k] = st.get(k, 0.0)
best = {}
def keep(stage, t):
    best[stage] = min(best.get(stage, 1e9), time.process_time() - t)
for _ in range(2):  # best of two: the machine is shared
    a, k = cap["r"]
    t = time.process_time()
    frames = list(real_r(*a, **dict(k, threads=1)))
    keep("rasterize", t)
    a, k = cap["e"]
    lzw, blocks = E._lzw, []
    E._lzw = lambda b, bits=8: blocks.append((b, bits)) or b""
    t = time.process_time()
    real_e(iter(frames), *a, **dict(k, threads=1))
    keep("gif deltas", t)
    E._lzw = lzw
    t = time.process_time()
    for b, bits in blocks:
        lzw(b, bits)
    keep("gif LZW", t)
    del frames
out.update({k: v * 1e3 for k, v in best.items()})
print(json.dumps(out))
"""


def stage_cpu(code_root: Path, motion: str, fps: str, size: str) -> dict[str, float]:
    """CPU ms per stage of one render with the code at ``code_root`` (see :data:`STAGES_CHILD`)."""
    w, h = size.lower().split("x")
    env = dict(os.environ, PYTHONPATH=str(code_root), OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", STAGES_CHILD, motion, fps if fps != "default" else "25", w, h,
                          RETARGET.get(motion, "fair1_ppf")], cwd=AD, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"stage timing failed: {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def write_scene(folder: Path, size: str) -> Path:
    """A two-character scene file (char1 + dab, char2 + jumping jacks, a gradient background)."""
    import numpy as np
    from PIL import Image

    w, h = (int(v) for v in size.lower().split("x"))
    y, x = np.mgrid[0:h, 0:w]
    sky = np.dstack([x * 0 + 90, 140 + y * 80 // h, 200 - x * 60 // w]).astype(np.uint8)
    Image.fromarray(sky).save(folder / "sky.png")
    ex = AD / "examples"
    chars = []
    for name, motion, retarget, x0 in (("char1", "dab", "fair1_ppf", -0.4),
                                       ("char2", "jumping_jacks", "cmu1_pfp", 0.4)):
        text = (ex / "config" / "retarget" / f"{retarget}.yaml").read_text()
        (folder / f"{name}.yaml").write_text(text.replace("char_starting_location: [0.0, 0.0, -0.5]",
                                                          f"char_starting_location: [{x0}, 0.0, -0.5]"))
        chars.append({"character_cfg": str(ex / "characters" / name / "char_cfg.yaml"),
                      "motion_cfg": str(ex / "config" / "motion" / f"{motion}.yaml"),
                      "retarget_cfg": str(folder / f"{name}.yaml")})
    scene = {"scene": {"ANIMATED_CHARACTERS": chars},
             "view": {"WINDOW_DIMENSIONS": [w, h], "BACKGROUND_IMAGE": str(folder / "sky.png")},
             "controller": {"MODE": "video_render", "OUTPUT_VIDEO_PATH": str(folder / "scene.gif")}}
    (folder / "scene.yaml").write_text(json.dumps(scene, indent=1))  # JSON is YAML
    return folder / "scene.yaml"


def run_scene(scene: Path, fps: str, out_dir: Path) -> dict:
    stats = out_dir / "scene_stats.json"
    cmd = [sys.executable, "-m", "animator", str(scene), "-o", str(out_dir / "scene.gif"), "--stats", str(stats)]
    if fps != "default":
        cmd += ["--fps", fps]
    r = timed(cmd, AD, dict(os.environ, PYTHONPATH=str(REPO)))
    s = json.loads(stats.read_text())
    r.update(bytes=s["bytes"], frames=s["frames"], stages={k: float(v) for k, v in s["timings_ms"].items()})
    return r


def median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline-ref", metavar="REF",
                    help="also time the code at this git ref (e.g. 769e06a), A/B in turn")
    ap.add_argument("--peer", metavar="CMD", help="also time this shell command (another renderer), in turn")
    ap.add_argument("--peer-output", metavar="FILE", help="the file --peer writes (its size is reported)")
    ap.add_argument("--peer-cwd", metavar="DIR", default=".", help="working directory of --peer (default: here)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each contender per row; medians printed (3)")
    ap.add_argument("--motion", action="append", help="clip(s) of char1 (default dab); repeat the flag for more")
    ap.add_argument("--fps", default="native", help="native (default: every BVH frame), default, or a number")
    ap.add_argument("--size", default="500x500")
    ap.add_argument("--args", default="", help="extra animator options for ours and the baseline, e.g. '--margin 80'")
    ap.add_argument("--target", type=float, default=3.0, help="speed-up over the baseline to report as met (3)")
    ap.add_argument("--no-floor", action="store_true", help="skip Pillow's save_all floor")
    ap.add_argument("--stages", action="store_true", help="also print CPU ms per stage, each stage alone on one "
                    "thread, for ours and the baseline (where the time goes)")
    ap.add_argument("--keep", help="keep the outputs in this folder")
    ap.add_argument("--json", help="also write the figures to this JSON file")
    ap.add_argument("--scene", action="store_true", help="also time a two-character scene file (see above)")
    ap.add_argument("--floor-of", metavar="GIF", help=argparse.SUPPRESS)  # pillow_floor_in_child's process
    args = ap.parse_args(argv)
    if args.floor_of:
        print(json.dumps(pillow_floor(Path(args.floor_of))))
        return 0

    out_dir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="animator-bench-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    extra = shlex.split(args.args)
    motions = args.motion or ["dab"]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average at start {load_avg()}", flush=True)
    build_kernel(REPO)
    compile_tree(REPO)  # bytecode for ours as for the baseline: each process loads what an image holds
    base = Baseline(args.baseline_ref) if args.baseline_ref else None
    if base:
        print(f"baseline: {args.baseline_ref} ({base.commit}) in a worktree at {base.dir}", flush=True)
    report: dict = {"load_start": load_avg(), "rows": []}
    try:
        for motion in motions:
            contenders: list[tuple[str, object]] = [("ours", REPO)]
            if base:
                contenders.append(("base", base.dir))
            if args.peer:
                contenders.append(("peer", None))
            runs: dict[str, list[dict]] = {name: [] for name, _ in contenders}
            floors = []
            for rep in range(max(1, args.repeat)):
                k = rep % len(contenders)
                for name, root in contenders[k:] + contenders[:k]:  # rotate who goes first
                    if name == "peer":
                        r = timed(args.peer, Path(args.peer_cwd), shell=True)
                        if args.peer_output and Path(args.peer_output).exists():
                            r["bytes"] = Path(args.peer_output).stat().st_size
                    else:
                        r = run_animator(root, motion, args.fps, args.size, out_dir, name, extra)  # type: ignore[arg-type]
                    r["load"] = load_avg()
                    runs[name].append(r)
                if not args.no_floor:  # timed in every round too, as the machine's speed drifts
                    floors.append(pillow_floor_in_child(runs["ours"][0]["path"]))
            row = {"motion": motion, "fps": args.fps, "size": args.size, "args": args.args, "runs": runs}
            ours = runs["ours"]
            print(f"\nchar1 + {motion}, fps {args.fps}, {args.size}{' ' + args.args if args.args else ''}: "
                  f"{ours[0]['frames']} frames, median of {len(ours)} whole processes each, in turn")
            print(f"{'':<8}{'wall s':>8}{'CPU s':>8}{'peak MB':>9}{'bytes':>12}   load(1,5,15) at its runs")
            summary = {}
            for name, rs in runs.items():
                b = rs[-1].get("bytes")
                summary[name] = {"wall_s": median(rs, "wall_s"), "cpu_s": median(rs, "cpu_s"),
                                 "peak_mb": max(r["peak_mb"] for r in rs), "bytes": b}
                loads = "; ".join(r["load"].split()[0] for r in rs)
                print(f"{name:<8}{summary[name]['wall_s']:>8.3f}{summary[name]['cpu_s']:>8.3f}"
                      f"{summary[name]['peak_mb']:>9.0f}{(f'{b:,}' if b else '-'):>12}   {loads}")
            if not args.no_floor:
                floor = {**floors[-1], "wall_s": median(floors, "wall_s"), "cpu_s": median(floors, "cpu_s")}
                summary["pillow"] = floor
                print(f"{'pillow':<8}{floor['wall_s']:>8.3f}{floor['cpu_s']:>8.3f}{'':>9}{floor['bytes']:>12,}   "
                      f"Pillow's save_all of our {floor['frames']} decoded frames (the floor: GIF writing alone)")
            for name, rs in runs.items():
                if name != "peer":
                    st = {k: statistics.median(r["stages"][k] for r in rs) for k in rs[0]["stages"]}
                    print(f"  {name} stage ms (median): " + ", ".join(f"{k} {v:.0f}" for k, v in st.items()))
                    summary[name]["stages_ms"] = st
            s = summary["ours"]
            if "pillow" in summary:
                print(f"  ours / Pillow's save_all alone: {s['wall_s'] / summary['pillow']['wall_s']:.2f}x the time "
                      f"(ours renders too), GIF {s['bytes'] / summary['pillow']['bytes']:.2f}x the bytes")
            for other in ("base", "peer"):
                if other in summary:
                    o = summary[other]
                    line = (f"  {other} / ours: wall {o['wall_s'] / s['wall_s']:.2f}x, "
                            f"CPU {o['cpu_s'] / s['cpu_s']:.2f}x, peak memory {o['peak_mb'] / s['peak_mb']:.2f}x")
                    if o.get("bytes"):
                        line += f", GIF bytes {o['bytes'] / s['bytes']:.3f}x"
                    print(line)
            if "base" in summary:
                o = summary["base"]
                same = runs["ours"][-1]["md5"] == runs["base"][-1]["md5"]
                speed = o["wall_s"] / s["wall_s"]
                print(f"  target: whole process >= {args.target:g}x faster than {args.baseline_ref}: "
                      f"{'met' if speed >= args.target else 'MISSED'} ({speed:.2f}x); GIF no larger: "
                      f"{'met' if s['bytes'] <= o['bytes'] else 'MISSED'} ({s['bytes']:,} vs {o['bytes']:,} bytes, "
                      f"{'byte-identical' if same else 'different bytes'}); peak memory no higher: "
                      f"{'met' if s['peak_mb'] <= o['peak_mb'] else 'MISSED'}")
            if args.stages:
                roots = [("ours", REPO)] + ([("base", base.dir)] if base else [])
                cpu = {name: stage_cpu(root, motion, args.fps, args.size) for name, root in roots}
                print(f"  CPU ms per stage, each alone on one thread (load average {load_avg()}):")
                print(f"  {'stage':<12}" + "".join(f"{name:>9}" for name, _ in roots)
                      + ("   base/ours" if base else ""))
                for stage in cpu["ours"]:
                    line = f"  {stage:<12}" + "".join(f"{cpu[name].get(stage, 0):>9.0f}" for name, _ in roots)
                    if base and cpu["ours"][stage] > 0:
                        line += f"   {cpu['base'].get(stage, 0) / cpu['ours'][stage]:>8.2f}x"
                    print(line)
                tot = {name: sum(v.values()) for name, v in cpu.items()}
                print(f"  {'sum':<12}" + "".join(f"{tot[name]:>9.0f}" for name, _ in roots)
                      + (f"   {tot['base'] / tot['ours']:>8.2f}x" if base else ""))
                summary["stages_cpu_ms"] = cpu
            row["summary"] = summary
            report["rows"].append(row)
            if args.scene and motion == motions[0]:
                scene = write_scene(out_dir, args.size)
                runs_s = [run_scene(scene, args.fps, out_dir) for _ in range(max(1, args.repeat))]
                sc = {"wall_s": median(runs_s, "wall_s"), "cpu_s": median(runs_s, "cpu_s"),
                      "peak_mb": max(r["peak_mb"] for r in runs_s), "bytes": runs_s[-1]["bytes"],
                      "frames": runs_s[-1]["frames"],
                      "stages_ms": {k: statistics.median(r["stages"][k] for r in runs_s) for k in runs_s[0]["stages"]}}
                print(f"scene   {sc['wall_s']:>8.2f}{sc['cpu_s']:>8.2f}{sc['peak_mb']:>9.0f}{sc['bytes']:>12,}   "
                      f"char1 + dab and char2 + jumping jacks on a background, {sc['frames']} frames "
                      f"({sc['wall_s'] / s['wall_s']:.2f}x ours' wall for one character)")
                print("  scene stage ms (median): " + ", ".join(f"{k} {v:.0f}" for k, v in sc["stages_ms"].items()))
                row["scene"] = sc
    finally:
        if base:
            base.close()
        if not args.keep:
            shutil.rmtree(out_dir, ignore_errors=True)
    report["load_end"] = load_avg()
    print(f"\nload average at end {report['load_end']}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
