# shellcheck shell=bash
# Sourced by scripts/bootstrap.sh, scripts/install_model_stack.sh and scripts/run_local.sh: they say how
# far the models' preparation has got in the JSON file named by DOODLEPOD_MODELS_STATE_FILE (nothing
# when it is unset), which the app reads for GET /ping's "models" object and to answer photo requests
# 503 models_unavailable meanwhile (app/characters/preparation.py). Replaced atomically.
#
#   models_state STATE DETAIL [STEP DONE TOTAL [RETRY_AFTER_S]]
#   STATE: preparing | starting | failed | ready; DETAIL: one sentence for a person (no double quotes)
#   MODELS_STATE_WEIGHTS (a variable, optional): what the model server's archives are (released | tiny |
#   finder), said as "weights" once they are chosen, so /ping can say what serves the models.
models_state() {
  local file=${DOODLEPOD_MODELS_STATE_FILE:-}
  [[ -n $file ]] || return 0
  local progress=null retry=${6:-null} weights=null
  [[ -n ${3:-} ]] && progress=$(printf '{"step": "%s", "done": %d, "total": %d}' "$3" "${4:-0}" "${5:-0}")
  [[ -n ${MODELS_STATE_WEIGHTS:-} ]] && weights="\"$MODELS_STATE_WEIGHTS\""
  printf '{"state": "%s", "detail": "%s", "progress": %s, "retry_after_s": %s, "weights": %s}\n' \
    "$1" "$2" "$progress" "$retry" "$weights" > "$file.tmp.$$" && mv -f "$file.tmp.$$" "$file"
}
