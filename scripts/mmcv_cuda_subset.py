#!/usr/bin/env python3
"""Cut an unpacked mmcv 2.1.0 sdist down to the CUDA kernels doodlepod's two models call.

    python scripts/mmcv_cuda_subset.py SRC_DIR            # SRC_DIR: the unpacked mmcv-2.1.0/

Why: OpenMMLab publishes mmcv 2.1.0 wheels only up to torch 2.1 / CUDA 12.1, so on a newer CUDA
stack mmcv has to be compiled, and its 58 CUDA sources (filtered_lrelu.cu alone takes minutes) cost
far more than a short GPU check can spend. The Mask R-CNN detector calls two mmcv ops on the GPU,
``nms`` (RPN and the box head, through ``batched_nms``) and ``roi_align`` (box and mask RoI
extractors); the pose model calls none. So this keeps:

* every C++ source (the CPU ops and the Python bindings: ``import mmcv.ops`` checks that all of the
  bindings exist, so none can go), compiled as usual;
* ``pytorch/cuda/nms_cuda.cu`` and ``pytorch/cuda/roi_align_cuda.cu``, and the parts of
  ``pytorch/cuda/cudabind.cpp`` that register those two kernels for CUDA tensors.

Every other op keeps its CPU kernel and, on a CUDA tensor, fails with mmcv's own "not implemented"
error instead of running. Three wrappers call a CUDA function directly under ``MMCV_WITH_CUDA``
(nms_rotated, nms_quadri, sparse conv); they are compiled as in a CPU-only build ("Not compiled with
GPU support"), since their kernels are left out.

Also: ``THC/THCAtomics.cuh`` (included by mmcv's CUDA helper) is gone from recent torch; its
replacement ``ATen/cuda/Atomic.cuh`` has been there since torch 1.11.

Build the result as usual (``MMCV_WITH_OPS=1 FORCE_CUDA=1 pip wheel --no-build-isolation ...``);
scripts/gpu_check.sh does. Prints what it changed; exits non-zero if the sources are not the ones
it knows (a marker not found exactly once).
"""
from __future__ import annotations

import sys
from pathlib import Path

#: CUDA kernels kept (pytorch/cuda/<name>), and each one's block in cudabind.cpp: the first line of
#: the block and the last (both found exactly once).
KEEP = {
    "nms_cuda.cu": ("Tensor NMSCUDAKernelLauncher(Tensor boxes, Tensor scores, float iou_threshold,",
                    "REGISTER_DEVICE_IMPL(nms_impl, CUDA, nms_cuda);"),
    "roi_align_cuda.cu": ("void ROIAlignForwardCUDAKernelLauncher(Tensor input, Tensor rois, Tensor output,",
                          "REGISTER_DEVICE_IMPL(roi_align_backward_impl, CUDA, roi_align_backward_cuda);"),
}
#: wrappers whose MMCV_WITH_CUDA branches call kernels that are left out
DIRECT_CUDA_CALLERS = ("nms_rotated.cpp", "nms_quadri.cpp", "spconv_ops.cpp")
THC_INCLUDE = "#include <THC/THCAtomics.cuh>"
ATEN_ATOMIC = "#include <ATen/cuda/Atomic.cuh>"


class SubsetError(Exception):
    pass


def _block(lines: list[str], first: str, last: str) -> list[str]:
    starts = [i for i, line in enumerate(lines) if line.rstrip() == first]
    ends = [i for i, line in enumerate(lines) if line.strip() == last]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise SubsetError(f"cudabind.cpp: block {first!r} .. {last!r} found {len(starts)}/{len(ends)} times")
    return lines[starts[0]:ends[0] + 1]


def subset(src: Path) -> list[str]:
    """Rewrite the sources under ``src`` (an unpacked mmcv sdist) in place; return what changed."""
    csrc = src / "mmcv" / "ops" / "csrc"
    cuda = csrc / "pytorch" / "cuda"
    bind = cuda / "cudabind.cpp"
    if not bind.is_file():
        raise SubsetError(f"{bind} not found: not an unpacked mmcv 2.x sdist")
    done: list[str] = []

    lines = bind.read_text().splitlines()
    head = [line for line in lines[:5] if line.startswith("#include")]
    if head != ['#include "pytorch_cpp_helper.hpp"', '#include "pytorch_device_registry.hpp"']:
        raise SubsetError(f"cudabind.cpp starts with {head}, expected mmcv 2.1.0's two includes")
    out = head + [""]
    for first, last in KEEP.values():
        out += _block(lines, first, last) + [""]
    bind.write_text("// Cut down by doodlepod's scripts/mmcv_cuda_subset.py: only the kernels below.\n"
                    + "\n".join(out))
    done.append(f"cudabind.cpp: {len(lines)} -> {len(out)} lines ({', '.join(KEEP)})")

    dropped = sorted(p.name for p in cuda.glob("*.cu") if p.name not in KEEP)
    missing = [name for name in KEEP if not (cuda / name).is_file()]
    if missing:
        raise SubsetError(f"kernels to keep not found: {missing}")
    for name in dropped:
        (cuda / name).unlink()
    done.append(f"dropped {len(dropped)} CUDA sources, kept {len(KEEP)}")

    for name in DIRECT_CUDA_CALLERS:
        path = csrc / "pytorch" / name
        text = path.read_text()
        n = text.count("#ifdef MMCV_WITH_CUDA\n")
        if n == 0:
            raise SubsetError(f"{path}: no '#ifdef MMCV_WITH_CUDA' to turn off")
        path.write_text(text.replace("#ifdef MMCV_WITH_CUDA\n", "#ifdef MMCV_WITH_CUDA_KERNELS_LEFT_OUT\n"))
        done.append(f"{name}: {n} CUDA branch(es) compiled as in a CPU-only build")

    helper = csrc / "common" / "pytorch_cuda_helper.hpp"
    text = helper.read_text()
    if THC_INCLUDE in text:
        helper.write_text(text.replace(THC_INCLUDE, ATEN_ATOMIC))
        done.append(f"pytorch_cuda_helper.hpp: {THC_INCLUDE} -> {ATEN_ATOMIC}")
    return done


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    try:
        for line in subset(Path(argv[0])):
            print(f"mmcv_cuda_subset: {line}")
    except SubsetError as err:
        print(f"mmcv_cuda_subset: error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
