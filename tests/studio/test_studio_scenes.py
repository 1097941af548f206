"""The studio's scenes page (GET /studio-scenes: studio/scenes.html, js/scene.js) in a real headless Chromium against the app
as `make run` starts it on two CPUs (tests/support/make_run_pod.py: gunicorn, the render worker, Valkey).

Faked, and why: the two models (no weights here): the detector answers the boxes of the scene fixture
photo's four characters (tests/fixtures/scene_photo.py), the pose model char1's keypoints as fractions
of each crop.

A person's flow: upload the photo; every character found is shown numbered on it; give one another
motion; drop one; add it back by drawing its box on the photo; choose a plain colour background; play
the scene: its progress shows and the animation appears (more than one frame). The server's scene
must hold what the page showed. Screenshots at 1280x800 and 390x844 go to build/studio-screenshots/.
"""
from __future__ import annotations

import io

import pytest
import requests
from PIL import Image

from tests.fixtures.scene_photo import answer_key, make_scene_photo
from tests.studio.conftest import SCREENSHOTS
from tests.studio.test_studio_by_hand import drag
from tests.support import hold, make_run_pod, stack

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def photo(tmp_path_factory):
    image, pasted = make_scene_photo()
    path = tmp_path_factory.mktemp("scene") / "family.png"
    Image.fromarray(image).save(path)
    return path, answer_key(pasted)


def find_all(torchserve, key) -> None:
    """The fake models find the photo's four characters (the pose: char1's joints as fractions of each crop)."""
    boxes = [{"bbox": k["box"], "score": round(0.95 - 0.05 * i, 2), "category": "drawn_humanoid"}
             for i, k in enumerate(key)]
    l, t, r, b = key[1]["box"]
    c1 = key[1]
    fractions = [[(c1["joints"][j][0] - l) / (r - l), (c1["joints"][j][1] - t) / (b - t)] for j in stack.COCO_FROM_AD]
    torchserve.set_control(detector={"mode": "boxes", "boxes": boxes}, pose={"mode": "fractions", "fractions": fractions})


@pytest.fixture(scope="module")
def server(torchserve, photo):
    find_all(torchserve, photo[1])
    with make_run_pod.pod("dp-studio-scenes-", torchserve) as app:
        try:
            yield app
        finally:
            print(app.log_text()[-3000:])


def _scene_id(page) -> str:
    return page.evaluate("() => new URLSearchParams(location.hash.slice(1)).get('scene')")


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)])
def test_every_character_found_is_shown_fixed_and_played_together(server, photo, open_page, width, height):
    path, key = photo
    page = open_page(width, height, touch=width < 500)
    page.goto(f"{server.url}/studio-scenes")
    page.wait_for_selector("body[data-ready=true]")
    page.get_by_test_id("scene-upload").set_input_files(str(path))
    page.wait_for_function("() => document.querySelectorAll('[data-testid=scene-characters] li').length === 4")
    page.wait_for_function("() => document.querySelector('.scene-photo').naturalWidth > 0")
    assert page.locator(".scene-box").count() == 4
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"scene-found-{width}x{height}.png"), full_page=True)

    # a motion of its own for character 2; character 4 dropped, then drawn back by hand
    page.get_by_test_id("scene-motion-1").select_option("zombie")
    page.wait_for_function("() => document.querySelector('[data-testid=scene-status]').textContent.startsWith('Saved')")
    page.get_by_test_id("scene-drop-3").click()
    page.wait_for_function("() => document.querySelectorAll('[data-testid=scene-characters] li').length === 3")
    page.get_by_test_id("scene-add").click()
    box = page.locator("[data-testid=scene-stage] svg").bounding_box()
    sx, sy = box["width"] / 1000, box["height"] / 750
    l, t, r, b = key[3]["box"]
    page.mouse.move(box["x"] + l * sx, box["y"] + t * sy)
    page.mouse.down()
    page.mouse.move(box["x"] + r * sx, box["y"] + b * sy, steps=6)
    page.mouse.up()
    # the models are not the tiny ones: the server fits the skeleton in the box (the pose model) and the
    # character joins at once; the editor opens on its fitted joints to check, kept as they are here
    save = page.get_by_test_id("scene-add-save")
    page.wait_for_function("() => document.querySelector('[data-testid=scene-add-save]').textContent"
                           " === 'Save its joints'", timeout=120_000)
    assert page.locator("[data-testid=scene-characters] li").count() == 4
    save.click()
    page.get_by_test_id("scene-add-panel").wait_for(state="hidden")
    page.wait_for_function("() => document.querySelectorAll('[data-testid=scene-characters] li').length === 4",
                           timeout=120_000)

    # a plain colour behind them, then play
    page.get_by_test_id("scene-bg-colour").check()
    page.wait_for_function("() => document.querySelector('[data-testid=scene-status]').textContent.startsWith('Saved')")
    page.get_by_test_id("scene-play").click()
    page.wait_for_function("() => { const i = document.querySelector('[data-testid=scene-result]');"
                           " return i && i.complete && i.naturalWidth > 0; }", timeout=300_000)
    assert page.get_by_test_id("scene-error").is_hidden()
    page.screenshot(path=str(SCREENSHOTS / f"scene-playing-{width}x{height}.png"), full_page=True)

    # what the server holds is what the page showed
    scene = requests.get(f"{server.url}/scenes/{_scene_id(page)}", timeout=30).json()
    assert len(scene["characters"]) == 4
    assert scene["characters"][1]["motion"] == "zombie"
    assert scene["background"] == {"kind": "colour", "colour": "#fdf6e3"}
    added = scene["characters"][3]["bbox"]
    assert abs(added[0] - l) < 12 and abs(added[3] - b) < 12, (added, key[3]["box"])
    src = page.get_by_test_id("scene-result").get_attribute("src")
    gif = Image.open(io.BytesIO(requests.get(requests.compat.urljoin(server.url + "/", src), timeout=30).content))
    assert gif.n_frames > 1


def test_the_studio_link_starts_from_a_characters_photo(server, photo, open_page):
    """studio-scenes#from=<character id> (what the studio links to when its photo holds several drawings):
    that character's photo, every character in it."""
    path, key = photo
    made = requests.post(f"{server.url}/characters", files={"image": ("p.png", path.read_bytes(), "image/png")},
                         timeout=120)
    assert made.status_code == 201, made.text
    page = open_page(1280, 800)
    page.goto(f"{server.url}/studio-scenes#from={made.json()['id']}")
    page.wait_for_function("() => document.querySelectorAll('[data-testid=scene-characters] li').length === 4",
                           timeout=120_000)
    assert page.get_by_test_id("scene-error").is_hidden()
    assert _scene_id(page)


def test_the_studio_offers_all_the_drawings_it_found_together(server, photo, open_page):
    """Uploading a photo of several drawings in the studio (one character, the best box) offers them all
    together: the link opens the scenes page with every character found."""
    path, _ = photo
    page = open_page(1280, 800)
    page.goto(f"{server.url}/studio")
    page.wait_for_selector("body[data-ready=true]")
    page.get_by_test_id("upload").set_input_files(str(path))
    link = page.get_by_test_id("animate-all")
    link.wait_for(state="visible", timeout=120_000)
    assert link.text_content() == "Animate all 4 together"
    page.screenshot(path=str(SCREENSHOTS / "studio-animate-all-1280x800.png"))
    link.click()
    page.wait_for_function("() => document.querySelectorAll('[data-testid=scene-characters] li').length === 4",
                           timeout=120_000)
    assert "/studio-scenes" in page.url


def _result_shown(page, timeout=300_000) -> None:
    page.wait_for_function("() => { const i = document.querySelector('[data-testid=scene-result]');"
                           " return i && i.complete && i.naturalWidth > 0; }", timeout=timeout)


def test_a_reload_follows_the_render_in_progress(server, photo, open_page):
    """Play, then a reload while the render's job waits: the reloaded page follows the same job to its
    animation. The render worker is paused (hold.paused_group: SIGSTOP to its process group), so the job
    is still waiting at the reload on any machine, however fast."""
    path, _ = photo
    page = open_page(1280, 800)
    page.goto(f"{server.url}/studio-scenes")
    page.wait_for_selector("body[data-ready=true]")
    page.get_by_test_id("scene-upload").set_input_files(str(path))
    page.wait_for_function("() => document.querySelectorAll('[data-testid=scene-characters] li').length === 4")
    sid = _scene_id(page)
    kept = f"() => (JSON.parse(localStorage.getItem('doodlepod.scene-results.{sid}') || '{{}}').pending || null)"
    with hold.paused_group(server.worker.proc.pid):
        page.get_by_test_id("scene-play").click()
        page.wait_for_function(kept)
        job = page.evaluate(kept)["job"]
        page.reload()
        page.wait_for_selector("body[data-ready=true]")
        page.wait_for_function("() => document.querySelector('[data-testid=scene-status]').textContent"
                               ".startsWith('Still drawing the scene')", timeout=30_000)
        assert page.get_by_test_id("scene-play").is_disabled()          # not asked for twice
        assert page.locator("[data-testid=scene-result]").count() == 0
        assert requests.get(f"{server.url}/jobs/{job}", timeout=30).json()["status"] == "queued"
    _result_shown(page)
    assert page.get_by_test_id("scene-status").text_content() == "Every character is moving."
    assert page.evaluate(kept) is None
    assert page.get_by_test_id("scene-error").is_hidden()
    src = page.get_by_test_id("scene-result").get_attribute("src")
    assert src == requests.get(f"{server.url}/jobs/{job}", timeout=30).json()["animation"]
    page.screenshot(path=str(SCREENSHOTS / "scene-resumed-1280x800.png"))


def test_a_photo_the_models_found_nothing_in_is_kept_across_a_reload(server, torchserve, photo, open_page):
    """The models find nothing: the photo is shown to add its drawings by hand. A reload before the first
    character keeps it (this browser's IndexedDB), and the first one added makes the scene from it; with
    nothing kept (another browser, storage cleared) the page says to choose the photo again."""
    path, key = photo
    torchserve.set_control(detector={"mode": "boxes", "boxes": []})
    try:
        page = open_page(390, 844, touch=True)
        page.goto(f"{server.url}/studio-scenes")
        page.wait_for_selector("body[data-ready=true]")
        page.get_by_test_id("scene-upload").set_input_files(str(path))
        page.get_by_test_id("scene-stage").wait_for(state="visible", timeout=120_000)
        page.wait_for_function("() => location.hash === '#photo'")
        page.reload()
        page.wait_for_selector("body[data-ready=true]")
        page.wait_for_function("() => { const i = document.querySelector('.scene-photo');"
                               " return i.complete && i.naturalWidth === 1000; }")
        assert "before the page was reloaded" in page.get_by_test_id("scene-status").text_content()
        page.screenshot(path=str(SCREENSHOTS / "scene-photo-kept-390x844.png"), full_page=True)
        # the first character, by hand, makes the scene of that photo
        page.get_by_test_id("scene-add").click()
        page.get_by_test_id("scene-stage").scroll_into_view_if_needed()
        box = page.locator("[data-testid=scene-stage] svg").bounding_box()
        k = box["width"] / 1000
        l, t, r, b = key[0]["box"]
        drag(page, (box["x"] + l * k, box["y"] + t * k), (box["x"] + r * k, box["y"] + b * k), touch=True)
        page.get_by_test_id("scene-add-save").click()
        page.wait_for_function("() => document.querySelectorAll('[data-testid=scene-characters] li').length === 1",
                               timeout=120_000)
        scene = requests.get(f"{server.url}/scenes/{_scene_id(page)}", timeout=30).json()
        assert scene["image"] == {"width": 1000, "height": 750}, scene["image"]
        assert abs(scene["characters"][0]["bbox"][0] - l) < 8, (scene["characters"][0]["bbox"], key[0]["box"])
        # kept only until then; and a #photo with nothing kept says so
        page.goto(f"{server.url}/studio-scenes#photo")
        page.reload()
        page.wait_for_selector("body[data-ready=true]")
        error = page.get_by_test_id("scene-error")
        assert error.is_visible() and "choose it again" in error.inner_text(), error.inner_text()
    finally:
        find_all(torchserve, key)
