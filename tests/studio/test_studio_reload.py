"""A reload of the studio keeps what the person chose and made (issue 43): the chosen motions, the finished
animations, and a render still in progress, which the reloaded page follows to its end.

Real: Chromium, the app as `make run` starts it on a 2-CPU machine (gunicorn with gevent workers, the
render worker, Valkey: renders are jobs), a real TorchServe with the fake models (never called here: the
character is created with its own box and joints).
"""
from __future__ import annotations

import pytest
import requests

from tests.studio.conftest import SCREENSHOTS
from tests.support import hold, make_run_pod
from tests.support.characters import post_char1

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def server(torchserve):
    with make_run_pod.pod("dp-studio-reload-", torchserve) as app:
        try:
            yield app
        finally:
            print(app.log_text()[-3000:])


@pytest.fixture(scope="module")
def character(server) -> str:
    return post_char1(server.url)


def _choose(page, names):
    for box in page.locator("[data-testid^=motion-]").all():
        box.set_checked(box.get_attribute("data-testid").removeprefix("motion-") in names)


def _chosen(page):
    return sorted(b.get_attribute("data-testid").removeprefix("motion-")
                  for b in page.locator("[data-testid^=motion-]:checked").all())


def _shown(page, name, timeout=300_000):
    page.wait_for_function("n => { const i = document.querySelector(`[data-testid=animation-${n}] img`);"
                           " return i && i.complete && i.naturalWidth > 0; }", arg=name, timeout=timeout)
    return page.locator(f"[data-testid=animation-{name}] img").get_attribute("src")


def test_a_reload_keeps_the_chosen_motions_the_animations_and_a_render_in_progress(server, character, open_page):
    page = open_page(1280, 800)
    page.goto(f"{server.url}/studio#character={character}")
    page.wait_for_selector("body[data-ready=true]")
    page.get_by_test_id("size").select_option("256")
    _choose(page, {"dab", "jumping_jacks"})
    page.get_by_test_id("render").click()
    dab = _shown(page, "dab")
    _shown(page, "jumping_jacks")

    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    assert _chosen(page) == ["dab", "jumping_jacks"]
    assert _shown(page, "dab", timeout=30_000) == dab                   # the same file, not rendered again
    assert "kept from before" in page.get_by_test_id("render-state").inner_text()

    # a render in progress: reloaded while its job waits, the page follows it to the animation. The worker
    # is paused (SIGSTOP to its process group) so the job is still in progress at the reload on any machine:
    # a fast one finished it before the reload and the page had nothing to follow.
    with hold.paused_group(server.worker.proc.pid):
        _choose(page, {"wave_hello"})
        page.get_by_test_id("render").click()
        page.wait_for_function("() => JSON.parse(localStorage.getItem('doodlepod.studio.' + "
                               f"'{character}') || '{{}}').pending")
        page.reload()
        page.wait_for_selector("body[data-ready=true]")
        assert _chosen(page) == ["wave_hello"]
        page.wait_for_function("() => /Still rendering|Rendering|Waiting/.test("
                               "document.querySelector('[data-testid=render-state]').textContent)",
                               timeout=30_000)
        assert page.locator("[data-testid=animation-wave_hello] img").count() == 0
    _shown(page, "wave_hello")
    assert page.get_by_test_id("error").is_hidden()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "studio-reload-1280x800.png"))
    # a saved edit makes the kept results stale: they are not shown for the new version
    r = requests.patch(f"{server.url}/characters/{character}", json={"joints": {"neck": [250, 120]}}, timeout=120)
    assert r.status_code == 200, r.text
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    page.wait_for_timeout(500)
    assert page.locator("[data-testid^=animation-]").count() == 0
