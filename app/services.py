"""The long-lived objects one app worker shares between requests, built once by :func:`app.create_app`.

Routes reach them through :func:`services` (the current app's :class:`Services`); a new service is a
field here, built in :func:`build_services` (which the app workers and the render worker share).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from flask import current_app

if TYPE_CHECKING:  # the real imports need PROMETHEUS_MULTIPROC_DIR set first (see create_app)
    from .characters.preparation import ModelPreparation
    from .characters.resource import Characters
    from .characters.torchserve import TorchServeClient
    from .clients.ratelimit import RateLimiter
    from .clients.refusals import RefusalPacer
    from .config import Settings
    from .jobs.idempotency import SyncIdempotency
    from .jobs.queue import JobQueue
    from .motions.library import Motion
    from .motions.own import OwnMotions
    from .motions.previews import MotionPreviews
    from .render.admission import InflightSlots
    from .render.pipeline import Pipeline
    from .render.pool import RenderPool
    from .scenes.resource import Scenes
    from .shares import Shares
    from .storage.backends import Storage

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
    shares: Shares                   # each client's share of the pools (app/shares.py)
    jobs: JobQueue | None = None                 # async jobs on Redis (None: no DOODLEPOD_REDIS_URL)
    limiter: RateLimiter | None = None           # per-client token buckets (None: limit 0)
    idempotency: SyncIdempotency | None = None   # Idempotency-Key records of synchronous requests
    previews: MotionPreviews | None = None       # each motion on the reference character (GET /motions)
    own_motions: OwnMotions | None = None        # clients' motions made from their videos (POST /motions)
    scenes: Scenes | None = None                 # several characters of one photo together (POST /scenes)
    preparation: ModelPreparation | None = None  # how far `make run` has got preparing the models
    refusals: RefusalPacer | None = None         # each client's free refusals a second (None: not paced)


def build_services(settings: Settings, run_dir: Path, spill_name: str, workers: int = 0) -> Services:
    """Every service of one process (an app worker or a render worker) from ``settings``.

    ``run_dir`` is the pod's shared runtime folder (render slots); the render pool spills its
    arguments and results into ``spill_name`` in a scratch folder of this process's own. Call after
    :func:`app.runtime_dir`, which points the metrics at that folder before they are imported.
    ``workers``: the processes of this kind in the container, whose render processes share its memory
    (0: DOODLEPOD_WORKERS, the app's gunicorn workers).
    """
    from .characters.preparation import ModelPreparation
    from .characters.resource import Characters
    from .characters.torchserve import TorchServeClient
    from .clients.refusals import RefusalPacer
    from .config import available_cpus
    from .motions.library import load_motions
    from .motions.previews import MotionPreviews
    from .render.admission import InflightSlots
    from .render.memory import render_process_memory_mb
    from .render.pipeline import Pipeline
    from .render.pool import RenderPool
    from .render.scratch import make_scratch
    from .render.steps import render_reference, warm
    from .shares import Shares
    from .storage.backends import from_settings

    # Spill files (images and renders on their way to and from the render processes) and uploaded
    # clips go to a scratch folder in the temp folder, not to the runtime folder: that one holds only
    # small state (slots, metric files) on a small volume of its own.
    scratch = make_scratch()
    processes = settings.render_processes or available_cpus()
    memory_mb = render_process_memory_mb(settings.render_process_memory_mb, processes, workers or settings.workers)
    pool = RenderPool(processes, scratch / spill_name, warm_up=warm, memory_limit_mb=memory_mb)
    storage = from_settings(settings)
    preparation = ModelPreparation(settings.models_state_file)
    torchserve = TorchServeClient(settings.torchserve_url, settings.torchserve_management_url,
                                  timeout_s=settings.torchserve_timeout_s, retries=settings.torchserve_retries,
                                  gate=preparation.check)
    pipeline = Pipeline(settings, torchserve, storage, pool, scratch_dir=scratch)
    jobs, limiter, idempotency = redis_services(settings)
    own = None
    if jobs is not None:
        from .motions.own import OwnMotions
        own = OwnMotions(jobs.redis, settings.redis_prefix, storage, int(settings.expiry_hours * 3600))
    from .scenes.resource import Scenes

    characters = Characters(settings, pipeline, storage)
    refusals = RefusalPacer(settings.client_refusals_per_s) if settings.client_refusals_per_s > 0 else None
    return Services(settings=settings, motions=load_motions(settings.motions_dir or None), storage=storage,
                    torchserve=torchserve, pool=pool, slots=InflightSlots(run_dir / "slots", settings.max_inflight,
                                                                         shares=bool(settings.client_render_slots)),
                    pipeline=pipeline, characters=characters,
                    shares=Shares(settings, jobs.redis if jobs is not None else None),
                    jobs=jobs, limiter=limiter, idempotency=idempotency, runtime_dir=run_dir,
                    previews=MotionPreviews(storage, pipeline, render_reference), own_motions=own,
                    scenes=Scenes(settings, pipeline, storage, characters), preparation=preparation,
                    refusals=refusals)


def redis_services(settings: Settings) -> tuple[JobQueue | None, RateLimiter | None, SyncIdempotency | None]:
    """The job queue, rate limiter and idempotency records on DOODLEPOD_REDIS_URL (without it: no queue
    and no records, and a rate limiter in this process's memory).

    They share one connection pool; nothing connects until the first call, so a Redis that is down
    at start only makes async requests answer 503.
    """
    from .clients.ratelimit import RateLimiter
    from .jobs.idempotency import SyncIdempotency
    from .jobs.queue import JobQueue

    queue = JobQueue.from_settings(settings)
    if queue is None:
        local = None
        if settings.rate_limit_per_min > 0:
            from .clients.ratelimit import LocalRateLimiter
            local = LocalRateLimiter(settings.rate_limit_per_min, settings.rate_limit_burst)
        return None, local, None
    limiter = None
    if settings.rate_limit_per_min > 0:
        limiter = RateLimiter(queue.redis, queue.key("rate", ""), settings.rate_limit_per_min,
                              settings.rate_limit_burst)
    idempotency = SyncIdempotency(queue.redis, settings.redis_prefix, settings.idempotency_ttl_s,
                                  settings.request_deadline_s + 30, settings.retry_after_s or 5)
    return queue, limiter, idempotency


def services() -> Services:
    """The current app's services (inside a request or an app context)."""
    return current_app.extensions[EXTENSION]
