# shellcheck shell=bash
# The container engine for `make images`, `make pod` and the pod tests: sourced, not run.
#
#   engine_detect              sets ENGINE to podman or docker: the first that answers (`info`);
#                              DOODLEPOD_ENGINE=podman|docker picks one
#   engine_configure IMAGE     podman only: starts a throwaway container of IMAGE (any local image).
#                              If the machine's own configuration cannot start it and
#                              scripts/podman/containers.conf can, exports CONTAINERS_CONF with that
#                              file for this process and its children, and says so. An operator's
#                              CONTAINERS_CONF is kept as it is.
#   engine_build_opts          prints, one per line, the options every build here gets (see below)
#
# What scripts/podman/containers.conf changes, and why, is written in that file. /etc/containers is
# never touched.

ENGINE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROJECT_CONTAINERS_CONF=$ENGINE_DIR/podman/containers.conf

engine_log() { printf '[%s %(%H:%M:%S)T] %s\n' "${ENGINE_LOG_TAG:-engine}" -1 "$*" >&2; }

engine_detect() {
  local want=${DOODLEPOD_ENGINE:-} e
  for e in ${want:-podman docker}; do
    if command -v "$e" >/dev/null && timeout 60 "$e" info >/dev/null 2>&1; then
      ENGINE=$e
      export ENGINE
      return 0
    fi
  done
  if [[ -n $want ]]; then
    engine_log "DOODLEPOD_ENGINE=$want, but \`$want info\` does not answer"
  else
    engine_log "no container engine answers here (tried podman, docker: \`podman info\`/\`docker info\`)."
    engine_log "install one, e.g. as root: apt-get install -y podman (scripts/install_podman.sh)"
  fi
  return 1
}

engine_configure() {
  local image=$1 err
  [[ $ENGINE == podman ]] || return 0
  if [[ -n ${CONTAINERS_CONF:-} ]]; then
    engine_log "CONTAINERS_CONF=$CONTAINERS_CONF (yours): used as it is"
    return 0
  fi
  if err=$(podman run --rm --network none --entrypoint true "$image" 2>&1); then
    return 0
  fi
  if CONTAINERS_CONF=$PROJECT_CONTAINERS_CONF podman run --rm --network none --entrypoint true "$image" >/dev/null 2>&1; then
    export CONTAINERS_CONF=$PROJECT_CONTAINERS_CONF
    engine_log "podman cannot start containers with this machine's configuration:"
    engine_log "  ${err##*$'\n'}"
    engine_log "using $CONTAINERS_CONF for doodlepod's podman commands (CONTAINERS_CONF; /etc untouched):"
    engine_log "  runtime runc, cgroupfs, file events, fixed nofile/nproc limits (the file says why)"
    return 0
  fi
  engine_log "podman cannot start a container of $image, with this machine's configuration or with"
  engine_log "$PROJECT_CONTAINERS_CONF: ${err##*$'\n'}"
  return 1
}

# Build options: on podman, the host's CA bundle is mounted read-only over the image's during RUN
# steps (never stored in a layer), so pip and apt inside trust what this machine trusts (networks
# that re-sign TLS, company CAs); docker's builder has no such option.
engine_build_opts() {
  if [[ $ENGINE == podman && -f /etc/ssl/certs/ca-certificates.crt ]]; then
    echo "--volume=/etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro"
  fi
}
