"""Cut motion-capture clips into loops for the motion library (run by hand when clips are added).

    python scripts/cut_motions.py SOURCE_DIR motions/cmu > /tmp/cuts.yaml
    python scripts/cut_motions.py /nowhere motions/loops --library motions/library.yaml --names dab ...

For every ``SOURCE_DIR/<category>/<name>.bvh``: pose char1 with the derived retarget config, pick
the cut of at least 60% of the clip (and 1.5 s) whose last pose is closest to its first
(:func:`animator.loop_seam.best_loop`), and when the gap is still over ``--blend-above`` % of the
character's height, ease the last ``--blend`` frames' rotations (and the root's height) towards the
first frame, so the jump back spreads over a few frames. The cut is written with 2 decimals (0.01
degree, 0.01 cm; enough for a drawing, and smaller files) to ``OUT_DIR/<category>/<name>.bvh``,
then measured again as the library serves it; the measures print as YAML for ``library.yaml``.
With ``--library``, the named motions are cut likewise with their hand-written configs, to
``OUT_DIR/<name>.bvh`` and a motion config ``OUT_DIR/<name>.yaml`` that plays all of it.
Clips captured faster than 30 fps keep every n-th frame (about 30 fps; renders show 25).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import animator  # noqa: E402
from animator.auto_retarget import configs_for  # noqa: E402
from animator.bvh import load_bvh  # noqa: E402
from animator.config import load_motion_config, load_retarget_config  # noqa: E402
from animator.loop_seam import best_loop, character_height_px, loop_gap_pct, step_pct  # noqa: E402
from animator.retarget import retarget  # noqa: E402

CHAR1 = ROOT / "tests" / "fixtures" / "animated_drawings" / "examples" / "characters" / "char1"
#: Root travel (first to last frame, % of the character's height) above which a motion "travels".
TRAVELS_ABOVE_PCT = 20.0


def measure(motion_cfg, retarget_cfg, char) -> tuple[np.ndarray, int, float]:
    """(char1's joint positions per frame, its root joint index, its height in pixels) for a clip."""
    names = [j.name for j in char.skeleton]
    return retarget(char, motion_cfg, retarget_cfg).positions, names.index("root"), character_height_px(char)


def blend_towards_first(bvh, rows: np.ndarray, frames: int) -> np.ndarray:
    """``rows`` (F, C) with every joint's rotation in its last ``frames`` frames turned part of the
    way towards its first-frame rotation (the turn from last to first, scaled down linearly:
    slerp, so Euler angle wrap-around cannot swing a limb), and the root's height eased likewise;
    horizontal root travel is left alone."""
    from scipy.spatial.transform import Rotation

    rows = rows.copy()
    n = len(rows)
    weights = np.array([(frames - k) / (frames + 1) for k in range(frames)])  # last frame first
    for j, chans in enumerate(bvh.channels):
        start = int(bvh.channel_start[j])
        rot = [(start + k, c[0].upper()) for k, c in enumerate(chans) if c.endswith("rotation")]
        if len(rot) == 3:
            cols, order = [c for c, _ in rot], "".join(a for _, a in rot)
            first = Rotation.from_euler(order, rows[0, cols], degrees=True)
            last = Rotation.from_euler(order, rows[n - 1, cols], degrees=True)
            turn = (first * last.inv()).as_rotvec()
            for k, w in enumerate(weights):
                r = Rotation.from_rotvec(w * turn) * Rotation.from_euler(order, rows[n - 1 - k, cols], degrees=True)
                rows[n - 1 - k, cols] = r.as_euler(order, degrees=True)
        if j == 0:
            y = next((start + k for k, c in enumerate(chans) if c.lower() == "yposition"), None)
            if y is not None:
                rows[n - frames:, y] += weights[::-1] * (rows[0, y] - rows[n - 1, y])
    return rows


def write_cut(src: Path, dst: Path, rows: np.ndarray, frame_time: float) -> None:
    text = src.read_text()
    head = text[:text.index("MOTION")]
    body = "\n".join(" ".join(f"{v:.2f}".replace("-0.00", "0.00") for v in r) for r in rows)
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(f"{head}MOTION\nFrames: {len(rows)}\nFrame Time: {frame_time:.7g}\n{body}\n")


def cut(src: Path, dst: Path, motion_cfg, retarget_cfg, char, blend: int, blend_above: float) -> tuple[str, Path]:
    """Cut (and blend) one clip to ``dst``; returns the YAML lines that describe it, and ``dst``."""
    bvh = load_bvh(motion_cfg.bvh_path)
    start, end = motion_cfg.frame_range(bvh.n_frames)
    frame_time = motion_cfg.frame_time or bvh.frame_time
    every = max(1, round(1 / 30 / frame_time))  # keep about 30 fps: renders show 25
    pos, root, height = measure(motion_cfg, retarget_cfg, char)
    pos = pos[::every]
    n = len(pos)
    first, last, gap = best_loop(pos, root, height, max(45, int(0.6 * n)))
    rows = bvh.motion[start:end][::every][first:last + 1]
    blended = gap > blend_above
    if blended:
        rows = blend_towards_first(bvh, rows, blend)
    write_cut(Path(motion_cfg.bvh_path), dst, rows, frame_time * every)
    lines = [f"# {src}: frames {start + first * every}..{start + last * every} every {every}"
             f"{', last %d blended' % blend if blended else ''}; uncut gap {loop_gap_pct(pos, root, height):.2f}"]
    return "\n".join(lines), dst


def report(name: str, comment: str, motion_cfg, retarget_cfg, char) -> None:
    pos, root, height = measure(motion_cfg, retarget_cfg, char)
    travel = float(np.linalg.norm(pos[-1, root] - pos[0, root]) / height * 100)
    print(f"{name}:  {comment}")
    print(f"  loop_gap_pct: {loop_gap_pct(pos, root, height):.2f}  # step {step_pct(pos, root, height):.2f}")
    print(f"  travels: {'true' if travel > TRAVELS_ABOVE_PCT else 'false'}  # root moves {travel:.0f}%")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("source", type=Path, help="a folder of <category>/<name>.bvh clips")
    ap.add_argument("out", type=Path, help="where the cut clips go (<category>/<name>.bvh)")
    ap.add_argument("--library", type=Path, help="also cut these motions of this library.yaml (their hand-written "
                                                 "configs) into OUT/<name>.bvh + <name>.yaml", default=None)
    ap.add_argument("--names", nargs="*", default=(), help="the --library motions to cut")
    ap.add_argument("--blend", type=int, default=8, help="frames eased towards the first (default 8)")
    ap.add_argument("--blend-above", type=float, default=0.5, help="loop gap (%% of height) that needs a blend")
    args = ap.parse_args()
    char = animator.load_character(CHAR1)
    for src in sorted(args.source.glob("*/*.bvh")):
        motion_cfg, retarget_cfg = configs_for(src)
        comment, dst = cut(src, args.out / src.parent.name / src.name, motion_cfg, retarget_cfg, char, args.blend,
                           args.blend_above)
        report(src.stem, comment, *configs_for(dst), char)
    if args.library:
        entries = yaml.safe_load(args.library.read_text())["motions"]
        for name in args.names:
            entry = entries[name]
            motion_cfg = load_motion_config(args.library.parent / entry["motion"])
            retarget_cfg = load_retarget_config(args.library.parent / entry["retarget"])
            comment, dst = cut(Path(entry["motion"]), args.out / f"{name}.bvh", motion_cfg, retarget_cfg, char,
                               args.blend, args.blend_above)
            cfg = yaml.safe_load(Path(motion_cfg.path).read_text())
            cfg.update(filepath=dst.name, start_frame_idx=0, end_frame_idx=None)
            (args.out / f"{name}.yaml").write_text(f"# {name}, cut to loop by scripts/cut_motions.py\n"
                                                   + yaml.safe_dump(cfg, sort_keys=False))
            report(name, comment, load_motion_config(args.out / f"{name}.yaml"), retarget_cfg, char)


if __name__ == "__main__":
    main()
