#!/usr/bin/env bash
# Install the CPU OpenMMLab stack (mmengine, mmcv with ops, mmdet, mmpose) into a virtualenv.
#
# Usage: scripts/install_model_stack.sh VENV
#
# VENV must already hold torch (requirements/test.txt pins the CPU build). Pins come from
# requirements/model-cpu.txt. The script is idempotent: when every pinned package is installed and
# the stack imports (mmcv's compiled ops included), it returns in a couple of seconds.
#
# mmcv 2.1.0 publishes no wheel for this torch, so it is compiled from its sdist once, with only the
# ops the two models call (scripts/mmcv_subset.py --cpu: nms and roi_align, measured by
# scripts/mmcv_ops_used.py; the other ops raise a clear error when called), and the wheel is kept
# outside the repo in
#   $DOODLEPOD_CACHE/wheels/mmcv-<mmcv>_torch-<torch>_cpu-subset-<hash of the kept ops>_<pytag>/
# keyed by every version the binary depends on; a cold machine builds it, a warm one reuses it, and
# scripts/images.sh hands the same wheel to the CPU model image.
# xtcocotools is likewise built from source against the venv's numpy 2 and cached under a key that
# includes the numpy version. Builds bypass pip's own wheel cache (--no-cache-dir), which is keyed by
# the sdist alone and would hand back an mmcv compiled against another torch. Wheels land in the
# cache by an atomic rename, and a lock serialises
# concurrent builds, so an interrupted or parallel run never leaves a half-written wheel behind.
#
# Env:
#   DOODLEPOD_CACHE       cache root (default ~/.cache/doodlepod)
#   DOODLEPOD_MMCV_WHEEL  a ready mmcv wheel to seed the cache with on a cold cache (it must have
#                         been built against the same torch/python, with at least the subset's ops;
#                         the import check verifies it)
#   MAX_JOBS              parallel compile jobs for the mmcv build (default 2)
#   DOODLEPOD_FORCE=1     reinstall even if everything looks installed
#   DOODLEPOD_MODELS_STATE_FILE  where to say how far it has got (scripts/models_state.sh; steps 2-6 of
#                         the 7 that `make run` counts, the mmcv compile by its compile units)
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
if [[ $# -ne 1 || "$1" == -h || "$1" == --help ]]; then
  usage
  [[ $# -eq 1 ]] && exit 0 || exit 2
fi

cd "$(dirname "$0")/.."
VENV=$1
PY="$VENV/bin/python"
PINS=requirements/model-cpu.txt
CACHE=${DOODLEPOD_CACHE:-$HOME/.cache/doodlepod}
WHEELS="$CACHE/wheels"
LOGS="$CACHE/logs"
start=$SECONDS
# shellcheck source=scripts/models_state.sh
source scripts/models_state.sh
STEPS=7  # of the models' preparation as `make run` counts it (bootstrap.sh: 1, run_local.sh: 7)
step() {  # step N TEXT [ETA_S]: the state file says step N of $STEPS is under way
  models_state preparing "The model server is being prepared; photos can be animated once it is ready." \
    "step $1 of $STEPS, $2" "$(($1 - 1))" "$STEPS" "${3:-60}"
}

log() { printf '[model-stack %(%H:%M:%S)T +%4ds] %s\n' -1 "$((SECONDS - start))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
pin() {  # the stack's pins, and the project's build tools (setuptools, cython) from requirements/build.txt
  local v
  v=$(sed -n "s/^$1==\([^[:space:];#]*\).*/\1/p" "$PINS" requirements/build.txt)
  [[ -n "$v" ]] || die "no pin for $1 in $PINS or requirements/build.txt"
  printf '%s' "$v"
}
pip_install() { "$PY" -m pip install --quiet --disable-pip-version-check "$@" >&2; }

[[ -x "$PY" ]] || die "$PY not found: create the venv first (make venv)"
"$PY" -c 'import torch' 2>/dev/null || die "torch is not installed in $VENV (requirements/test.txt pins it)"

MMENGINE=$(pin mmengine); MMCV=$(pin mmcv); MMDET=$(pin mmdet); MMPOSE=$(pin mmpose)
XTCOCO=$(pin xtcocotools); CHUMPY=$(pin chumpy); JSON_TRICKS=$(pin json_tricks); MUNKRES=$(pin munkres)
OPENCV=$(pin opencv-python); MATPLOTLIB=$(pin matplotlib)
SETUPTOOLS=$(pin setuptools); WHEEL=$(pin wheel); NINJA=$(pin ninja); CYTHON=$(pin cython)

read -r TORCH PYTAG < <("$PY" -c 'import sys, torch; print(torch.__version__.split("+")[0], "cp%d%d" % sys.version_info[:2])')
SUBSET=$("$PY" scripts/mmcv_subset.py --key)  # cpu-subset-<hash>: which ops the mmcv build keeps

# The import check that decides "installed": versions match the pins, mmcv is the subset build the
# cache key names (any mmcv with the ops when DOODLEPOD_MMCV_WHEEL seeded it), the compiled ops load
# and the two the models call run. Fails printing what is wrong (the last line of its stderr).
stack_ok() {
  "$PY" - "${DOODLEPOD_MMCV_WHEEL:+any}" "$SUBSET" "$MMENGINE" "$MMCV" "$MMDET" "$MMPOSE" "$XTCOCO" <<'EOF' 2>&1 >/dev/null | tail -n 1
import importlib
import sys
from importlib.metadata import PackageNotFoundError, version
want = dict(zip(["mmengine", "mmcv", "mmdet", "mmpose", "xtcocotools"], sys.argv[3:]))
for name, v in want.items():
    try:
        if version(name) != v:
            sys.exit(f"{name} {version(name)} is installed, the pin is {v}")
    except PackageNotFoundError:
        sys.exit(f"{name} is not installed")
import mmcv.ops  # noqa: F401  (loads mmcv/_ext*.so, which must match this torch)
built = getattr(importlib.import_module("mmcv._ext"), "doodlepod_subset", "mmcv with every op")
if sys.argv[1] != "any" and sys.argv[2] not in built:
    sys.exit(f"the installed mmcv is {built}, not the CPU subset {sys.argv[2]}")
from mmcv.ops import nms, roi_align  # the two ops the models call (scripts/mmcv_subset.py)
import torch
try:
    nms(torch.tensor([[0.0, 0, 10, 10], [1, 1, 11, 11]]), torch.tensor([0.9, 0.8]), 0.5)
    roi_align(torch.ones(1, 1, 4, 4), torch.tensor([[0.0, 0, 0, 4, 4]]), (2, 2), 1.0, 0, "avg", True)
except Exception as err:
    sys.exit(f"mmcv's nms/roi_align do not run on CPU: {err}")
import mmdet.apis  # noqa: F401
import mmpose.apis  # noqa: F401
import xtcocotools.mask  # noqa: F401  (compiled against numpy: fails on an ABI mismatch)
EOF
}

mmcv_ops_ok() {  # the compiled ops load and the two the models call run (a tiny nms and roi_align)
  "$PY" -c 'import torch; from mmcv.ops import nms, roi_align
nms(torch.tensor([[0.0, 0, 10, 10], [1, 1, 11, 11]]), torch.tensor([0.9, 0.8]), 0.5)
roi_align(torch.ones(1, 1, 4, 4), torch.tensor([[0.0, 0, 0, 4, 4]]), (2, 2), 1.0, 0, "avg", True)' 2>/dev/null
}

why=forced
if [[ "${DOODLEPOD_FORCE:-0}" != 1 ]] && why=$(stack_ok); then
  log "OpenMMLab stack already installed in $VENV (mmcv $MMCV, mmdet $MMDET, mmpose $MMPOSE, torch $TORCH)"
  exit 0
fi
log "installing the CPU OpenMMLab stack into $VENV (torch $TORCH, $PYTAG; $why); wheel cache: $WHEELS"
mkdir -p "$WHEELS" "$LOGS"

# cached_wheel NAME VERSION KEY BUILD_FUNCTION: print the path of NAME's wheel in the cache
# directory KEY, building it with BUILD_FUNCTION OUTDIR LOGFILE when missing. Builds run under a
# lock and land by rename, so readers only ever see complete wheels.
cached_wheel() {
  local name=$1 ver=$2 key=$3 build=$4 dir="$WHEELS/$3" whl
  mkdir -p "$dir"
  whl=$(find "$dir" -maxdepth 1 -name "${name}-${ver}-*.whl" -print -quit)
  if [[ -z "$whl" ]]; then
    exec 9>"$WHEELS/.lock-$key"
    if ! flock -n 9; then
      log "waiting for another process building $key"
      flock 9
    fi
    whl=$(find "$dir" -maxdepth 1 -name "${name}-${ver}-*.whl" -print -quit)
    if [[ -z "$whl" ]]; then
      local tmp buildlog t0=$SECONDS
      tmp=$(mktemp -d "$WHEELS/.build-$key.XXXXXX")
      buildlog="$LOGS/build-$key-$(date +%Y%m%d-%H%M%S).log"
      log "cold cache: building $name $ver ($key); log: $buildlog"
      if ! "$build" "$tmp" "$buildlog"; then
        tail -n 30 "$buildlog" >&2 || true
        rm -rf "$tmp"
        die "building $name $ver failed; full log: $buildlog"
      fi
      local built
      built=$(find "$tmp" -maxdepth 1 -name "${name}-${ver}-*.whl" -print -quit)
      [[ -n "$built" ]] || die "build of $name produced no wheel (see $buildlog)"
      mv "$built" "$dir/"
      rm -rf "$tmp"
      whl="$dir/$(basename "$built")"
      log "built $(basename "$whl") ($(du -h "$whl" | cut -f1)) in $((SECONDS - t0)) s; cached in $dir"
    fi
    flock -u 9
    exec 9>&-
  else
    log "warm cache: $(basename "$whl") from $dir"
  fi
  printf '%s' "$whl"
}

# Run a long command in the background, logging a heartbeat every minute so the build is visibly alive.
# Progress goes to the state file every 5 s (for mmcv: ninja's [done/total] compile units and an
# estimate of the time left from the pace so far).
with_heartbeat() {
  local what=$1 buildlog=$2; shift 2
  "$@" >"$buildlog" 2>&1 &
  local pid=$! t0=$SECONDS next=$((SECONDS + 60)) step n_done n_total eta
  while kill -0 "$pid" 2>/dev/null; do
    sleep 5
    kill -0 "$pid" 2>/dev/null || break
    step=$(grep -o -E '^[[:space:]]*\[[0-9]+/[0-9]+\]' "$buildlog" | tail -n 1 | tr -d '[:space:][]' || true)
    if [[ $what == mmcv* && $step =~ ^([0-9]+)/([0-9]+)$ ]]; then
      n_done=${BASH_REMATCH[1]} n_total=${BASH_REMATCH[2]}
      eta=$(( n_done > 0 ? (SECONDS - t0) * (n_total - n_done) / n_done + 60 : 240 ))
      models_state preparing "The model server is being prepared: mmcv compiles once per machine ($(( (SECONDS - t0) / 60 )) min so far); photos can be animated once it is ready." \
        "step 3 of $STEPS, compiling mmcv's C++ ops" "$n_done" "$n_total" "$eta"
    fi
    if (( SECONDS >= next )); then
      log "  still building $what ($(( (SECONDS - t0) / 60 )) min${step:+, compile step [$step]})"
      next=$((SECONDS + 60))
    fi
  done
  wait "$pid"
}

build_mmcv() {
  local out=$1 buildlog=$2
  if [[ -n "${DOODLEPOD_MMCV_WHEEL:-}" ]]; then
    [[ -f "$DOODLEPOD_MMCV_WHEEL" ]] || die "DOODLEPOD_MMCV_WHEEL=$DOODLEPOD_MMCV_WHEEL does not exist"
    log "seeding the cache with $DOODLEPOD_MMCV_WHEEL"
    cp "$DOODLEPOD_MMCV_WHEEL" "$out/" && echo "seeded from $DOODLEPOD_MMCV_WHEEL" >"$buildlog"
    return
  fi
  # the sdist (pip's own client and indexes; its metadata step needs the venv's torch), cut down to
  # the ops the models call, then compiled as usual
  # (kept in $CACHE/src: a rebuild of another subset or torch needs no download)
  local sdist="$CACHE/src/mmcv-$MMCV.tar.gz" src="$out/src" dl
  if [[ ! -f $sdist ]]; then
    mkdir -p "$CACHE/src"
    dl=$(mktemp -d "$CACHE/src/.download.XXXXXX")
    "$PY" -m pip download --quiet --no-deps --no-binary mmcv --no-build-isolation --no-cache-dir \
      --disable-pip-version-check -d "$dl" "mmcv==$MMCV" >"$buildlog" 2>&1 \
      || { rm -rf "$dl"; log "cannot download mmcv $MMCV's source (pip download mmcv==$MMCV)"; return 1; }
    [[ -f $dl/mmcv-$MMCV.tar.gz ]] || { rm -rf "$dl"; log "pip download left no mmcv-$MMCV.tar.gz"; return 1; }
    mv "$dl/mmcv-$MMCV.tar.gz" "$sdist" && rm -rf "$dl"
  fi
  mkdir -p "$src" && tar xzf "$sdist" -C "$src" || { log "cannot unpack $sdist"; return 1; }
  "$PY" scripts/mmcv_subset.py --cpu "$src/mmcv-$MMCV" >&2 || return 1
  log "compiling mmcv $MMCV for CPU with only the ops the models call ($SUBSET, MAX_JOBS=${MAX_JOBS:-2});" \
      "about 3 min on 2 idle cores, once per torch version"
  with_heartbeat "mmcv $MMCV" "$buildlog" \
    env MMCV_WITH_OPS=1 FORCE_CUDA=0 MAX_JOBS="${MAX_JOBS:-2}" \
    "$PY" -m pip wheel -v --no-deps --no-build-isolation --no-cache-dir --disable-pip-version-check \
    -w "$out" "$src/mmcv-$MMCV"
}

build_xtcocotools() {
  local out=$1 buildlog=$2
  with_heartbeat "xtcocotools $XTCOCO" "$buildlog" \
    "$PY" -m pip wheel --no-deps --no-build-isolation --no-binary xtcocotools --no-cache-dir --disable-pip-version-check \
    -w "$out" "xtcocotools==$XTCOCO"
}

t=$SECONDS
MMCV_KEY="mmcv-${MMCV}_torch-${TORCH}_${SUBSET}_${PYTAG}"
if find "$WHEELS/$MMCV_KEY" -maxdepth 1 -name "mmcv-${MMCV}-*.whl" 2>/dev/null | grep -q . || [[ -n ${DOODLEPOD_MMCV_WHEEL:-} ]]; then
  mmcv_eta=90
else
  mmcv_eta=300  # the subset compile: ~4 CPU-min, 2-3 min on 2 idle cores
fi
step 2 "installing build tools and mmengine" "$mmcv_eta"
pip_install "setuptools==$SETUPTOOLS" "wheel==$WHEEL" "ninja==$NINJA" "cython==$CYTHON"
log "build tools ready ($((SECONDS - t)) s)"

t=$SECONDS
pip_install "mmengine==$MMENGINE" "opencv-python==$OPENCV" "matplotlib==$MATPLOTLIB"
log "mmengine $MMENGINE ready ($((SECONDS - t)) s)"

step 3 "installing mmcv" "$mmcv_eta"
mmcv_whl=$(cached_wheel mmcv "$MMCV" "$MMCV_KEY" build_mmcv)
t=$SECONDS
pip_install --force-reinstall --no-deps "$mmcv_whl"
pip_install "$mmcv_whl"  # its (pure Python) dependencies
if ! mmcv_ops_ok; then
  log "the cached mmcv wheel does not load against torch $TORCH; moving it aside and rebuilding"
  mv "$mmcv_whl" "$mmcv_whl.bad-$(date +%s)"
  unset DOODLEPOD_MMCV_WHEEL
  mmcv_whl=$(cached_wheel mmcv "$MMCV" "$MMCV_KEY" build_mmcv)
  pip_install --force-reinstall --no-deps "$mmcv_whl"
  mmcv_ops_ok || die "mmcv $MMCV ops do not load even after a rebuild: $("$PY" -c 'import mmcv.ops' 2>&1 | tail -n 1)"
fi
log "mmcv $MMCV with ops ready ($((SECONDS - t)) s)"

step 4 "installing mmdet" 60
t=$SECONDS
pip_install "mmdet==$MMDET"
log "mmdet $MMDET ready ($((SECONDS - t)) s)"

step 5 "building xtcocotools, installing mmpose's dependencies" 50
NUMPY=$("$PY" -c 'import numpy; print(numpy.__version__)')
xtcoco_whl=$(cached_wheel xtcocotools "$XTCOCO" "xtcocotools-${XTCOCO}_numpy-${NUMPY}_${PYTAG}" build_xtcocotools)
t=$SECONDS
pip_install --force-reinstall --no-deps "$xtcoco_whl"
pip_install "$xtcoco_whl"
# chumpy's setup.py imports pip, so it cannot build in an isolated environment.
pip_install --no-build-isolation "chumpy==$CHUMPY"
pip_install "json_tricks==$JSON_TRICKS" "munkres==$MUNKRES"
log "mmpose runtime dependencies ready ($((SECONDS - t)) s)"

# torchvision: mmpose imports only transforms.ToPILImage from it, and there is no CPU torchvision
# wheel for this torch. Use the real one when present; otherwise the documented CPU-only shim.
if "$PY" -c 'import importlib.metadata as m; m.version("torchvision")' 2>/dev/null; then
  log "real torchvision present: not installing the CPU shim"
else
  shim_src=$(mktemp -d)
  cp -r models/torchvision-shim/. "$shim_src/"   # build in a copy: keep build/ out of the repo
  pip_install --no-build-isolation --no-deps "$shim_src"
  rm -rf "$shim_src"
  log "installed doodlepod-cpu-torchvision-shim (models/torchvision-shim/README.md says why)"
fi

step 6 "installing mmpose" 30
t=$SECONDS
pip_install --no-deps "mmpose==$MMPOSE"
log "mmpose $MMPOSE ready ($((SECONDS - t)) s)"

if ! out=$(stack_ok); then
  "$PY" - <<'EOF' >&2 || true
import mmcv.ops, mmdet.apis, mmpose.apis, xtcocotools.mask
EOF
  die "the OpenMMLab stack is not right in $VENV: $out"
fi
log "OpenMMLab stack ready in $((SECONDS - start)) s: mmengine $MMENGINE, mmcv $MMCV (ops, CPU), mmdet $MMDET, mmpose $MMPOSE, torch $TORCH"
