#!/usr/bin/env bash
# Create or update the development virtualenv used by `make test`, `make run` and `make bench`.
#
# The venv lives outside the repo (default ~/.cache/doodlepod/venv) so that a fresh clone on a warm
# machine reuses it. A stamp file holds a hash of every requirements file and install script: when
# the hash matches, this script returns at once; otherwise it installs (incrementally) and re-stamps.
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

hashed=(requirements/*.txt scripts/bootstrap.sh)
[[ -f scripts/install_model_stack.sh ]] && hashed+=(scripts/install_model_stack.sh)
key=$(cat "${hashed[@]}" | sha256sum | cut -c1-16)
stamp="$VENV/.doodlepod-stamp"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$key" ]]; then
  exit 0
fi

log() { printf '[bootstrap %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
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
echo "$key" > "$stamp"
log "venv ready in $((SECONDS - start)) s"
