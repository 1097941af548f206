#!/usr/bin/env bash
# Rehearse CI on a clean machine: `make test` (.ci/run) in a Debian bookworm system that holds only what
# the README's first line names, on a fresh clone of this checkout's HEAD. What `make rehearse` runs.
#
# Usage: scripts/rehearse.sh [--rootfs | --shell | --run COMMAND] [-- MAKE_TARGET...]
#   (no option)    clean system, fresh clone, `make venv` then `CI=true bash .ci/run`, each phase timed
#   --rootfs       only build (or find) the clean system's root filesystem and image
#   --shell        an interactive shell in the clean system with the clone (nothing run)
#   --run COMMAND  only COMMAND (bash) in the clean system, in the clone, timed: to try one install
#                  script, e.g. --run scripts/install_podman.sh
#   -- TARGET..    run `make TARGET...` instead of .ci/run after `make venv` (e.g. -- lint)
#
# The clean system: an mmdebstrap minbase root filesystem of Debian bookworm plus python3.11 with
# headers and venv (Debian splits `python3 -m venv` into python3.11-venv), openjdk-17-jdk-headless,
# g++, make, git and ca-certificates: nothing else (no curl, no procps, no iptables, no podman, no
# chromium, no Node: `make test` must install what it needs). Kept as a tarball under
# $DOODLEPOD_REHEARSE_DIR, rebuilt when its package list (REHEARSE_PACKAGES below) changes; imported
# into podman as localhost/doodlepod-rehearse:KEY. About 2 min and 400 MB the first time.
#
# The run: `podman run --privileged` (the pod tests nest podman inside it), its own network namespace
# by slirp4netns (the nested podman's bridges and iptables rules stay inside it; DOODLEPOD_REHEARSE_NETWORK
# =host shares this machine's), its own empty container storage on this machine's disk (so the nested
# podman uses overlay, not overlay-on-overlay), HEAD cloned fresh (uncommitted changes are NOT
# rehearsed: it says so), ../shared mounted read-only beside it as CI has it. Nothing of this machine's
# caches (~/.cache/doodlepod: venv, wheels, mmcv build) goes in. What does go in is this machine's way
# to the network, which a CI machine has too: its extra CA certificates (/usr/local/share/ca-certificates,
# for networks that re-sign TLS), its pip configuration and the local package folders it names, its
# npm configuration, PIP_* environment variables.
#
# Prints each phase's wall time and the load (/proc/loadavg, also sampled every 60 s) and writes the
# whole log to $DOODLEPOD_REHEARSE_DIR/rehearse-DATE.log. Exit status: that of the make run.
# Needs root, podman and mmdebstrap (scripts/install_podman.sh installs them), the Debian mirror,
# and the network `make test` needs (PyPI or the pip configuration's local index, npm's registry).
#
# Env: DOODLEPOD_REHEARSE_DIR     rootfs tarball and logs (default $DOODLEPOD_CACHE/rehearse; the only
#                                 thing kept between rehearsals)
#      DOODLEPOD_REHEARSE_NETWORK slirp4netns (default) | host
#      DOODLEPOD_REHEARSE_CACHE   development only: a folder kept as the clean system's ~/.cache/doodlepod
#                                 across rehearsals (then it is no longer a cold run, and it says so)
#      DOODLEPOD_DEBIAN_MIRROR    Debian mirror (default http://deb.debian.org/debian)
set -euo pipefail
{  # read whole before it runs: editing this file during a rehearsal (40 min) does not change the rehearsal

MODE=run
targets=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --rootfs) MODE=rootfs ;;
    --shell) MODE=shell ;;
    --run) MODE=run-command; COMMAND=${2:?--run needs a command}; shift ;;
    --) shift; targets=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "rehearse.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done

cd "$(dirname "$0")/.."
ROOT=$(pwd -P)
CACHE=${DOODLEPOD_CACHE:-$HOME/.cache/doodlepod}
DIR=${DOODLEPOD_REHEARSE_DIR:-$CACHE/rehearse}
NETWORK=${DOODLEPOD_REHEARSE_NETWORK:-slirp4netns}
MIRROR=${DOODLEPOD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY=${MIRROR%/debian}/debian-security
# What the README's first line names, as Debian packages. Changing it rebuilds the clean system.
REHEARSE_PACKAGES=python3.11,python3.11-dev,python3.11-venv,openjdk-17-jdk-headless,g++,make,git,ca-certificates

mkdir -p "$DIR"
LOG=$DIR/rehearse-$(date -u +%Y%m%dT%H%M%SZ).log
exec > >(while IFS= read -r line; do printf '%(%H:%M:%S)T %s\n' -1 "$line"; done | tee -a "$LOG") 2>&1
say() { printf '[rehearse] %s\n' "$*"; }
die() { say "ERROR: $*"; exit 1; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
declare -a phases=()
phase_start() { PHASE=$1; PHASE_T0=$SECONDS; PHASE_LOAD0=$(load); say "== $PHASE (load $PHASE_LOAD0)"; }
phase_end() {
  local took=$((SECONDS - PHASE_T0))
  phases+=("$(printf '%-28s %5d s  %02d:%02d  load %s -> %s' "$PHASE" "$took" $((took / 60)) $((took % 60)) "$PHASE_LOAD0" "$(load)")")
  say "== $PHASE: ${took} s (load $(load))"
}
summary() {
  local rc=$?
  set +e
  [[ -n ${sampler:-} ]] && kill "$sampler" 2>/dev/null
  if [[ ${#phases[@]} -gt 0 ]]; then
    say "phases (wall, load 1/5/15 min at start -> end):"
    printf '[rehearse]   %s\n' "${phases[@]}"
    if [[ -s ${LOADS:-/nonexistent} ]]; then
      say "load sampled every 60 s: $(awk '{s+=$1; if ($1>m) m=$1; n++} END {printf "mean %.2f, max %.2f over %d samples", s/n, m, n}' "$LOADS")"
    fi
  fi
  say "exit status $rc; log: $LOG"
  [[ -n ${WORK:-} ]] && rm -rf "$WORK"
}
trap summary EXIT

[[ $(id -u) -eq 0 ]] || die "needs root (mmdebstrap's root mode, podman run --privileged)"
for tool in podman mmdebstrap git; do
  command -v "$tool" >/dev/null || die "$tool is not installed (scripts/install_podman.sh installs podman and mmdebstrap)"
done
say "start $(date -u +%FT%TZ) on $(nproc) CPUs, load $(load); checkout $ROOT at $(git rev-parse --short HEAD)"

# ---- the clean system ----------------------------------------------------------------------------
KEY=$( { echo "$REHEARSE_PACKAGES $MIRROR"; sed -n '/^# ---- the clean system/,/^# ---- end of the clean system/p' "$0"; } \
       | sha256sum | cut -c1-12)
ROOTFS=$DIR/rootfs-$KEY.tar
IMAGE=localhost/doodlepod-rehearse:$KEY
phase_start "clean system (rootfs)"
if [[ -f $ROOTFS ]]; then
  say "kept: $ROOTFS ($(du -m "$ROOTFS" | cut -f1) MB)"
else
  say "building Debian bookworm minbase + $REHEARSE_PACKAGES from $MIRROR"
  mmdebstrap --variant=minbase --mode=root --format=tar --aptopt='APT::Install-Recommends "false"' \
    --include="$REHEARSE_PACKAGES" \
    --customize-hook='rm -rf "$1"/var/cache/apt/*.bin "$1"/var/log/apt/* "$1"/var/log/dpkg.log' \
    bookworm "$ROOTFS.part" \
    "deb $MIRROR bookworm main" "deb $MIRROR bookworm-updates main" "deb $SECURITY bookworm-security main" \
    || die "mmdebstrap failed"
  mv "$ROOTFS.part" "$ROOTFS"
  find "$DIR" -maxdepth 1 -name 'rootfs-*.tar' ! -name "${ROOTFS##*/}" -delete  # older package lists
fi
if ! podman image exists "$IMAGE"; then
  podman import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' --change 'CMD ["bash"]' "$ROOTFS" "$IMAGE" >/dev/null || die "podman import failed"
fi
phase_end
# ---- end of the clean system
[[ $MODE == rootfs ]] && { say "clean system: $IMAGE"; exit 0; }

# ---- the run -------------------------------------------------------------------------------------
# This machine's podman as `make images` uses it (scripts/podman/containers.conf where this machine's
# own configuration cannot start a container).
ENGINE=podman ENGINE_LOG_TAG=rehearse
# shellcheck source=scripts/engine.sh
source scripts/engine.sh
engine_configure "$IMAGE" || die "podman cannot start the clean system here"
WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/doodlepod-rehearse.XXXXXX")
phase_start "fresh clone of HEAD"
[[ -z $(git status --porcelain --untracked-files=no) ]] || say "NOTE: uncommitted changes are not rehearsed (a clone of HEAD)"
git clone --quiet --no-local "$ROOT" "$WORK/ci/doodlepod"
git -C "$WORK/ci/doodlepod" checkout --quiet --detach "$(git rev-parse HEAD)"
phase_end

mounts=(-v "$WORK/ci:/ci" -v "$WORK/containers:/var/lib/containers")
mkdir -p "$WORK/containers"
if [[ -d $ROOT/../shared ]]; then
  mounts+=(-v "$(cd "$ROOT/../shared" && pwd -P):/ci/shared:ro")
else
  say "NOTE: no ../shared beside the checkout: the tests that need it will skip"
fi
# This machine's way to the network (not its caches): CA certificates, pip and npm configuration,
# and the local package folders the pip configuration names.
setup=(set -e';')
mkdir -p "$WORK/host"
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$WORK/host/"
  setup+=('cp /ci-host/*.crt /usr/local/share/ca-certificates/ && update-ca-certificates >/dev/null 2>&1;')
fi
for f in .config/pip/pip.conf .pip/pip.conf .npmrc; do
  [[ -f $HOME/$f ]] && mounts+=(-v "$HOME/$f:/root/$f:ro")
done
[[ -f /etc/pip.conf ]] && mounts+=(-v "/etc/pip.conf:/etc/pip.conf:ro")
for d in $(cat /etc/pip.conf "$HOME/.config/pip/pip.conf" "$HOME/.pip/pip.conf" 2>/dev/null \
             | grep -oE '(file://)?/[^ ]+' | sed 's|^file://||' | sort -u) ${PIP_FIND_LINKS:-}; do
  d=${d%/simple}; d=${d%/}
  [[ -d $d && $d == /opt/* ]] && mounts+=(-v "$d:$d:ro")
done
envs=(-e CI=true -e HOME=/root -e TERM=dumb)
while IFS='=' read -r k _; do envs+=(-e "$k"); done < <(env | grep -E '^PIP_' || true)
if [[ -n ${DOODLEPOD_REHEARSE_CACHE:-} ]]; then
  mkdir -p "$DOODLEPOD_REHEARSE_CACHE"
  mounts+=(-v "$(cd "$DOODLEPOD_REHEARSE_CACHE" && pwd -P):/root/.cache/doodlepod")
  say "NOTE: DOODLEPOD_REHEARSE_CACHE=$DOODLEPOD_REHEARSE_CACHE kept as the clean system's cache: NOT a cold run"
fi
net=(--network "$NETWORK")
[[ $NETWORK == slirp4netns ]] && net=(--network "slirp4netns:allow_host_loopback=false")
# A machine's limits, not a container's defaults: no pids limit (2048: TorchServe's JVM, Chromium and
# gunicorn's workers together come near it), /dev/shm as large as this machine's (64 MB by default).
run=(podman run --rm --privileged --name "doodlepod-rehearse-$$" "${net[@]}" --hostname ci
     --pids-limit=-1 --shm-size="$(df -k --output=size /dev/shm | tail -n 1 | tr -d ' ')k"
     "${mounts[@]}" -v "$WORK/host:/ci-host:ro" "${envs[@]}" -w /ci/doodlepod "$IMAGE")

if [[ $MODE == shell ]]; then
  say "a shell in the clean system (exit to leave; everything in it is removed)"
  "${run[@]}" bash -c "${setup[*]} exec bash" </dev/tty
  exit
fi

if [[ $MODE == run-command ]]; then
  phase_start "--run $COMMAND"
  set +e
  "${run[@]}" bash -c "${setup[*]} $COMMAND"
  rc=$?
  set -e
  phase_end
  exit $rc
fi

LOADS=$WORK/loads
( while sleep 60; do cut -d' ' -f1 /proc/loadavg >> "$LOADS"; done ) &
sampler=$!
phase_start "clean system starts (README prereqs)"
"${run[@]}" bash -c "${setup[*]} python3.11 --version && java -version 2>&1 | head -1 && g++ --version | head -1 && make --version | head -1" \
  || die "the clean system does not start or lacks what the README names"
phase_end
if [[ ${#targets[@]} -gt 0 ]]; then inner="make ${targets[*]}"; else inner="bash .ci/run"; fi
phase_start "make venv + $inner"
set +e
"${run[@]}" bash -c "${setup[*]}
  t0=\$SECONDS; echo \"[rehearse] inside: make venv (load \$(cut -d' ' -f1-3 /proc/loadavg))\"
  make venv || { echo '[rehearse] make venv FAILED'; exit 1; }
  echo \"[rehearse] inside: make venv took \$((SECONDS - t0)) s (load \$(cut -d' ' -f1-3 /proc/loadavg))\"
  t0=\$SECONDS; echo \"[rehearse] inside: $inner (load \$(cut -d' ' -f1-3 /proc/loadavg))\"
  $inner; rc=\$?
  echo \"[rehearse] inside: $inner took \$((SECONDS - t0)) s, exit \$rc (load \$(cut -d' ' -f1-3 /proc/loadavg))\"
  exit \$rc"
rc=$?
set -e
phase_end
grep -E '^\S+ \[rehearse\] inside: .* took ' "$LOG" | sed 's/^\S* /  /' || true
exit $rc
}
