"""The studio's "Make a motion from a video", in a real headless Chromium against the real app.

What is real: Chromium driven by Playwright, gunicorn with gevent workers, a render worker
(python -m app.worker) with the real pose model, a Redis-compatible server (Valkey), HTTP on
loopback. Faked: the two drawing models TorchServe serves (tests/fixtures/torchserve_fake). The
video is made from a photo of a person (tests/fixtures/people): no video of a person moving is
available offline.

The flow is a person's: upload char1's texture, choose a video under Motions, watch the progress,
find "Your video" selected in the picker, render it; the animation shown decodes to several frames.
"""
from __future__ import annotations

import io

import pytest
import requests
from PIL import Image

from tests.conftest import CHAR1
from tests.studio.conftest import SCREENSHOTS
from tests.support import stack
from tests.support.jobstack import RedisServer, app_and_worker
from tests.support.person_video import PHOTO, frame, placements, write_video

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.redis, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def torchserve(torchserve):
    torchserve.set_control(pose=stack.char1_pose())
    return torchserve


@pytest.fixture(scope="module")
def server(torchserve, tmp_path_factory):
    """The app, a render worker and Redis, sharing a runtime folder as in a pod."""
    redis = RedisServer().start()
    workdir = stack.make_workdir("dp-studio-video-")
    env = {"DOODLEPOD_TORCHSERVE_URL": torchserve.inference_url,
           "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": torchserve.management_url, "DOODLEPOD_REDIS_URL": redis.url,
           "DOODLEPOD_LOCAL_DIR": str(workdir / "files"), "DOODLEPOD_RUNTIME_DIR": str(workdir / "pod"),
           "DOODLEPOD_RENDER_SIZE": "200", "DOODLEPOD_RENDER_PROCESSES": "1", "DOODLEPOD_MAX_INFLIGHT": "4",
           "DOODLEPOD_RATE_LIMIT_PER_MIN": "6000", "DOODLEPOD_RATE_LIMIT_BURST": "1000"}
    try:
        with app_and_worker(workdir, env) as app:
            yield app
    finally:
        redis.remove()
        stack.remove(workdir)


def test_a_video_becomes_a_motion_in_the_picker_and_renders(server, open_page, tmp_path):
    photo = Image.open(PHOTO).convert("RGB")
    video = write_video(tmp_path / "me.mp4", [frame(photo, *p) for p in placements(30)])  # 2 s at 15 fps
    page = open_page(1280, 800)
    page.goto(f"{server.url}/studio")
    page.wait_for_selector("body[data-ready=true]")
    page.get_by_test_id("upload").set_input_files(str(CHAR1 / "texture.png"))
    page.get_by_test_id("video").wait_for(state="attached")
    page.locator("#step-motions").wait_for(state="visible", timeout=120_000)

    chosen_before = page.locator("[data-testid^=motion-]:checked").evaluate_all("bs => bs.map(b => b.value)")
    assert chosen_before  # the library's default motion
    seen = []
    page.on("response", lambda r: seen.append(r.url) if "/jobs/" in r.url else None)
    page.get_by_test_id("video").set_input_files(str(video))
    page.wait_for_function("() => document.getElementById('video-state').textContent.startsWith('Made')",
                           timeout=180_000)
    assert seen, "the page polled the job"
    own = page.locator("[data-testid^=motion-video-]")
    assert own.count() == 1 and own.is_checked()
    name = own.get_attribute("value")
    # making it kept what was chosen before (issue 33 item 6)
    assert all(page.get_by_test_id(f"motion-{m}").is_checked() for m in chosen_before)
    assert page.get_by_test_id("chosen").inner_text().startswith("Chosen: Your video")
    assert page.locator("section[data-category=yours] h3").inner_text() == "Your motions"
    page.locator("#step-motions").screenshot(path=str(SCREENSHOTS / "studio-video-motion.png"))

    for box in page.locator("[data-testid^=motion-]").all():
        box.set_checked(box.get_attribute("value") == name)
    page.get_by_test_id("render").click()
    shown = page.get_by_test_id(f"animation-{name}")
    shown.wait_for(state="visible", timeout=300_000)
    img = shown.locator("img")
    page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=img.element_handle())
    gif = Image.open(io.BytesIO(requests.get(img.get_attribute("src"), timeout=60).content))
    assert gif.n_frames > 1
    assert page.get_by_test_id("error").is_hidden()
    # captioned as the person knows it, not by its id ("Video-Bf02f8be4a96")
    assert shown.locator("figcaption span").inner_text().startswith("Your video ("), shown.inner_text()


def test_a_video_with_nobody_says_so(server, open_page, tmp_path):
    import numpy as np

    blank = write_video(tmp_path / "empty.mp4", [np.full((240, 320, 3), 200, np.uint8)] * 8)
    page = open_page(1280, 800)
    page.goto(f"{server.url}/studio")
    page.wait_for_selector("body[data-ready=true]")
    page.get_by_test_id("upload").set_input_files(str(CHAR1 / "texture.png"))
    page.locator("#step-motions").wait_for(state="visible", timeout=120_000)
    page.get_by_test_id("video").scroll_into_view_if_needed()
    scrolled = page.evaluate("() => window.scrollY")
    page.get_by_test_id("video").set_input_files(str(blank))
    # the error beside the video button, the page where it was, the status line saying what happened
    error = page.get_by_test_id("video-error")
    error.wait_for(state="visible", timeout=120_000)
    assert "no person" in error.inner_text().lower()
    assert page.get_by_test_id("error").is_hidden()
    assert abs(page.evaluate("() => window.scrollY") - scrolled) < 200
    box = error.bounding_box()
    assert 0 <= box["y"] and box["y"] + box["height"] <= 800, box
    assert page.get_by_test_id("video-state").inner_text().startswith("No motion was made")
    assert page.locator("[data-testid^=motion-video-]").count() == 0
