#!/usr/bin/env bash
# Install the system libraries the video pose model loads at run time: mediapipe (requirements/pose.txt)
# opens libEGL.so.1 and libGLESv2.so.2 even on its CPU path, and a clean Debian has neither (a clean-system
# rehearsal failed every motion-from-video test with "OSError: libEGL.so.1: cannot open shared object
# file"). Debian's packages: libegl1, libgles2.
#
# Idempotent: instant when both libraries are known to the dynamic linker. Installing needs root and
# apt-get (CI runs as root); anywhere else it says what to run, and a motion from a video fails until then.
# Proves the result: each library is loaded (dlopen) once installed; a failure names the library.
set -euo pipefail
# shellcheck source=scripts/apt_install.sh
source "$(dirname "$0")/apt_install.sh"

say() { printf '[install_pose_libs] %s\n' "$*" >&2; }
LIBS=(libEGL.so.1 libGLESv2.so.2)
missing() { local lib; for lib in "${LIBS[@]}"; do /sbin/ldconfig -p | grep -qF "$lib (" || echo "$lib"; done; }
loads() { python3 -c 'import ctypes, sys; [ctypes.CDLL(name) for name in sys.argv[1:]]' "${LIBS[@]}"; }

[[ -z "$(missing)" ]] && exit 0
if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
  say "missing $(missing | tr '\n' ' ')(mediapipe needs them for a motion from a video);"
  say "  install them with: sudo apt-get install -y libegl1 libgles2"
  exit 0
fi
start=$SECONDS
say "installing Debian's libegl1 and libgles2 for the video pose model (once; seconds)"
apt_install --no-install-recommends libegl1 libgles2 || { say "FAILED: apt-get install libegl1 libgles2"; exit 1; }
left=$(missing)
[[ -z $left ]] || { say "FAILED: still missing after the install: $left"; exit 1; }
loads || { say "FAILED: ${LIBS[*]} are installed but do not load"; exit 1; }
say "libegl1 and libgles2 installed and loading in $((SECONDS - start)) s"
