"""The CPU OpenMMLab stack that scripts/install_model_stack.sh puts in the dev venv.

Checks what the handlers rely on: mmcv's compiled ops load against this torch and compute (RoIAlign
and NMS on CPU, the ops Mask R-CNN uses), the pinned versions are the installed ones, the script's
already-installed path is a quick no-op, and the CPU torchvision shim provides exactly ToPILImage
and refuses the rest loudly.
"""
from __future__ import annotations

import re
import subprocess
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.conftest import REPO

pytestmark = pytest.mark.model_stack

SCRIPT = REPO / "scripts" / "install_model_stack.sh"


def cpu_pins() -> dict[str, str]:
    text = (REPO / "requirements" / "model-cpu.txt").read_text()
    return dict(re.findall(r"^([A-Za-z0-9_.\-]+)==(\S+)", text, re.M))


def test_installed_versions_are_the_pinned_ones():
    pins = cpu_pins()
    for name in ("mmengine", "mmcv", "mmdet", "mmpose", "xtcocotools"):
        assert version(name) == pins[name], name


def test_mmcv_compiled_ops_run_on_cpu():
    torch.set_num_threads(1)
    from mmcv.ops import nms, roi_align

    feats = torch.arange(16, dtype=torch.float32).reshape(1, 1, 4, 4)
    rois = torch.tensor([[0, 0.0, 0.0, 4.0, 4.0]])
    out = roi_align(feats, rois, (2, 2), 1.0, 0, "avg", True)
    assert out.shape == (1, 1, 2, 2)
    assert out.flatten().tolist() == pytest.approx([2.5, 4.5, 10.5, 12.5])  # bin means of 4y + x
    boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 11, 11], [50, 50, 60, 60]], dtype=torch.float32)
    _, keep = nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5)
    assert keep.tolist() == [0, 2]


def test_install_script_is_a_quick_no_op_when_installed(tmp_path):
    venv = Path(torch.__file__).resolve().parents[4]       # <venv>/lib/pythonX.Y/site-packages/torch
    res = subprocess.run([str(SCRIPT), str(venv)], capture_output=True, text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "DOODLEPOD_CACHE": str(tmp_path)})
    assert res.returncode == 0, res.stderr
    assert "already installed" in res.stderr
    assert not any(tmp_path.iterdir())        # nothing built or downloaded


def test_install_script_usage():
    assert subprocess.run([str(SCRIPT), "--help"], capture_output=True, text=True).stdout.startswith("Install the CPU")
    res = subprocess.run([str(SCRIPT)], capture_output=True, text=True)
    assert res.returncode == 2


def test_torchvision_is_the_shim_or_real():
    import torchvision

    if not getattr(torchvision, "IS_DOODLEPOD_SHIM", False):
        pytest.skip(f"a real torchvision {torchvision.__version__} is installed")
    from torchvision.transforms import ToPILImage

    img = ToPILImage()(torch.zeros(3, 4, 5))
    assert img.size == (5, 4) and img.mode == "RGB"
    assert ToPILImage()(np.full((4, 5), 0.5, np.float32)).getpixel((0, 0)) == 127
    with pytest.raises(AttributeError, match="torchvision-shim"):
        torchvision.ops  # noqa: B018
    with pytest.raises(ImportError):
        from torchvision.transforms import Resize  # noqa: F401
    import mmpose.apis  # noqa: F401  (the import the shim exists for)
