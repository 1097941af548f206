#!/usr/bin/env bash
# Create or update the development virtualenv used by `make test`, `make run` and `make bench`.
#
# The venv lives outside the repo (default ~/.cache/doodlepod/venv) so that a fresh clone on a warm
# machine reuses it. A stamp file holds a hash of every requirements file and install script: when
# the hash matches, the requirements are not looked at again; otherwise they are installed
# (incrementally) and re-stamped. Last, the project itself is installed in editable mode (no
# dependencies: the pins above are the dependencies) whenever the venv's `animator` is not this
# checkout's: several checkouts (worktrees, CI's fresh clone) share one venv, and each `make` must
# test and run its own code (`python -m animator` and `doodlepod-animate` from any folder).
#
# Env: DOODLEPOD_CACHE (default ~/.cache/doodlepod), DOODLEPOD_VENV (default $DOODLEPOD_CACHE/venv),
#      PYTHON (default python3.11, else python3).
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE=${DOODLEPOD_CACHE:-$HOME/.cache/doodlepod}
VENV=${DOODLEPOD_VENV:-$CACHE/venv}
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}

# The browser for the studio page's tests is a system package: checked on every run (instant when
# present), outside the venv stamp below.
scripts/install_browser.sh
# The Node tools the tests read our glTF files with (tools/node: gltf-validator, three.js): npm ci from
# the lockfile, skipped when installed.
scripts/install_node_tools.sh

hashed=(requirements/*.txt scripts/bootstrap.sh)
[[ -f scripts/install_model_stack.sh ]] && hashed+=(scripts/install_model_stack.sh)
key=$(cat "${hashed[@]}" | sha256sum | cut -c1-16)
stamp="$VENV/.doodlepod-stamp"
log() { printf '[bootstrap %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

# The editable install of this checkout (from / so that the checkout's own folder on sys.path
# cannot answer for the venv). It also compiles the animator's kernels (animator/_*.pyx) in place:
# done again whenever a kernel's source or the build script changed, or the checkout lacks a working
# compiled module (a fresh clone: they are not committed), even when the venv's stamp is up to date.
install_project() {
  local here installed project_key project_stamp="$VENV/.doodlepod-project"
  here=$(pwd -P)
  local kernels=(animator/_*.pyx) imports
  kernels=("${kernels[@]#animator/}")
  imports=$(printf ', animator.%s' "${kernels[@]%.pyx}")
  project_key="$here $(cat pyproject.toml setup.py animator/_*.pyx | sha256sum | cut -c1-16)"
  installed=$(cd / && "$VENV/bin/python" -c "import animator, os$imports; print(os.path.dirname(os.path.dirname(os.path.realpath(animator.__file__))))" 2>/dev/null || true)
  if [[ "$installed" != "$here" || "$(cat "$project_stamp" 2>/dev/null)" != "$project_key" ]]; then
    log "installing this checkout ($here) into the venv in editable mode, compiling the animator's kernels"
    rm -f animator/_*.c animator/_*.so  # built anew from the sources as they are now
    "$VENV/bin/python" -m pip install --quiet --no-deps --no-build-isolation -e . \
      2> >(grep -v 'is ignored: it is neither' >&2)
    echo "$project_key" > "$project_stamp"
  fi
}

if [[ -f "$stamp" && "$(cat "$stamp")" == "$key" ]]; then
  install_project
  exit 0
fi

start=$SECONDS
if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating virtualenv $VENV with $PYTHON"
  mkdir -p "$(dirname "$VENV")"
  "$PYTHON" -m venv "$VENV"
fi
log "installing requirements/test.txt"
# pip's global config lists two local index folders that lack most projects; its per-project
# "Location ... is ignored" warnings are noise, so they are filtered out.
"$VENV/bin/python" -m pip install --quiet -r requirements/test.txt 2> >(grep -v 'is ignored: it is neither' >&2)
if [[ -x scripts/install_model_stack.sh ]]; then
  log "installing the CPU OpenMMLab stack (mmcv wheel cached under $CACHE/wheels)"
  scripts/install_model_stack.sh "$VENV"
fi
log "installing requirements/pose.txt (without dependencies: see that file)"
"$VENV/bin/python" -m pip install --quiet --no-deps -r requirements/pose.txt 2> >(grep -v 'is ignored: it is neither' >&2)
install_project
echo "$key" > "$stamp"
log "venv ready in $((SECONDS - start)) s"
