"""Same output A/B: renders a set of cases with this tree and with our code at a git ref, and says
which files differ (sizes and SHA-1 of each side).

For a change that must not move a pixel (a compiled kernel, a faster step): the cases cover the
four AnimatedDrawings characters, five motions, 160-500 px, GIF with a transparent background and
on white, and WebP, rendered in one process each (``processes=1``; the CLI's split into processes
is byte for byte the same file, see ``tests/animator/test_parallel.py``). The fixtures are this
tree's for both sides. Prints a table and, last, how many cases differ; exits 1 if any does.

    python bench/identical.py --baseline-ref 41410c1
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from common import REPO
from worktree import Baseline

AD = REPO / "tests" / "fixtures" / "animated_drawings" / "examples"
#: (character, motion, retarget config, canvas side in px)
CASES = [("char1", "dab", "fair1_ppf", 500), ("char2", "jumping_jacks", "cmu1_pfp", 300),
         ("char3", "zombie", "fair1_ppf", 256), ("char4", "wave_hello", "fair1_ppf", 400),
         ("char1", "jumping", "fair1_ppf", 160), ("char2", "dab", "fair1_ppf", 500)]
#: (format, background) per case
OUTPUTS = [("gif", None), ("gif", (255, 255, 255)), ("webp", None)]

#: Run in a fresh interpreter with the tree under test first on sys.path: one JSON line per render.
RENDER = r"""
import hashlib, json, sys
sys.path.insert(0, sys.argv[1])
import animator
from animator.api import RenderOptions
cases, outputs, ad = json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
assert animator.__file__.startswith(sys.argv[1]), animator.__file__
for char, motion, retarget, size in cases:
    ch = animator.load_character(f"{ad}/characters/{char}")
    mc = animator.load_motion_config(f"{ad}/config/motion/{motion}.yaml")
    rc = animator.load_retarget_config(f"{ad}/config/retarget/{retarget}.yaml")
    for fmt, bg in outputs:
        res = animator.render(ch, mc, rc, RenderOptions(width=size, height=size, format=fmt,
                                                        background=None if bg is None else tuple(bg), processes=1))
        print(json.dumps([char, motion, size, fmt, bg, len(res.data), hashlib.sha1(res.data).hexdigest()]))
"""


def renders(tree: Path) -> list[list]:
    out = subprocess.run([sys.executable, "-c", RENDER, str(tree), json.dumps(CASES), json.dumps(OUTPUTS), str(AD)],
                         cwd="/", capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-ref", required=True, help="git ref of our code to compare with")
    args = parser.parse_args()
    with Baseline(args.baseline_ref) as base:
        theirs = renders(base.dir)
        ours = renders(REPO)
    print(f"this tree against {args.baseline_ref} ({base.commit}): {len(ours)} renders")
    print(f"{'case':38} {'ours bytes':>11} {'base bytes':>11}  same")
    differ = 0
    for a, b in zip(ours, theirs):
        same = a[5:] == b[5:]
        differ += not same
        case = f"{a[0]} {a[1]} {a[2]}px {a[3]}{' on white' if a[4] else ''}"
        print(f"{case:38} {a[5]:>11,} {b[5]:>11,}  {'yes' if same else 'NO (' + a[6][:8] + ' vs ' + b[6][:8] + ')'}")
    print(f"{differ} of {len(ours)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
