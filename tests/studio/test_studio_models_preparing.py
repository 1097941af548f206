"""The studio while `make run` is still preparing the models on a fresh machine (issue 35).

A real app on `make run`'s settings with no model server yet, and the state file `make run` writes
while the model stack builds (DOODLEPOD_MODELS_STATE_FILE; scripts/models_state.sh writes it the same
way): the page says what is being prepared and how far (the bar), leads to placing the joints by hand,
and follows the state as it changes, without a reload. Chromium at 1280x800 and 390x844.
"""
from __future__ import annotations

import json
import os
import types
from pathlib import Path

import pytest

from tests.studio.conftest import SCREENSHOTS
from tests.support import make_run_pod

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.timeout(600)]

COMPILING = {"state": "preparing",
             "detail": "The model server is being prepared: mmcv compiles once per machine (4 min so far); "
                       "photos can be animated once it is ready.",
             "progress": {"step": "step 3 of 7, compiling mmcv's C++ ops", "done": 38, "total": 77},
             "retry_after_s": 2}
LOADING = {"state": "starting", "detail": "The model server is starting and loading the models.",
           "progress": {"step": "loading models", "done": 1, "total": 2}, "retry_after_s": 2}


def write_state(path: Path, state: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, path)


@pytest.mark.parametrize("width, height", [(1280, 800), (390, 844)])
def test_the_page_says_how_far_the_models_are_and_leads_to_placing_by_hand(open_page, tmp_path, width, height):
    state = tmp_path / "models-state.json"
    write_state(state, COMPILING)
    nowhere = types.SimpleNamespace(inference_url="http://127.0.0.1:9", management_url="http://127.0.0.1:9")
    with make_run_pod.pod("dp-studio-preparing-", nowhere, {"DOODLEPOD_MODELS_STATE_FILE": str(state)},
                          redis=False) as app:
        page = open_page(width, height, touch=width < 500)
        page.goto(f"{app.url}/studio")
        note = page.get_by_test_id("models-note")
        note.wait_for(state="visible", timeout=30_000)
        assert note.get_attribute("data-state") == "preparing"
        text = note.inner_text()
        assert "compiling mmcv" in text and "38 of 77" in text and "place the box and joints yourself" in text, text
        bar = note.locator("progress")
        assert bar.is_visible() and abs(float(bar.get_attribute("value") or bar.evaluate("b => b.value")) - 38 / 77) < 0.01
        assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth"), "sideways scrolling"
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"models-preparing-{width}x{height}.png"))

        # the page looks again after retry_after_s: TorchServe loading now
        write_state(state, LOADING)
        page.wait_for_function("() => document.getElementById('models-note').dataset.state === 'starting'",
                               timeout=30_000)
        assert "loading the models" in note.inner_text() and "1 of 2" in note.inner_text()
        assert note.get_by_test_id("models-note-action").is_visible()
