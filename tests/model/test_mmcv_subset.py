"""mmcv's CPU subset build (scripts/mmcv_subset.py --cpu, built by scripts/install_model_stack.sh).

The cutting itself on a small sdist-shaped tree (pure file work, and the patched ext_loader run
against a stand-in extension), the real sdist when the install script cached it, and the venv's
mmcv: the subset the scripts name, every ``mmcv.ops`` name importable, a left-out op failing with
the clear error when called. The ops the models call running is tests/model/test_model_stack.py's
job; both models answering on this build is tests/model/test_handlers.py's (TorchServe) and
test_model_released_path.py's (full-size configs).
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import types
from pathlib import Path

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import mmcv_subset  # noqa: E402

CACHE = Path(os.environ.get("DOODLEPOD_CACHE", Path.home() / ".cache" / "doodlepod"))

PYBIND = """// Copyright (c) OpenMMLab. All rights reserved
#include <torch/extension.h>

#include "pytorch_cpp_helper.hpp"

std::string get_compiler_version();

Tensor nms(Tensor boxes, Tensor scores, float iou_threshold, int offset);

void deform_conv_forward(Tensor input, Tensor weight, Tensor offset,
                         Tensor output, int kW);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("get_compiler_version", &get_compiler_version, "get_compiler_version");
  m.def("nms", &nms, "nms (CPU/CUDA) ", py::arg("boxes"), py::arg("scores"),
        py::arg("iou_threshold"), py::arg("offset"));
  m.def("deform_conv_forward", &deform_conv_forward, "deform_conv_forward",
        py::arg("input"), py::arg("weight"), py::arg("offset"),
        py::arg("output"), py::arg("kW"));
}
"""
WRAPPERS = {
    "info.cpp": "std::string get_compiler_version() {\n  return \"GCC\";\n}\n",
    "nms.cpp": "Tensor nms_impl(Tensor boxes);\n\nTensor nms(Tensor boxes, Tensor scores, float iou_threshold,\n"
               "           int offset) {\n  return nms_impl(boxes);\n}\n",
    "deform_conv.cpp": "void deform_conv_forward(Tensor input, Tensor weight, Tensor offset,\n"
                       "                         Tensor output, int kW) {\n}\n",
}
EXT_LOADER_HEAD = "import importlib\n\nif True:  # mmcv: if torch.__version__ != 'parrots':\n\n"


def fake_sdist(root: Path) -> Path:
    """The parts of an unpacked mmcv-2.1.0/ that the CPU cut reads and writes."""
    pytorch = root / "mmcv" / "ops" / "csrc" / "pytorch"
    (pytorch / "cpu").mkdir(parents=True)
    (pytorch / "pybind.cpp").write_text(PYBIND)
    for name, text in WRAPPERS.items():
        (pytorch / name).write_text(text)
    (pytorch / "cpu" / "nms.cpp").write_text("// nms_cpu\n")
    (pytorch / "cpu" / "deform_conv.cpp").write_text("// deform_conv_cpu\n")
    (root / "mmcv" / "utils").mkdir(parents=True)
    (root / "mmcv" / "utils" / "ext_loader.py").write_text(EXT_LOADER_HEAD + mmcv_subset.LOAD_EXT)
    return root


def load_ext_of(root: Path, ext: types.ModuleType):
    """The cut tree's mmcv/utils/ext_loader.py, run against ``ext`` standing in for mmcv._ext."""
    spec = importlib.util.spec_from_file_location("cut_ext_loader", root / "mmcv" / "utils" / "ext_loader.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.importlib = types.SimpleNamespace(import_module=lambda name: ext)
    return module


def test_cpu_cut_keeps_only_the_ops_wrappers_kernels_and_bindings(tmp_path):
    root = fake_sdist(tmp_path / "mmcv-2.1.0")
    done = mmcv_subset.cpu_subset(root, ops=("nms",))
    pytorch = root / "mmcv" / "ops" / "csrc" / "pytorch"
    assert sorted(p.name for p in pytorch.glob("*.cpp")) == ["info.cpp", "nms.cpp", "pybind.cpp"]
    assert [p.name for p in (pytorch / "cpu").glob("*.cpp")] == ["nms.cpp"]
    bind = (pytorch / "pybind.cpp").read_text()
    assert 'm.def("nms", &nms' in bind and 'm.def("get_compiler_version"' in bind
    assert "deform_conv_forward" not in bind          # neither declared nor bound
    assert f'm.attr("doodlepod_subset") = "doodlepod\'s CPU subset {mmcv_subset.cpu_key()} (ops nms;' in bind
    assert "3 -> 2 bindings (get_compiler_version, nms)" in done[0]


def test_cut_loader_imports_every_op_module_and_a_left_out_op_raises_when_called(tmp_path):
    root = fake_sdist(tmp_path / "mmcv-2.1.0")
    mmcv_subset.cpu_subset(root, ops=("nms",))

    def nms(*args):
        return "kept"

    ext = types.SimpleNamespace(nms=nms, doodlepod_subset="doodlepod's CPU subset cpu-subset-x (ops nms)")
    loader = load_ext_of(root, ext)
    assert loader.load_ext("_ext", ["nms"]) is ext              # nothing left out: the extension itself
    mixed = loader.load_ext("_ext", ["nms", "nms_rotated"])      # what mmcv/ops/nms.py asks for
    assert mixed.nms() == "kept"
    left_out = loader.load_ext("_ext", ["deform_conv_forward"])  # a whole op module left out: imports
    with pytest.raises(loader.OpNotCompiledError, match=r"mmcv op 'nms_rotated' is not compiled into this mmcv "
                                                        r"build: doodlepod's CPU subset cpu-subset-x \(ops nms\)"):
        mixed.nms_rotated(1, 2)
    with pytest.raises(NotImplementedError, match="'deform_conv_forward'.*MMCV_WITH_OPS=1"):
        left_out.deform_conv_forward()
    with pytest.raises(AttributeError):
        mixed.not_asked_for  # noqa: B018  (only the names the op module asked for are stood in for)


def test_uncut_extension_keeps_mmcvs_own_import_time_check(tmp_path):
    root = fake_sdist(tmp_path / "mmcv-2.1.0")
    mmcv_subset.cpu_subset(root, ops=("nms",))
    loader = load_ext_of(root, types.SimpleNamespace(nms=len))   # no doodlepod_subset: a full build
    with pytest.raises(AssertionError, match="nms_rotated miss in module _ext"):
        loader.load_ext("_ext", ["nms", "nms_rotated"])


def test_cut_refuses_sources_it_does_not_know(tmp_path):
    root = fake_sdist(tmp_path / "a")
    mmcv_subset.cpu_subset(root, ops=("nms",))
    with pytest.raises(mmcv_subset.SubsetError, match="already cut down"):
        mmcv_subset.cpu_subset(root, ops=("nms",))
    root = fake_sdist(tmp_path / "b")
    with pytest.raises(mmcv_subset.SubsetError, match=r"wrappers of \['roi_align'\] not found"):
        mmcv_subset.cpu_subset(root, ops=("nms", "roi_align"))
    loader = root / "mmcv" / "utils" / "ext_loader.py"
    loader.write_text(loader.read_text().replace("assert hasattr", "assert  hasattr"))
    with pytest.raises(mmcv_subset.SubsetError, match="load_ext found 0 times"):
        mmcv_subset.cpu_subset(root, ops=("nms",))
    res = subprocess.run([sys.executable, str(REPO / "scripts" / "mmcv_subset.py"), "--cpu", str(tmp_path / "none")],
                         capture_output=True, text=True)
    assert res.returncode == 1 and "not an unpacked mmcv 2.x sdist" in res.stderr


def test_cpu_cut_of_the_real_sdist(tmp_path):
    sdist = CACHE / "src" / "mmcv-2.1.0.tar.gz"
    if not sdist.is_file():
        pytest.skip(f"{sdist} is not cached (scripts/install_model_stack.sh keeps it after a build)")
    with tarfile.open(sdist) as tar:
        # the "data" filter where this Python has it (3.11.4 on; Debian bookworm's 3.11.2 has not)
        tar.extractall(tmp_path, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    res = subprocess.run([sys.executable, str(REPO / "scripts" / "mmcv_subset.py"), "--cpu", str(tmp_path / "mmcv-2.1.0")],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert ("113 -> 7 bindings (get_compiler_version, get_compiling_cuda_version, nms, softnms, nms_match, "
            "roi_align_forward, roi_align_backward)") in res.stdout
    pytorch = tmp_path / "mmcv-2.1.0" / "mmcv" / "ops" / "csrc" / "pytorch"
    units = sorted(p.relative_to(pytorch).as_posix() for p in [*pytorch.glob("*.cpp"), *pytorch.glob("cpu/*.cpp")])
    assert units == ["cpu/nms.cpp", "cpu/roi_align.cpp", "info.cpp", "nms.cpp", "pybind.cpp", "roi_align.cpp"]
    shutil.rmtree(tmp_path / "mmcv-2.1.0")


@pytest.mark.model_stack
def test_the_venvs_mmcv_is_the_subset_and_a_left_out_op_fails_clearly_when_called():
    import mmcv.ops
    import torch
    from mmcv.ops import box_iou_rotated, nms_rotated  # imported like mmdet does: no error yet

    ext = importlib.import_module("mmcv._ext")
    assert mmcv_subset.cpu_key() in getattr(ext, "doodlepod_subset", "mmcv built with every op")
    assert hasattr(mmcv.ops, "DeformConv2d") and hasattr(mmcv.ops, "ModulatedDeformConv2d")
    boxes = torch.tensor([[5.0, 5.0, 4.0, 4.0, 0.0], [6.0, 5.0, 4.0, 4.0, 0.1]])
    with pytest.raises(NotImplementedError, match=r"mmcv op 'box_iou_rotated' is not compiled into this mmcv build: "
                                                  r"doodlepod's CPU subset cpu-subset-\w+ \(ops nms, roi_align;"):
        box_iou_rotated(boxes, boxes)
    with pytest.raises(NotImplementedError, match=r"mmcv op 'nms_rotated' is not compiled"):
        nms_rotated(boxes, torch.tensor([0.9, 0.8]), 0.5)
