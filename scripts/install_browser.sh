#!/usr/bin/env bash
# Install the browser the studio page's tests drive (tests/studio/): Debian's chromium package.
#
# Playwright (from requirements) drives it headless; Playwright cannot download its own browsers on
# machines without internet, so the tests use this system Chromium (DOODLEPOD_CHROMIUM overrides
# the path). Idempotent and instant when a Chromium is already there. Installing needs root and
# apt-get (CI runs as root: about 1 minute, once); anywhere else it only says what to run, and the
# browser tests skip with that reason.
#
# Then a smoke test (a few seconds, once per Chromium version: scripts/smoke_stamp.sh): Chromium, headless
# as the tests start it, takes a 320x200 screenshot of a green data: URL, and the PNG's first pixel is
# green. A Chromium that cannot do that (missing libraries, no /dev/shm...) fails this script with
# Chromium's own words.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/smoke_stamp.sh
source scripts/smoke_stamp.sh
# shellcheck source=scripts/apt_install.sh
source scripts/apt_install.sh

say() { printf '[install_browser] %s\n' "$*" >&2; }
smoke() {  # smoke CHROMIUM
  local key out cout tmp start=$SECONDS
  key=$(smoke_key "$1" "$("$1" --version 2>/dev/null)")
  smoke_cached browser "$key" && return 0
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/doodlepod-browser-smoke.XXXXXX")
  # --no-sandbox: Playwright's default too (root has no setuid sandbox).
  cout=$(timeout 90 "$1" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --user-data-dir="$tmp/profile" \
          --window-size=320,200 --screenshot="$tmp/shot.png" 'data:text/html,<body style="margin:0;background:%2300ff00"></body>' 2>&1) || true
  if ! out=$("$(command -v python3.11 || command -v python3)" - "$tmp/shot.png" 2>&1 <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
w, h, depth, color = struct.unpack(">IIBB", data[16:26])
idat, i = b"", 8
while i < len(data):
    n, kind = struct.unpack(">I4s", data[i:i + 8])
    idat += data[i + 8:i + 8 + n] if kind == b"IDAT" else b""
    i += 12 + n
first = zlib.decompress(idat)[1:4]  # the first scanline's first pixel: filters leave it as it is
assert (w, h) == (320, 200) and depth == 8 and color in (2, 6) and first == b"\x00\xff\x00", (w, h, depth, color, first)
PY
  ) ; then
    rm -rf "$tmp"
    say "FAILED: Chromium ($1) cannot take a headless screenshot: the browser tests would fail the same way:"
    printf '%s\n' "$cout" "$out" | grep -v -e 'dbus' -e '^$' | tail -n 15 | sed 's/^/    /' >&2
    exit 1
  fi
  rm -rf "$tmp"
  smoke_record browser "$key" ok
  say "Chromium works: a headless screenshot of a data: URL (smoke test, $((SECONDS - start)) s)"
}

found=${DOODLEPOD_CHROMIUM:-$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)}
if [[ -n "$found" && -x "$found" ]]; then
  smoke "$found"
  exit 0
fi

if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
  say "no Chromium found and cannot install one here (needs root and apt-get)."
  say "the studio page's browser tests will SKIP; install it with: sudo apt-get install -y chromium"
  exit 0
fi

start=$SECONDS
say "installing Debian's chromium for the browser tests (once; about a minute)"
apt_install chromium || { say "apt-get install chromium FAILED: the studio page's browser tests will SKIP"; exit 0; }
say "chromium $(chromium --version 2>/dev/null | awk '{print $2}') installed in $((SECONDS - start)) s"
smoke "$(command -v chromium)"
