"""The .glb plays in three.js (from tools/node, served from loopback) in the system Chromium, and
its frame at 1 s has our render's silhouette."""
from __future__ import annotations

import base64
import functools
import io
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from PIL import Image

from animator.formats.gltf import LAYER, draw_ranks, gltf_frame
from tests.conftest import REPO
from tests.exports.conftest import node_tools

pytestmark = pytest.mark.browser

SCREENSHOTS = REPO / "build" / "export-screenshots"


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def served(tmp_path):
    """A loopback HTTP server over a folder holding three, the viewer page and whatever the test adds."""
    tools = node_tools()
    (tmp_path / "three").symlink_to(tools / "node_modules" / "three")
    (tmp_path / "viewer.html").symlink_to(tools / "gltf_viewer.html")
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(tmp_path)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield tmp_path, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def webgl_page():
    """A page of a headless Chromium with software WebGL (SwiftShader); requests leaving loopback fail."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("BROWSER TESTS SKIPPED: Playwright is not installed")
    from tests.studio.conftest import chromium_path

    path = chromium_path()
    if path is None:
        pytest.skip("BROWSER TESTS SKIPPED: no Chromium; as root run scripts/install_browser.sh")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, headless=True,
                                     args=["--use-angle=swiftshader", "--enable-unsafe-swiftshader",
                                           "--ignore-gpu-blocklist", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page(viewport={"width": 640, "height": 640}, device_scale_factor=1)
            page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("http://127.0.0.1")
                       else route.abort())
            page.set_default_timeout(90_000)
            yield page
        finally:
            browser.close()


def _silhouette(alpha: np.ndarray, size: int = 256) -> np.ndarray:
    """The opaque pixels cut to their bounding box and scaled to ``size`` x ``size`` (aligns boxes)."""
    rows, cols = np.flatnonzero(alpha.any(axis=1)), np.flatnonzero(alpha.any(axis=0))
    crop = alpha[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1]
    im = Image.fromarray((crop * 255).astype(np.uint8)).resize((size, size), Image.Resampling.BILINEAR)
    return np.asarray(im) >= 128


def test_three_js_plays_the_glb_and_its_frame_at_1s_matches_our_render(render_as, char1, served, webgl_page):
    root, base = served
    glb = render_as("glb", max_frames=None, fps=25, width=400, height=400)
    ours = render_as("frames", max_frames=None, fps=25, width=400, height=400)
    (root / "model.glb").write_bytes(glb.data)
    frame = int(round(1.0 / glb.motion.frame_time_s))             # the frame shown at t = 1 s
    assert frame == 25 and glb.frame_count > frame

    webgl_page.goto(f"{base}/viewer.html?model=/model.glb&t=1.0&size=600")
    webgl_page.wait_for_function("window.viewer !== undefined")
    result = webgl_page.evaluate("window.viewer")
    assert result["ok"], result.get("error")
    assert result["clip"] == "motion" and result["duration"] == pytest.approx((glb.frame_count - 1) * 0.04, abs=1e-4)
    assert result["tracks"] == 2 * len(char1.skeleton)
    assert result["bones"] == [j.name for j in char1.skeleton]
    assert result["material"] == "MeshBasicMaterial" and result["hasMap"]      # unlit, textured

    # three.js's skeleton puts every joint where our motion has it at that frame
    rows = np.flatnonzero(char1.mask.any(axis=1))
    origin = (next(j.loc for j in char1.skeleton if j.name == "root")[0], rows[-1] + 1)
    want = gltf_frame(glb.motion.positions[frame], origin, max(char1.size))
    got = np.array(result["bonePositions"])
    assert np.allclose(got[:, :2], want, atol=1e-4)
    # and lifts each towards the viewer by its body-part group's draw position at that frame
    names = [j.name for j in char1.skeleton]
    parents = [-1 if j.parent is None else names.index(j.parent) for j in char1.skeleton]
    ranks = draw_ranks(parents, names, glb.motion.part_joints, glb.motion.part_order)
    assert np.allclose(got[:, 2], ranks[frame] * LAYER, atol=1e-6)
    assert len(set(ranks[frame])) > 1

    shot = np.asarray(Image.open(io.BytesIO(base64.b64decode(result["png"].split(",", 1)[1]))).convert("RGBA"))
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    Image.fromarray(shot).save(SCREENSHOTS / "glb_three_js_1s.png")
    import json
    import zipfile

    z = zipfile.ZipFile(io.BytesIO(ours.data))
    name = json.loads(z.read("frames.json"))["files"][frame]
    mine = np.asarray(Image.open(io.BytesIO(z.read(name))).convert("RGBA"))
    Image.fromarray(mine).save(SCREENSHOTS / "ours_1s.png")
    a, b = _silhouette(shot[..., 3] > 0), _silhouette(mine[..., 3] > 0)
    iou = (a & b).sum() / (a | b).sum()
    print(f"silhouette IoU three.js vs ours at 1 s: {iou:.3f}")
    assert iou >= 0.9, iou
