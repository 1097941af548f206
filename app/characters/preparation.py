"""How far the model server's preparation has got, as ``make run`` reports it, and the ``models``
object of ``GET /ping``.

On a fresh machine ``make run`` starts the app before the model stack is built (mmcv compiles for
minutes): scripts/run_local.sh and scripts/install_model_stack.sh write their progress to the JSON
file named by ``DOODLEPOD_MODELS_STATE_FILE``::

    {"state": "preparing" | "starting" | "failed", "detail": "<a sentence>",
     "progress": {"step": "...", "done": 3, "total": 77} | null, "retry_after_s": 540 | null,
     "weights": "released" | "tiny" | "finder" | null}

The app only reads it. While it says the models are not there yet, requests that need them do not
call a model server that does not exist yet (:meth:`ModelPreparation.check`): the app's own ink finder
answers them (DOODLEPOD_FINDER_FALLBACK), or, with that off, ``503 models_unavailable`` with
``Retry-After`` at once. :func:`served_by` says which of these answers a photo now. Without the file
(a pod, or ``make serve-app``) the models' state comes from TorchServe's management API alone.
"""
from __future__ import annotations

import json
import logging
from typing import Any

from ..errors import ModelsUnavailable

log = logging.getLogger("doodlepod.models")

#: Largest state file read (it is a few hundred bytes).
MAX_STATE_BYTES = 64 * 1024
#: Retry-After when nothing better is known (TorchServe loading its models takes tens of seconds).
DEFAULT_RETRY_AFTER_S = 30
#: Longest Retry-After sent: a client told to wait longer would miss the models becoming ready.
MAX_RETRY_AFTER_S = 300
NOT_YET = ("preparing", "starting", "failed")


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


class ModelPreparation:
    """Reads the state file (``path`` empty: there is none)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def read(self) -> dict[str, Any] | None:
        """The file's state, normalised, or None when there is no file or it cannot be read."""
        if not self.path:
            return None
        try:
            with open(self.path, "rb") as f:
                raw = json.loads(f.read(MAX_STATE_BYTES))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:  # half-written files are replaced atomically; anything else
            log.warning("cannot read the models' state file %s: %s", self.path, exc)
            return None
        if not isinstance(raw, dict) or raw.get("state") not in NOT_YET + ("ready",):
            return None
        progress = raw.get("progress")
        if isinstance(progress, dict):
            progress = {"step": str(progress.get("step", ""))[:200], "done": _int_or_none(progress.get("done")) or 0,
                        "total": _int_or_none(progress.get("total")) or 0}
        else:
            progress = None
        weights = raw.get("weights")
        return {"state": raw["state"], "detail": str(raw.get("detail", ""))[:500], "progress": progress,
                "retry_after_s": _int_or_none(raw.get("retry_after_s")),
                "weights": weights if weights in WEIGHTS_SERVED else None}

    def check(self) -> None:
        """Raise :class:`ModelsUnavailable` when the file says the models are not there yet."""
        state = self.read()
        if state is None or state["state"] not in NOT_YET:
            return
        raise ModelsUnavailable(f"the models are not ready yet: {state['detail']}",
                                retry_after_of(state["retry_after_s"]))


#: What the model server's archives are (their answers' X-Doodlepod-Weights) -> ``served_by``.
WEIGHTS_SERVED = {"released": "released_weights", "tiny": "tiny_random_models", "finder": "ink_finder"}


def served_by(models_ready: bool, weights: str | None, fallback: bool) -> str:
    """What answers a photo's detector and pose requests now, for ``GET /ping``'s ``models.served_by``:
    ``released_weights`` (AnimatedDrawings' trained models), ``tiny_random_models`` (the tests' models),
    ``ink_finder`` (the finder's archives on the model server), ``model_server`` (ready, its weights not
    known yet: named by its first answer), ``ink_finder_in_app`` (the model server is not ready: the
    app's own finder answers) or ``none`` (not ready and DOODLEPOD_FINDER_FALLBACK off: 503).
    ``weights``: what the model server's answers or the preparation file named."""
    if models_ready:
        return WEIGHTS_SERVED.get(weights or "", "model_server")
    return "ink_finder_in_app" if fallback else "none"


def retry_after_of(estimate_s: int | None) -> int:
    """The Retry-After for an estimate of the seconds left (bounded)."""
    if estimate_s is None:
        return DEFAULT_RETRY_AFTER_S
    return max(1, min(MAX_RETRY_AFTER_S, estimate_s))


def models_summary(model_states: dict[str, dict[str, Any]], preparation: dict[str, Any] | None,
                   management_url: str, fallback: bool = False) -> dict[str, Any]:
    """The ``models`` object of ``GET /ping`` from each model's readiness (TorchServe's management API)
    and the preparation file's state (None: no file). ``fallback``: the app's ink finder answers photos
    while the models are not there (DOODLEPOD_FINDER_FALLBACK), which the absent state's detail says."""
    meanwhile = ("the app's own ink finder animates photos meanwhile" if fallback else
                 "photos cannot be animated; drawings with their joints placed by hand still can")
    names = list(model_states)
    if all(s.get("ok") for s in model_states.values()):
        return {"state": "ready", "detail": "The models are ready: photos are animated.", "progress": None,
                "retry_after_s": None}
    if preparation is not None and preparation["state"] in ("preparing", "starting"):
        return {"state": preparation["state"], "detail": preparation["detail"], "progress": preparation["progress"],
                "retry_after_s": retry_after_of(preparation["retry_after_s"])}
    if preparation is not None and preparation["state"] == "failed":
        return {"state": "absent", "detail": preparation["detail"], "progress": None, "retry_after_s": None}
    unreachable = all("unreachable" in str(s.get("detail", "")) or "did not finish" in str(s.get("detail", ""))
                      for s in model_states.values())
    if unreachable:
        return {"state": "absent",
                "detail": f"The model server does not answer at {management_url}: {meanwhile}.",
                "progress": None, "retry_after_s": None}
    loaded = sum(1 for s in model_states.values() if s.get("ok"))
    return {"state": "starting",
            "detail": (f"The model server is loading the models ({loaded} of {len(names)} ready); photos can be "
                       "animated once they are."),
            "progress": {"step": "loading models", "done": loaded, "total": len(names)},
            "retry_after_s": DEFAULT_RETRY_AFTER_S}
