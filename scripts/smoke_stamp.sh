# shellcheck shell=bash
# Stamps of the install scripts' smoke tests: sourced, not run.
#
# Each install script (install_podman.sh, install_browser.sh, install_node_tools.sh, smoke_models.sh)
# proves that what it installed works, once per install: the result is kept in
# $DOODLEPOD_CACHE/smoke/NAME with a key (a hash of what the result depends on: the script, the
# packages' versions), and the smoke test runs again only when that key changes.
#
#   smoke_key WORDS...            prints a key: a hash of the words and of this file and the calling script
#   smoke_cached NAME KEY         exit 0 when NAME's stamp holds KEY (the result is on its second line)
#   smoke_record NAME KEY RESULT  writes NAME's stamp: RESULT is "ok" or "skip: REASON" (the tests that
#                                 need NAME read the reason: tests/pod/conftest.py)
#   smoke_forget NAME             removes NAME's stamp (a failed smoke test runs again next time)

SMOKE_DIR=${DOODLEPOD_CACHE:-$HOME/.cache/doodlepod}/smoke
SMOKE_SOURCES=("$(realpath "${BASH_SOURCE[0]}")" "$(realpath "$0")")  # before the caller changes folder

smoke_key() {
  { printf '%s\n' "$@"; cat "${SMOKE_SOURCES[@]}"; } | sha256sum | cut -c1-16
}

smoke_cached() {
  [[ "$(head -n 1 "$SMOKE_DIR/$1" 2>/dev/null)" == "$2" ]]
}

smoke_record() {
  mkdir -p "$SMOKE_DIR"
  printf '%s\n%s\n' "$2" "$3" > "$SMOKE_DIR/$1.tmp"
  mv "$SMOKE_DIR/$1.tmp" "$SMOKE_DIR/$1"
}

smoke_forget() {
  rm -f "$SMOKE_DIR/$1"
}
