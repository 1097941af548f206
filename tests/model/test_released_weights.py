"""AnimatedDrawings' released weights, end to end: char4's photo through both real models.

Runs only where the released archives are present (``make fetch-weights`` on a machine with
internet puts them in ``~/.cache/doodlepod/weights``; see docs/model-server.md); skipped otherwise,
with that reason. It converts them to the pinned stack (``scripts/build_archives.py --weights-dir``,
cached next to the weights), serves them with TorchServe through the kit's launcher, and posts
char4's original phone photo to the real app in-process.

What it checks against: char4's ``texture.png`` is the crop of that photo (downsized to 1000 px, as
AnimatedDrawings does before detection) that AnimatedDrawings' models chose, and its
``char_cfg.yaml`` holds their joints in the crop's pixels. The test finds the crop in the photo by
template matching, so the reference box and joints come from the fixture files themselves:
- the box the app answers must overlap the crop's box with IoU >= 0.7;
- each joint must lie within 5% of the photo's larger side of char_cfg.yaml's joint.
"""
from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image, ImageOps

from tests.conftest import CHARACTERS, REPO

CHAR4 = CHARACTERS / "char4"
WEIGHTS_DIR = Path(os.environ.get("DOODLEPOD_CACHE", Path.home() / ".cache" / "doodlepod")) / "weights"
ARCHIVES = ("drawn_humanoid_detector.mar", "drawn_humanoid_pose_estimator.mar")
#: AnimatedDrawings downsizes a photo to this longest side before detecting (and cropping) on it.
AD_MAX_SIDE = 1000


def _gray(image: Image.Image) -> np.ndarray:
    return np.asarray(image.convert("L"), dtype=np.float64)


def find_crop(photo: Image.Image, crop: Image.Image) -> tuple[int, int, float]:
    """Where ``crop`` sits in ``photo`` (same scale): top-left (x, y) of the best normalised
    cross-correlation, and that correlation (1.0: identical pixels)."""
    from scipy.signal import fftconvolve

    image, template = _gray(photo), _gray(crop)
    th, tw = template.shape
    t = template - template.mean()
    numerator = fftconvolve(image, t[::-1, ::-1], mode="valid")
    # per-window sums of the image and its square (integral images) for the local variance
    s1 = np.pad(image, ((1, 0), (1, 0))).cumsum(0).cumsum(1)
    s2 = np.pad(image ** 2, ((1, 0), (1, 0))).cumsum(0).cumsum(1)

    def window(s: np.ndarray) -> np.ndarray:
        return s[th:, tw:] - s[:-th, tw:] - s[th:, :-tw] + s[:-th, :-tw]

    n = th * tw
    variance = window(s2) - window(s1) ** 2 / n
    score = numerator / np.sqrt(np.maximum(variance, 1e-9) * (t ** 2).sum())
    y, x = np.unravel_index(np.argmax(score), score.shape)
    return int(x), int(y), float(score[y, x])


def char4_reference() -> tuple[list[float], dict[str, tuple[float, float]], tuple[int, int], float]:
    """char4's box and joints in the upright photo's pixels, the photo's size and the match score."""
    # The PNG is stored sideways with EXIF orientation 6, like the phone photo it was; the app (and
    # AnimatedDrawings) work on it upright, and the app answers in the upright photo's pixels.
    photo = ImageOps.exif_transpose(Image.open(CHAR4 / "original_img.png")).convert("RGB")
    scale = min(1.0, AD_MAX_SIDE / max(photo.size))
    small = photo.resize((round(photo.width * scale), round(photo.height * scale)), Image.Resampling.BILINEAR)
    texture = Image.open(CHAR4 / "texture.png").convert("RGB")
    x, y, score = find_crop(small, texture)
    box = [x / scale, y / scale, (x + texture.width) / scale, (y + texture.height) / scale]
    cfg = yaml.safe_load((CHAR4 / "char_cfg.yaml").read_text())
    joints = {j["name"]: ((j["loc"][0] + x) / scale, (j["loc"][1] + y) / scale) for j in cfg["skeleton"]}
    return box, joints, photo.size, score


def iou(a: list[float], b: list[float]) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    area = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / area if area > 0 else 0.0


def test_char4_texture_is_found_in_its_photo() -> None:
    """The reference itself: the crop is found unambiguously, inside the photo (no weights needed)."""
    box, joints, (width, height), score = char4_reference()
    assert score > 0.95, f"char4's texture does not match its photo anywhere well (best {score:.3f})"
    assert 0 <= box[0] < box[2] <= width and 0 <= box[1] < box[3] <= height
    assert all(box[0] <= x <= box[2] and box[1] <= y <= box[3] for x, y in joints.values())
    assert iou(box, box) == 1.0 and iou(box, [box[2], box[3], box[2] + 10, box[3] + 10]) == 0.0


@pytest.mark.e2e
@pytest.mark.model_stack
@pytest.mark.timeout(1800)
@pytest.mark.skipif(not all((WEIGHTS_DIR / a).is_file() for a in ARCHIVES),
                    reason=f"AnimatedDrawings' released archives are not in {WEIGHTS_DIR}: "
                           "run `make fetch-weights` on a machine with internet access")
def test_released_models_find_char4_in_its_photo(make_app, tmp_path: Path) -> None:
    from handlers.torchserve_local import LocalTorchServe

    store = WEIGHTS_DIR / "model-store"      # converted once; build_archives skips what is current
    subprocess.run([sys.executable, str(REPO / "scripts" / "build_archives.py"), "--weights-dir", str(WEIGHTS_DIR),
                    "--out", str(store), "-q"], check=True, cwd=REPO, timeout=1500)
    box, joints, (width, height), _ = char4_reference()
    with LocalTorchServe(store, tmp_path / "ts") as ts:
        app = make_app(torchserve_url=ts.inference_url, torchserve_management_url=ts.management_url,
                       torchserve_timeout_s=300.0, request_deadline_s=600.0, render_size=64, render_fps="5",
                       torchserve_retries=1)
        photo = (CHAR4 / "original_img.png").read_bytes()
        resp = app.test_client().post("/animate", data={"image": (io.BytesIO(photo), "char4.png", "image/png"),
                                                         "motions": "dab"})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    found = resp.json["character"]
    overlap = iou(found["bbox"], box)
    assert overlap >= 0.7, f"detector box {found['bbox']} vs char4's crop {box}: IoU {overlap:.2f}"
    tolerance = 0.05 * max(width, height)
    off = {name: float(np.hypot(found["joints"][name][0] - x, found["joints"][name][1] - y))
           for name, (x, y) in joints.items()}
    worst = max(off, key=off.get)
    assert off[worst] <= tolerance, f"joint {worst} is {off[worst]:.0f} px from char_cfg.yaml's (limit {tolerance:.0f})"
