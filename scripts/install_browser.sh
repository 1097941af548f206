#!/usr/bin/env bash
# Install the browser the studio page's tests drive (tests/studio/): Debian's chromium package.
#
# Playwright (from requirements) drives it headless; Playwright cannot download its own browsers on
# machines without internet, so the tests use this system Chromium (DOODLEPOD_CHROMIUM overrides
# the path). Idempotent and instant when a Chromium is already there. Installing needs root and
# apt-get (CI runs as root: about 1 minute, once); anywhere else it only says what to run, and the
# browser tests skip with that reason.
set -euo pipefail

found=${DOODLEPOD_CHROMIUM:-$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)}
if [[ -n "$found" && -x "$found" ]]; then
  exit 0
fi

say() { printf '[install_browser] %s\n' "$*" >&2; }
if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
  say "no Chromium found and cannot install one here (needs root and apt-get)."
  say "the studio page's browser tests will SKIP; install it with: sudo apt-get install -y chromium"
  exit 0
fi

start=$SECONDS
export DEBIAN_FRONTEND=noninteractive
say "installing Debian's chromium for the browser tests (once; about a minute)"
# A fresh image has no package lists: update once, and again only if the install fails on stale ones.
if ! compgen -G "/var/lib/apt/lists/*_Packages" >/dev/null; then
  apt-get update -qq
fi
if ! apt-get install -y -qq chromium >/dev/null; then
  apt-get update -qq
  apt-get install -y -qq chromium >/dev/null || {
    say "apt-get install chromium FAILED: the studio page's browser tests will SKIP"
    exit 0
  }
fi
say "chromium $(chromium --version 2>/dev/null | awk '{print $2}') installed in $((SECONDS - start)) s"
