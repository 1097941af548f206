#!/usr/bin/env python
"""Motion library benchmark: every library motion rendered on char1, and (``--studio``) how soon a
person sees the first 8 previews of their own character after a Save in the studio.

1. The library on char1, in this process, one motion after the other, as the app renders them
   (``app.render.steps.render_motion``: the library's configs, derived ones for ``retarget: auto``)
   on the app's default render settings (``DOODLEPOD_RENDER_SIZE``, 25 fps GIF, one thread: one
   render process of the pool); then the same at the reference previews' size (128 px, at most 40
   frames, the thumbnail mesh: what ``GET /motions/<name>/preview.gif`` makes once per motion).
   Prints each motion's wall ms and GIF bytes, the sum and the slowest.
2. ``--studio``: the local stack as ``bench/studio.py`` starts it (a real TorchServe with the fake
   models, so model time is excluded; the app under gunicorn with gevent workers on its default
   settings, as ``make run`` starts it) and a headless Chromium 1280x2000 (the editor and the
   first rows of motions on screen together, as on a big monitor); char1 uploaded in the page,
   then ``--rounds`` times: move a joint, click Save, wait until 8 previews of the new version
   play. Prints the time from the click to the 1st and the 8th preview playing, p50 of the rounds.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import studio as studio_bench
from common import REPO, load_avg, pct

CHAR1 = REPO / "tests" / "fixtures" / "animated_drawings" / "examples" / "characters" / "char1"


def library_on_char1() -> None:
    import animator
    from app.config import load_settings
    from app.motions.library import load_motions
    from app.motions.previews import PREVIEW_FRAMES, PREVIEW_SIDE
    from app.render.pipeline import THUMBNAIL_MESH_CELLS
    from app.render.steps import render_motion

    side = load_settings().render_size
    char = animator.load_character(CHAR1)
    library = load_motions()
    variants = {f"default settings ({side} px GIF, 25 fps)": {"width": side, "height": side, "threads": 1},
                f"reference preview ({PREVIEW_SIDE} px, <= {PREVIEW_FRAMES} frames)":
                    {"width": PREVIEW_SIDE, "height": PREVIEW_SIDE, "max_frames": PREVIEW_FRAMES,
                     "mesh_cells": THUMBNAIL_MESH_CELLS, "threads": 1}}
    for label, options in variants.items():
        rows = []
        for m in library.values():
            t0 = time.perf_counter()
            out = render_motion(char, str(m.motion_cfg), None if m.retarget_cfg is None else str(m.retarget_cfg),
                                animator.RenderOptions(**options))
            rows.append((m.name, (time.perf_counter() - t0) * 1e3, len(out["data"]), out["frame_count"],
                         m.seconds))
        print(f"\nthe library on char1, {label}, one render process:")
        for name, ms, size, frames, seconds in rows:
            print(f"  {name:16s} {ms:7.0f} ms  {frames:4d} frames ({seconds:4.1f} s clip)  {size:9,d} bytes")
        slow = max(rows, key=lambda r: r[1])
        print(f"  all {len(rows)}: sum {sum(r[1] for r in rows) / 1e3:.1f} s, slowest {slow[0]} {slow[1]:.0f} ms, "
              f"median {pct([r[1] for r in rows], 50):.0f} ms", flush=True)


def studio_first_previews(rounds: int, wanted: int = 8) -> None:
    with studio_bench.studio_stack("motions") as (browser, app):
        figures = _rounds(browser, app.url, rounds, wanted)
    print(f"\nstudio, Save -> previews of the new version playing ({rounds} saves, app defaults):")
    for k, label in ((0, "1st preview"), (wanted - 1, f"{wanted}th preview")):
        values = [f[k] for f in figures]
        print(f"  {label:12s} p50 {pct(values, 50):6.0f} ms  max {max(values):6.0f} ms")


def _rounds(browser, url: str, rounds: int, wanted: int) -> list[list[float]]:
    page = browser.new_page(viewport={"width": 1280, "height": 2000}, reduced_motion="reduce")
    page.set_default_timeout(180_000)
    page.goto(f"{url}/studio")
    page.wait_for_selector("body[data-ready=true]")
    if not page.get_by_test_id("token").is_visible():
        page.locator("#token-box summary").click()
    page.get_by_test_id("token").fill(studio_bench.TOKEN)
    page.get_by_test_id("token").dispatch_event("change")
    page.get_by_test_id("upload").set_input_files(str(CHAR1 / "texture.png"))
    page.get_by_test_id("joint-left_elbow").wait_for(state="visible")
    page.evaluate("() => window.scrollTo(0, 0)")
    figures = []
    for i in range(rounds + 1):  # the first round warms the reference previews and the render processes
        try:
            page.wait_for_function(f"() => window.studio.previews().playing.length >= {wanted}")
        except Exception:
            page.screenshot(path="/tmp/bench-motions-timeout.png")
            states = page.evaluate("() => [...document.querySelectorAll('.motion .preview')].map(p => p.dataset.state)")
            sys.exit(f"fewer than {wanted} previews played; card states: {states}; screenshot "
                     "/tmp/bench-motions-timeout.png")
        studio_bench.settle(page)
        box = page.get_by_test_id("joint-left_elbow").bounding_box()
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.keyboard.press("ArrowRight" if i % 2 == 0 else "ArrowLeft")
        generation = page.evaluate("() => window.studio.previews().generation")
        clicked = page.evaluate("() => { document.querySelector('[data-testid=save]').click(); "
                                "return performance.now(); }")
        page.wait_for_function(f"() => window.studio.previews().generation > {generation} && "
                               f"window.studio.previews().playing.length >= {wanted}")
        playing = page.evaluate("() => window.studio.previews().playing")
        times = [t - clicked for t in sorted(playing)[:wanted]]
        if i:
            figures.append(times)
        print(f"round {i}{' (warm-up)' if not i else ''}: 1st preview {times[0]:6.0f} ms, "
              f"{wanted}th {times[-1]:6.0f} ms", flush=True)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--studio", action="store_true", help="also time Save -> first 8 previews in a browser")
    parser.add_argument("--rounds", type=int, default=5, help="saves to time with --studio (default 5)")
    parser.add_argument("--no-library", action="store_true", help="skip the library renders")
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    print(f"commit {commit.stdout.strip()}, load {load_avg()} (1/5/15 min), cores {os.cpu_count()}", flush=True)
    if not args.no_library:
        library_on_char1()
    if args.studio:
        studio_first_previews(args.rounds)
    print(f"\nload at the end: {load_avg()} (1/5/15 min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
