"""Both images build from a clean checkout (`make images`), and hold what they should and nothing else:
no compiler, none of our tests, no ``.git``; ``pip check`` passes inside each."""
from __future__ import annotations

import json
import re

import pytest

from tests.pod.conftest import APP_IMAGE, MODEL_IMAGE, WORKER_IMAGE

pytestmark = [pytest.mark.pod, pytest.mark.timeout(3600)]

IMAGES = [APP_IMAGE, WORKER_IMAGE, MODEL_IMAGE]
COMPILERS = ("gcc", "cc", "c++", "g++", "clang", "x86_64-linux-gnu-gcc", "x86_64-linux-gnu-gcc-12", "nvcc")
#: Where each image keeps our code.
CODE_DIRS = {APP_IMAGE: "/srv/doodlepod", WORKER_IMAGE: "/srv/doodlepod", MODEL_IMAGE: "/home/model-server"}


def sh(images, image: str, script: str, timeout: float = 300):
    return images.engine.run("run", "--rm", "--network", "none", "--entrypoint", "sh", image, "-c", script,
                             timeout=timeout)


def test_images_build_from_a_clean_checkout(images):
    for image in IMAGES:
        info = json.loads(images.engine.run("image", "inspect", image, check=True).stdout)[0]
        assert info["Size"] > 50e6, (image, info["Size"])
    # What make images says at the end: each image, its size and build time.
    for image in IMAGES:
        assert re.search(rf"^{re.escape(image)}\s+\d+ MB\s+built in\s+\d+ s", images.output, re.M), images.output[-2000:]


@pytest.mark.parametrize("image", IMAGES)
def test_image_holds_no_compiler_no_tests_no_git(images, image):
    code = CODE_DIRS[image]
    found = sh(images, image, "for c in " + " ".join(COMPILERS) + "; do command -v $c; done; "
               "find / -xdev \\( -name .git -o -path '*/tests/fixtures/animated_drawings*' \\) -print 2>/dev/null; "
               f"find {code} \\( -name '.git*' -o -name tests -o -name conftest.py \\) -print | head -20")
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "", f"{image} holds: {found.stdout}"
    # Our own test files: none anywhere under the code folder.
    tests = sh(images, image, f"find {CODE_DIRS[image]} -name 'test_*.py' -o -name conftest.py | head")
    assert tests.stdout.strip() == "", f"{image} holds tests: {tests.stdout}"


@pytest.mark.parametrize("image", [APP_IMAGE, WORKER_IMAGE])
def test_app_images_hold_the_code_and_its_compiled_kernel(images, image):
    res = sh(images, image, "cd /srv/doodlepod && ls animator/_raster*.so app/__init__.py motions | head -3 "
             "&& python -c 'import animator._raster, app; print(\"ok\")'")
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stdout + res.stderr


def test_only_the_worker_image_holds_the_video_pose_model(images):
    """The video feature's packages (370 MB) only where they are used: the worker's motion_from_video job."""
    check = "import importlib.util as u; print(all(u.find_spec(m) for m in ('mediapipe', 'cv2', 'matplotlib')))"
    worker = images.engine.run("run", "--rm", "--network", "none", "--entrypoint", "python", WORKER_IMAGE, "-c",
                               "import mediapipe; from animator.video.pose_model import track_frames; print('ok')")
    assert worker.returncode == 0 and worker.stdout.strip() == "ok", worker.stderr[-2000:]
    app = images.engine.run("run", "--rm", "--network", "none", "--entrypoint", "python", APP_IMAGE, "-c", check)
    assert app.stdout.strip() == "False", app.stdout + app.stderr
    sizes = {i: json.loads(images.engine.run("image", "inspect", i, check=True).stdout)[0]["Size"]
             for i in (APP_IMAGE, WORKER_IMAGE)}
    assert sizes[WORKER_IMAGE] - sizes[APP_IMAGE] > 200e6, sizes


def pip_check(images, image: str) -> tuple[int, str]:
    res = images.engine.run("run", "--rm", "--network", "none", "--entrypoint", "python", image, "-m", "pip",
                            "check", timeout=300)
    return res.returncode, (res.stdout + res.stderr).strip()


def test_pip_check_passes_in_the_app_image(images):
    rc, out = pip_check(images, APP_IMAGE)
    assert rc == 0, out


def test_pip_check_in_the_worker_image(images):
    """mediapipe goes in without its declared dependencies (requirements/pose.txt says why): its
    opencv-contrib-python is replaced by opencv-python-headless (the same cv2 module without the GUI
    libraries, which would need libGL), and sounddevice serves audio tasks it never runs here. pip
    check must report those two and nothing else."""
    rc, out = pip_check(images, WORKER_IMAGE)
    assert sorted(out.splitlines()) == ["mediapipe 1.2.3 requires opencv-contrib-python, which is not installed.",
                                        "mediapipe 1.2.3 requires sounddevice, which is not installed."], out


def test_pip_check_in_the_model_image(images):
    """Clean with the real CPU torchvision. Where torch's CPU index cannot be reached (this machine),
    the image carries the venv's torchvision shim (scripts/images.sh says so), and pip check must
    report exactly that one gap: mmpose's declared torchvision."""
    rc, out = pip_check(images, MODEL_IMAGE)
    shim = images.engine.run("run", "--rm", "--network", "none", "--entrypoint", "python", MODEL_IMAGE, "-c",
                             "import importlib.metadata as m; print(m.version('doodlepod-cpu-torchvision-shim'))")
    if shim.returncode != 0:
        assert rc == 0, out
    else:
        assert out.splitlines() == ["mmpose 1.3.2 requires torchvision, which is not installed."], out
        assert "torchvision is models/torchvision-shim" in images.output


def test_model_image_serves_on_cpu_with_the_pinned_stack(images):
    res = images.engine.run("run", "--rm", "--network", "none", "--entrypoint", "python", MODEL_IMAGE, "-c",
                            "import torch, mmcv, mmcv.ops, mmdet, mmpose, mmengine, ts; "
                            "print(torch.__version__, torch.cuda.is_available(), mmcv.__version__, mmdet.__version__, "
                            "mmpose.__version__, mmengine.__version__)", timeout=300)
    assert res.returncode == 0, res.stderr
    torch_v, cuda, mmcv_v, mmdet_v, mmpose_v, mmengine_v = res.stdout.split()
    assert torch_v.endswith("+cpu") and cuda == "False"
    assert (mmcv_v, mmdet_v, mmpose_v, mmengine_v) == ("2.1.0", "3.3.0", "1.3.2", "0.10.7")
    # No NVIDIA libraries came with torch (PyPI's default torch would pull gigabytes of them).
    nvidia = sh(images, MODEL_IMAGE, "ls -d /opt/venv/lib/python3*/site-packages/nvidia* 2>/dev/null | head -3")
    assert nvidia.stdout.strip() == "", nvidia.stdout
