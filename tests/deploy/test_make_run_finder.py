"""`make run` without trained weights: the README's photo request answered by the ink finder.

``make run`` as a person starts it (DOODLEPOD_RUN_WEIGHTS=finder: what ``auto`` picks on a machine
that cannot download AnimatedDrawings' weights, without asking the network here). As soon as the app
is up, the README's photo line (char4's photo, parsed out of README.md) is sent: until the model
server is ready, the app's own ink finder answers it (on a fresh machine the model stack is still
building then; on a warm one TorchServe may already serve the finder's archives: the answer's
``warnings`` say which). Once "doodlepod is running at" is printed, the same line goes through
TorchServe's finder handlers. Each time: three animations, GIFs in which the figure moves and stays
whole (its drawn area per frame close to the first frame's), then Ctrl-C stops everything.

Everything is real: make, scripts/run_local.sh, gunicorn with gevent workers, TorchServe with the
finder's archives, local storage, the photo. Free ports and a temporary run folder (tests/deploy/
test_make_run.py's MakeRun), so the test can run beside other servers.
"""
from __future__ import annotations

import io
import json
import re
import shlex
import signal
import subprocess
import time

import numpy as np
import pytest
from PIL import Image, ImageSequence

from tests.conftest import REPO
from tests.deploy.test_make_run import README, README_BASE, READY_TIMEOUT_S, MakeRun, default_motions, get

pytestmark = [pytest.mark.e2e, pytest.mark.model_stack, pytest.mark.timeout(READY_TIMEOUT_S + 300)]

APP_UP_LINE = "the app is up at"


def photo_command() -> str:
    """The shell command of the README block marked ``photo-curl``, continuations joined."""
    m = re.search(r"<!-- photo-curl[^>]*-->\s*```sh\n(.*?)```", README.read_text(), re.S)
    assert m, "README.md has no block marked <!-- photo-curl -->"
    command = re.sub(r"\\\n\s*", " ", m.group(1)).strip()
    assert command.startswith("curl ") and "original_img.png" in command and README_BASE in command, command
    return command


@pytest.fixture
def finder_run(tmp_path):
    run = MakeRun(tmp_path)
    run.env["DOODLEPOD_RUN_WEIGHTS"] = "finder"
    yield run
    run.kill_leftovers()


def wait_for(run: MakeRun, line: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S + 60
    while line not in run.output():
        assert run.proc.poll() is None, f"make run exited ({run.proc.returncode}):\n{run.output()[-5000:]}"
        assert time.monotonic() < deadline, f"no '{line}' in time:\n{run.output()[-5000:]}"
        time.sleep(1)


def animate_photo(run: MakeRun) -> tuple[dict, float]:
    command = photo_command().replace(README_BASE, f"http://127.0.0.1:{run.app}")
    t0 = time.monotonic()
    res = subprocess.run(shlex.split(command) + ["--max-time", "300"], cwd=REPO, capture_output=True, text=True,
                         timeout=330)
    took = time.monotonic() - t0
    assert res.returncode == 0, res.stderr
    body = json.loads(res.stdout)
    assert "animations" in body, body
    return body, took


def drawn_area(frame: Image.Image) -> int:
    """Pixels of the figure in a frame: not the (uniform) background of the first pixel's colour."""
    rgb = np.asarray(frame.convert("RGB")).astype(int)
    return int((np.abs(rgb - rgb[0, 0]).sum(axis=2) > 60).sum())


def check_moves_as_drawn(run: MakeRun, body: dict) -> None:
    assert set(body["animations"]) == set(default_motions())
    assert len(body["animations"]) == 3
    for name, url in body["animations"].items():
        status, data = get(url)
        assert status == 200 and data[:6] in (b"GIF89a", b"GIF87a"), (name, status)
        with Image.open(io.BytesIO(data)) as gif:
            frames = [f.copy() for f in ImageSequence.Iterator(gif)]
        assert len(frames) > 10, (name, len(frames))
        areas = [drawn_area(f) for f in frames]
        assert areas[0] > 500, (name, areas[0])  # the figure is there
        # it moves: frames differ from the first ...
        first = np.asarray(frames[0].convert("RGB"))
        assert any(np.abs(np.asarray(f.convert("RGB")).astype(int) - first).sum() > 0 for f in frames[1:]), name
        # ... and stays whole: no frame tears the drawing apart or loses most of it
        assert min(areas) > 0.5 * areas[0] and max(areas) < 2.0 * areas[0], (name, min(areas), max(areas), areas[0])


def test_make_run_animates_the_readme_photo_with_the_finder_before_and_after_the_model_server(finder_run):
    run = finder_run
    run.start()
    t_start = time.monotonic()
    wait_for(run, APP_UP_LINE)
    app_up_s = time.monotonic() - t_start
    body, took = animate_photo(run)
    codes = [w["code"] for w in body.get("warnings", [])]
    assert codes in (["found_by_ink_finder_in_app"], ["found_by_ink_finder"]), body
    check_moves_as_drawn(run, body)
    first = {"after_start_s": round(time.monotonic() - t_start, 1), "took_s": round(took, 1), "warnings": codes,
             "app_up_s": round(app_up_s, 1), "bbox": body["character"]["bbox"]}

    wait_for(run, "doodlepod is running at")
    ready_s = time.monotonic() - t_start
    assert "models: finder weights" in run.output()
    status, ping = get(f"http://127.0.0.1:{run.app}/ping")
    assert status == 200, ping
    assert json.loads(ping)["models"]["served_by"] == "ink_finder"
    body, took = animate_photo(run)
    assert [w["code"] for w in body.get("warnings", [])] == ["found_by_ink_finder"], body
    check_moves_as_drawn(run, body)
    print(f"make run, finder: first photo {first}; model server ready {ready_s:.0f} s after start, "
          f"photo through TorchServe's finder {took:.1f} s, bbox {body['character']['bbox']}")
    assert run.interrupt() in (0, -signal.SIGINT)  # make dies of the same SIGINT, as in a terminal
    assert not run.leftovers()
