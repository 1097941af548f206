"""The install scripts' smoke tests (scripts/smoke_stamp.sh): each proves what it installed works, keeps
the result in a stamp, and fails with what failed. Run against this machine's own Chromium and Node
tools (skipped where they are not installed: these tests never install anything)."""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.pod.conftest import _podman_smoke_result


def _run(script: str, cache: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / "scripts" / script)], capture_output=True, text=True, timeout=180,
                          env={**os.environ, "DOODLEPOD_CACHE": str(cache), **env})


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if not found:
        pytest.skip("no Chromium here (scripts/install_browser.sh would install it: not in a test)")
    return found


def test_a_browser_that_cannot_take_a_screenshot_fails_the_install_and_leaves_no_stamp(tmp_path):
    _chromium()
    res = _run("install_browser.sh", tmp_path, DOODLEPOD_CHROMIUM="/bin/false")
    assert res.returncode == 1, res.stderr
    assert "FAILED: Chromium (/bin/false) cannot take a headless screenshot" in res.stderr
    assert not (tmp_path / "smoke" / "browser").exists()


def test_chromium_takes_the_screenshot_once_then_the_stamp_answers(tmp_path):
    chromium = _chromium()
    res = _run("install_browser.sh", tmp_path, DOODLEPOD_CHROMIUM=chromium)
    assert res.returncode == 0 and "Chromium works" in res.stderr, res.stderr
    assert (tmp_path / "smoke" / "browser").read_text().splitlines()[1] == "ok"
    t0 = time.monotonic()
    again = _run("install_browser.sh", tmp_path, DOODLEPOD_CHROMIUM=chromium)
    assert again.returncode == 0 and again.stderr == "", again.stderr        # no second screenshot
    assert time.monotonic() - t0 < 5


def test_the_node_tools_run_once_then_the_stamp_answers(tmp_path):
    modules = REPO / "tools" / "node" / "node_modules"
    if not shutil.which("node") or not (modules / "gltf-validator").is_dir() or not (modules / "three").is_dir():
        pytest.skip("no Node tools here (scripts/install_node_tools.sh would install them: not in a test)")
    res = _run("install_node_tools.sh", tmp_path)
    assert res.returncode == 0 and "node tools work" in res.stderr, res.stderr
    again = _run("install_node_tools.sh", tmp_path)
    assert again.returncode == 0 and again.stderr == "", again.stderr


def test_the_pod_tests_read_the_podman_smoke_result(tmp_path, monkeypatch):
    monkeypatch.setenv("DOODLEPOD_CACHE", str(tmp_path))
    assert _podman_smoke_result() == ""                                      # not run: the tests find out
    (tmp_path / "smoke").mkdir()
    (tmp_path / "smoke" / "podman").write_text("0123abcd\nskip: no namespaces here\n")
    assert _podman_smoke_result() == "skip: no namespaces here"
