#!/usr/bin/env bash
# Run pod.yaml with podman, on CPUs, with deploy/redis.yaml's Redis: what `make pod` calls.
#
# Usage: scripts/pod.sh up [--detach] [--set KEY=VALUE]...
#                                         start; wait for /ping 200 with both models READY; print
#                                         curl lines; then run until Ctrl-C (removes everything) or,
#                                         with --detach, return and leave it running; --set adds an
#                                         app setting to the pod's ConfigMap
#        scripts/pod.sh down              remove everything `up` started (`make pod-down`)
#
# `podman play kube` runs the real pod.yaml and deploy/redis.yaml through scripts/pod_overlay.py,
# which changes only what must differ here (the CPU model image, no GPU, the model container as a
# plain container instead of a native sidecar, numeric probe ports, the app's port on 127.0.0.1, the
# Redis URL) and says why for each. Both pods join a podman network of their own, whose DNS lets the
# app reach Redis by name as in the cluster. The images come from `make images`; where Redis's
# image cannot be pulled, a local equivalent is built (scripts/podman/Containerfile.redis).
#
# Env:
#   DOODLEPOD_POD_NAME       the pod's name (default doodlepod; Redis: NAME-redis, network: NAME)
#   DOODLEPOD_POD_PORT       the app's port on 127.0.0.1 (default 8000)
#   DOODLEPOD_IMAGE_TAG      tag of the images (default 0.1.0)
#   DOODLEPOD_POD_TIMEOUT_S  how long to wait for /ping 200 (default 900)
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
cmd=${1:-}; shift || true
detach=""
sets=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --detach) detach=1 ;;
    --set) [[ $# -ge 2 && $2 == DOODLEPOD_*=* ]] || { echo "pod.sh: --set DOODLEPOD_<SETTING>=VALUE" >&2; exit 2; }
           sets+=(--set "$2"); shift ;;
    *) echo "pod.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
case $cmd in up|down) ;; -h|--help) usage; exit 0 ;; *) usage >&2; exit 2 ;; esac

cd "$(dirname "$0")/.."
ROOT=$PWD
ENGINE_LOG_TAG=pod
# shellcheck source=scripts/engine.sh
source scripts/engine.sh
NAME=${DOODLEPOD_POD_NAME:-doodlepod}
PORT=${DOODLEPOD_POD_PORT:-8000}
TAG=${DOODLEPOD_IMAGE_TAG:-0.1.0}
TIMEOUT=${DOODLEPOD_POD_TIMEOUT_S:-900}
REDIS=$NAME-redis
NETWORK=$NAME
STATE=$ROOT/build/pod/$NAME
start=$SECONDS
log() { engine_log "$@"; }
die() { engine_log "ERROR: $*"; exit 1; }

DOODLEPOD_ENGINE=podman engine_detect || die "\`make pod\` needs podman (its play kube runs pod.yaml); scripts/install_podman.sh"
if [[ $cmd == up ]]; then
  podman image exists "doodlepod-app:$TAG" || die "no image doodlepod-app:$TAG: run \`make images\` first"
  engine_configure "doodlepod-app:$TAG" || exit 1
elif podman image exists "doodlepod-app:$TAG"; then
  engine_configure "doodlepod-app:$TAG" 2>/dev/null || true
fi

# PyYAML for the overlay: the venv's Python, else this machine's.
PY=${DOODLEPOD_CACHE:-$HOME/.cache/doodlepod}/venv/bin/python
[[ -x $PY ]] || PY=python3
"$PY" -c 'import yaml' 2>/dev/null || die "scripts/pod_overlay.py needs PyYAML (make venv, or apt-get install python3-yaml)"

down() {
  local quiet=${1:-}
  [[ -n $quiet ]] || log "removing pods $NAME and $REDIS, their volumes and network $NETWORK"
  # The app first: it drains while TorchServe still answers (pod.yaml's grace period, capped here).
  podman pod stop -t 20 "$NAME" >/dev/null 2>&1 || true
  podman pod rm -f "$NAME" >/dev/null 2>&1 || true
  podman pod rm -f -t 10 "$REDIS" >/dev/null 2>&1 || true
  # The pods' volumes: NAME-<volume> (scripts/pod_overlay.py names them so).
  podman volume ls --quiet | grep -E "^($NAME|$REDIS)-" | xargs --no-run-if-empty podman volume rm -f >/dev/null 2>&1 || true
  podman network rm -f "$NETWORK" >/dev/null 2>&1 || true
  rm -rf "$STATE"
  [[ -n $quiet ]] || log "removed"
}

if [[ $cmd == down ]]; then
  down
  exit 0
fi

for image in "doodlepod-app:$TAG" "doodlepod-worker:$TAG" "doodlepod-model:$TAG-cpu"; do
  podman image exists "$image" || die "no image $image: run \`make images\` first"
done
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
  die "port $PORT is already in use (another \`make pod\` or \`make run\`?); DOODLEPOD_POD_PORT=8001 picks another"
fi
down quiet
mkdir -p "$STATE"

# Redis: deploy/redis.yaml's image, or a local equivalent where no registry answers.
redis_image=$("$PY" -c 'import sys, yaml; d = [x for x in yaml.safe_load_all(open("deploy/redis.yaml")) if x and x["kind"] == "StatefulSet"][0]; print(d["spec"]["template"]["spec"]["containers"][0]["image"])')
redis_args=()
if ! podman image exists "$redis_image" && ! timeout 60 podman pull -q "$redis_image" >/dev/null 2>&1; then
  local_redis=localhost/doodlepod-redis-local:bookworm
  if ! podman image exists "$local_redis"; then
    log "cannot pull $redis_image: building a local equivalent, $local_redis (Debian's redis-server; scripts/podman/Containerfile.redis)"
    mapfile -t build_opts < <(engine_build_opts)
    podman build -q "${build_opts[@]}" -f scripts/podman/Containerfile.redis -t "$local_redis" scripts/podman >/dev/null
  fi
  log "Redis: $local_redis in place of $redis_image"
  redis_args=(--redis-image "$local_redis")
fi

"$PY" scripts/pod_overlay.py --what redis --redis-name "$REDIS" "${redis_args[@]}" >"$STATE/redis.yaml"
"$PY" scripts/pod_overlay.py --what pod --name "$NAME" --tag "$TAG" --port "$PORT" --redis-name "$REDIS" "${sets[@]}" >"$STATE/pod.yaml"

cleanup() {
  local rc=$?
  trap '' INT TERM
  trap - EXIT
  down
  exit "$rc"
}
# Whatever goes wrong before the pod is ready, nothing it started is left behind (with --detach too).
trap cleanup EXIT
trap 'log "stopping"; exit 0' INT TERM

podman network create "$NETWORK" >/dev/null
log "starting Redis (pod $REDIS, from deploy/redis.yaml)"
podman play kube --network "$NETWORK" "$STATE/redis.yaml" >"$STATE/play-redis.log" 2>&1 \
  || { cat "$STATE/play-redis.log" >&2; die "podman play kube deploy/redis.yaml failed"; }
t0=$SECONDS
log "starting pod $NAME from pod.yaml (the CPU overlay: $STATE/pod.yaml)"
podman play kube --network "$NETWORK" "$STATE/pod.yaml" >"$STATE/play-pod.log" 2>&1 \
  || { cat "$STATE/play-pod.log" >&2; die "podman play kube pod.yaml failed"; }
# podman 4.3's play kube applies the containers' memory limits but not their CPU requests (each gets
# cpu.shares 1024): give each the weight the kubelet gives a request, 1024 per CPU, so the app, the
# worker and TorchServe share a busy machine as they would share a node.
"$PY" - "$STATE/pod.yaml" <<'EOF' | while read -r container shares; do
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    for c in (d or {}).get("spec", {}).get("containers", []) if (d or {}).get("kind") == "Pod" else []:
        cpu = str(c.get("resources", {}).get("requests", {}).get("cpu", ""))
        if cpu:
            milli = float(cpu[:-1]) if cpu.endswith("m") else float(cpu) * 1000
            print(c["name"], max(2, int(milli * 1024 / 1000)))
EOF
  if podman update --cpu-shares "$shares" "$NAME-$container" >/dev/null 2>&1; then
    log "container $NAME-$container: cpu.shares $shares (its CPU request)"
  else
    log "could not set $NAME-$container's cpu.shares to $shares (podman update): it shares the CPUs equally"
  fi
done

base="http://127.0.0.1:$PORT"
ping_ready() {  # 0 when /ping answers 200 with both models READY (and Redis reachable: async jobs on)
  "$PY" - "$base/ping" <<'EOF' 2>/dev/null
import json, sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
    c = json.load(r)["components"]
sys.exit(0 if r.status == 200 and c["detector"]["ok"] and c["pose_estimator"]["ok"] and c["jobs"]["ok"] else 1)
EOF
}
next=$((SECONDS + 15))
until ping_ready; do
  for c in model app worker; do
    state=$(podman container inspect --format '{{.State.Status}}' "$NAME-$c" 2>/dev/null || echo missing)
    if [[ $state != running ]]; then
      log "container $NAME-$c is $state; its last lines:"
      podman logs --tail 30 "$NAME-$c" >&2 2>&1 || true
      [[ $state == missing ]] && die "the pod did not start"
    fi
  done
  (( SECONDS - t0 < TIMEOUT )) || die "/ping not 200 after $TIMEOUT s (DOODLEPOD_POD_TIMEOUT_S); podman logs $NAME-model / $NAME-app"
  if (( SECONDS >= next )); then log "  waiting for /ping 200 ($((SECONDS - t0)) s)"; next=$((SECONDS + 15)); fi
  sleep 1
done
ready_s=$((SECONDS - t0))
echo "$ready_s" >"$STATE/ready_s"
log "pod $NAME: /ping 200 with both models READY $ready_s s after \`podman play kube\`"

chars=tests/fixtures/animated_drawings/examples/characters
# char1's joints from its char_cfg.yaml, in the image's pixels (the README shows the same line).
joints='{"root":[264,397],"hip":[264,397],"torso":[247,232],"neck":[231,119],"right_shoulder":[151,245],"right_elbow":[99,278],"right_hand":[46,311],"left_shoulder":[343,218],"left_elbow":[396,245],"left_hand":[449,278],"right_hip":[191,404],"right_knee":[165,476],"right_foot":[138,556],"left_hip":[337,390],"left_knee":[376,456],"left_foot":[409,549]}'
weights=$(podman image inspect --format '{{index .Config.Labels "org.doodlepod.weights"}}' "doodlepod-model:$TAG-cpu" 2>/dev/null || true)
photo_note=""
[[ $weights == finder ]] && photo_note="  (the ink finder: no trained weights; warnings say found_by_ink_finder)"
if [[ $weights == tiny ]]; then
  photo_note="  (tiny models: expect 422 no_character, or nonsense)"
  log "the model image has TINY RANDOM-INITIALISED models: their detections are MEANINGLESS;"
  log "  send the character's joints (the curl line below), or build it with DOODLEPOD_MODEL_WEIGHTS=released"
fi
cat <<EOF

doodlepod is running in pod $NAME at $base  (models: ${weights:-?} weights; logs: podman logs $NAME-app | $NAME-worker | $NAME-model)
Open $base/studio in a browser to upload a drawing, fix its box, mask and joints and watch it move.
Or try, from $ROOT:

# health: 200 with each component's state
curl -s $base/ping

# animate a drawing, sending its joints (works with any weights)
curl -s $base/animate \\
  -F image=@$chars/char1/texture.png \\
  -F 'joints=$joints'

# the same as an async job: 202 + Location: /jobs/<id> at once; then poll that URL until "succeeded"
curl -si $base/animate -H 'Prefer: respond-async' -H "Idempotency-Key: \$(date +%s%N)" \\
  -F image=@$chars/char1/texture.png \\
  -F 'joints=$joints'
curl -s $base/jobs/JOB_ID    # JOB_ID: the end of the Location header

# animate a photo: the models find the character and its joints$photo_note
curl -s $base/animate \\
  -F image=@$chars/char4/original_img.png

# metrics
curl -s $base/metrics | grep ^doodlepod_

Animations are stored in the pod's app-data volume.
EOF
if [[ -n $detach ]]; then
  trap - EXIT INT TERM
  echo "Remove it with: make pod-down (DOODLEPOD_POD_NAME=$NAME)"
  exit 0
fi
echo "Press Ctrl-C to stop and remove it (or run make pod-down)."
while podman pod exists "$NAME"; do sleep 2 & wait $! || true; done
log "pod $NAME is gone"
