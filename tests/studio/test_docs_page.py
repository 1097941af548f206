"""The API reference page (/docs) in a real headless Chromium against the app under gunicorn.

What is real: Chromium (Debian's package) driven by Playwright, gunicorn with gevent workers, the app
serving its OpenAPI document and the page's own files under the studio's Content-Security-Policy.
No model is called: the page only reads the document (TorchServe is not started).

The page must render every operation of the document the server answers, with this server's bounds
(the app runs with a non-default DOODLEPOD_RENDER_SIZE_MAX, which the page must show), and every error
code; an uncaught error in the page fails the test (tests/studio/conftest.py).
"""
from __future__ import annotations

from pathlib import Path

import pytest
import requests

from tests.studio.conftest import SCREENSHOTS
from tests.support import stack

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def server():
    def env(workdir: Path) -> dict[str, str]:
        return {"DOODLEPOD_LOCAL_DIR": str(workdir / "files"), "DOODLEPOD_RENDER_SIZE_MAX": "640",
                "DOODLEPOD_AUTH_TOKEN": "docs-token", "DOODLEPOD_RENDER_PROCESSES": "1"}

    with stack.app_server("dp-docs-page-", env) as app:
        yield app


def test_docs_page_renders_every_operation_with_this_servers_bounds(server, open_page):
    document = requests.get(f"{server.url}/openapi.json", timeout=10).json()
    operations = [(method, path) for path, item in document["paths"].items() for method in item
                  if method in ("get", "post", "put", "patch", "delete")]
    codes = [entry["const"] for entry in document["components"]["schemas"]["ErrorCode"]["oneOf"]]

    page = open_page(1280, 800)
    page.goto(f"{server.url}/docs")
    page.wait_for_selector("#errors")
    shown = page.eval_on_selector_all("section.op", "els => els.map(e => e.querySelector('h3').textContent)")
    assert len(shown) == len(operations)
    for method, path in operations:
        assert any(text.startswith(method) and f" {path}" in text for text in shown), (method, path)
    size = page.inner_text("#animateCharacter")
    assert "maximum: 640" in size and "minimum: 64" in size
    errors = page.inner_text("#errors")
    assert all(code in errors for code in codes)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "docs-1280x800.png"))


def test_docs_tables_fit_a_phone(server, open_page):
    """Issue 43: on a phone every table showed its first columns and cut the last (the description) behind a
    sideways scroll. Each table must fit the screen, nothing of it hidden."""
    page = open_page(390, 844, touch=True)
    page.goto(f"{server.url}/docs")
    page.wait_for_selector("#errors")
    cut = page.evaluate("""() => [...document.querySelectorAll('main table')].filter(t => {
        const r = t.getBoundingClientRect();
        return r.right > innerWidth + 1 || t.scrollWidth > t.clientWidth + 1; }).length""")
    total = page.evaluate("() => document.querySelectorAll('main table').length")
    assert total > 10 and cut == 0, f"{cut} of {total} tables wider than the screen"
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    page.locator("main table").nth(2).scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "docs-tables-390x844.png"))
