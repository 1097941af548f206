#!/usr/bin/env bash
# Install the container engine the pod tests and `make images`/`make pod` use: Debian's podman
# (with runc, which runs where crun refuses hybrid cgroups, and mmdebstrap, which builds the Python
# base image from Debian packages when no registry answers).
#
# Idempotent and instant when podman or a running docker is already there. Installing needs root and
# apt-get (CI runs as root: about a minute, once); anywhere else it only says what to run, and the
# pod tests skip with that reason.
set -euo pipefail

say() { printf '[install_podman] %s\n' "$*" >&2; }
if command -v podman >/dev/null && command -v mmdebstrap >/dev/null; then
  exit 0
fi
if command -v docker >/dev/null && timeout 20 docker info >/dev/null 2>&1; then
  exit 0  # a working docker builds and runs the images too (not the pod: that is podman's play kube)
fi
if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
  say "no podman here and cannot install it (needs root and apt-get)."
  say "the pod tests will SKIP; install it with: sudo apt-get install -y podman runc mmdebstrap"
  exit 0
fi

start=$SECONDS
export DEBIAN_FRONTEND=noninteractive
say "installing Debian's podman, runc and mmdebstrap for the image and pod tests (once; about a minute)"
if ! compgen -G "/var/lib/apt/lists/*_Packages" >/dev/null; then
  apt-get update -qq
fi
if ! apt-get install -y -qq --no-install-recommends podman runc mmdebstrap uidmap slirp4netns \
     netavark aardvark-dns catatonit fuse-overlayfs >/dev/null; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends podman runc mmdebstrap uidmap slirp4netns \
    netavark aardvark-dns catatonit fuse-overlayfs >/dev/null || {
    say "apt-get install podman FAILED: the pod tests will SKIP"
    exit 0
  }
fi
say "$(podman --version) installed in $((SECONDS - start)) s"
