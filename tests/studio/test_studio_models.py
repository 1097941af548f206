"""What the studio says about the models: tiny random ones, and a model server that is not there.

Issue 33 item 2: with `make run`'s tiny random-initialised models the page showed ten "Drawings found
(score 98%)" on scraps of paper; the warning lived only in the terminal. The model handlers now name
their weights in a header (scripts/build_archives.py writes them into the archive), the app puts a
`tiny_models` warning in the character's answer or its error, and the page says so plainly and
opens the photo for placing the box and joints by hand.

And while the models are not ready (GET /ping's `models`: preparing, starting, absent) the page says
so above the upload and leads to placing the joints by hand. Real parts: a real TorchServe with the
fake models (their weights cannot be downloaded here; the fake answers carry the weights header as
the real handlers do), gunicorn with `make run`'s settings, Chromium. The absent case is a real app
whose model server address has nothing listening.
"""
from __future__ import annotations

import types

import pytest
import requests

from tests.conftest import CHAR1
from tests.studio.conftest import SCREENSHOTS
from tests.support import make_run_pod, stack

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.timeout(600)]

TEXTURE = (CHAR1 / "texture.png").read_bytes()
TINY = {"weights": "tiny"}


@pytest.fixture(scope="module")
def server(torchserve):
    with make_run_pod.pod("dp-studio-models-", torchserve, redis=False) as app:
        try:
            yield app
        finally:
            print(app.log_text()[-3000:])


def _post(server, files=None, data=None):
    return requests.post(f"{server.url}/characters", files=files or {"image": ("char1.png", TEXTURE, "image/png")},
                         data=data, timeout=120)


def test_the_answers_say_when_the_models_are_the_tiny_random_ones(server, torchserve):
    texture, joints = stack.load_fixture_character("char1")
    from PIL import Image
    pose = {"mode": "fractions", "fractions": stack.pose_fractions(Image.fromarray(texture), joints)}
    try:
        torchserve.set_control(detector={"mode": "nonwhite"}, pose=pose)
        plain = _post(server)
        assert plain.status_code == 201, plain.text
        assert "warnings" not in plain.json()  # released (or unnamed) weights: nothing to say

        torchserve.set_control(detector={"mode": "nonwhite", **TINY}, pose={**pose, **TINY})
        found = _post(server)
        assert found.status_code == 201, found.text
        assert [w["code"] for w in found.json()["warnings"]] == ["tiny_models"]
        assert "tiny random" in found.json()["warnings"][0]["message"]

        # joints placed by hand: the models were not asked, nothing to warn about
        doc = found.json()
        by_hand = _post(server, data={"bbox": str(doc["bbox"]), "joints": __import__("json").dumps(doc["joints"])})
        assert by_hand.status_code == 201, by_hand.text
        assert "warnings" not in by_hand.json()

        # the models missed: the error says why too
        torchserve.set_control(detector={"mode": "nonwhite", **TINY},
                               pose={"mode": "fractions", "fractions": [[0.01, 0.01]] * 17, **TINY})
        missed = _post(server)
        assert missed.status_code == 422 and missed.json()["error"] == "invalid_character", missed.text
        assert [w["code"] for w in missed.json()["warnings"]] == ["tiny_models"]
    finally:
        torchserve.set_control(detector={"mode": "nonwhite"}, pose=pose)


def test_the_page_says_tiny_models_plainly_and_opens_the_photo_for_placing_by_hand(server, torchserve, open_page):
    texture, joints = stack.load_fixture_character("char1")
    from PIL import Image
    pose = {"mode": "fractions", "fractions": stack.pose_fractions(Image.fromarray(texture), joints)}
    torchserve.set_control(detector={"mode": "nonwhite", **TINY}, pose={**pose, **TINY})
    try:
        page = open_page(1280, 800)
        page.goto(f"{server.url}/studio")
        page.wait_for_selector("body[data-ready=true]")
        page_image, _ = stack.page_with_character("char1", (1200, 900), (300, 150))
        page.get_by_test_id("upload").set_input_files(
            files=[{"name": "page.jpg", "mimeType": "image/jpeg", "buffer": stack.encode(page_image, "JPEG", quality=90)}])
        note = page.get_by_test_id("fix-note")
        note.wait_for(state="visible", timeout=120_000)
        assert "tiny random-initialised models" in note.inner_text()
        page.get_by_test_id("joint-neck").wait_for(state="visible")  # the ink guess: a box and joints to drag
        assert page.locator("#detections").is_hidden()  # no "Drawings found" on scraps of paper
        assert page.evaluate("() => location.hash") == ""  # nothing saved yet: the person places, then saves
        view = page.evaluate("() => document.querySelector('#stage svg').getAttribute('viewBox')")
        assert view == "0 0 1200 900", view  # the whole photo
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "models-tiny-1280x800.png"))
        page.get_by_test_id("save").click()
        page.wait_for_function("() => new URLSearchParams(location.hash.slice(1)).get('character')", timeout=120_000)
        assert page.get_by_test_id("fix-note").is_hidden()
    finally:
        torchserve.set_control(detector={"mode": "nonwhite"}, pose=pose)


def test_without_a_model_server_the_page_says_so_and_leads_to_placing_by_hand(open_page):
    nowhere = types.SimpleNamespace(inference_url="http://127.0.0.1:9", management_url="http://127.0.0.1:9")
    with make_run_pod.pod("dp-studio-nomodels-", nowhere, redis=False) as app:
        page = open_page(390, 844, touch=True)
        page.goto(f"{app.url}/studio")
        note = page.get_by_test_id("models-note")
        note.wait_for(state="visible", timeout=30_000)
        assert note.get_attribute("data-state") == "absent"
        assert "model server" in note.inner_text() and "place the box and joints yourself" in note.inner_text()
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "models-absent-390x844.png"))
        with page.expect_file_chooser() as chooser:
            page.get_by_test_id("models-note-action").tap()
        chooser.value.set_files(files=[{"name": "char1.png", "mimeType": "image/png", "buffer": TEXTURE}])
        page.locator("#stage").wait_for(state="visible")  # the editor, on the whole photo
        assert page.evaluate("() => document.querySelector('#stage svg').getAttribute('viewBox')") == "0 0 508 602"
