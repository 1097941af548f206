#!/usr/bin/env python3
"""Cut an unpacked mmcv 2.1.0 sdist down to the ops doodlepod's two models call, for CPU or CUDA.

    python scripts/mmcv_subset.py --cpu SRC_DIR    # the venv's and the CPU image's mmcv
    python scripts/mmcv_subset.py --cuda SRC_DIR   # the GPU check's mmcv (scripts/gpu_check.sh)
    python scripts/mmcv_subset.py --key            # the CPU subset's name in wheel cache keys

SRC_DIR is the unpacked ``mmcv-2.1.0/``; the sources are rewritten in place, then built as usual
(``MMCV_WITH_OPS=1 pip wheel --no-build-isolation SRC_DIR``, with ``FORCE_CUDA=0`` or ``1``). Prints
what it changed; exits non-zero, naming the marker, when the sources are not the ones it knows.

What the models call, measured by ``scripts/mmcv_ops_used.py`` (every function of ``mmcv._ext``
called while both handlers answer through their real ``load_model``/``handle`` path on CPU, tiny
and full-size configs alike): the Mask R-CNN detector calls ``nms`` (RPN and box head, through
``batched_nms``) and ``roi_align_forward`` (box and mask RoI extractors); the top-down pose model
calls none. So:

``--cpu`` (the default CPU build compiles 77 units: every op's wrapper and CPU kernel): keeps the
wrapper (``csrc/pytorch/<op>.cpp``) and CPU kernel (``csrc/pytorch/cpu/<op>.cpp``) of the ops in
``CPU_OPS``, plus ``info.cpp`` (``get_compiler_version``, which mmengine's environment report
calls); ``pybind.cpp`` declares and binds only the functions those wrappers define (``nms``,
``softnms``, ``nms_match``, ``roi_align_forward``/``_backward`` and the two version queries) and
names the subset in ``mmcv._ext.doodlepod_subset``. ``import mmcv.ops`` still works: it imports
every op module, each asking ``mmcv/utils/ext_loader.py`` for its bindings, and the patched loader
hands an op module whose bindings are missing a stand-in whose functions raise
``OpNotCompiledError`` (a ``NotImplementedError`` naming the op and this build) when CALLED, so
mmdet's and mmpose's imports of ``mmcv.ops`` names keep working and a left-out op fails loudly.
An mmcv built without the subset marker keeps mmcv's own assertion (a binding missing at import).

``--cuda``: OpenMMLab publishes mmcv 2.1.0 wheels only up to torch 2.1 / CUDA 12.1, so on a newer
CUDA stack mmcv has to be compiled, and its 58 CUDA sources (filtered_lrelu.cu alone takes
minutes) cost far more than a short GPU check can spend. This keeps every C++ source (CPU ops and
bindings) and, of the CUDA ones, ``pytorch/cuda/nms_cuda.cu`` and ``pytorch/cuda/roi_align_cuda.cu``
and the parts of ``pytorch/cuda/cudabind.cpp`` that register those two kernels for CUDA tensors.
Every other op keeps its CPU kernel and, on a CUDA tensor, fails with mmcv's own "not implemented"
error. Three wrappers call a CUDA function directly under ``MMCV_WITH_CUDA`` (nms_rotated,
nms_quadri, sparse conv); they are compiled as in a CPU-only build ("Not compiled with GPU
support"), since their kernels are left out. Also: ``THC/THCAtomics.cuh`` (included by mmcv's CUDA
helper) is gone from recent torch; its replacement ``ATen/cuda/Atomic.cuh`` has been there since
torch 1.11.
"""
from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

#: The ops (csrc/pytorch/<op>.cpp and cpu/<op>.cpp) the CPU build keeps, each with the functions of
#: mmcv._ext the two models call from it: scripts/mmcv_ops_used.py measures them and fails on a call
#: not listed here; cpu_subset() fails if its op's wrapper does not define and bind one.
CPU_CALLED = {"nms": ("nms",), "roi_align": ("roi_align_forward",)}
CPU_OPS = tuple(CPU_CALLED)
#: Sources every CPU subset keeps besides the ops: the compiler/CUDA version queries.
CPU_ALWAYS = ("info",)
#: Bump when the cutting itself changes in a way that changes the built wheel.
CPU_FORMAT = 1

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

MODULE_OPEN = "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {"
#: mmcv 2.1.0's load_ext for PyTorch (mmcv/utils/ext_loader.py), replaced by the subset-aware one
LOAD_EXT = """    def load_ext(name, funcs):
        ext = importlib.import_module('mmcv.' + name)
        for fun in funcs:
            assert hasattr(ext, fun), f'{fun} miss in module {name}'
        return ext
"""
SUBSET_LOAD_EXT = '''    class OpNotCompiledError(NotImplementedError):
        """An mmcv op left out of this build (doodlepod's scripts/mmcv_subset.py)."""

    def _left_out(fun, subset):
        def left_out(*args, **kwargs):
            raise OpNotCompiledError(
                f'mmcv op {fun!r} is not compiled into this mmcv build: {subset}. '
                'It keeps only the ops doodlepod\\'s models call; to use this one, build mmcv '
                'with every op (MMCV_WITH_OPS=1 pip wheel --no-binary mmcv mmcv==2.1.0)')

        left_out.__name__ = fun
        return left_out

    class _SubsetExt:
        """mmcv._ext of a subset build, for one op module: the compiled functions, and for each
        one left out a function raising OpNotCompiledError when called (imports keep working)."""

        def __init__(self, ext, missing):
            self._ext = ext
            self._missing = frozenset(missing)

        def __getattr__(self, fun):
            if fun in self._missing:
                return _left_out(fun, self._ext.doodlepod_subset)
            return getattr(self._ext, fun)

    def load_ext(name, funcs):
        ext = importlib.import_module('mmcv.' + name)
        missing = [fun for fun in funcs if not hasattr(ext, fun)]
        if missing and hasattr(ext, 'doodlepod_subset'):
            return _SubsetExt(ext, missing)
        for fun in funcs:
            assert hasattr(ext, fun), f'{fun} miss in module {name}'
        return ext
'''


class SubsetError(Exception):
    pass


def cpu_key() -> str:
    """The CPU subset's name in cache keys: changes whenever the kept ops or the cutting change."""
    text = f"format {CPU_FORMAT}\n" + "\n".join(sorted(CPU_ALWAYS + CPU_OPS))
    return "cpu-subset-" + hashlib.sha256(text.encode()).hexdigest()[:10]


def _csrc(src: Path) -> Path:
    csrc = src / "mmcv" / "ops" / "csrc"
    if not (csrc / "pytorch" / "pybind.cpp").is_file():
        raise SubsetError(f"{csrc / 'pytorch' / 'pybind.cpp'} not found: not an unpacked mmcv 2.x sdist")
    return csrc


# ---- --cpu ------------------------------------------------------------------------------------------
def _definition(text: str, cname: str) -> bool:
    """Whether C++ source ``text`` defines (not just declares) a top-level function ``cname``."""
    return re.search(rf"(?m)^[A-Za-z][^;{{}}]*?\b{re.escape(cname)}\s*\([^;{{}}]*\)\s*\{{", text) is not None


def _parse_pybind(text: str) -> tuple[list[str], dict[str, str], list[tuple[str, str, str]]]:
    """Split mmcv's pybind.cpp into (header lines, {function: declaration}, [(binding, function, m.def)])."""
    if text.count(MODULE_OPEN) != 1:
        raise SubsetError(f"pybind.cpp: {MODULE_OPEN!r} found {text.count(MODULE_OPEN)} times, expected once")
    pre, body = text.split(MODULE_OPEN)
    header = [line for line in pre.splitlines() if line.startswith(("#", "//"))]
    rest = "\n".join(line for line in pre.splitlines() if not line.startswith(("#", "//")))
    decls: dict[str, str] = {}
    for chunk in (c.strip() for c in rest.split(";")):
        if not chunk:
            continue
        m = re.search(r"(\w+)\s*\(", chunk)
        if m is None or m.group(1) in decls:
            raise SubsetError(f"pybind.cpp: cannot read the declaration {chunk[:80]!r}")
        decls[m.group(1)] = chunk + ";"
    body = body.rstrip()
    if not body.endswith("}"):
        raise SubsetError("pybind.cpp: the module body does not end with '}'")
    defs = []
    for stmt in (s.strip() for s in body[:-1].split(";")):
        if not stmt:
            continue
        m = re.match(r'm\.def\(\s*"(\w+)",\s*&(\w+)', stmt)
        if m is None or m.group(2) not in decls:
            raise SubsetError(f"pybind.cpp: cannot read the binding {stmt[:80]!r}")
        defs.append((m.group(1), m.group(2), stmt + ";"))
    return header, decls, defs


def cpu_subset(src: Path, ops: tuple[str, ...] = CPU_OPS) -> list[str]:
    """Rewrite the sources under ``src`` for a CPU build of ``ops`` only; return what changed."""
    pytorch = _csrc(src) / "pytorch"
    keep = tuple(CPU_ALWAYS) + tuple(ops)
    missing = [op for op in keep if not (pytorch / f"{op}.cpp").is_file()]
    if missing:
        raise SubsetError(f"wrappers of {missing} not found in {pytorch}")
    bind = pytorch / "pybind.cpp"
    text = bind.read_text()
    if "doodlepod_subset" in text:
        raise SubsetError(f"{bind} is already cut down: start again from the unpacked sdist")
    header, decls, defs = _parse_pybind(text)

    wrappers = {op: (pytorch / f"{op}.cpp").read_text() for op in keep}
    kept = [(py, c, stmt) for py, c, stmt in defs if any(_definition(w, c) for w in wrappers.values())]
    bound = {py for py, c, _ in kept}
    for op in ops:
        if not any(_definition(wrappers[op], c) for _, c, _ in kept):
            raise SubsetError(f"{op}.cpp defines none of pybind.cpp's bound functions")
        unbound = [fun for fun in CPU_CALLED.get(op, ()) if fun not in bound]
        if unbound:
            raise SubsetError(f"{op}.cpp does not define the called function(s) {unbound}")
    names = ", ".join(py for py, _, _ in kept)
    label = f"doodlepod's CPU subset {cpu_key()} (ops {', '.join(ops)}; scripts/mmcv_subset.py)"
    out = [f"// Cut down by {label}: only these bindings.", *header, ""]
    out += [decls[c] + "\n" for c in dict.fromkeys(c for _, c, _ in kept)]
    out += [MODULE_OPEN, *("  " + stmt for _, _, stmt in kept), f'  m.attr("doodlepod_subset") = "{label}";', "}", ""]
    bind.write_text("\n".join(out))
    done = [f"pybind.cpp: {len(defs)} -> {len(kept)} bindings ({names})"]

    wrappers_cut = sorted(p.name for p in pytorch.glob("*.cpp") if p.stem not in keep and p.name != "pybind.cpp")
    kernels = pytorch / "cpu"
    kernels_kept = sorted(p.name for p in kernels.glob("*.cpp") if p.stem in keep)
    kernels_cut = sorted(p.name for p in kernels.glob("*.cpp") if p.stem not in keep)
    for path in [pytorch / n for n in wrappers_cut] + [kernels / n for n in kernels_cut]:
        path.unlink()
    done.append(f"kept wrappers {', '.join(f'{op}.cpp' for op in keep)} and pybind.cpp; dropped {len(wrappers_cut)}")
    done.append(f"kept CPU kernels {', '.join(kernels_kept) or 'none'}; dropped {len(kernels_cut)}")

    loader = src / "mmcv" / "utils" / "ext_loader.py"
    text = loader.read_text()
    if text.count(LOAD_EXT) != 1:
        raise SubsetError(f"{loader}: mmcv 2.1.0's load_ext found {text.count(LOAD_EXT)} times, expected once")
    loader.write_text(text.replace(LOAD_EXT, SUBSET_LOAD_EXT))
    done.append("ext_loader.py: op modules whose bindings are left out load; calling one raises OpNotCompiledError")
    return done


# ---- --cuda -----------------------------------------------------------------------------------------
def _block(lines: list[str], first: str, last: str) -> list[str]:
    starts = [i for i, line in enumerate(lines) if line.rstrip() == first]
    ends = [i for i, line in enumerate(lines) if line.strip() == last]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise SubsetError(f"cudabind.cpp: block {first!r} .. {last!r} found {len(starts)}/{len(ends)} times")
    return lines[starts[0]:ends[0] + 1]


def cuda_subset(src: Path) -> list[str]:
    """Rewrite the sources under ``src`` (an unpacked mmcv sdist) in place; return what changed."""
    csrc = _csrc(src)
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
    bind.write_text("// Cut down by doodlepod's scripts/mmcv_subset.py --cuda: only the kernels below.\n"
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
    if argv in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if argv == ["--key"]:
        print(cpu_key())
        return 0
    if len(argv) != 2 or argv[0] not in ("--cpu", "--cuda"):
        print(__doc__, file=sys.stderr)
        return 2
    cut = cpu_subset if argv[0] == "--cpu" else cuda_subset
    try:
        for line in cut(Path(argv[1])):
            print(f"mmcv_subset {argv[0]}: {line}")
    except (SubsetError, OSError) as err:
        print(f"mmcv_subset {argv[0]}: error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
