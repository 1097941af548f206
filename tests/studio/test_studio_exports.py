"""The studio offers the export formats: picked in the format menu, rendered by the real app, shown
as a video, or (files a browser does not play) as a line saying what the download holds, with a
download link to the file.

Real: Chromium (Playwright), gunicorn with gevent workers and its render processes, local storage,
HTTP on loopback. The character is created with its own box and joints, so no model is called and
no TorchServe runs."""
from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
import requests

from tests.studio.conftest import SCREENSHOTS
from tests.support import stack
from tests.support.characters import post_char1

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def server():
    def env(workdir: Path) -> dict[str, str]:
        return {"DOODLEPOD_LOCAL_DIR": str(workdir / "files"), "DOODLEPOD_RENDER_SIZE": "128",
                "DOODLEPOD_RENDER_PROCESSES": "2", "DOODLEPOD_MAX_INFLIGHT": "8",
                "DOODLEPOD_TORCHSERVE_URL": "http://127.0.0.1:9", "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL":
                "http://127.0.0.1:9", "DOODLEPOD_TORCHSERVE_RETRIES": "0"}

    with stack.app_server("dp-studio-exports-", env) as s:
        yield s


@pytest.fixture(scope="module")
def character(server) -> str:
    return post_char1(server.url)


def _render(page, fmt: str):
    page.get_by_test_id("format").select_option(fmt)
    page.get_by_test_id("render").click()
    shown = page.get_by_test_id("animation-dab")
    page.wait_for_function(
        "fmt => { const a = document.querySelector('[data-testid=animation-dab] a');"
        " return a && a.getAttribute('download').includes(fmt === 'apng' ? '.png' : fmt); }", arg=fmt,
        timeout=300_000)
    return shown


def test_the_studio_offers_and_renders_the_export_formats(server, character, open_page):
    page = open_page(1280, 800)
    page.goto(f"{server.url}/studio#character={character}")
    page.wait_for_selector("body[data-ready=true]")
    offered = page.eval_on_selector_all("[data-testid=format] option", "os => os.map(o => o.value)")
    assert set(offered) == {"gif", "webp", "mp4", "apng", "webm", "frames", "sheet", "joints", "glb"}
    for box in page.locator("[data-testid^=motion-]").all():
        box.set_checked(box.get_attribute("data-testid") == "motion-dab")

    shown = _render(page, "sheet")
    note = shown.get_by_test_id("download-note-dab")
    assert "sprite sheet" in note.inner_text().lower()
    link = shown.get_by_role("link", name="Download")
    assert link.get_attribute("download") == "dab.sheet.zip"   # readable: the motion, not a 32-character id
    got = requests.get(link.get_attribute("href"), timeout=60)
    assert got.status_code == 200 and got.headers["Content-Type"] == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(got.content)).namelist()
    assert sorted(names) == ["sheet.json", "sheet.png"]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "studio-export-sheet.png"), full_page=True)

    shown = _render(page, "webm")
    video = shown.locator("video")
    page.wait_for_function("v => v.readyState >= 2 && v.videoWidth > 0", arg=video.element_handle(), timeout=60_000)
    assert video.get_attribute("src").endswith(".webm")

    shown = _render(page, "glb")
    assert "gltf" in shown.get_by_test_id("download-note-dab").inner_text().lower()
    got = requests.get(shown.get_by_role("link", name="Download").get_attribute("href"), timeout=60)
    assert got.content[:4] == b"glTF" and got.headers["Content-Type"] == "model/gltf-binary"
    assert page.get_by_test_id("error").is_hidden()


def test_a_sprite_sheet_that_cannot_fit_is_refused_before_the_render_with_what_fits(server, character, open_page):
    """Issue 43: a zombie sheet at 768 or 1024 px failed after the whole render (17-27 s), telling the
    person to lower max_frames, a control the studio does not have. The server prices it before the work
    now and answers what fits; the page says that in its own words (its size menu, PNG frames)."""
    page = open_page(1280, 800)
    page.goto(f"{server.url}/studio#character={character}")
    page.wait_for_selector("body[data-ready=true]")
    for box in page.locator("[data-testid^=motion-]").all():
        box.set_checked(box.get_attribute("data-testid") == "motion-zombie")
    page.get_by_test_id("format").select_option("sheet")
    page.get_by_test_id("size").select_option("1024")
    with page.expect_response(lambda r: r.url.endswith("/animations") and r.request.method == "POST") as answer:
        page.get_by_test_id("render").click()
    # the server's rule (app/render/sheet_price.py), not the page's: refused before the render, with what fits
    assert answer.value.status == 422 and answer.value.json()["error"] == "output_too_large"
    assert answer.value.json()["fits"]["size"] < 768, answer.value.json()
    error = page.locator("#render-error")
    error.wait_for(state="visible", timeout=10_000)
    text = error.inner_text()
    assert "would not fit" in text and "Choose 512 px or smaller" in text and "PNG frames" in text, text
    assert page.locator("[data-testid=animation-zombie]").count() == 0
