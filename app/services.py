"""The long-lived objects one app worker shares between requests, built once by :func:`app.create_app`.

Routes reach them through :func:`services` (the current app's :class:`Services`); helpers that add a
service add a field here and build it in ``create_app``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from flask import current_app

if TYPE_CHECKING:  # the real imports need PROMETHEUS_MULTIPROC_DIR set first (see create_app)
    from .characters import Characters
    from .config import Settings
    from .motions import Motion
    from .pipeline import Pipeline
    from .render_pool import InflightSlots, RenderPool
    from .storage import Storage
    from .torchserve import TorchServeClient

EXTENSION = "doodlepod"


@dataclass
class Services:
    settings: Settings
    motions: dict[str, Motion]       # the motion library by name (built-ins + DOODLEPOD_MOTIONS_DIR)
    storage: Storage                 # where finished animations go (local folder or S3)
    torchserve: TorchServeClient
    pool: RenderPool                 # this worker's render processes
    slots: InflightSlots             # the pod-wide render slots (admission)
    pipeline: Pipeline
    runtime_dir: Path                # the pod's shared runtime folder (slots, metric files)
    characters: Characters           # the characters API's steps over the pipeline and the storage


def services() -> Services:
    """The current app's services (inside a request or an app context)."""
    return current_app.extensions[EXTENSION]
