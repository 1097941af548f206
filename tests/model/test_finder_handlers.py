"""The ink finder's handler pair inside a real TorchServe 0.12 on 127.0.0.1 (no trained weights).

``scripts/build_archives.py --finder`` builds the two archives doodlepod serves where the released
weights are absent, under the learned models' names; handlers/torchserve_local.py starts TorchServe
with handlers/config.properties on free ports. The answers must have the learned models' shapes
(tests/support/model_answers.py checks the same for the tiny archives) and, unlike the tiny models',
mean something: the detector's box is the drawing's, the pose answer's joints lie on the figure in
a person's order (head above shoulders above hips above feet).

Real: TorchServe, its Java frontend and Python workers, the archives, the HTTP exchange, the drawings
(AnimatedDrawings' char1 pasted on a page; a drawn stick figure). Nothing is mocked.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from handlers.torchserve_local import LocalTorchServe
from tests.conftest import REPO
from tests.model.test_handlers import post, predict_url
from tests.support import stack
from tests.support.model_answers import drawing, encoded

pytestmark = [pytest.mark.e2e, pytest.mark.model_stack]

DETECTOR = "drawn_humanoid_detector"
POSE = "drawn_humanoid_pose_estimator"
COCO = ["nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder", "right_shoulder",
        "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip", "right_hip", "left_knee",
        "right_knee", "left_ankle", "right_ankle"]


@pytest.fixture(scope="module")
def finder_store(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("finder-store")
    res = subprocess.run([sys.executable, str(REPO / "scripts" / "build_archives.py"), "--finder", "--out", str(store)],
                         capture_output=True, text=True, timeout=300, cwd=REPO)
    assert res.returncode == 0, res.stdout + res.stderr
    return store


@pytest.fixture(scope="module")
def torchserve(finder_store, tmp_path_factory):
    server = LocalTorchServe(finder_store, tmp_path_factory.mktemp("torchserve"), env={"OMP_NUM_THREADS": "1"})
    server.start(timeout=600)
    try:
        yield server
    finally:
        server.stop()


def headers_lower(headers: dict) -> dict:
    return {k.lower(): v for k, v in headers.items()}


def test_finder_archives_hold_no_checkpoint_and_the_finders_modules(finder_store):
    import zipfile

    for model in (DETECTOR, POSE):
        with zipfile.ZipFile(finder_store / f"{model}.mar") as zf:
            names = set(zf.namelist())
            manifest = json.loads(zf.read("MAR-INF/MANIFEST.json"))
        assert "serializedFile" not in manifest["model"], manifest
        assert {"handler_base.py", "ink_finder_base.py", "animator/finder/answers.py",
                "animator/segment.py"} <= names, sorted(names)
        assert not any(n.endswith((".pth", ".so", ".pyx")) for n in names), sorted(names)
        stamp = json.loads((finder_store / f"{model}.mar.json").read_text())
        assert stamp["source"] == {"weights": "finder"}


def test_an_unzipped_finder_archive_answers_on_its_own_without_torch_or_mmcv(finder_store, tmp_path):
    """What TorchServe's worker does with an archive, in a Python that sees no checkout (-S: no .pth
    files; only the packages' folder and the unzipped archive on its path): the archive's own animator
    modules answer, and neither torch nor OpenMMLab is imported (the worker itself imports torch; the
    handlers do not, so `make run` can serve them before mmcv is built)."""
    import zipfile

    site = Path(np.__file__).resolve().parents[1]
    page, _ = stack.page_with_character("char1")
    (tmp_path / DETECTOR).with_suffix(".png").write_bytes(encoded(page, "PNG"))  # the photo
    (tmp_path / POSE).with_suffix(".png").write_bytes(encoded(drawing(300, 400), "PNG"))  # a figure's crop
    for model, handler in ((DETECTOR, "ink_finder_detector"), (POSE, "ink_finder_pose_estimator")):
        root = tmp_path / model
        with zipfile.ZipFile(finder_store / f"{model}.mar") as zf:
            zf.extractall(root)
        script = f"""
import json, sys
sys.path[:0] = [{str(root)!r}, {str(site)!r}]
import yaml
import {handler} as mod
class Context:
    model_yaml_config = yaml.safe_load(open({str(root / "model-config.yaml")!r}))
    system_properties = {{"model_dir": {str(root)!r}}}
handler = mod.{ "InkFinderDetectorHandler" if model == DETECTOR else "InkFinderPoseHandler" }()
handler.initialize(Context())
answer = handler.handle([{{"body": open({str((tmp_path / model).with_suffix(".png"))!r}, "rb").read()}}], None)
import animator
print(json.dumps({{"answer": answer, "animator": animator.__file__,
                  "heavy": sorted(m for m in ("torch", "mmcv", "mmdet", "mmpose") if m in sys.modules)}}))
"""
        res = subprocess.run([sys.executable, "-S", "-c", script], capture_output=True, text=True, timeout=120,
                             cwd=tmp_path)
        assert res.returncode == 0, res.stderr[-3000:]
        out = json.loads(res.stdout.strip().splitlines()[-1])
        assert out["animator"].startswith(str(root)), out["animator"]
        assert out["heavy"] == [], out["heavy"]
        assert len(out["answer"]) == 1 and out["answer"][0], out["answer"]


def test_both_finder_models_ready_and_loaded_without_torch_models(torchserve):
    for model in (DETECTOR, POSE):
        with urllib.request.urlopen(f"{torchserve.management_url}/models/{model}", timeout=10) as resp:
            described = json.loads(resp.read())[0]
        assert [w["status"] for w in described["workers"]] == ["READY"]
    log = (torchserve.log_dir / "model_log.log").read_text()
    assert re.search(r'drawn_humanoid_detector: ink finder loaded in .*"weights": "finder"', log), log[-3000:]
    assert re.search(r'drawn_humanoid_pose_estimator: ink finder loaded in .*"weights": "finder"', log), log[-3000:]


def test_detector_finds_the_drawing_on_its_page(torchserve):
    page, joints = stack.page_with_character("char1")
    l, t, r, b = stack.ink_box(page)
    status, answer, headers = post(predict_url(torchserve, DETECTOR), encoded(page, "JPEG"), "image/jpeg")
    assert status == 200, answer
    assert headers_lower(headers).get("x-doodlepod-weights") == "finder"
    assert isinstance(answer, list) and 1 <= len(answer) <= 8
    assert [d["score"] for d in answer] == sorted((d["score"] for d in answer), reverse=True)
    for det in answer:
        assert set(det) == {"bbox", "score", "category"} and det["category"] == "drawn_humanoid"
        assert 0.0 <= det["score"] <= 1.0
    bl, bt, br, bb = answer[0]["bbox"]
    inter = max(0, min(r, br) - max(l, bl)) * max(0, min(b, bb) - max(t, bt))
    iou = inter / ((r - l) * (b - t) + (br - bl) * (bb - bt) - inter)
    assert iou >= 0.8, (answer[0], (l, t, r, b))


def test_pose_fits_a_person_shaped_skeleton_to_the_crop(torchserve):
    for width, height in ((300, 400), (640, 480)):
        page = drawing(width, height)
        ink = np.asarray(page).min(axis=2) < 128
        status, answer, headers = post(predict_url(torchserve, POSE), encoded(page, "PNG"), "image/png", True)
        assert status == 200, answer
        assert headers_lower(headers).get("x-doodlepod-weights") == "finder"
        assert isinstance(answer, list) and len(answer) == 1, answer
        person = answer[0]
        assert set(person) == {"keypoints", "bbox", "score"}
        assert person["bbox"] == [0.0, 0.0, float(width), float(height)]
        kp = {name: k for name, k in zip(COCO, person["keypoints"], strict=True)}
        assert person["score"] == pytest.approx(float(np.mean([k[2] for k in kp.values()])), abs=1e-4)
        for x, y, s in kp.values():
            assert 0 <= x <= width - 1 and 0 <= y <= height - 1 and 0.0 <= s <= 1.0
        mid = lambda a, b: (kp[a][1] + kp[b][1]) / 2  # noqa: E731
        assert kp["nose"][1] < mid("left_shoulder", "right_shoulder") < mid("left_hip", "right_hip") \
            < mid("left_ankle", "right_ankle"), kp
        # the figure's right is on the image's left (AnimatedDrawings' and COCO's convention)
        assert kp["right_wrist"][0] < kp["left_wrist"][0] and kp["right_ankle"][0] < kp["left_ankle"][0], kp
        # every joint on (or within a stroke's reach of) the ink
        ys, xs = np.nonzero(ink)
        for name, (x, y, _) in kp.items():
            assert np.min(np.hypot(xs - x, ys - y)) <= 0.08 * max(width, height), (name, x, y)


def test_blank_paper_answers_empty_lists_not_invented_figures(torchserve):
    paper = Image.new("RGB", (320, 240), (246, 244, 238))
    for model in (DETECTOR, POSE):
        status, answer, _ = post(predict_url(torchserve, model), encoded(paper, "PNG"), "image/png")
        assert status == 200 and answer == [], (model, answer)


def test_bad_requests_get_json_errors(torchserve):
    status, answer, _ = post(predict_url(torchserve, DETECTOR), b"hello", "text/plain")
    assert status == 415 and answer["error"] == "not_an_image", answer
    status, answer, _ = post(predict_url(torchserve, POSE), b"\x89PNG\r\n\x1a\nbroken", "image/png")
    assert status == 400 and answer["error"] == "corrupt_image", answer
    big = Image.new("RGB", (5000, 20), (255, 255, 255))
    status, answer, _ = post(predict_url(torchserve, DETECTOR), encoded(big, "PNG"), "image/png")
    assert status == 413 and answer["error"] == "image_too_large", answer
