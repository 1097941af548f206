"""The model image's pins are one consistent set, and the same OpenMMLab versions the tests run.

Docker cannot build here, so this reads Dockerfile.model as text: CUDA base image vs the cuXXX tag
vs the PyTorch wheel index vs the OpenMMLab mmcv wheel index (which must list a prebuilt mmcv for
that CUDA/torch pair), torch vs torchvision, mmcv vs the range mmdet/mmpose accept, and
mmengine/mmcv/mmdet/mmpose/TorchServe vs requirements/model-cpu.txt and requirements/test.txt.
Each check is a function run on the real file and on a deliberately broken copy.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import REPO

DOCKERFILE = REPO / "Dockerfile.model"
CPU_PINS = REPO / "requirements" / "model-cpu.txt"
GPU_CONSTRAINTS = REPO / "requirements" / "model-gpu.txt"
TEST_PINS = REPO / "requirements" / "test.txt"
CONFIG_PROPERTIES = REPO / "handlers" / "config.properties"

# Linux CUDA/torch pairs for which OpenMMLab publishes mmcv 2.1.0 wheels (from mmcv's
# docs/en/_static/version.json, the table behind its install page), and the Python tags of those
# wheels (cp38..cp311 for the torch 2.x builds).
MMCV_PREBUILT = {"2.1.0": {("11.8", "2.0"), ("11.7", "2.0"), ("11.8", "2.1"), ("12.1", "2.1"),
                           ("11.7", "1.13"), ("11.6", "1.13"), ("11.6", "1.12"), ("11.3", "1.12")}}
MMCV_PYTHONS = {"3.8", "3.9", "3.10", "3.11"}
# torch minor -> the torchvision minor built with it (PyTorch's compatibility table).
TORCHVISION_FOR_TORCH = {"2.0": "0.15", "2.1": "0.16", "2.2": "0.17", "2.3": "0.18", "2.4": "0.19"}
# CUDA builds PyTorch published per torch minor.
TORCH_CUDA_BUILDS = {"2.0": {"11.7", "11.8"}, "2.1": {"11.8", "12.1"}, "2.2": {"11.8", "12.1"}}


def dockerfile_args(text: str) -> dict[str, str]:
    return dict(re.findall(r"^ARG\s+([A-Z_]+)=(\S+)\s*$", text, re.M))


def pins(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;#]+)", line.strip())
        if m:
            out[m.group(1).lower().replace("_", "-")] = m.group(2)
    return out


def minor(version: str) -> str:
    return ".".join(version.split("+")[0].split(".")[:2])


def pin_problems(text: str, cpu: dict[str, str], test: dict[str, str], gpu: dict[str, str]) -> list[str]:
    """Every inconsistency among the Dockerfile's pins and the CPU stack's (empty: consistent)."""
    a = dockerfile_args(text)
    problems = []
    m = re.fullmatch(r"nvidia/cuda:(\d+)\.(\d+)\.\d+-cudnn(\d+)-(?:runtime|devel)-ubuntu(\d+\.\d+)",
                     a.get("CUDA_IMAGE", ""))
    if not m:
        return [f"CUDA_IMAGE {a.get('CUDA_IMAGE')!r} is not an exact nvidia/cuda X.Y.Z-cudnnN tag"]
    cuda = f"{m.group(1)}.{m.group(2)}"
    cu_tag = f"cu{m.group(1)}{m.group(2)}"
    if a.get("CUDA_TAG") != cu_tag:
        problems.append(f"CUDA_TAG {a.get('CUDA_TAG')} but the base image is CUDA {cuda} ({cu_tag})")
    if not a.get("TORCH_INDEX", "").rstrip("/").endswith("/" + cu_tag):
        problems.append(f"TORCH_INDEX {a.get('TORCH_INDEX')} is not the {cu_tag} wheel index")
    torch_v, tv_v, mmcv_v = a.get("TORCH_VERSION", ""), a.get("TORCHVISION_VERSION", ""), a.get("MMCV_VERSION", "")
    for key, value in (("TORCH_VERSION", torch_v), ("TORCHVISION_VERSION", tv_v), ("MMCV_VERSION", mmcv_v)):
        if not re.fullmatch(r"\d+\.\d+\.\d+", value):
            problems.append(f"{key} {value!r} is not an exact version")
    if cuda not in TORCH_CUDA_BUILDS.get(minor(torch_v), set()):
        problems.append(f"no torch {torch_v} build for CUDA {cuda}")
    if TORCHVISION_FOR_TORCH.get(minor(torch_v)) != minor(tv_v):
        problems.append(f"torchvision {tv_v} does not go with torch {torch_v}")
    mmcv_index = a.get("MMCV_INDEX", "")
    im = re.fullmatch(r"https://download\.openmmlab\.com/mmcv/dist/(cu\d+)/torch(\d+\.\d+)(?:\.0)?/index\.html",
                      mmcv_index)
    if not im:
        problems.append(f"MMCV_INDEX {mmcv_index!r} is not an OpenMMLab mmcv wheel index")
    else:
        if im.group(1) != cu_tag:
            problems.append(f"MMCV_INDEX is for {im.group(1)}, the image is {cu_tag}")
        if im.group(2) != minor(torch_v):
            problems.append(f"MMCV_INDEX is for torch {im.group(2)}, the image has torch {torch_v}")
    if (cuda, minor(torch_v)) not in MMCV_PREBUILT.get(mmcv_v, set()):
        problems.append(f"OpenMMLab publishes no mmcv {mmcv_v} wheel for CUDA {cuda} + torch {minor(torch_v)}")
    py = re.search(r"\bpython(3\.\d+)-venv\b", text)
    if not py or py.group(1) not in MMCV_PYTHONS:
        problems.append(f"the image's Python ({py.group(1) if py else 'unknown'}) has no mmcv {mmcv_v} wheel")
    if not re.search(r"--only-binary[ =]mmcv\b", text):
        problems.append("mmcv is not installed with --only-binary mmcv (a missing wheel would compile silently)")
    for name, arg in (("mmcv", "MMCV_VERSION"), ("mmengine", "MMENGINE_VERSION"), ("mmdet", "MMDET_VERSION"),
                      ("mmpose", "MMPOSE_VERSION")):
        if a.get(arg) != cpu.get(name):
            problems.append(f"{arg} {a.get(arg)} but requirements/model-cpu.txt pins {name}=={cpu.get(name)}")
    if a.get("TORCHSERVE_VERSION") != test.get("torchserve"):
        problems.append(f"TORCHSERVE_VERSION {a.get('TORCHSERVE_VERSION')} but the tests run torchserve "
                        f"{test.get('torchserve')}")
    if test.get("torch-model-archiver") != test.get("torchserve"):
        problems.append("torch-model-archiver and torchserve pins differ in requirements/test.txt")
    numpy = gpu.get("numpy", "")
    if minor(torch_v) in {"2.0", "2.1"} and not numpy.startswith("1."):
        problems.append(f"numpy {numpy or '(unpinned)'} in the image, but torch {torch_v} and its mmcv wheels "
                        "are built against numpy 1.x")
    return problems


def current() -> tuple[str, dict[str, str], dict[str, str], dict[str, str]]:
    return DOCKERFILE.read_text(), pins(CPU_PINS), pins(TEST_PINS), pins(GPU_CONSTRAINTS)


def test_dockerfile_pins_are_consistent():
    assert pin_problems(*current()) == []


@pytest.mark.parametrize("old, new, expect", [
    ("ARG TORCH_VERSION=2.1.2", "ARG TORCH_VERSION=2.2.1", "MMCV_INDEX is for torch 2.1"),
    ("ARG TORCHVISION_VERSION=0.16.2", "ARG TORCHVISION_VERSION=0.17.1", "torchvision 0.17.1 does not go"),
    ("ARG CUDA_TAG=cu121", "ARG CUDA_TAG=cu118", "CUDA_TAG cu118"),
    ("cuda:12.1.1-cudnn8", "cuda:12.4.1-cudnn8", "no torch 2.1.2 build for CUDA 12.4"),
    ("ARG MMDET_VERSION=3.3.0", "ARG MMDET_VERSION=3.2.0", "MMDET_VERSION 3.2.0"),
    ("--only-binary mmcv", "", "--only-binary"),
    ("python3.10-venv", "python3.12-venv", "Python (3.12)"),
])
def test_inconsistent_pins_are_caught(old, new, expect):
    text, cpu, test, gpu = current()
    assert old in text
    problems = pin_problems(text.replace(old, new), cpu, test, gpu)
    assert any(expect in p for p in problems), problems


def test_numpy_2_with_torch_2_1_is_caught():
    text, cpu, test, gpu = current()
    assert any("numpy" in p for p in pin_problems(text, cpu, test, {**gpu, "numpy": "2.1.0"}))


@pytest.mark.model_stack
def test_mmcv_pin_is_inside_what_mmdet_and_mmpose_accept():
    import mmdet
    import mmpose
    from mmengine.utils import digit_version

    mmcv = digit_version(dockerfile_args(DOCKERFILE.read_text())["MMCV_VERSION"])
    assert digit_version(mmdet.mmcv_minimum_version) <= mmcv < digit_version(mmdet.mmcv_maximum_version)
    assert digit_version(mmpose.mmcv_minimum_version) <= mmcv <= digit_version(mmpose.mmcv_maximum_version)
    installed = {m.__name__: m.__version__ for m in (mmdet, mmpose)}
    assert installed == {"mmdet": pins(CPU_PINS)["mmdet"], "mmpose": pins(CPU_PINS)["mmpose"]}


def _properties(path: Path) -> dict[str, str]:
    text = re.sub(r"\\\n\s*", "", path.read_text())
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))


def test_config_properties_matches_archives_and_image():
    props = _properties(CONFIG_PROPERTIES)
    assert props["disable_token_authorization"] == "true"
    assert props["default_workers_per_model"] == "1"
    names = ["drawn_humanoid_detector", "drawn_humanoid_pose_estimator"]
    assert props["load_models"].split(",") == [f"{n}.mar" for n in names]
    models = json.loads(props["models"])
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_archives", REPO / "scripts" / "build_archives.py")
    version = re.search(r'^ARCHIVE_VERSION = "([^"]+)"', spec.loader.get_source("build_archives"), re.M).group(1)
    for name in names:
        entry = models[name][version]
        assert entry["marName"] == f"{name}.mar"
        assert entry["minWorkers"] == entry["maxWorkers"] == 1
        assert entry["batchSize"] >= 1 and entry["maxBatchDelay"] >= 0 and entry["responseTimeout"] > 0
    for key in ("inference_address", "management_address", "metrics_address"):
        assert props[key].startswith("http://127.0.0.1:"), key
    assert int(props["max_request_size"]) >= 8 * 1024 * 1024
    assert not re.match(props["allowed_urls"], "https://example.com/x.mar")   # local archives only


def test_image_runs_torchserve_in_the_foreground_as_non_root():
    text = DOCKERFILE.read_text()
    instructions = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    assert "sleep infinity" not in instructions
    cmd = re.search(r"^CMD\s+(\[.*?\])\s*$", text, re.M | re.S).group(1)
    argv = json.loads(cmd.replace("\\\n", ""))                   # exec form: a JSON array
    assert argv[0] == "torchserve" and "--foreground" in argv and "--start" not in argv
    assert "--disable-token-auth" in argv
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert users and users[-1].split(":")[0] not in {"0", "root"}
    assert re.search(r"^COPY .*handlers/readiness\.py", text, re.M)
    assert re.search(r'HEALTHCHECK [^\n]*\\\n\s*CMD \["doodlepod-model-ready"\]', text)
