"""Client of the TorchServe that runs the detector and the pose model (over localhost in the pod).

Every call has a timeout (capped by the request's deadline) and retries connection failures and
TorchServe's "busy" answers (503, 507) with exponential backoff. Readiness comes from the management
API (``GET /models/NAME``: at least one worker READY), because TorchServe's own ``/ping`` says
Healthy before the models have loaded.
"""
from __future__ import annotations

import json
import logging
import time
from typing import Any

import requests

from .deadline import Deadline
from .errors import ModelServerError, ModelServerUnavailable

log = logging.getLogger("doodlepod.torchserve")

_BUSY = (503, 507)


class TorchServeClient:
    """Calls ``POST {inference_url}/predictions/{model}`` with the image as the multipart field ``data``."""

    def __init__(self, inference_url: str, management_url: str, *, timeout_s: float = 30.0,
                 retries: int = 2, backoff_s: float = 0.25) -> None:
        self.inference_url = inference_url.rstrip("/")
        self.management_url = management_url.rstrip("/")
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.session = requests.Session()
        adapter = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=64, max_retries=0)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)

    def predict(self, model: str, image: bytes, deadline: Deadline, stage: str) -> Any:
        """Post ``image`` (encoded PNG/JPEG bytes) to ``model`` and return its decoded JSON answer.

        Raises :class:`ModelServerUnavailable` (down, not loaded, busy after retries),
        :class:`ModelServerError` (an error answer or one that is not JSON) or
        :class:`DeadlineExceeded`.
        """
        url = f"{self.inference_url}/predictions/{model}"
        attempt = 0
        while True:
            timeout = deadline.cap(self.timeout_s, stage)
            problem: str
            try:
                resp = self.session.post(url, files={"data": ("image.png", image, "image/png")},
                                         timeout=(min(timeout, 3.0), timeout))
            except requests.ConnectionError as exc:
                problem = f"cannot connect to TorchServe at {self.inference_url} ({type(exc).__name__})"
            except requests.Timeout:
                deadline.check(stage)
                raise ModelServerUnavailable(f"model '{model}' did not answer within {timeout:.1f} s")
            else:
                if resp.status_code == 200:
                    try:
                        return resp.json()
                    except (ValueError, json.JSONDecodeError):
                        raise ModelServerError(f"model '{model}' answered something that is not JSON") from None
                if resp.status_code == 404:
                    raise ModelServerUnavailable(f"model '{model}' is not loaded in TorchServe")
                if resp.status_code not in _BUSY:
                    raise ModelServerError(f"model '{model}' failed with HTTP {resp.status_code}: "
                                           f"{_short(resp.text)}")
                problem = f"model '{model}' is busy (HTTP {resp.status_code})"
            if attempt >= self.retries:
                raise ModelServerUnavailable(problem + f"; gave up after {attempt + 1} attempts")
            pause = self.backoff_s * (2 ** attempt)
            if deadline.remaining() <= pause:
                raise deadline.exceeded(stage, problem)
            log.warning("%s; retry %d/%d in %.2f s", problem, attempt + 1, self.retries, pause)
            time.sleep(pause)
            attempt += 1

    def model_state(self, model: str, timeout_s: float) -> dict[str, Any]:
        """Readiness of ``model``: ``{"ready": bool, "detail": str, "workers": {status: count}}``."""
        url = f"{self.management_url}/models/{model}"
        try:
            resp = self.session.get(url, timeout=timeout_s)
        except requests.RequestException as exc:
            return {"ready": False, "detail": f"management API unreachable: {type(exc).__name__}"}
        if resp.status_code == 404:
            return {"ready": False, "detail": "model not registered"}
        if resp.status_code != 200:
            return {"ready": False, "detail": f"management API answered HTTP {resp.status_code}"}
        try:
            workers = resp.json()[0].get("workers", [])
        except (ValueError, IndexError, KeyError, AttributeError, TypeError):
            return {"ready": False, "detail": "unreadable management API answer"}
        counts: dict[str, int] = {}
        for w in workers:
            status = str(w.get("status", "UNKNOWN"))
            counts[status] = counts.get(status, 0) + 1
        ready = counts.get("READY", 0) > 0
        return {"ready": ready, "detail": "READY" if ready else "no READY worker", "workers": counts}


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."
