# Sourced (not run) by the install scripts that put Debian packages on the machine (install_browser.sh,
# install_podman.sh, install_pose_libs.sh, install_node_tools.sh): one way to call apt-get for all of them.
#
#   apt_install [apt-get install option...] PACKAGE...
#
# Installs quietly; a fresh image has no package lists (plain or compressed), so they are fetched first, and fetched again
# (then the install tried once more) when the first try fails on stale ones. The first try's own
# complaints are dropped (a stale list is expected and mended); the second try's are shown. Another apt
# (a second checkout installing, unattended-upgrades) holding dpkg's lock is waited for, up to
# APT_LOCK_WAIT_S seconds (default 300), instead of failing at once. Returns apt-get's status: the
# caller says what a failure means (a test group skips, or the script fails). Needs root and apt-get:
# the caller checks that first, to say what to run instead.

apt_install() {
  local lock=(-o "DPkg::Lock::Timeout=${APT_LOCK_WAIT_S:-300}")
  export DEBIAN_FRONTEND=noninteractive
  if ! compgen -G "/var/lib/apt/lists/*_Packages*" >/dev/null; then  # also .lz4: lists kept compressed
    apt-get "${lock[@]}" update -qq || true  # a failed update shows in the install's own error
  fi
  apt-get "${lock[@]}" install -y -qq "$@" >/dev/null 2>&1 && return 0
  apt-get "${lock[@]}" update -qq || true
  apt-get "${lock[@]}" install -y -qq "$@" >/dev/null
}
