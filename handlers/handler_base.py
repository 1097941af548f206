"""Shared machinery of doodlepod's TorchServe handlers.

One job per piece, used by both model handlers (``drawn_humanoid_detector.py`` and
``drawn_humanoid_pose_estimator.py``):

- :func:`request_bytes` / :func:`decode_image`: take one TorchServe request row (raw body or
  multipart field ``data``), check it is a PNG or JPEG of sensible size, and decode it to a BGR
  ``uint8`` array (H, W, 3) as OpenMMLab pipelines expect;
- :class:`RequestError`: a bad request, with a stable ``error`` code, a human message and an HTTP
  status; it becomes a JSON answer for that request only (the rest of the batch is unaffected).
  TorchServe 0.12 offers two ways to answer with a status other than 200: raising
  ``ts.utils.util.PredictionException(message, error_code)`` fails every request of the batch with
  that code, while ``context.set_response_status(code, phrase, idx)`` sets it per request; with
  batching only the second keeps one bad upload from failing its neighbours, so that is what we use;
- :func:`select_device`: ``cuda:<gpu_id>`` when TorchServe assigned a GPU and CUDA works, else CPU;
- :class:`BatchImageHandler`: the TorchServe entry point. TorchServe hands ``handle`` a list of
  requests (one per client request, up to the model's ``batchSize``); valid images go through the
  model in one forward pass, and every request gets its own answer and status code.

Image coordinates everywhere: pixels of the decoded image, origin top-left, x right, y down. JPEG
EXIF orientation is applied first (as ``cv2.imdecode`` does), so coordinates match the picture a
viewer shows.

This file is copied into each model archive next to the handler (TorchServe puts the archive
directory on ``sys.path``), so it must import nothing from the rest of the repository.
"""
from __future__ import annotations

import io
import json
import logging
import os
import time
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Sequence

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

logger = logging.getLogger(__name__)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
JPEG_MAGIC = b"\xff\xd8\xff"


@dataclass(frozen=True)
class ImageLimits:
    """Bounds on accepted images, in pixels. ``max_pixels`` guards against decompression bombs."""

    min_side: int = 16
    max_side: int = 4096
    max_pixels: int = 4096 * 4096


class RequestError(Exception):
    """A request the handler refuses: ``code`` is stable for clients, ``message`` is for humans."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status

    def answer(self) -> dict[str, str]:
        return {"error": self.code, "message": self.message}


def limits_of(settings: dict[str, Any]) -> ImageLimits:
    """The image limits of a handler's settings (the archive's model-config YAML), defaults elsewhere."""
    return ImageLimits(
        min_side=int(settings.get("min_side", ImageLimits.min_side)),
        max_side=int(settings.get("max_side", ImageLimits.max_side)),
        max_pixels=int(settings.get("max_pixels", ImageLimits.max_pixels)),
    )


def request_bytes(row: dict[str, Any]) -> bytes:
    """Return the image bytes of one TorchServe request row.

    TorchServe puts a multipart field named ``data`` under ``"data"`` and a raw request body under
    ``"body"``; JSON bodies arrive already parsed (dict/list) and ``text/*`` bodies as ``str``.
    """
    payload = row.get("data")
    if payload is None:
        payload = row.get("body")
    if payload is None:
        raise RequestError(
            "empty_body",
            'no image in the request: send PNG or JPEG bytes as the body or as a multipart field named "data"',
        )
    if isinstance(payload, (dict, list)):
        raise RequestError("not_an_image", "got JSON, expected PNG or JPEG bytes", 415)
    if isinstance(payload, str):
        raise RequestError(
            "not_an_image",
            "got text, expected PNG or JPEG bytes (send the file itself, e.g. curl --data-binary @drawing.png)",
            415,
        )
    data = bytes(payload)
    if not data:
        raise RequestError(
            "empty_body",
            'the image is empty: send PNG or JPEG bytes as the body or as a multipart field named "data"',
        )
    return data


def decode_image(data: bytes, limits: ImageLimits = ImageLimits()) -> np.ndarray:
    """Decode PNG/JPEG bytes to a BGR ``uint8`` array of shape (H, W, 3).

    Transparent pixels are composited over white (drawings on a transparent background read as
    paper), greyscale and palette images are expanded to three channels, EXIF orientation is applied.
    Raises :class:`RequestError` for anything that is not a complete PNG or JPEG within ``limits``.
    """
    if data.startswith(PNG_MAGIC):
        kind = "PNG"
    elif data.startswith(JPEG_MAGIC):
        kind = "JPEG"
    else:
        raise RequestError(
            "unsupported_format",
            f"not a PNG or JPEG image (first bytes {data[:8]!r}); only PNG and JPEG are accepted",
            415,
        )
    try:
        with Image.open(io.BytesIO(data)) as im:
            w, h = im.size
            if w * h > limits.max_pixels or max(w, h) > limits.max_side:
                raise RequestError(
                    "image_too_large",
                    f"the image is {w}x{h} px; the limit is {limits.max_side} px a side and "
                    f"{limits.max_pixels} px in all: downsize it before sending",
                    413,
                )
            if min(w, h) < limits.min_side:
                raise RequestError(
                    "image_too_small",
                    f"the image is {w}x{h} px; both sides must be at least {limits.min_side} px",
                )
            im.load()  # raises on truncated or corrupt data
            im = ImageOps.exif_transpose(im)
            rgb = _to_rgb(im)
    except RequestError:
        raise
    except (OSError, SyntaxError, ValueError, UnidentifiedImageError, Image.DecompressionBombError) as exc:
        raise RequestError("corrupt_image", f"the {kind} data could not be decoded: {exc}") from None
    return np.ascontiguousarray(np.asarray(rgb, dtype=np.uint8)[:, :, ::-1])


def _to_rgb(im: Image.Image) -> Image.Image:
    if im.mode == "RGB":
        return im
    if im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info):
        rgba = im.convert("RGBA")
        paper = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(paper, rgba).convert("RGB")
    if im.mode.startswith("I;16") or im.mode == "I":
        arr = np.asarray(im, dtype=np.float64)
        peak = arr.max() or 1.0
        return Image.fromarray((arr * (255.0 / max(peak, 255.0))).astype(np.uint8)).convert("RGB")
    return im.convert("RGB")


def select_device(context: Any) -> str:
    """``cuda:<gpu_id>`` when TorchServe gave this worker a GPU and CUDA is usable, else ``cpu``.

    ``DOODLEPOD_DEVICE`` (``cpu``/``cuda``/``cuda:N``) overrides the choice, e.g. to force CPU.
    """
    import torch

    forced = os.environ.get("DOODLEPOD_DEVICE", "").strip()
    if forced:
        return forced
    gpu_id = (getattr(context, "system_properties", None) or {}).get("gpu_id")
    if gpu_id is not None and torch.cuda.is_available():
        return f"cuda:{int(gpu_id)}"
    return "cpu"


class BatchImageHandler:
    """Base TorchServe handler: decode and validate each request, run the valid ones as one batch.

    Subclasses set ``model_name`` and implement :meth:`load_model` and :meth:`predict`.
    Settings come from the archive's model-config YAML, section ``handler`` (see
    ``scripts/build_archives.py``): ``config`` (mm config file in the archive), ``num_threads``
    (torch CPU threads; 0 keeps torch's default), image limits, and model-specific keys.
    """

    model_name = "model"

    def __init__(self) -> None:
        self.initialized = False
        self.model: Any = None
        self.device = "cpu"
        self.settings: dict[str, Any] = {}
        self.limits = ImageLimits()

    # -- TorchServe entry points -----------------------------------------------------------------
    def initialize(self, context: Any) -> None:
        import torch

        t0 = time.perf_counter()
        props = context.system_properties
        model_dir = props.get("model_dir")
        self.settings = dict((getattr(context, "model_yaml_config", None) or {}).get("handler") or {})
        threads = int(os.environ.get("DOODLEPOD_TORCH_THREADS", self.settings.get("num_threads", 0)) or 0)
        if threads > 0:
            torch.set_num_threads(threads)
        self.limits = limits_of(self.settings)
        self.device = select_device(context)
        checkpoint = os.path.join(model_dir, context.manifest["model"]["serializedFile"])
        config = os.path.join(model_dir, self.settings.get("config", "config.py"))
        self.model = self.load_model(config, checkpoint, self.device)
        self.initialized = True
        logger.info(
            "%s: loaded on %s in %.1f s (torch threads %d; handler settings %s)",
            self.model_name, self.device, time.perf_counter() - t0, torch.get_num_threads(),
            json.dumps(self.settings, sort_keys=True),
        )

    def handle(self, data: list[dict[str, Any]], context: Any) -> list[Any]:
        t0 = time.perf_counter()
        answers: list[Any] = [None] * len(data)
        images: list[np.ndarray] = []
        slots: list[int] = []
        for i, row in enumerate(data):
            try:
                images.append(decode_image(request_bytes(row), self.limits))
                slots.append(i)
            except RequestError as err:
                logger.warning("%s: request %d refused (%s): %s", self.model_name, i, err.code, err.message)
                answers[i] = err.answer()
                _set_status(context, i, err.status)
        t1 = time.perf_counter()
        if images:
            try:
                outputs = self.predict(images)
            except Exception:  # noqa: BLE001 - one bad batch must not kill the worker
                logger.exception("%s: inference failed on a batch of %d", self.model_name, len(images))
                for i in slots:
                    answers[i] = {"error": "inference_failed",
                                  "message": f"{self.model_name} could not process the image; see the model server log"}
                    _set_status(context, i, 500)
            else:
                for i, out in zip(slots, outputs):
                    answers[i] = out
        weights = str(self.settings.get("weights") or "")
        for i in range(len(data)):
            _set_content_type(context, i)
            if weights:  # "tiny": random weights built for tests; the app tells the person
                _set_header(context, i, WEIGHTS_HEADER, weights)
        logger.info(
            "%s: batch of %d (%d valid): decode %.0f ms, model %.0f ms",
            self.model_name, len(data), len(images), (t1 - t0) * 1e3, (time.perf_counter() - t1) * 1e3,
        )
        return answers

    # -- for subclasses ----------------------------------------------------------------------------
    def load_model(self, config: str, checkpoint: str, device: str) -> Any:
        raise NotImplementedError

    def predict(self, images: Sequence[np.ndarray]) -> list[Any]:
        """Run the model on BGR images (one batch); return one JSON-able answer per image."""
        raise NotImplementedError


def _set_status(context: Any, idx: int, status: int) -> None:
    if context is not None and hasattr(context, "set_response_status"):
        context.set_response_status(status, HTTPStatus(status).phrase, idx)


#: The response header naming the weights the archive was built from ("tiny" or "released";
#: scripts/build_archives.py writes it into the handler's settings).
WEIGHTS_HEADER = "X-Doodlepod-Weights"


def _set_header(context: Any, idx: int, key: str, value: str) -> None:
    if context is not None and hasattr(context, "set_response_header"):
        context.set_response_header(idx, key, value)


def _set_content_type(context: Any, idx: int) -> None:
    if context is not None and hasattr(context, "set_response_content_type"):
        context.set_response_content_type(idx, "application/json")


def clip_box(box: Sequence[float], width: int, height: int) -> list[float]:
    """Clip [left, top, right, bottom] to the image rectangle [0, width] x [0, height]."""
    l, t, r, b = (float(v) for v in box)
    return [min(max(l, 0.0), width), min(max(t, 0.0), height), min(max(r, 0.0), width), min(max(b, 0.0), height)]
