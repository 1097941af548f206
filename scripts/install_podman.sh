#!/usr/bin/env bash
# Install the container engine the pod tests and `make images`/`make pod` use, and prove it works.
#
# Debian's podman with what a clean Debian bookworm lacks for builds, runs and `play kube` (PACKAGES
# below: netavark, podman's network stack, calls `iptables`, which a fresh machine does not have), runc
# (which runs where crun refuses hybrid cgroups) and mmdebstrap (which builds the Python base image from
# Debian packages when no registry answers). Installing needs root and apt-get (CI runs as root: about
# a minute, once); anywhere else it only says what to run.
#
# Then, as root, a smoke test of a few seconds: an image with a RUN step is built (FROM a local image of
# Debian's static busybox: no registry needed), a container of it runs on podman's default network, and
# a pod of it runs with `podman play kube`. A missing piece fails this script with its name. Where the
# machine cannot run containers at all (no namespaces: an unprivileged sandbox), or podman cannot be
# installed, it says why and exits 0: the pod tests skip with that reason (read from the smoke stamp,
# $DOODLEPOD_CACHE/smoke/podman) and a red banner. The result is kept until this script, the packages'
# versions or the kernel change (scripts/smoke_stamp.sh), so `make test` does not run it each time.
# A working docker (and no podman) is used as it is, without a smoke test.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/smoke_stamp.sh
source scripts/smoke_stamp.sh
# shellcheck source=scripts/apt_install.sh
source scripts/apt_install.sh

say() { printf '[install_podman] %s\n' "$*" >&2; }
skip() { say "$1: the pod tests will SKIP"; smoke_record podman "${KEY:-none}" "skip: $1"; exit 0; }
# Debian package: what it is for (Depends and Recommends of podman 4.3 that a minbase system lacks).
PACKAGES=(
  podman          # the engine
  runc            # OCI runtime that runs on hybrid cgroups (scripts/podman/containers.conf)
  mmdebstrap      # the Python base image from Debian packages (scripts/base_image.sh)
  uidmap slirp4netns fuse-overlayfs  # rootless podman, and storage where the kernel's overlay is refused
  netavark aardvark-dns              # the default network: bridges and DNS between a pod's containers
  iptables        # netavark's firewall: without it every RUN, run and pod fails (os error 2)
  catatonit       # the pod's infra container (play kube builds its pause image from it)
  curl            # scripts/images.sh asks whether torch's index and the released weights answer
)

if ! command -v podman >/dev/null && command -v docker >/dev/null && timeout 20 docker info >/dev/null 2>&1; then
  exit 0  # a working docker builds and runs the images too (not the pod: that is podman's play kube)
fi

missing=()
if command -v dpkg-query >/dev/null; then
  for p in "${PACKAGES[@]}"; do
    [[ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null)" == ii* ]] || missing+=("$p")
  done
else
  command -v podman >/dev/null || missing+=(podman)
fi
if [[ ${#missing[@]} -gt 0 ]]; then
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    say "missing: ${missing[*]}, and cannot install it here (needs root and apt-get);"
    say "install it with: sudo apt-get install -y --no-install-recommends ${missing[*]}"
    command -v podman >/dev/null || skip "no podman here"
  else
    start=$SECONDS
    say "installing Debian's ${missing[*]} for the image and pod tests (once; about a minute)"
    apt_install --no-install-recommends "${missing[@]}" || skip "apt-get install ${missing[*]} FAILED"
    say "$(podman --version) and ${#missing[@]} packages installed in $((SECONDS - start)) s"
  fi
fi

# ---- smoke test ------------------------------------------------------------------------------------
if [[ $(id -u) -ne 0 ]]; then
  say "not root: no smoke test of podman here (the pod tests find out for themselves)"
  smoke_forget podman
  exit 0
fi
versions=$(dpkg-query -W "${PACKAGES[@]}" crun conmon golang-github-containers-common 2>/dev/null || true)
KEY=$(smoke_key "$versions" "$(uname -r)" "$(cat scripts/engine.sh scripts/podman/containers.conf)")
smoke_cached podman "$KEY" && exit 0

mkdir -p "$SMOKE_DIR"
exec 9>"$SMOKE_DIR/.podman.lock"  # two checkouts' smoke tests take turns (same image and pod names)
flock 9
smoke_cached podman "$KEY" && exit 0

# Can this machine make containers at all? Not in an unprivileged sandbox: then the tests skip.
if ! err=$(unshare --mount --uts --ipc --net --pid --fork true 2>&1); then
  skip "this machine cannot run containers (no namespaces for root: unshare says '${err##*$'\n'}')"
fi
# Each piece podman needs here, by name (podman's own errors do not name them: "No such file or
# directory (os error 2)" is netavark not finding iptables).
for piece in podman:podman conmon:conmon runc:runc iptables:iptables \
             /usr/lib/podman/netavark:netavark /usr/lib/podman/aardvark-dns:aardvark-dns \
             /usr/libexec/podman/catatonit:catatonit; do
  if ! command -v "${piece%%:*}" >/dev/null; then
    say "FAILED: ${piece%%:*} is missing (Debian package ${piece##*:}): apt-get install -y ${piece##*:}"
    exit 1
  fi
done

start=$SECONDS
work=$(mktemp -d "${TMPDIR:-/tmp}/doodlepod-podman-smoke.XXXXXX")
BASE=localhost/doodlepod-smoke-base:latest IMAGE=localhost/doodlepod-smoke:latest POD=doodlepod-smoke
cleanup() {
  podman pod rm -f "$POD" >/dev/null 2>&1 || true
  podman rmi -f "$IMAGE" "$BASE" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {  # fail STEP OUTPUT
  say "FAILED: $1 after $((SECONDS - start)) s:"
  printf '%s\n' "$2" | tail -n 15 | sed 's/^/    /' >&2
  if [[ $2 == *iptables* || $2 == *nftables* || $2 == *netavark* ]]; then
    say "netavark's firewall: \`iptables -t nat -L -n\` says: $(iptables -t nat -L -n 2>&1 | tail -n 1)"
    say "  (a kernel without nf_tables needs the legacy backend: update-alternatives --set iptables /usr/sbin/iptables-legacy)"
  fi
  say "the pod tests and \`make images\` would fail the same way; fix the above (engine: scripts/engine.sh)"
  exit 1
}

# The base: Debian's static busybox (its package, downloaded, not installed: it conflicts with busybox).
busybox=$SMOKE_DIR/busybox
if [[ ! -x $busybox ]]; then
  (cd "$work" && apt-get download -qq busybox-static >/dev/null 2>&1) \
    || fail "downloading Debian's busybox-static for the smoke test's image" "$(cd "$work" && apt-get download busybox-static 2>&1)"
  dpkg-deb -x "$work"/busybox-static_*.deb "$work/deb"
  cp "$work/deb/bin/busybox" "$busybox.tmp" && mv "$busybox.tmp" "$busybox"
fi
mkdir -p "$work/rootfs/bin" "$work/build"
cp "$busybox" "$work/rootfs/bin/busybox"
for tool in sh true cat sleep; do ln -s busybox "$work/rootfs/bin/$tool"; done
tar -C "$work/rootfs" -cf "$work/rootfs.tar" .
out=$(timeout 60 podman import "$work/rootfs.tar" "$BASE" 2>&1) || fail "podman import of a busybox root filesystem" "$out"

ENGINE=podman ENGINE_LOG_TAG=install_podman
# shellcheck source=scripts/engine.sh
source scripts/engine.sh
engine_configure "$BASE" || fail "starting a container (podman run --network none)" "$(podman run --rm --network none "$BASE" true 2>&1)"

printf 'FROM %s\nRUN echo built > /smoke\n' "$BASE" > "$work/build/Containerfile"
out=$(timeout 120 podman build -q -t "$IMAGE" "$work/build" 2>&1) || fail "podman build of a Containerfile with a RUN step" "$out"
out=$(timeout 60 podman run --rm "$IMAGE" cat /smoke 2>&1) && [[ $out == built ]] \
  || fail "podman run on the default network" "$out"
cat > "$work/pod.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $POD
spec:
  restartPolicy: Never
  containers:
    - name: c
      image: $IMAGE
      imagePullPolicy: IfNotPresent
      command: ["/bin/sh", "-c", "cat /smoke; exec sleep 60"]
EOF
out=$(timeout 120 podman play kube "$work/pod.yaml" 2>&1) || fail "podman play kube of a one-container pod" "$out"
for _ in $(seq 50); do
  [[ "$(podman logs "$POD-c" 2>/dev/null)" == built ]] && break
  sleep 0.2
done
[[ "$(podman logs "$POD-c" 2>&1)" == built ]] || fail "the pod's container did not run" "$(podman logs "$POD-c" 2>&1; podman pod ps -a 2>&1)"
out=$(timeout 60 podman play kube --down "$work/pod.yaml" 2>&1) || fail "podman play kube --down" "$out"

smoke_record podman "$KEY" ok
say "podman works here: a build with RUN, a run, a pod (smoke test, $((SECONDS - start)) s${CONTAINERS_CONF:+, CONTAINERS_CONF=$CONTAINERS_CONF})"
