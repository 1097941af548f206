"""Client of the TorchServe that runs the detector and the pose model (over localhost in the pod).

Every call has a timeout (capped by the request's deadline) that covers the whole exchange, the
answer's body included: under gevent workers one ``gevent.Timeout`` bounds connect, send and every
byte of the answer, so a server that trickles its answer cannot hold a request past its deadline
(a per-read socket timeout alone would let one byte every few seconds go on for ever). Answers are
read up to :data:`MAX_ANSWER_BYTES`. Connection failures, answers cut off mid-body and TorchServe's
"busy" answers (503, 507) are retried with exponential backoff; every transport error ends as a JSON
502 or 503 (never a 500). Readiness comes from the management API (``GET /models/NAME``: at least
one worker READY), because TorchServe's own ``/ping`` says Healthy before the models have loaded.
"""
from __future__ import annotations

import json
import logging
import time
from typing import Any, Callable

import requests

from ..deadline import Deadline
from ..errors import ApiError, ModelServerError, ModelServerUnavailable
from ..loop import time_limit

log = logging.getLogger("doodlepod.torchserve")

_BUSY = (503, 507)
#: Largest answer read from TorchServe (detections and keypoints are a few KB).
MAX_ANSWER_BYTES = 8 * 2**20


class _AttemptTimedOut(Exception):
    """One call to TorchServe ran past its time limit (see :func:`app.loop.time_limit`)."""


def _read_answer(resp: requests.Response, limit: int = MAX_ANSWER_BYTES) -> bytes:
    """The body of a streamed answer, at most ``limit`` bytes (ModelServerError beyond)."""
    chunks, size = [], 0
    for chunk in resp.iter_content(64 * 1024):
        size += len(chunk)
        if size > limit:
            raise ModelServerError(f"TorchServe answered more than {limit // 2**20} MiB")
        chunks.append(chunk)
    return b"".join(chunks)


#: The header the model handlers name their weights in (handlers/handler_base.py).
WEIGHTS_HEADER = "X-Doodlepod-Weights"


class TorchServeClient:
    """Calls ``POST {inference_url}/predictions/{model}`` with the image as the multipart field ``data``."""

    def __init__(self, inference_url: str, management_url: str, *, timeout_s: float = 30.0,
                 retries: int = 2, backoff_s: float = 0.25, gate: Callable[[], None] | None = None) -> None:
        self.gate = gate  # raises before any call while the models are known not to be there yet
        self.inference_url = inference_url.rstrip("/")
        self.management_url = management_url.rstrip("/")
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.session = requests.Session()
        adapter = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=64, max_retries=0)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        #: The weights the models' last answer named (header X-Doodlepod-Weights: "tiny" for random
        #: weights built for tests, "released"), None until one names them.
        self.weights: str | None = None

    @property
    def runs_tiny_models(self) -> bool:
        """True when the model server's last answer came from tiny random-initialised models."""
        return self.weights == "tiny"

    def predict(self, model: str, image: bytes, deadline: Deadline, stage: str) -> Any:
        """Post ``image`` (encoded PNG/JPEG bytes) to ``model`` and return its decoded JSON answer.

        Raises :class:`ModelsUnavailable` (the models are still being prepared: see ``gate``),
        :class:`ModelServerUnavailable` (busy after retries, no answer in time; with ``down`` set when it
        refuses connections after retries or has not loaded the model),
        :class:`ModelServerError` (an error answer or one that is not JSON) or
        :class:`DeadlineExceeded`.
        """
        if self.gate is not None:
            self.gate()
        url = f"{self.inference_url}/predictions/{model}"
        attempt = 0
        while True:
            timeout = deadline.cap(self.timeout_s, stage)
            problem: str
            failure: type[ApiError] = ModelServerUnavailable  # what to raise once retries are spent
            down = False  # the server is not there at all (see ModelServerUnavailable.down)
            try:
                status, body = self._post(url, image, timeout)
            except requests.ConnectionError as exc:
                problem = f"cannot connect to TorchServe at {self.inference_url} ({type(exc).__name__})"
                down = True
            except (requests.Timeout, _AttemptTimedOut):
                deadline.check(stage)
                raise ModelServerUnavailable(f"model '{model}' did not answer within {timeout:.1f} s") from None
            except requests.RequestException as exc:  # the answer was cut off or garbled mid-body
                problem = f"model '{model}' sent a broken answer ({type(exc).__name__})"
                failure = ModelServerError
            else:
                if status == 200:
                    try:
                        return json.loads(body)
                    except (ValueError, RecursionError):
                        raise ModelServerError(f"model '{model}' answered something that is not JSON") from None
                if status == 404:
                    raise ModelServerUnavailable(f"model '{model}' is not loaded in TorchServe", down=True)
                if status not in _BUSY:
                    raise ModelServerError(f"model '{model}' failed with HTTP {status}: "
                                           f"{_short(body.decode('utf-8', 'replace'))}")
                problem = f"model '{model}' is busy (HTTP {status})"
            if attempt >= self.retries:
                message = problem + f"; gave up after {attempt + 1} attempts"
                raise ModelServerUnavailable(message, down=True) if down else failure(message)
            pause = self.backoff_s * (2 ** attempt)
            if deadline.remaining() <= pause:
                raise deadline.exceeded(stage, problem)
            log.warning("%s; retry %d/%d in %.2f s", problem, attempt + 1, self.retries, pause)
            time.sleep(pause)
            attempt += 1

    def _post(self, url: str, image: bytes, timeout: float) -> tuple[int, bytes]:
        """One attempt: (status, body), the whole exchange within ``timeout`` seconds."""
        with time_limit(timeout, _AttemptTimedOut()):
            resp = self.session.post(url, files={"data": ("image.png", image, "image/png")},
                                     timeout=(min(timeout, 3.0), timeout), stream=True)
            try:
                if resp.status_code == 200:
                    self.weights = resp.headers.get(WEIGHTS_HEADER) or self.weights
                return resp.status_code, _read_answer(resp)
            finally:
                resp.close()

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
