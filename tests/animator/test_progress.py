"""Progress of a render: the callback's figures, and the command line's bar on a terminal only."""
from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
import time

import pytest

import animator
from animator.cli.progress_bar import ProgressBar, line
from animator.parallel import runs
from tests.conftest import AD_ROOT, REPO

CHAR = "examples/characters/char1"
DAB = "examples/config/motion/dab.yaml"
FAIR = "examples/config/retarget/fair1_ppf.yaml"


def _render(processes: int, fmt: str = "gif") -> tuple[list[tuple[int, int]], animator.RenderResult]:
    character = animator.load_character(AD_ROOT / CHAR)
    motion = animator.load_motion_config(AD_ROOT / DAB)
    retarget = animator.load_retarget_config(AD_ROOT / FAIR)
    calls: list[tuple[int, int]] = []
    result = animator.render(character, motion, retarget,
                             animator.RenderOptions(width=96, height=96, max_frames=60, processes=processes,
                                                    format=fmt),
                             progress=lambda done, total: calls.append((done, total)))
    return calls, result


@pytest.mark.parametrize("processes", [1, 2])
def test_progress_counts_every_frame_from_zero_to_the_clip(processes):
    calls, result = _render(processes)
    total = result.frame_count
    assert calls[0] == (0, total) and calls[-1] == (total, total)
    assert all(t == total for _, t in calls)
    done = [d for d, _ in calls]
    assert done == sorted(done), "progress went backwards"
    _, own = runs(total, processes)[0]  # the frames this process makes itself, from 0
    assert set(range(own + 1)) <= set(done), "frames made in this process are each reported"


def test_webp_reports_progress_too():
    calls, result = _render(1, "webp")
    assert calls[-1] == (result.frame_count, result.frame_count) and len(calls) > result.frame_count


def test_the_bar_line_shows_frames_percent_and_time_left():
    assert line(0, 120, 0.0) == "[" + "." * 30 + "]   0/120 frames   0%"
    text = line(30, 120, 3.0, "dab")
    assert text.startswith("dab [" + "#" * 8 + "." * 22 + "]")
    assert " 30/120 frames  25%" in text and "~9 s left" in text


def test_the_bar_is_quiet_off_a_terminal_and_throttled_on_one():
    plain = io.StringIO()
    bar = ProgressBar(plain)
    for i in range(11):
        bar(i, 10)
    assert plain.getvalue() == ""

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    now = [0.0]
    tty = Tty()
    bar = ProgressBar(tty, clock=lambda: now[0])
    for i in range(10):          # ten frames within one redraw period: drawn once
        bar(i, 10)
    assert tty.getvalue().count("\r[") == 1
    now[0] = 1.0
    bar(10, 10)                  # the last frame is drawn, then the line erased
    out = tty.getvalue()
    assert out.count("\r[") == 2 and "10/10 frames" in out and out.endswith("\r\033[K")


def _cli_on_a_terminal(*extra: str, tmp_path) -> tuple[int, str]:
    """Run the command line with stderr on a pseudo-terminal; what the terminal received."""
    master, slave = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "animator", CHAR, "-m", DAB, "-r", FAIR, "-o",
                             str(tmp_path / "dab.gif"), "--size", "160", *extra],
                            cwd=AD_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=slave)
    os.close(slave)
    chunks = []
    t_end = time.monotonic() + 120
    while time.monotonic() < t_end:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                data = os.read(master, 4096)
            except OSError:  # the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(master)
    return proc.wait(30), b"".join(chunks).decode(errors="replace")


def test_cli_draws_a_bar_on_a_terminal_and_not_with_q(tmp_path):
    code, shown = _cli_on_a_terminal("--processes", "1", tmp_path=tmp_path)
    assert code == 0, shown
    frames = [part.split(" frames")[0].rsplit(" ", 1)[-1] for part in shown.split("\r[")[1:]]
    assert len(set(frames)) >= 2, f"the bar did not move: {shown!r}"
    assert shown.endswith("\r\033[K"), "the bar is erased at the end"
    code, shown = _cli_on_a_terminal("--processes", "1", "-q", tmp_path=tmp_path)
    assert code == 0 and "frames" not in shown, shown


def test_cli_piped_stderr_gets_no_bar(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-m", "animator", CHAR, "-m", DAB, "-r", FAIR, "-o", str(tmp_path / "a.gif"),
                        "--size", "96", "--max-frames", "20"], cwd=AD_ROOT, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stderr == "", r.stderr
