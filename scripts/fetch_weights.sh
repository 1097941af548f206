#!/usr/bin/env bash
# Download AnimatedDrawings' released model archives (MIT licence) into a folder.
#
# Usage: scripts/fetch_weights.sh [DIR]     (default: ${DOODLEPOD_CACHE:-~/.cache/doodlepod}/weights)
#
# Fetches drawn_humanoid_detector.mar (~311 MB) and drawn_humanoid_pose_estimator.mar (~357 MB)
# from https://github.com/facebookresearch/AnimatedDrawings/releases/tag/v0.0.1, resuming partial
# downloads, and checks each file's SHA-256 against the pinned value before moving it into DIR
# (a file that is already there and matches is not downloaded again). Then:
#   scripts/build_archives.py --weights-dir DIR --out build/model-store
#
# Env:
#   DOODLEPOD_WEIGHTS_URL                base URL of the release (default: the v0.0.1 release)
#   DOODLEPOD_SHA256_DETECTOR / _POSE    expected SHA-256 (override the pins below); an empty pin
#                                        means "not pinned": the hash is printed, not checked.
set -euo pipefail

if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi

DIR=${1:-${DOODLEPOD_CACHE:-$HOME/.cache/doodlepod}/weights}
BASE=${DOODLEPOD_WEIGHTS_URL:-https://github.com/facebookresearch/AnimatedDrawings/releases/download/v0.0.1}
# The pose archive's hash and size (374,824,711 bytes) as published by other projects that pin the
# same release file; the detector's is not pinned yet (printed on first download: pin it here).
SHA_POSE=${DOODLEPOD_SHA256_POSE-40ebdc69f1727dfe475161ae751fb066013e590f8894fe0016f0b69b336ee42f}
SHA_DETECTOR=${DOODLEPOD_SHA256_DETECTOR-}

log() { printf '[fetch-weights %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
command -v curl >/dev/null || die "curl is required"
mkdir -p "$DIR"

fetch() {
  local name=$1 want=$2 dst="$DIR/$1" part="$DIR/.$1.part" got t0=$SECONDS
  if [[ -f "$dst" && -n "$want" ]] && [[ "$(sha256sum "$dst" | cut -d' ' -f1)" == "$want" ]]; then
    log "$name: already present and verified"
    return
  fi
  log "$name: downloading $BASE/$name"
  curl --fail --location --retry 5 --retry-delay 3 --continue-at - --silent --show-error \
    --output "$part" "$BASE/$name" || die "$name: download failed"
  got=$(sha256sum "$part" | cut -d' ' -f1)
  if [[ -n "$want" && "$got" != "$want" ]]; then
    rm -f "$part"
    die "$name: SHA-256 $got does not match the pinned $want (set DOODLEPOD_SHA256_* to override)"
  fi
  [[ -n "$want" ]] || log "$name: SHA-256 $got (not pinned; pin it in scripts/fetch_weights.sh)"
  mv "$part" "$dst"
  log "$name: $(du -h "$dst" | cut -f1) in $((SECONDS - t0)) s"
}

fetch drawn_humanoid_detector.mar "$SHA_DETECTOR"
fetch drawn_humanoid_pose_estimator.mar "$SHA_POSE"
log "weights ready in $DIR"
