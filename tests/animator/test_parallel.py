"""A transparent GIF's frames made in several processes: the same file, and no process left behind."""
import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import animator
from animator import RenderOptions, render
from animator.formats.gif import GifWriter, encode_gif, gif_delays
from animator.parallel import MIN_FRAMES_PER_PROCESS, gif_in_processes, runs
from tests.conftest import AD_EXAMPLES, CHARACTERS, CMU, FAIR, REPO
from tests.support import procs, wait

T = 3  # transparent index
PALETTE = np.array([[200, 0, 0], [0, 0, 200], [20, 20, 20]], np.uint8)


def _walking_square(n: int) -> list[np.ndarray]:
    """A square that moves every frame, so that each frame is disposed (the screen is then clear)."""
    out = []
    for k in range(n):
        f = np.full((30, 80), T, np.uint8)
        x = k % 60
        f[5:20, x:x + 15] = k % 3
        out.append(f)
    return out


def _frames_of(frames):
    return lambda a, b: iter(frames[a:b])


@pytest.fixture(autouse=True)
def _alone(monkeypatch, request):
    """These tests fork in pytest's own process, which threads other tests leave behind (a render
    pool's manager thread) may share: what they check is the split and the join, so the process is
    taken as running no other thread; test_a_process_with_other_threads_does_not_fork checks the rule."""
    if request.node.name != "test_a_process_with_other_threads_does_not_fork":
        monkeypatch.setattr(animator.parallel.threading, "active_count", lambda: 1)
    _EARLIER[:] = procs.children(os.getpid())   # other tests' render pools may have children here


#: pytest's children before the running test: theirs, not the test's.
_EARLIER: list[int] = []


def _new_children() -> list[int]:
    return [pid for pid in procs.children(os.getpid()) if pid not in _EARLIER]


def test_runs_are_consecutive_and_never_shorter_than_the_minimum():
    assert runs(100, 2) == [(0, 50), (50, 100)]
    assert runs(101, 3) == [(0, 34), (34, 67), (67, 101)]
    assert runs(2 * MIN_FRAMES_PER_PROCESS, 2) == [(0, MIN_FRAMES_PER_PROCESS), (MIN_FRAMES_PER_PROCESS, 48)]
    assert runs(2 * MIN_FRAMES_PER_PROCESS - 1, 2) == [(0, 2 * MIN_FRAMES_PER_PROCESS - 1)]  # one would be short
    parts = runs(339, 4)
    assert len(parts) == 4 and parts[0][0] == 0 and parts[-1][1] == 339
    assert all(b == c for (_, b), (c, _) in zip(parts, parts[1:]))
    assert min(b - a for a, b in parts) >= MIN_FRAMES_PER_PROCESS
    assert runs(10, 8) == [(0, 10)]


@pytest.mark.parametrize("processes", [2, 3])
def test_runs_joined_are_the_single_process_file(processes):
    frames = _walking_square(90)
    delays = gif_delays(len(frames), 0.04)
    want = encode_gif(frames, PALETTE, T, delays, threads=1)
    got = gif_in_processes(GifWriter(PALETTE, T, delays), _frames_of(frames), len(frames), processes)
    assert got == want
    assert _new_children() == []


def test_a_run_that_ends_on_a_full_screen_is_refused():
    # a still character: nothing turns transparent, no frame is disposed, so a run cannot start afresh
    frames = [np.pad(np.zeros((10, 10), np.uint8), 5, constant_values=T)] * 60
    gif = GifWriter(PALETTE, T, gif_delays(60, 0.04))
    assert gif_in_processes(gif, _frames_of(frames), 60, 2) is None
    assert _new_children() == []


def test_a_failing_child_makes_the_caller_render_in_one_process():
    frames = _walking_square(60)
    parent = os.getpid()

    def frames_of(a, b):
        if os.getpid() != parent:
            raise RuntimeError("broken in the child")
        return iter(frames[a:b])

    gif = GifWriter(PALETTE, T, gif_delays(60, 0.04))
    assert gif_in_processes(gif, frames_of, 60, 2) is None
    assert _new_children() == []


def test_an_error_in_the_parent_kills_the_children():
    frames = _walking_square(60)
    parent = os.getpid()

    def frames_of(a, b):
        if os.getpid() != parent:
            time.sleep(60)  # a child still at work when the parent fails
        elif a == 0:
            raise KeyError("the parent's own run fails")
        return iter(frames[a:b])

    t0 = time.monotonic()
    with pytest.raises(KeyError):
        gif_in_processes(GifWriter(PALETTE, T, gif_delays(60, 0.04)), frames_of, 60, 2)
    assert time.monotonic() - t0 < 30
    assert _new_children() == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_children_die_with_a_killed_parent(tmp_path):
    script = textwrap.dedent("""
        import os, sys, time
        import numpy as np
        from animator.formats.gif import GifWriter, gif_delays
        from animator.parallel import gif_in_processes

        def frames_of(a, b):
            os.write(1, b"ready\\n")  # one write: the three processes' lines cannot interleave
            time.sleep(120)  # parent and children alike: the test kills the parent meanwhile
            return iter([])

        pal = np.zeros((2, 3), np.uint8)
        gif_in_processes(GifWriter(pal, 2, gif_delays(96, 0.04)), frames_of, 96, 3)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    kids: list[int] = []
    try:
        kids = wait.until(lambda: len(procs.children(proc.pid)) == 2 and procs.children(proc.pid), 30,
                          "the two children started")
        assert proc.stdout.readline().strip() == "ready"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        left = procs.wait_gone(kids, 10)
        assert not left, f"children outlived their parent: {left}"
    finally:
        proc.kill()
        proc.stdout.close()
        for k in kids:
            try:
                os.kill(k, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.parametrize("name,motion,retarget,size", [
    ("char1", "dab", FAIR, 160),
    ("char2", "jumping_jacks", CMU, 128),
])
def test_render_in_processes_is_the_same_file(name, motion, retarget, size):
    ch = animator.load_character(CHARACTERS / name)
    mcfg = animator.load_motion_config(AD_EXAMPLES / "config" / "motion" / f"{motion}.yaml")
    rcfg = animator.load_retarget_config(retarget)
    digests = set()
    for processes in (1, 2, 3):
        res = render(ch, mcfg, rcfg, RenderOptions(width=size, height=size, fps="native", processes=processes))
        assert res.frame_count >= 3 * MIN_FRAMES_PER_PROCESS
        digests.add(hashlib.sha1(res.data).hexdigest())
    assert len(digests) == 1
    assert _new_children() == []


def test_processes_is_checked():
    with pytest.raises(animator.ConfigError, match="processes"):
        RenderOptions(processes=0)


def test_a_process_with_other_threads_does_not_fork(monkeypatch):
    """A forked child keeps only the forking thread: locks the others hold would stay held in it."""
    import threading

    from animator import parallel

    forks = []

    def fork():
        forks.append(1)
        raise OSError("this test forks nothing")

    monkeypatch.setattr(parallel.os, "fork", fork)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    try:
        gif = GifWriter(np.zeros((2, 3), np.uint8), 0, gif_delays(48, 0.04))
        frames = lambda a, b: iter([np.zeros((4, 4), np.uint8)] * (b - a))  # noqa: E731
        assert parallel.gif_in_processes(gif, frames, 48, processes=2) is None
    finally:
        stop.set()
        other.join()
    assert forks == []
