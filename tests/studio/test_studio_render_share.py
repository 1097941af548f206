"""The studio when the person's own other render holds their one render slot (429 render_share_used).

pod.yaml gives each client one render slot (DOODLEPOD_CLIENT_RENDER_SLOTS=1): a person whose other
request (another tab, their phone) is still rendering gets 429 ``render_share_used`` with Retry-After.
The page must say so in a person's words, wait it out and try again by itself; never a raw error.

Real: Chromium at 1280x800 and 390x844, the app under gunicorn with gevent workers and one render
process, no Redis (renders are synchronous requests, which the share counts); the character is created
with its own box and joints (no model). The other render is this test's own request from the same
address (127.0.0.1) while the render process is paused (SIGSTOP): it holds the slot for as long as the
test needs on any machine.
"""
from __future__ import annotations

import re
import threading

import pytest
import requests

from tests.studio.conftest import SCREENSHOTS
from tests.support import hold, stack, wait
from tests.support.characters import post_char1

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def server():
    env = lambda w: {"DOODLEPOD_TORCHSERVE_URL": "http://127.0.0.1:9",  # noqa: E731
                     "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": "http://127.0.0.1:9", "DOODLEPOD_TORCHSERVE_RETRIES": "0",
                     "DOODLEPOD_LOCAL_DIR": str(w / "files"), "DOODLEPOD_RENDER_PROCESSES": "1",
                     "DOODLEPOD_MAX_INFLIGHT": "2", "DOODLEPOD_CLIENT_RENDER_SLOTS": "1", "DOODLEPOD_RENDER_SIZE": "160"}
    with stack.app_server("dp-studio-share-", env) as app:
        try:
            yield app
        finally:
            print(app.log_text()[-3000:])


@pytest.fixture(scope="module")
def character(server) -> str:
    return post_char1(server.url)


def _in_flight(server) -> float:
    text = requests.get(f"{server.url}/metrics", timeout=10).text
    m = re.search(r"^doodlepod_renders_in_flight(?:\{[^}]*\})? ([0-9.e+-]+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


# each size its own motions: a render made before is answered from the render cache, without a slot
@pytest.mark.parametrize("width, height, mine, theirs", [(1280, 800, "zombie", 128), (390, 844, "jumping", 144)])
def test_the_page_waits_for_the_persons_other_render_and_then_renders(server, character, open_page, width, height,
                                                                      mine, theirs):
    # the person's other render (their phone) first, from the same address, its render process paused: it
    # holds the person's one slot before the page asks anything (the page's motion previews, at background
    # priority, count in the share too: asked first, one of them could take the slot the test needs)
    other: dict = {}
    with hold.paused(hold.app_render_processes(server.proc.pid)):
        thread = threading.Thread(target=lambda: other.update(r=requests.post(
            f"{server.url}/characters/{character}/animations", json={"motions": ["dab"], "size": theirs}, timeout=300)))
        thread.start()
        wait.until(lambda: _in_flight(server) >= 1, 30, "the other render to hold its slot")
        page = open_page(width, height, touch=width < 500)
        page.goto(f"{server.url}/studio#character={character}")
        page.wait_for_selector("body[data-ready=true]")
        for box in page.locator("[data-testid^=motion-]").all():
            box.set_checked(box.get_attribute("data-testid") == f"motion-{mine}")
        page.wait_for_function("() => !document.body.classList.contains('busy')")
        state = page.get_by_test_id("render-state")
        state.scroll_into_view_if_needed()
        page.get_by_test_id("render").click()
        page.wait_for_function("() => /other render on this server is still running/.test("
                               "document.querySelector('[data-testid=render-state]').textContent)", timeout=30_000)
        text = state.inner_text()
        assert re.search(r"each person gets one at a time\): trying again in \d+ s", text), text
        assert page.get_by_test_id("error").is_hidden() and page.get_by_test_id("render-error").is_hidden()
        assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth"), "sideways scrolling"
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        state.scroll_into_view_if_needed()
        page.screenshot(path=str(SCREENSHOTS / f"studio-render-share-{width}x{height}.png"))
    thread.join(300)
    assert other["r"].status_code == 200, other["r"].text
    # the other render done, the page's own try goes through: the animation plays, no error was shown
    page.wait_for_function("n => { const i = document.querySelector(`[data-testid=animation-${n}] img`);"
                           " return i && i.complete && i.naturalWidth > 0; }", arg=mine, timeout=300_000)
    assert page.get_by_test_id("error").is_hidden() and page.get_by_test_id("render-error").is_hidden()
    page.screenshot(path=str(SCREENSHOTS / f"studio-render-share-done-{width}x{height}.png"))
