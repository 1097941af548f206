#!/usr/bin/env bash
# Build a local stand-in for the Python base image the Dockerfiles start FROM, from Debian packages.
#
# Usage: scripts/base_image.sh ENGINE NAME
#   ENGINE  podman or docker (what `make images` found)
#   NAME    the image name to create, e.g. python:3.11.11-slim-bookworm
#
# For machines that reach Debian's archive but no container registry (scripts/images.sh calls it
# only after a pull of NAME failed, and says so): mmdebstrap makes a Debian 12 (bookworm) minbase
# root filesystem with python3, python3-venv, python3-dev and ca-certificates, creates a venv at
# /usr/local (so `python`, `pip` and installed console scripts are on PATH at /usr/local/bin, as in
# the official python image), leaves out documentation and man pages, and `ENGINE import`s it as
# NAME. The Python inside is Debian's 3.11 (3.11.2), not the exact patch release NAME's tag says;
# the image's labels say where it came from. About 100 s and 180 MB.
#
# Needs root (mmdebstrap's root mode) and mmdebstrap (apt-get install -y mmdebstrap).
# Env: DOODLEPOD_DEBIAN_MIRROR  Debian mirror (default http://deb.debian.org/debian)
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
if [[ $# -ne 2 ]]; then usage >&2; exit 2; fi
ENGINE=$1 NAME=$2
MIRROR=${DOODLEPOD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY=${MIRROR%/debian}/debian-security
log() { printf '[base-image %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

command -v mmdebstrap >/dev/null || { log "mmdebstrap is not installed (apt-get install -y mmdebstrap)"; exit 1; }
[[ $(id -u) -eq 0 ]] || { log "building a base image from Debian packages needs root (mmdebstrap)"; exit 1; }

start=$SECONDS
work=$(mktemp -d "${TMPDIR:-/tmp}/doodlepod-base.XXXXXX")
trap 'rm -rf "$work"' EXIT
log "building $NAME from Debian bookworm packages ($MIRROR): python3 python3-venv python3-dev ca-certificates"
# path-exclude: what Debian's own slim images and the python images leave out (docs, man pages,
# translations); copyright files stay. No Recommends. usrmerge (mmdebstrap's way to a merged /usr on
# bookworm) has done its work once the tree exists: usr-is-merged takes its place, and the perl it
# pulled in goes (50 MB).
mmdebstrap --variant=minbase --mode=root --aptopt='APT::Install-Recommends "false"' \
  --include=python3,python3-venv,python3-dev,ca-certificates \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --customize-hook='chroot "$1" apt-get install -y -qq usr-is-merged' \
  --customize-hook='chroot "$1" dpkg --purge usrmerge libfile-find-rule-perl libnumber-compare-perl libtext-glob-perl perl perl-modules-5.36 libperl5.36 libgdbm-compat4' \
  --customize-hook='chroot "$1" python3 -m venv /usr/local' \
  --customize-hook='chroot "$1" /usr/local/bin/python -m pip --version' \
  --customize-hook='rm -rf "$1"/root/.cache "$1"/var/cache/apt/*.bin "$1"/var/log/apt/* "$1"/var/log/dpkg.log' \
  bookworm "$work/rootfs.tar" \
  "deb $MIRROR bookworm main" "deb $MIRROR bookworm-updates main" "deb $SECURITY bookworm-security main"

python=$(tar -xOf "$work/rootfs.tar" ./var/lib/dpkg/status \
  | awk '/^Package: python3.11-minimal$/ {p=1} p && /^Version:/ {print $2; p=0}')
"$ENGINE" import \
  --change 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["python3"]' \
  --change "LABEL org.opencontainers.image.description=\"Debian bookworm minbase + python3 $python (venv at /usr/local), built locally by doodlepod's scripts/base_image.sh from $MIRROR; a stand-in for $NAME on a machine without a registry\"" \
  --message "doodlepod scripts/base_image.sh: Debian bookworm + python3 $python" \
  "$work/rootfs.tar" "$NAME" >/dev/null
log "built $NAME (Debian python3 $python) in $((SECONDS - start)) s: $("$ENGINE" image inspect --format '{{.Size}}' "$NAME" | awk '{printf "%.0f MB", $1/1e6}')"
