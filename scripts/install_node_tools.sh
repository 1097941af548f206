#!/usr/bin/env bash
# Install the Node tools the tests use as independent readers of our files (tools/node/package.json):
# the Khronos glTF validator and three.js (served to Chromium by the glTF browser test).
#
# `npm ci` from the committed lockfile into tools/node/node_modules; skipped when that folder already
# holds exactly the lockfile's packages (npm's own copy of the lockfile there matches). Needs Node 20+
# and npm: installed with apt-get when missing and this runs as root (CI does); anywhere else it says
# what to run, and the tests that need the tools skip with that reason (as they do when npm ci fails).
set -euo pipefail
cd "$(dirname "$0")/../tools/node"

say() { printf '[install_node_tools] %s\n' "$*" >&2; }
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    say "no node/npm here and cannot install them (needs root and apt-get): the glTF tests will SKIP"
    exit 0
  fi
  say "installing Debian's nodejs and npm (once)"
  export DEBIAN_FRONTEND=noninteractive
  compgen -G "/var/lib/apt/lists/*_Packages" >/dev/null || apt-get update -qq
  apt-get install -y -qq nodejs npm >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null; }
fi
if [[ -f node_modules/.package-lock.json ]] \
   && node -e 'const a=require("./package-lock.json").packages, b=require("./node_modules/.package-lock.json").packages;
               for (const k of Object.keys(a)) if (k && (!b[k] || b[k].version !== a[k].version)) process.exit(1);' ; then
  exit 0
fi
start=$SECONDS
say "npm ci in tools/node (gltf-validator, three)"
if ! npm ci --no-audit --no-fund --loglevel=error; then
  say "npm ci FAILED (no npm registry?): the glTF tests will SKIP"
  exit 0
fi
say "node tools installed in $((SECONDS - start)) s"
