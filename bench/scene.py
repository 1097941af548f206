"""Scene bench: a page scene of 3 characters, one motion each, 500x500 GIF, beside three single renders of
the same characters with the same motions (500x500 GIF each), in the same run.

The page: tests/fixtures/scene_photo.py's paper, 750x750, with char1, char2 and char4 pasted at
different sizes (char2 partly in front of char1); each character is cut from the photo as the app
cuts it. Contenders, in turn, the order rotating every repeat, each in this process:

* ``scene``: :func:`animator.page_scene.render_page_scene` on the inpainted page (OpenCV NS);
* ``scene-colour``: the same scene on a plain colour (no inpainting);
* ``singles``: :func:`animator.render` of each character alone (its whole canvas, transparent), the
  three one after the other (their sum is the figure).

Printed: the median wall time (ms) of each, the scene's stage timings, frame counts, file sizes,
the load average, and the ratio scene / singles. Asserts nothing.

    python bench/scene.py [--repeat 3] [--threads 1]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import animator  # noqa: E402
from animator.auto_retarget import configs_for  # noqa: E402
from animator.page_scene import Background, PageCharacter, PageScene, render_page_scene  # noqa: E402
from tests.fixtures.scene_photo import cut_out, make_scene_photo  # noqa: E402

MOTIONS = Path(__file__).resolve().parents[1] / "tests/fixtures/animated_drawings/examples/config/motion"
LAYOUT = (("char1", 0.62, 60, 250), ("char4", 0.70, 440, 300), ("char2", 0.75, 250, 440))
CLIPS = ("dab.yaml", "jumping_jacks.yaml", "wave_hello.yaml")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="RenderOptions.threads (1: as in the app's pool)")
    args = ap.parse_args()
    photo, pasted = make_scene_photo(LAYOUT, size=(750, 750))
    chars = []
    for p, clip in zip(pasted, CLIPS):
        c, origin = cut_out(photo, p)
        chars.append(PageCharacter(c, *configs_for(MOTIONS / clip, None), origin=origin, name=p.name))
    page = PageScene(chars, (750, 750), Background("page", image=photo))
    plain = PageScene(chars, (750, 750), Background("colour", colour=(250, 246, 236)))
    opts = animator.RenderOptions(width=500, height=500, threads=args.threads)

    def scene():
        return render_page_scene(page, opts)

    def scene_colour():
        return render_page_scene(plain, opts)

    def singles():
        return [animator.render(c.character, c.motion_cfg, c.retarget_cfg, opts) for c in chars]

    contenders = {"scene": scene, "scene-colour": scene_colour, "singles": singles}
    times: dict[str, list[float]] = {k: [] for k in contenders}
    results: dict[str, object] = {}
    loads = []
    for r in range(args.repeat):
        names = list(contenders)
        names = names[r % 3:] + names[:r % 3]
        for name in names:
            loads.append(os.getloadavg()[0])
            t = time.perf_counter()
            results[name] = contenders[name]()
            times[name].append((time.perf_counter() - t) * 1e3)
    med = {k: statistics.median(v) for k, v in times.items()}
    s = results["scene"]
    print(f"load average during the run: {min(loads):.1f} to {max(loads):.1f}; {os.cpu_count()} CPUs; "
          f"threads {args.threads}; {args.repeat} repeats (median ms)")
    print(f"scene        {med['scene']:9.0f} ms  {s.frame_count} frames  {len(s.data) / 1e6:.2f} MB  500x500 GIF, "
          f"inpainted page")
    sc = results["scene-colour"]
    print(f"scene-colour {med['scene-colour']:9.0f} ms  {sc.frame_count} frames  {len(sc.data) / 1e6:.2f} MB")
    singles_out = results["singles"]
    print(f"singles      {med['singles']:9.0f} ms  " + ", ".join(
        f"{c.name} {r.frame_count} frames {len(r.data) / 1e6:.2f} MB" for c, r in zip(chars, singles_out)))
    print("scene stages (last run, ms): " + ", ".join(f"{k} {v:.0f}" for k, v in s.timings_ms.items()))
    print(f"scene / singles: {med['scene'] / med['singles']:.2f}; scene-colour / singles: "
          f"{med['scene-colour'] / med['singles']:.2f}")


if __name__ == "__main__":
    main()
