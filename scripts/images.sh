#!/usr/bin/env bash
# Build doodlepod's images: what `make images` calls.
#
# Usage: scripts/images.sh [app] [model]     (default: both)
#
#   doodlepod-app:TAG        Dockerfile.app: the API (gunicorn)
#   doodlepod-worker:TAG     Dockerfile.app --build-arg ROLE=worker: the render worker, the app image plus
#                            the pose model of motions from videos (the only process that runs it)
#   doodlepod-model:TAG-cpu  Dockerfile.model --build-arg DEVICE=cpu: TorchServe and both models on CPUs
#                            (the GPU build, `docker build -f Dockerfile.model .`, needs NVIDIA's CUDA
#                            image, PyTorch's CUDA index and OpenMMLab's wheels: docs/deployment.md)
#
# With podman or docker, whichever answers (DOODLEPOD_ENGINE picks one; scripts/engine.sh). The
# Python base image both Dockerfiles start FROM is pulled when missing; where no registry answers
# it is built from Debian packages instead (scripts/base_image.sh), and the script says so.
# The CPU model image gets mmcv and xtcocotools from the wheels the venv bootstrap compiled and
# cached (scripts/install_model_stack.sh, under $DOODLEPOD_CACHE/wheels), and torch's CPU wheel from
# this machine's pip when it has one (else the image's pip takes it from PyPI's CPU index); without
# cached wheels the build compiles them itself (mmcv's same CPU subset: scripts/mmcv_subset.py).
# Prints each image's size and build time.
#
# Env:
#   DOODLEPOD_IMAGE_TAG      tag of both images (default 0.1.0, the one pod.yaml names)
#   DOODLEPOD_MODEL_WEIGHTS  auto | released | finder | tiny (default auto: AnimatedDrawings' released
#                            weights where they can be downloaded, else the ink finder's archives,
#                            no trained weights; tiny: random-initialised models, for tests only)
#   DOODLEPOD_ENGINE         podman | docker (default: the first that answers)
#   DOODLEPOD_CACHE          cache root of the venv bootstrap's wheels (default ~/.cache/doodlepod)
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
targets=()
for a in "$@"; do
  case $a in
    app|model) targets+=("$a") ;;
    -h|--help) usage; exit 0 ;;
    *) echo "images.sh: unknown argument '$a'" >&2; usage >&2; exit 2 ;;
  esac
done
[[ ${#targets[@]} -gt 0 ]] || targets=(app model)

cd "$(dirname "$0")/.."
ENGINE_LOG_TAG=images
# shellcheck source=scripts/engine.sh
source scripts/engine.sh
TAG=${DOODLEPOD_IMAGE_TAG:-0.1.0}
WEIGHTS=${DOODLEPOD_MODEL_WEIGHTS:-auto}
CACHE=${DOODLEPOD_CACHE:-$HOME/.cache/doodlepod}
log() { engine_log "$@"; }
die() { engine_log "ERROR: $*"; exit 1; }
pin() { sed -n "s/^$1==\([^[:space:];#]*\).*/\1/p" "$2" | head -n 1; }
size_mb() { "$ENGINE" image inspect --format '{{.Size}}' "$1" | awk '{printf "%.0f MB", $1/1e6}'; }

engine_detect || exit 1
log "container engine: $ENGINE ($("$ENGINE" --version))"

# ---- the base image ------------------------------------------------------------------------------
BASE=$(sed -n 's/^FROM \([^ ]*\) AS kernel$/\1/p' Dockerfile.app)
[[ -n $BASE ]] || die "cannot read the base image from Dockerfile.app's first FROM"
if "$ENGINE" image inspect "$BASE" >/dev/null 2>&1; then
  log "base image $BASE: present"
elif timeout 120 "$ENGINE" pull -q "$BASE" >/dev/null 2>&1; then
  log "base image $BASE: pulled"
else
  log "no registry answers for $BASE: building it from Debian packages instead (scripts/base_image.sh)"
  scripts/base_image.sh "$ENGINE" "$BASE"
fi
engine_configure "$BASE" || exit 1
mapfile -t build_opts < <(engine_build_opts)
[[ ${#build_opts[@]} -eq 0 ]] || log "build steps see this machine's CA bundle (read-only, not stored in the images)"

declare -A took built
build() {  # build NAME IMAGE ARGS...: one image, timed
  local name=$1 image=$2 t0=$SECONDS; shift 2
  log "building $image ($name)"
  "$ENGINE" build "${build_opts[@]}" -t "$image" "$@" . || die "building $image failed"
  took[$name]=$((SECONDS - t0))
  built[$name]=$image
  log "built $image in ${took[$name]} s: $(size_mb "$image")"
}

for target in "${targets[@]}"; do
  case $target in
  app)
    build app "doodlepod-app:$TAG" -f Dockerfile.app --build-arg ROLE=app
    build worker "doodlepod-worker:$TAG" -f Dockerfile.app --build-arg ROLE=worker
    ;;
  model)
    # mmcv and xtcocotools: the venv bootstrap's cached wheels, for this torch/numpy/Python 3.11.
    TORCH=$(pin torch requirements/test.txt); NUMPY=$(pin numpy requirements/animator.txt)
    MMCV=$(pin mmcv requirements/model-cpu.txt); XTCOCO=$(pin xtcocotools requirements/model-cpu.txt)
    SUBSET=$(python3 scripts/mmcv_subset.py --key)  # the ops install_model_stack.sh's mmcv keeps
    model_args=(-f Dockerfile.model --build-arg DEVICE=cpu)
    ctx=$CACHE/image-wheels
    mmcv_whl=$(find "$CACHE/wheels/mmcv-${MMCV}_torch-${TORCH}_${SUBSET}_cp311" -maxdepth 1 -name "mmcv-$MMCV-*.whl" 2>/dev/null | head -n 1 || true)
    xtc_whl=$(find "$CACHE/wheels/xtcocotools-${XTCOCO}_numpy-${NUMPY}_cp311" -maxdepth 1 -name "xtcocotools-$XTCOCO-*.whl" 2>/dev/null | head -n 1 || true)
    if [[ -n $mmcv_whl && -n $xtc_whl ]]; then
      rm -rf "$ctx" && mkdir -p "$ctx"
      cp -l "$mmcv_whl" "$xtc_whl" "$ctx/" 2>/dev/null || cp "$mmcv_whl" "$xtc_whl" "$ctx/"
      log "mmcv and xtcocotools: the venv bootstrap's cached wheels ($(basename "$mmcv_whl"), $(basename "$xtc_whl"))"
      # torch's CPU build: from this machine's pip (its own indexes and wheel folders) when it has it.
      torch_dir=$CACHE/wheels/torch-${TORCH}+cpu
      torch_whl=$(find "$torch_dir" -maxdepth 1 -name "torch-${TORCH}+cpu-*.whl" 2>/dev/null | head -n 1 || true)
      if [[ -z $torch_whl ]]; then
        pip_py=$CACHE/venv/bin/python; [[ -x $pip_py ]] || pip_py=python3
        mkdir -p "$torch_dir"
        "$pip_py" -m pip download --quiet --no-deps --only-binary :all: --python-version 3.11 \
          --platform manylinux_2_28_x86_64 -d "$torch_dir" "torch==${TORCH}+cpu" 2>/dev/null || true
        torch_whl=$(find "$torch_dir" -maxdepth 1 -name "torch-${TORCH}+cpu-*.whl" | head -n 1 || true)
      fi
      if [[ -n $torch_whl ]]; then
        cp -l "$torch_whl" "$ctx/" 2>/dev/null || cp "$torch_whl" "$ctx/"
        model_args+=(--build-arg CPU_TORCH_INDEX=)
        log "torch: $(basename "$torch_whl") from this machine's pip (cached in $torch_dir)"
      fi
      model_args+=(--build-context "wheels=$ctx")
    else
      log "no cached mmcv/xtcocotools wheels under $CACHE/wheels (\`make venv\` builds them): the image"
      log "build compiles them itself (~3 min on 2 idle cores)"
    fi
    # torchvision: torch's CPU index has the real one; without that index, the venv's shim.
    index=https://download.pytorch.org/whl/cpu
    if curl --silent --fail --head --connect-timeout 5 --max-time 15 -o /dev/null "$index/torchvision/"; then
      model_args+=(--build-arg TORCHVISION=real)
    else
      model_args+=(--build-arg TORCHVISION=shim)
      log "cannot reach $index: torchvision is models/torchvision-shim (mmpose's one import of it);"
      log "  pip check inside reports mmpose's missing torchvision (docs/deployment.md)"
    fi
    case $WEIGHTS in
      auto)
        url=https://github.com/facebookresearch/AnimatedDrawings/releases/download/v0.0.1/drawn_humanoid_pose_estimator.mar
        if curl --silent --fail --head --location --connect-timeout 5 --max-time 20 -o /dev/null "$url"; then
          WEIGHTS=released
        else
          WEIGHTS=finder
          log "cannot reach AnimatedDrawings' released weights: the model image serves the ink finder's archives"
          log "  (no trained weights: it reads the ink on the paper; docs/finder.md)"
        fi ;;
      released|finder|tiny) ;;
      *) die "DOODLEPOD_MODEL_WEIGHTS must be auto, released, finder or tiny, got '$WEIGHTS'" ;;
    esac
    build model "doodlepod-model:$TAG-cpu" "${model_args[@]}" --build-arg "MODEL_WEIGHTS=$WEIGHTS"
    ;;
  esac
done

echo
for name in app worker model; do
  [[ -n ${built[$name]:-} ]] || continue
  printf '%-28s %9s  built in %4d s  (%s)\n' "${built[$name]}" "$(size_mb "${built[$name]}")" "${took[$name]}" "$ENGINE"
done
