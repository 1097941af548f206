"""The command line as a new user met it (issue 33 items 7-10), run as a person runs it.

Each case runs ``python -m animator`` in a subprocess on AnimatedDrawings' char1 and checks the exit
code, the one line on stderr and the file written (read back by Pillow or zipfile, not by the code
that wrote it). The video window is checked on a real H.264 file made with ffmpeg.
"""
from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.conftest import AD_ROOT, REPO

CHAR1 = str(AD_ROOT / "examples" / "characters" / "char1")
SMALL = ["--size", "64", "--max-frames", "3", "-q"]


def animator(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "animator", *args], cwd=cwd or REPO, capture_output=True,
                          text=True, timeout=300, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


# --- item 7: motions by name -------------------------------------------------------------------------

def test_a_motion_of_the_library_by_its_name(tmp_path):
    out = tmp_path / "dab.gif"
    r = animator(CHAR1, "--motion", "dab", "-o", str(out), *SMALL)
    assert r.returncode == 0, r.stderr
    with Image.open(out) as im:
        assert im.format == "GIF" and im.n_frames == 3


def test_a_name_the_library_lacks_says_the_nearest_and_how_to_list(tmp_path):
    r = animator(CHAR1, "--motion", "dabb", "-o", str(tmp_path / "x.gif"), *SMALL)
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "did you mean dab" in r.stderr and "--list-motions" in r.stderr
    assert not (tmp_path / "x.gif").exists()


def test_list_motions_names_what_get_motions_names():
    r = animator("--list-motions")
    assert r.returncode == 0, r.stderr
    names = [line.split()[0] for line in r.stdout.splitlines()[:-1]]
    import yaml
    library = yaml.safe_load((REPO / "motions" / "library.yaml").read_text())["motions"]
    assert sorted(names) == sorted(library) and len(names) == 36
    assert "36 motions" in r.stdout.splitlines()[-1]


# --- item 8: the output's name and its format agree ---------------------------------------------------

@pytest.mark.parametrize("name, fmt, says", [
    ("x.png", "sheet", "sheet.zip"),       # was: a zip named .png, exit 0
    ("x.mov", None, "names no format"),    # was: a GIF named .mov
    ("x.zip", None, "--format"),           # frames or sheet?
    ("x.gif", "mp4", "x.mp4"),
])
def test_a_name_that_disagrees_with_the_format_is_refused(tmp_path, name, fmt, says):
    out = tmp_path / name
    r = animator(CHAR1, "--motion", "dab", "-o", str(out), *SMALL, *(["--format", fmt] if fmt else []))
    assert r.returncode == 2, r.stderr
    assert says in r.stderr, r.stderr
    assert not out.exists()


@pytest.mark.parametrize("name, fmt, member", [("x.sheet.zip", None, "sheet.png"), ("x.frames.zip", None, "frames.json"),
                                               ("x.zip", "sheet", "sheet.png"), ("x.png", "apng", None),
                                               ("x.joints.json", None, None)])
def test_the_servers_download_names_work(tmp_path, name, fmt, member):
    out = tmp_path / name
    r = animator(CHAR1, "--motion", "dab", "-o", str(out), *SMALL, *(["--format", fmt] if fmt else []))
    assert r.returncode == 0, r.stderr
    if member:
        with zipfile.ZipFile(out) as z:
            assert member in z.namelist(), z.namelist()
    elif name.endswith(".png"):
        with Image.open(out) as im:
            assert im.format == "PNG" and getattr(im, "n_frames", 1) == 3
    else:
        assert len(json.loads(out.read_text())["frames"]) == 3


# --- item 9: the subcommand is in --help --------------------------------------------------------------

def test_help_names_motion_from_video_and_the_list():
    r = animator("--help")
    usage = r.stdout.split("\n\n")[0]
    assert "motion-from-video" in usage and "--list-motions" in usage and "--start" in usage


def test_motion_from_video_keeps_the_native_logs_off_the_terminal(tmp_path):
    """MediaPipe's and TensorFlow Lite's lines are written to file descriptor 2 by C++: they go to a
    scratch file unless -v; Python's own stderr still reaches the terminal."""
    program = ("import os, sys\nfrom animator.video.motion import native_logs\n"
               "with native_logs():\n    os.write(2, b'W0000 inference_feedback_manager noise\\n')\n"
               "print('after', file=sys.stderr)\n"
               "with native_logs(shown=True):\n    os.write(2, b'shown with -v\\n')\n")
    r = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60,
                       env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert "noise" not in r.stderr and "after" in r.stderr and "shown with -v" in r.stderr


# --- item 10: a window of a longer video --------------------------------------------------------------

def _video(path: Path, seconds: float, fps: float = 10.0) -> Path:
    import imageio_ffmpeg

    gen = imageio_ffmpeg.write_frames(str(path), (64, 48), fps=fps, codec="libx264", quality=8,
                                      macro_block_size=16, ffmpeg_log_level="error")
    gen.send(None)
    for k in range(int(round(seconds * fps))):
        gen.send(np.full((48, 64, 3), (k * 7) % 255, np.uint8))
    gen.close()
    return path


def test_a_longer_video_uses_its_first_seconds_or_the_window_asked_for(tmp_path):
    from animator.errors import VideoError
    from animator.video.decode import VideoLimits, read_window

    video = _video(tmp_path / "long.mp4", 3.0)
    limits = VideoLimits(max_seconds=1.0)
    info, used, fps, frames = read_window(video, limits)          # was: refused ("3.0 s long; at most 1 s")
    assert (used.start_s, used.end_s, used.chosen) == (0.0, 1.0, False)
    assert len(list(frames)) in (10, 11)
    assert "the first 1 s" in used.describe() and "3.0 s video" in used.describe()
    _, used, _, frames = read_window(video, limits, start_s=1.5, end_s=2.5)
    assert (used.start_s, used.end_s, used.chosen) == (1.5, 2.5, True)
    assert len(list(frames)) in (10, 11)
    assert used.describe() == "1.5-2.5 s of the 3.0 s video"
    with pytest.raises(VideoError, match="at most 1 s"):
        read_window(video, limits, start_s=0.5, end_s=2.0)
    with pytest.raises(VideoError, match="only 3.00 s long"):
        read_window(video, limits, start_s=4.0)


def test_a_video_a_hair_over_the_limit_is_not_told_a_contradiction(tmp_path):
    """A 20.02 s video was told "20.0 s long; at most 20 s are accepted": now its first 20 s are used."""
    from animator.video.decode import VideoInfo, VideoLimits, window

    used = window(VideoInfo((640, 480), 30.0, 20.02), VideoLimits())
    assert (used.start_s, used.end_s) == (0.0, 20.0)
    assert used.describe() == "0-20 s of the 20.0 s video (the first 20 s: choose a start and end to use another part)"
    whole = window(VideoInfo((640, 480), 30.0, 8.4), VideoLimits())
    assert whole.whole and whole.describe() == "the whole 8.4 s video"


def test_motion_from_video_refuses_a_window_too_long_in_one_line(tmp_path):
    video = _video(tmp_path / "long.mp4", 3.0)
    r = animator("motion-from-video", str(video), "-o", str(tmp_path / "x.bvh"), "--start", "0", "--end", "3",
                 "--max-seconds", "1")
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert "at most 1 s" in r.stderr


def test_motion_from_video_of_a_person_says_one_line(tmp_path):
    """Item 9 on the real pose model: the one useful line came after about 45 lines of MediaPipe's logs."""
    pytest.importorskip("mediapipe")
    from tests.support.person_video import PHOTO, frame, placements, write_video

    photo = Image.open(PHOTO).convert("RGB")
    video = write_video(tmp_path / "her.mp4", [frame(photo, *p) for p in placements(30)])  # 2 s at 15 fps
    r = animator("motion-from-video", str(video), "-o", str(tmp_path / "her.bvh"), "--start", "0.5")
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert "her.bvh" in r.stderr and "0.5-2 s of the 2.0 s video" in r.stderr
    assert (tmp_path / "her.bvh").read_text().startswith("HIERARCHY")
