#!/usr/bin/env bash
# Install the Node tools the tests use as independent readers of our files (tools/node/package.json):
# the Khronos glTF validator and three.js (served to Chromium by the glTF browser test).
#
# `npm ci` from the committed lockfile into tools/node/node_modules; skipped when that folder already
# holds exactly the lockfile's packages (npm's own copy of the lockfile there matches). Needs Node 20+
# and npm: installed with apt-get when missing and this runs as root (CI does); anywhere else it says
# what to run, and the tests that need the tools skip with that reason (as they do when npm ci fails).
#
# Then a smoke test (under a second, once per lockfile and Node version: scripts/smoke_stamp.sh): the
# validator reads a minimal glTF and finds no error, and three.js loads with the lockfile's revision.
# A failure there fails this script with what failed.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/smoke_stamp.sh
source scripts/smoke_stamp.sh
# shellcheck source=scripts/apt_install.sh
source scripts/apt_install.sh
cd tools/node

say() { printf '[install_node_tools] %s\n' "$*" >&2; }
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    say "no node/npm here and cannot install them (needs root and apt-get): the glTF tests will SKIP"
    exit 0
  fi
  say "installing Debian's nodejs and npm (once)"
  apt_install nodejs npm || { say "FAILED: apt-get install nodejs npm"; exit 1; }
fi
if ! { [[ -f node_modules/.package-lock.json ]] \
   && node -e 'const a=require("./package-lock.json").packages, b=require("./node_modules/.package-lock.json").packages;
               for (const k of Object.keys(a)) if (k && (!b[k] || b[k].version !== a[k].version)) process.exit(1);' ; }; then
  start=$SECONDS
  say "npm ci in tools/node (gltf-validator, three)"
  if ! npm ci --no-audit --no-fund --loglevel=error; then
    say "npm ci FAILED (no npm registry?): the glTF tests will SKIP"
    exit 0
  fi
  say "node tools installed in $((SECONDS - start)) s"
fi

# ---- smoke test: the tools run -----------------------------------------------------------------------
KEY=$(smoke_key "$(node --version)" "$(cat package-lock.json validate_gltf.mjs)")
smoke_cached node_tools "$KEY" && exit 0
start=$SECONDS
fail() { say "FAILED: $1:"; printf '%s\n' "$2" | tail -n 15 | sed 's/^/    /' >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/doodlepod-node-smoke.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo '{"asset": {"version": "2.0"}}' > "$tmp/minimal.gltf"
out=$(timeout 60 node validate_gltf.mjs "$tmp/minimal.gltf" 2>&1) \
  && node -e 'const r = JSON.parse(process.argv[1]); process.exit(r.validatorVersion && r.issues.numErrors === 0 ? 0 : 1)' "$out" \
  || fail "the glTF validator on a minimal glTF (node validate_gltf.mjs)" "$out"
want=$(node -p 'require("./package-lock.json").packages["node_modules/three"].version.split(".")[1]')
out=$(timeout 60 node --input-type=module -e 'console.log((await import("three")).REVISION)' 2>&1) && [[ $out == "$want" ]] \
  || fail "three.js r$want does not load" "$out"
smoke_record node_tools "$KEY" ok
say "node tools work: the glTF validator and three.js r$want (smoke test, $((SECONDS - start)) s)"
