"""A real headless Chromium for the studio page's tests, driven by Playwright.

The browser is Debian's ``chromium`` (scripts/install_browser.sh installs it when ``make test`` runs
as root): Playwright cannot download its own browsers without internet, so it is pointed at the
system one (``DOODLEPOD_CHROMIUM`` overrides the path). Where there is no Chromium or no Playwright
the browser tests skip, and the reason is printed in the summary (pytest runs with ``-ra``) and in a
banner at the end of the run.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.conftest import REPO

#: Where the tests save their screenshots (build/ is not tracked).
SCREENSHOTS = REPO / "build" / "studio-screenshots"

_skipped: list[str] = []


def chromium_path() -> str | None:
    for candidate in (os.environ.get("DOODLEPOD_CHROMIUM"), shutil.which("chromium"),
                      shutil.which("chromium-browser"), shutil.which("google-chrome")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _skip(reason: str) -> None:
    _skipped.append(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for the session (contexts isolate the tests)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _skip("BROWSER TESTS SKIPPED: Playwright is not installed (pip install -r requirements/test.txt)")
    path = chromium_path()
    if path is None:
        _skip("BROWSER TESTS SKIPPED: no Chromium on this machine; as root run scripts/install_browser.sh "
              "(apt-get install -y chromium) or set DOODLEPOD_CHROMIUM")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=path, headless=True,
                                      args=["--disable-gpu", "--disable-dev-shm-usage"])
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def finder_torchserve() -> Iterator[Any]:
    """What `make run` serves on a machine without AnimatedDrawings' released weights (its ``auto`` picks
    ``finder`` there): a real TorchServe with the ink finder's archives (``scripts/build_archives.py
    --finder``) under the models' names, started by the kit's launcher. Builds in under a second and is
    READY in about 5 s on this machine. One per test module."""
    from handlers.torchserve_local import LocalTorchServe
    from tests.support import stack

    workdir = stack.make_workdir("dp-finder-ts-")
    store = workdir / "model-store"
    built = subprocess.run([sys.executable, str(REPO / "scripts" / "build_archives.py"), "--finder", "--out", str(store)],
                           capture_output=True, text=True, timeout=300, cwd=REPO)
    assert built.returncode == 0, built.stdout + built.stderr
    server = LocalTorchServe(store, workdir / "ts", env={"OMP_NUM_THREADS": "1"}, stop_timeout=10.0)
    try:
        server.start(timeout=300)
        yield server
    finally:
        server.stop()
        stack.remove(workdir)


@pytest.fixture
def open_page(browser) -> Iterator[Callable[..., Any]]:
    """``open_page(width, height, touch=False)``: a fresh browser context and page at that viewport.

    The context prefers reduced motion, so the page scrolls at once instead of smoothly (a smooth
    scroll would move the elements a test is about to drag). Uncaught exceptions in the page fail
    the test at teardown (a broken page must not pass because the asserted element happened to
    render); console errors are printed for the log."""
    contexts, errors = [], []

    def open_(width: int, height: int, touch: bool = False):
        context = browser.new_context(viewport={"width": width, "height": height}, device_scale_factor=1,
                                      has_touch=touch, is_mobile=touch, reduced_motion="reduce")
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: print(f"[page {width}x{height}] {msg.type}: {msg.text}")
                if msg.type in ("error", "warning", "info") else None)
        page.set_default_timeout(60_000)
        return page

    yield open_
    for context in contexts:
        context.close()
    assert not errors, f"uncaught errors in the page: {errors}"


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if _skipped:
        terminalreporter.write_sep("!", "studio page NOT tested in a browser", red=True, bold=True)
        for reason in dict.fromkeys(_skipped):
            terminalreporter.write_line(reason, red=True)
