#!/usr/bin/env bash
# The model handlers on a CUDA GPU: build the OpenMMLab stack there, then bench/gpu_models.py.
#
# Usage: scripts/gpu_check.sh DIR
#
# For a machine with an NVIDIA GPU, a CUDA toolkit (nvcc) matching its torch, and Python with torch,
# torchvision, numpy, scipy, matplotlib, opencv and Pillow already installed, but no package index
# (the lent GPU machines: torch 2.11 + CUDA 13, Python 3.12). DIR brings the rest:
#   DIR/whl/*.whl             mmengine, mmdet, mmpose and the pure-Python or cp312 wheels they need
#                             (docs/speed.md, "Model handlers on a GPU", lists them), installed with
#                             --no-index --no-deps into a scratch folder put first on PYTHONPATH;
#   DIR/src/mmcv-2.1.0.tar.gz mmcv's sdist, compiled here: OpenMMLab publishes mmcv 2.1.0 wheels only
#                             up to torch 2.1 / CUDA 12.1. scripts/mmcv_subset.py --cuda keeps the two
#                             CUDA kernels the detector calls (nms, roi_align) and every CPU kernel
#                             (141 s on the lent H100 machine's 16 cores; all 58 CUDA sources were
#                             not tried there);
#   DIR/mmcv_ext.so.gz        optional: an mmcv/_ext*.so this script built before (it writes one to
#                             $OUT when it fits), used instead of compiling again (saves about 3 min).
# A lease-sized run: GPU_CHECK_BUDGET_S=185 GPU_BENCH_ARGS="--sizes full --cpu-repeat 2 --warmup 2"
# with DIR/mmcv_ext.so.gz (the CPU runs of the full detector take a minute of it).
# If the CUDA build fails, mmcv is built with CPU kernels only (FORCE_CUDA=0) and the bench runs with
# --cpu-ops-shim (nms and roi_align on CPU copies of the GPU tensors); the log says which ran.
#
# Everything goes to $OUT/log as well as stdout (the build's own output to $OUT/mmcv-build.log, the
# figures to $OUT/gpu_models.json), so a run stopped at its time limit still says how far it got.
#
# Env: PYTHON (default python3), OUT (default /tmp/gpu-check), GPU_CHECK_BUDGET_S (whole script,
# default 400), GPU_CHECK_BUILD_S (the CUDA build's limit, default 240), MAX_JOBS (default nproc),
# TORCH_CUDA_ARCH_LIST (default: the GPU's own, e.g. 9.0 on an H100), GPU_CHECK_CXX (the C++
# compiler for the build), GPU_BENCH_ARGS (extra arguments for bench/gpu_models.py).
#
# Before the bench, a separate process runs mmcv's nms and roi_align on the CPU and the GPU; if it
# fails (crashes), the bench answers both ops with torchvision's kernels (--torchvision-ops).
set -uo pipefail

if [[ $# -ne 1 || $1 == -h || $1 == --help ]]; then
  sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  [[ $# -eq 1 ]] && exit 0 || exit 2
fi
DIR=$(cd "$1" && pwd) || exit 2
cd "$(dirname "$0")/.." || exit 2
REPO=$PWD
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/gpu-check}
BUDGET=${GPU_CHECK_BUDGET_S:-400}
BUILD_S=${GPU_CHECK_BUILD_S:-240}
JOBS=${MAX_JOBS:-$(nproc)}
SCRATCH=$(mktemp -d /tmp/gpu-check.XXXXXX)
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log") 2>&1
export PYTHONUNBUFFERED=1
start=$SECONDS
log() { printf '[gpu-check %(%H:%M:%S)T +%4ds] %s\n' -1 "$((SECONDS - start))" "$*"; }
left() { echo $((BUDGET - (SECONDS - start))); }

log "== machine"
nvidia-smi || log "nvidia-smi: not available"
nvcc --version | tail -n 2 || log "nvcc: not available"
log "cores $(nproc), memory $(free -g | awk '/^Mem/ {print $2}') GiB, java: $(command -v java || echo none)," \
    "torchserve: $(command -v torchserve || echo none)"
"$PY" - <<'EOF'
import sys, torch
print("python", sys.version.split()[0], "| torch", torch.__version__, "| torch CUDA", torch.version.cuda,
      "| cuDNN", torch.backends.cudnn.version(), "| CUDA available", torch.cuda.is_available(),
      "|", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")
EOF

log "== Python packages from $DIR/whl"
SITE=$SCRATCH/site
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" "$DIR"/whl/*.whl \
  || { log "ERROR: installing the wheels failed"; exit 1; }
export PYTHONPATH=$SCRATCH/mmcv:$SITE:$REPO
"$PY" -c 'import mmengine, xtcocotools.mask, pycocotools.mask, shapely, terminaltables, json_tricks, munkres' \
  || { log "ERROR: the wheels do not import"; exit 1; }

# torch's extension builder finds the toolkit through CUDA_HOME, else nvcc on PATH (which may be a
# wrapper script outside the toolkit): name it when the usual place has it.
if [[ -z ${CUDA_HOME:-} ]]; then
  for d in /usr/local/cuda "$(dirname "$(dirname "$(readlink -f "$(command -v nvcc || echo /nonexistent)")")")"; do
    if [[ -x $d/bin/nvcc ]]; then export CUDA_HOME=$d; break; fi
  done
fi
log "CUDA_HOME=${CUDA_HOME:-unset}"
# torch's CUDA headers include cuSPARSE's, cuBLAS's and cuSOLVER's. A toolkit assembled from pip
# packages can lack them while torch's own nvidia-* packages carry them: put those folders on the
# compilers' include path (searched after the -I folders, so the toolkit's own headers still win).
missing=()
for h in cusparse.h cublas_v2.h cublasLt.h cusolverDn.h cusolver_common.h; do
  [[ -f ${CUDA_HOME:-/nonexistent}/include/$h ]] || missing+=("$h")
done
if (( ${#missing[@]} )); then
  inc=$("$PY" - "${missing[@]}" <<'EOF'
import os
import sys
try:
    import nvidia
except ImportError:
    sys.exit(0)
want, dirs = set(sys.argv[1:]), []
for root in nvidia.__path__:
    for d, _, files in os.walk(root):
        if want & set(files) and d not in dirs:
            dirs.append(d)
print(":".join(dirs))
EOF
)
  [[ -n $inc ]] && export CPLUS_INCLUDE_PATH=$inc${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH}
  log "not in \$CUDA_HOME/include: ${missing[*]}; found in torch's nvidia packages: ${inc:-none}"
fi
# The lent GPU machines set CXX=/opt/gcc/bin/g++, which links libstdc++ statically into the
# extension; its helpers that build strings with iostreams (mmcv.ops.get_compiling_cuda_version)
# then crash with a segfault, while nms and roi_align run. GPU_CHECK_CXX names another compiler
# (not tried there yet).
[[ -n ${GPU_CHECK_CXX:-} ]] && export CXX=$GPU_CHECK_CXX
log "C++ compiler: ${CXX:-default}"
if [[ -z ${TORCH_CUDA_ARCH_LIST:-} ]]; then
  TORCH_CUDA_ARCH_LIST=$("$PY" -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability(0))' 2>/dev/null || echo 9.0)
fi
export TORCH_CUDA_ARCH_LIST

# build_mmcv LABEL FORCE_CUDA LIMIT_S [SUBSET]: compile mmcv from the sdist into $SCRATCH/mmcv,
# logging ninja's progress every 20 s; returns the build's status (124 when it ran out of time).
build_mmcv() {
  local label=$1 force_cuda=$2 limit=$3 subset=${4:-} src=$SCRATCH/src-$1 blog=$OUT/mmcv-build.log pid rc from t0=$SECONDS
  rm -rf "$src" && mkdir -p "$src" && tar xzf "$DIR/src/mmcv-2.1.0.tar.gz" -C "$src" || return 1
  src=$src/mmcv-2.1.0
  if [[ -n $subset ]]; then
    "$PY" "$REPO/scripts/mmcv_subset.py" --cuda "$src" || return 1
  fi
  log "building mmcv ($label: MMCV_WITH_OPS=1 FORCE_CUDA=$force_cuda TORCH_CUDA_ARCH_LIST=$TORCH_CUDA_ARCH_LIST" \
      "MAX_JOBS=$JOBS), at most ${limit} s; log: mmcv-build.log"
  echo "==== $label" >>"$blog"
  from=$(wc -l <"$blog")
  (cd "$src" && MMCV_WITH_OPS=1 FORCE_CUDA=$force_cuda MAX_JOBS=$JOBS \
     timeout --kill-after=5 "$limit" "$PY" -m pip wheel -v --no-deps --no-build-isolation --no-cache-dir \
     -w "$SCRATCH/wheel-$label" .) >>"$blog" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 20
    log "  $label: $((SECONDS - t0)) s, compile step $(grep -o -E '^[[:space:]]*\[[0-9]+/[0-9]+\]' "$blog" | tr -d ' ' | tail -n 1)"
  done
  wait "$pid"; rc=$?
  if [[ $rc -ne 0 ]]; then
    log "mmcv $label build failed (status $rc$([[ $rc -eq 124 ]] && echo ", out of time") after $((SECONDS - t0)) s):"
    tail -n +"$((from + 1))" "$blog" | grep -E -m 12 'error|Error|FAILED' | cut -c1-300
    return "$rc"
  fi
  rm -rf "$SCRATCH/mmcv" && mkdir -p "$SCRATCH/mmcv"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SCRATCH/mmcv" "$SCRATCH/wheel-$label"/mmcv-*.whl || return 1
  log "mmcv $label built in $((SECONDS - t0)) s"
  "$PY" -c 'import mmcv.ops' || { log "mmcv $label: the extension does not load"; return 1; }
}

log "== mmcv"
path=""
if [[ -f $DIR/mmcv_ext.so.gz ]]; then
  # the Python side from the sdist (no ops compiled), then the prebuilt extension beside it
  src=$SCRATCH/src-py && mkdir -p "$src" && tar xzf "$DIR/src/mmcv-2.1.0.tar.gz" -C "$src"
  (cd "$src/mmcv-2.1.0" && MMCV_WITH_OPS=0 "$PY" -m pip install -q --no-index --no-deps --no-build-isolation \
     --no-compile --target "$SCRATCH/mmcv" .) >>"$OUT/mmcv-build.log" 2>&1
  gunzip -c "$DIR/mmcv_ext.so.gz" >"$SCRATCH/mmcv/mmcv/_ext.$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("SOABI"))').so"
  path="prebuilt extension from $DIR/mmcv_ext.so.gz"
elif build_mmcv cuda-subset 1 "$BUILD_S" subset; then
  path="CUDA kernels for nms and roi_align (scripts/mmcv_subset.py --cuda), CPU kernels for every op"
elif (( $(left) >= 200 )); then
  log "falling back to mmcv with CPU kernels only"
  build_mmcv cpu 0 $(( $(left) - 120 )) && path="CPU kernels only" && GPU_BENCH_ARGS="${GPU_BENCH_ARGS:-} --cpu-ops-shim"
fi
if [[ -z $path ]] || ! "$PY" -c 'import mmcv.ops, mmdet.apis, mmpose.apis'; then
  log "ERROR: no usable mmcv (see mmcv-build.log)"
  exit 1
fi
log "mmcv ready: $path"
ext=$(ls "$SCRATCH"/mmcv/mmcv/_ext*.so 2>/dev/null | head -n 1)
if [[ -n $ext ]] && ! readelf -d "$ext" 2>/dev/null | grep -q 'libstdc++'; then
  log "WARNING: $(basename "$ext") links libstdc++ statically: its string-returning helpers" \
      "(mmcv.ops.get_compiling_cuda_version) crash, so nothing here calls them"
fi
log "== smoke test of mmcv's nms and roi_align (in a process of its own: a crash must not end the check)"
SMOKE_CUDA=1
[[ ${GPU_BENCH_ARGS:-} == *--cpu-ops-shim* ]] && SMOKE_CUDA=0
if SMOKE_CUDA=$SMOKE_CUDA timeout 120 "$PY" - <<'EOF'
import os
import torch
from mmcv.ops import nms, roi_align
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() and os.environ["SMOKE_CUDA"] == "1" else [])
g = torch.Generator().manual_seed(0)
xy = torch.rand(200, 2, generator=g) * 400
boxes = torch.cat([xy, xy + torch.rand(200, 2, generator=g) * 100 + 5], 1)
scores = torch.rand(200, generator=g)
feats = torch.rand(1, 8, 40, 40, generator=g)
rois = torch.cat([torch.zeros(16, 1), boxes[:16] / 10], 1)
for d in devices:
    _, keep = nms(boxes.to(d), scores.to(d), 0.5)
    r = roi_align(feats.to(d), rois.to(d), (7, 7), 1.0, 0, "avg", True)
    print(f"mmcv ops on {d}: nms kept {len(keep)} of 200, roi_align {tuple(r.shape)} sum {float(r.sum()):.4f}")
EOF
then
  log "mmcv's nms and roi_align ran"
else
  log "mmcv's ops failed (status $?): the bench answers nms and roi_align with torchvision's kernels"
  GPU_BENCH_ARGS="${GPU_BENCH_ARGS:-} --torchvision-ops"
  path="$path; its ops failed, torchvision's nms/roi_align used"
fi
if [[ -n $ext && ! -f $DIR/mmcv_ext.so.gz ]]; then  # bring the build back when it fits, for the next run
  cp "$ext" "$SCRATCH/ext.so" && { strip --strip-debug "$SCRATCH/ext.so" 2>/dev/null || true; }
  gzip -9 -c "$SCRATCH/ext.so" >"$SCRATCH/mmcv_ext.so.gz"
  if (( $(stat -c %s "$SCRATCH/mmcv_ext.so.gz") < 15 * 1024 * 1024 )); then
    cp "$SCRATCH/mmcv_ext.so.gz" "$OUT/" && log "kept the extension: \$OUT/mmcv_ext.so.gz ($(du -h "$OUT/mmcv_ext.so.gz" | cut -f1))"
  fi
fi

log "== bench/gpu_models.py (${GPU_BENCH_ARGS:-default arguments}), at most $(( $(left) - 5 )) s"
# shellcheck disable=SC2086  # GPU_BENCH_ARGS is a list of arguments
timeout --kill-after=5 $(( $(left) - 5 )) "$PY" bench/gpu_models.py --json "$OUT/gpu_models.json" ${GPU_BENCH_ARGS:-}
rc=$?
nvidia-smi --query-gpu=name,memory.used,memory.total,temperature.gpu,power.draw --format=csv 2>/dev/null
log "done (bench status $rc$([[ $rc -eq 124 ]] && echo ", out of time")); mmcv: $path"
rm -rf "$SCRATCH"
exit "$rc"
