"""The render worker: ``python -m app.worker`` takes async jobs from Redis and renders them.

It is a second process type of the app's image, run beside gunicorn in the same pod (the
``worker`` container of deploy/deployment.yaml, a second process of ``make run``). It builds the
same pipeline as the web app (TorchServe on localhost, the storage, a render process pool) and
shares the pod's render slots with it (``DOODLEPOD_RUNTIME_DIR``), so sync and async renders
together never exceed ``DOODLEPOD_MAX_INFLIGHT``.

Threads: ``DOODLEPOD_WORKER_CONCURRENCY`` job threads (each: wait for TorchServe to be ready and for
a job to be waiting, then take a render slot, take the job, run it; an idle thread holds no slot; jobs
come in clients' turns, and a client's jobs hold at most its render share of this worker's slots:
:meth:`Worker._take_turn`),
one heartbeat thread that renews the entries being worked on, and
one callback thread that hands each callback to a delivery thread of its own (app/jobs/webhooks.py;
at most DOODLEPOD_WEBHOOK_CONCURRENCY at once, :data:`PER_RECEIVER` per receiver).
SIGTERM stops taking work and lets running jobs finish
(bounded by the request deadline); a worker killed outright loses nothing: its jobs are taken over
after ``DOODLEPOD_JOBS_VISIBILITY_TIMEOUT_S``.

A failed attempt is judged by :func:`app.jobs.retry.decide`, from the error alone: a deterministic
failure (4xx, ``render_failed``, ``deadline_exceeded``, a crash) ends ``failed`` at once; a retryable one
(TorchServe or the storage down or wrong) is requeued with a not-before time, growing each attempt,
until ``DOODLEPOD_JOBS_MAX_ATTEMPTS``, then ends ``failed`` and is dead-lettered. No thread waits out
the delay: the job thread goes on to the next job.

``python -m app.worker --alive`` exits 0 if this pod's worker renewed its heartbeat file recently
(the container's liveness probe).
"""
from __future__ import annotations

import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import shares
from .clients.lanes import PER_RECEIVER, Lanes, receiver_of
from .errors import ApiError
from .jobs import retry
from .motions.library import pick
from .orders import ORDERS, AnimateOrder, CharacterOrder, SceneOrder, VideoOrder, WorkOrder

if TYPE_CHECKING:
    from .services import Services

log = logging.getLogger("doodlepod.worker")

HEARTBEAT_FILE = "worker.alive"
#: Seconds an idle job thread waits before it looks for work again (the pickup latency of a job).
IDLE_POLL_S = 0.2
#: Seconds between two writes of a job's frames progress to its record in Redis.
PROGRESS_EVERY_S = 0.2


#: kind -> handler(services, order, input bytes, job id, deadline, progress=None) -> result dict (merged into
#: the job); ``order`` is the job's work order (:mod:`app.orders`, read back from its payload), ``services``
#: the worker's :class:`app.services.Services` (the same objects the web app has), ``progress(report)``
#: writes the job's progress (app/render/pipeline.py's ``progress_report``).
HANDLERS: dict[str, Callable[..., dict[str, Any]]] = {}


def handler(order: type[WorkOrder]):
    """Register the function that runs ``order``'s jobs (routes queue them with its kind)."""
    def register(fn):
        HANDLERS[order.kind] = fn
        return fn
    return register


def read_order(kind: str, payload: dict[str, Any]) -> WorkOrder | dict[str, Any]:
    """A job's work order, as the route made it; a kind with no order (a test's) gets its payload."""
    order = ORDERS.get(kind)
    return payload if order is None else order.from_json(payload)


@handler(AnimateOrder)
def run_animate(ctx: Services, order: AnimateOrder, image: bytes | None, job_id: str, deadline,
                progress=None) -> dict:
    """POST /animate's work: the photo pipeline, with the request's validated fields."""
    motions = pick(ctx.motions, order.motions)
    if order.every_character:
        timings: dict[str, float] = {}
        answer = ctx.scenes.animate_photo(order, image or b"", ctx.motions, deadline, timings, progress=progress)
        return {**answer, "timings_ms": timings}
    result = ctx.pipeline.run(order, image or b"", motions, deadline, progress=progress)
    extra = {"warnings": result.warnings} if result.warnings else {}  # which finder found the drawing
    return {"animations": result.animations, "character": result.character, "timings_ms": result.timings_ms,
            **extra}


@handler(CharacterOrder)
def run_character_animations(ctx: Services, order: CharacterOrder, _input: bytes | None, job_id: str,
                             deadline, progress=None) -> dict:
    """POST /characters/{id}/animations' work (app/characters/resource.py), the render slot already held."""
    timings: dict[str, float] = {}
    record, urls, hits = ctx.characters.render(order, pick(ctx.motions, order.motions), deadline, timings,
                                               nullcontext, progress=progress)
    return {"character": {"id": record.id, "version": record.version}, "format": order.format,
            "size": order.size, "animations": urls, "cached": hits, "timings_ms": timings}


@handler(SceneOrder)
def run_scene_animations(ctx: Services, order: SceneOrder, _input: bytes | None, job_id: str,
                         deadline, progress=None) -> dict:
    """POST /scenes/{id}/animations' work (app/scenes/resource.py), the render slot already held."""
    timings: dict[str, float] = {}
    record, out = ctx.scenes.render(order, ctx.motions, deadline, timings, nullcontext, progress=progress)
    return {"scene": {"id": record.id, "version": record.version}, "format": order.format,
            "size": order.size, "animation": out["url"], "width": out["width"], "height": out["height"],
            "cached": out["cached"], "timings_ms": timings}


@handler(VideoOrder)
def run_motion_from_video(ctx: Services, order: VideoOrder, video: bytes | None, job_id: str,
                          deadline, progress=None) -> dict:
    """POST /motions' work: the person's movement in the video as the client's own motion
    (app/motions/own.py). It runs on a video thread, holding no render slot; the video waits
    in the storage (``video_key``; older jobs: the job's input in Redis)."""
    from .errors import InvalidVideo
    from .motions.own import make_motion

    if order.video_key:
        video = ctx.storage.get(order.video_key, deadline)
        if video is None:
            raise InvalidVideo("the uploaded video is no longer stored (expired); send it again")
    return make_motion(ctx, order, video or b"", job_id, deadline, report=progress)


class Worker:
    def __init__(self, services: Services, run_dir: Path, retry_delay_s: float = retry.FIRST_DELAY_S) -> None:
        self.settings = services.settings
        self.queue = services.jobs
        self.ctx = services
        self.slots = services.slots
        self.pool = services.pool
        self.run_dir = run_dir
        self.retry_delay_s = retry_delay_s   # the first retry's delay (then doubled each attempt)
        self.stop = threading.Event()
        self._stopped = threading.Event()   # set after the job threads ended: the heartbeat stops last
        self.name = f"{socket.gethostname()}-{os.getpid()}"
        self._lock = threading.Lock()
        self._jobs_holding = 0  # render slots this worker's job threads hold or are about to take
        self._clients: Counter[str] = Counter()  # client -> render jobs this worker runs for it now
        self._turns = threading.Lock()  # one job thread takes a turn at a time
        self._working: dict[tuple[str, str], set[str]] = {}   # (stream, consumer) -> entry ids
        self._ready_at = 0.0
        self._ready_ok = False
        from .clients.lookups import BoundedResolver
        # callback names: looked up on threads of their own, within each attempt's DOODLEPOD_WEBHOOK_TIMEOUT_S
        self.resolver = BoundedResolver(self.settings.webhook_dns_threads, self.settings.webhook_timeout_s)

    # --- the threads ------------------------------------------------------------------------
    def run(self) -> None:
        from . import metrics  # noqa: F401  (metrics files in the shared folder)

        threads = [threading.Thread(target=self._run_forever, args=(f"{self.name}-{i}", self._job_step),
                                    name=f"job-{i}", daemon=True) for i in range(self.settings.worker_concurrency)]
        threads += [threading.Thread(target=self._run_forever, args=(f"{self.name}-video-{i}", self._video_step),
                                     name=f"video-{i}", daemon=True)
                    for i in range(self.settings.worker_video_concurrency)]
        threads.append(threading.Thread(target=self._webhook_loop, args=(f"{self.name}-hooks",), name="hooks",
                                        daemon=True))
        beat = threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True)
        for t in threads + [beat]:
            t.start()
        log.info("worker %s started: %d job threads, redis %s, max attempts %d, visibility %gs",
                 self.name, self.settings.worker_concurrency, self.queue.safe_url(), self.queue.max_attempts,
                 self.queue.visibility_s)
        while not self.stop.wait(1.0):
            pass
        log.info("worker %s stopping: finishing running jobs", self.name)
        for t in threads:
            t.join(self.settings.request_deadline_s + 10)
        self._stopped.set()
        beat.join(5)
        log.info("worker %s stopped", self.name)

    def _run_forever(self, consumer: str, step: Callable[[str], float]) -> None:
        """Run ``step(consumer)`` until the worker stops: it returns how long to wait before its next turn
        (0 after work, at once); a turn that raises (Redis away, TorchServe's answer unreadable) is logged
        and waited out, 0.5 s doubling to 10 s until a turn works again."""
        backoff = 0.5
        while not self.stop.is_set():
            try:
                pause = step(consumer)
            except Exception as exc:
                log.warning("worker %s: %s: %s; retrying in %.1f s", consumer, type(exc).__name__, exc, backoff)
                self.stop.wait(backoff)
                backoff = min(10.0, backoff * 2)
                continue
            if pause:
                self.stop.wait(pause)
            else:
                backoff = 0.5

    def _job_step(self, consumer: str) -> float:
        """One turn of a job thread: a job taken and run under a render slot, if there is one to take."""
        if not self._models_ready():
            return 2.0
        # a render slot is taken only when there is work: an idle worker holding one would
        # turn the web app's synchronous requests away (on a small pod it is the only slot)
        if not self.queue.has_work(skip=self._at_share()) or not self._job_slot_free():
            return IDLE_POLL_S
        try:
            slot = self.slots.acquire()  # a want: background work gives its slot up
            if slot is None:
                return IDLE_POLL_S
            try:
                taken = self._take_turn(consumer)
                if taken is not None:
                    try:
                        self._run(taken, consumer)
                    finally:
                        with self._lock:
                            self._clients[taken.client] -= 1
                            if self._clients[taken.client] <= 0:
                                del self._clients[taken.client]
            finally:
                slot.release()
        finally:
            with self._lock:
                self._jobs_holding -= 1
        return 0.0

    def _at_share(self) -> tuple[str, ...]:
        """The clients whose jobs hold their render share (DOODLEPOD_CLIENT_RENDER_SLOTS) of this worker's
        slots now: their next jobs wait while other clients' are taken (none without a share)."""
        share = self.settings.client_render_slots
        if not share:
            return ()
        with self._lock:
            return tuple(c for c, n in self._clients.items() if n >= share)

    def _take_turn(self, consumer: str):
        """The next render job by clients' turns (:meth:`app.jobs.queue.JobQueue.take`), counted for its
        client before another thread looks (two threads must not both take a client's last turn)."""
        with self._turns:
            taken = self.queue.take(consumer, block_ms=0, skip=self._at_share())
            if taken is not None:
                with self._lock:
                    self._clients[taken.client] += 1
            return taken

    def _job_slot_free(self) -> bool:
        """Whether a job thread may take a render slot now, counting it held if so. Jobs hold at most
        all the pod's slots but one (when it has more than one): a slot stays for the synchronous
        requests that wait for one, however many jobs are queued (issue 41 S4: four queued scene jobs
        held both slots for 242 s while another client's /animate got 503 on 19 of 20 tries)."""
        most = max(1, self.slots.count - 1)
        with self._lock:
            if self._jobs_holding >= most:
                return False
            self._jobs_holding += 1
            return True

    def _video_step(self, consumer: str) -> float:
        """One turn of a video thread (their own stream): a video job read without a render slot, so videos
        never take the slots renders need; DOODLEPOD_WORKER_VIDEO_CONCURRENCY threads is all the capacity
        they get."""
        if not self._models_ready() or not self.queue.has_work(stream=self.queue.video_stream):
            return IDLE_POLL_S if self._ready_ok else 2.0
        taken = self.queue.take(consumer, block_ms=0, stream=self.queue.video_stream)
        if taken is not None:
            self._run(taken, consumer)
        return 0.0

    def _models_ready(self) -> bool:
        """Take work only while TorchServe has its models READY (checked at most every 2 s)."""
        now = time.monotonic()
        if now - self._ready_at > 2.0:
            s = self.settings
            try:
                states = [self.ctx.torchserve.model_state(m, s.ping_timeout_s)
                          for m in (s.detector_model, s.pose_model)]
                ok = all(st.get("ready") for st in states)
            except Exception:
                ok = False
            if ok != self._ready_ok:
                log.info("models %s: %s taking jobs", "ready" if ok else "not ready", "now" if ok else "not")
            self._ready_ok, self._ready_at = ok, now
        return self._ready_ok

    def _track(self, stream: str, consumer: str, entry_id: str, on: bool) -> None:
        with self._lock:
            ids = self._working.setdefault((stream, consumer), set())
            (ids.add if on else ids.discard)(entry_id)

    def _heartbeat_loop(self) -> None:
        from .jobs.queue import WEBHOOKS_GROUP, WORKERS_GROUP

        period = max(0.2, self.queue.visibility_s / 3)
        alive = self.run_dir / HEARTBEAT_FILE
        alive.touch()  # at once: the liveness probe may ask before the first period ends
        while not self._stopped.wait(period):
            alive.touch()  # liveness: this process' loops run (Redis being down is not a reason to restart)
            with self._lock:
                working = {k: list(v) for k, v in self._working.items() if v}
            try:
                for (stream, consumer), ids in working.items():
                    group = WEBHOOKS_GROUP if stream == self.queue.hooks else WORKERS_GROUP
                    kept = self.queue.heartbeat(consumer, ids, stream=stream, group=group)
                    for lost in set(ids) - kept:
                        log.warning("entry %s of %s was taken over by another worker", lost, consumer)
            except Exception as exc:
                log.warning("heartbeat failed: %s: %s", type(exc).__name__, exc)

    # --- one job ---------------------------------------------------------------------------------
    def _run(self, taken, consumer: str) -> None:
        from . import metrics
        from .deadline import Deadline

        stream = taken.stream or self.queue.stream
        self._track(stream, consumer, taken.entry_id, True)
        try:
            started = self.queue.start(taken, consumer)
            if started.verdict != "run":
                log.info("job %s not run: %s", taken.job_id, started.verdict)
                if started.verdict == "dead":
                    metrics.JOBS.labels(event="failed").inc()
                if started.released is not None:
                    self._give_back(started.released)
                return
            if taken.redelivered:
                metrics.JOBS.labels(event="redelivered").inc()
            job = started.job
            attempt = int(job["attempts"])
            log.info("job %s start kind=%s attempt=%d/%d%s", taken.job_id, job["kind"], attempt,
                     self.queue.max_attempts, " (redelivered)" if taken.redelivered else "")
            t0 = time.perf_counter()
            try:
                run = HANDLERS[job["kind"]]
                reporter = _progress_arg(run, self._reporter(taken.job_id))
                order = read_order(job["kind"], json.loads(job["payload"]))
                # a client past its storage share by now (its synchronous work stored meanwhile) fails alone
                self._check_storage_share(job)
                # what the job stores counts in its client's share as it is stored; its reservation is given
                # back when it ends (_give_back), so the real bytes replace the price
                with shares.metering() as meter:
                    try:
                        result = run(self.ctx, order, started.input, taken.job_id,
                                     Deadline(self.settings.request_deadline_s), **reporter)
                    finally:
                        self._charge(job.get("client", ""), meter.bytes)
            except ApiError as exc:
                self._failed(taken, started.owner, job, exc)
                return
            except Exception as exc:  # a bug: it would fail the same way again
                log.exception("job %s crashed", taken.job_id)
                self._failed(taken, started.owner, job, ApiError(f"{type(exc).__name__}"))
                return
            ended = self.queue.succeed(taken, started.owner, result)
            if ended:
                self._give_back(ended, job)
                self._ended(job)
                metrics.JOBS.labels(event="succeeded").inc()
                metrics.JOB_SECONDS.labels(status="succeeded").observe(_age_s(job))
                log.info("job %s succeeded in %.0f ms", taken.job_id, (time.perf_counter() - t0) * 1e3)
            else:
                log.warning("job %s finished here but another worker owns it now; result dropped", taken.job_id)
        finally:
            self._track(stream, consumer, taken.entry_id, False)

    def _ended(self, job: dict) -> None:
        """The job will not run again: remove what it kept outside Redis (a queued video)."""
        try:
            order = read_order(job.get("kind", ""), json.loads(job.get("payload") or "{}"))
            key = order.video_key if isinstance(order, VideoOrder) else ""
            if key:
                from .deadline import Deadline
                self.ctx.storage.delete(key, Deadline(30))
                self._charge(job.get("client", ""), -order.video_bytes)  # the route charged it when stored
        except Exception as exc:  # the expiry sweep (or the bucket's lifecycle rule) removes it later
            log.warning("job %s: its stored input not removed: %s", job.get("id"), exc)

    def _check_storage_share(self, job: dict) -> None:
        """Raise :class:`app.shares.StorageShareUsed` (not retryable) when the job's client is past its storage
        share now, its own reservation left out (Redis down: the job runs)."""
        from .jobs.queue import REDIS_ERRORS

        ledger = getattr(self.ctx, "shares", None)
        if ledger is None:
            return
        try:
            ledger.check_job_storage(job.get("client", ""), int(job.get("reserved") or 0))
        except REDIS_ERRORS as exc:
            log.warning("job %s: storage share not checked: %s", job.get("id"), type(exc).__name__)

    def _give_back(self, ended, job: dict | None = None) -> None:
        """An ended job's storage reservation leaves its client's share (what it stored was charged
        as it was stored)."""
        if ended.released:
            self._charge(ended.client or (job or {}).get("client", ""), -ended.released)

    def _charge(self, client: str, nbytes: int) -> None:
        try:
            self.ctx.shares.charge_storage(client, nbytes)
        except Exception as exc:  # the job's work is done; a lost count only errs in the client's favour
            log.warning("storage share of a job not charged (%d bytes): %s", nbytes, exc)

    def _reporter(self, job_id: str) -> Callable[[dict[str, Any]], None]:
        """A job's progress reports into its record (GET /jobs/{id}): the first, every change of
        stage and the last frame at once, the frames between at most every :data:`PROGRESS_EVERY_S`
        (one small write, however fast the frames come). The last frame's report is the figure the
        ended job keeps."""
        last = {"at": 0.0, "stage": None}

        def report(progress: dict[str, Any]) -> None:
            now = time.monotonic()
            done, total = progress.get("frames_done"), progress.get("frames_total")
            last_frame = total is not None and done is not None and done >= total
            if progress.get("stage") == last["stage"] and now - last["at"] < PROGRESS_EVERY_S and not last_frame:
                return
            last.update(at=now, stage=progress.get("stage"))
            try:
                self.queue.progress(job_id, progress)
            except Exception as exc:  # progress is a courtesy: the render goes on
                log.debug("job %s: progress not written: %s", job_id, exc)

        return report

    def _failed(self, taken, owner: str, job: dict, exc: ApiError) -> None:
        """End or requeue the job as :func:`app.jobs.retry.decide` says for ``exc``."""
        from . import metrics

        error = {"code": exc.code, "status": exc.status, "message": exc.message}
        attempt = int(job["attempts"])
        verdict = retry.decide(exc, attempt, self.queue.max_attempts, self.retry_delay_s)
        if verdict.retry:
            not_before = self.queue.retry(taken, owner, error, _created_epoch(job), verdict.delay_s)
            if not_before is not None:
                metrics.JOBS.labels(event="retried").inc()
                log.warning("job %s attempt %d/%d failed: %s %s; requeued, not before %.1f s from now",
                            taken.job_id, attempt, self.queue.max_attempts, exc.code, exc.message, verdict.delay_s)
            return
        if exc.retryable:
            error["message"] += f" (after {attempt} attempts)"
        ended = self.queue.fail(taken, owner, error, dead_letter=verdict.dead_letter)
        if ended:
            self._give_back(ended, job)
            self._ended(job)
        metrics.JOBS.labels(event="failed").inc()
        metrics.JOB_SECONDS.labels(status="failed").observe(_age_s(job))
        log.log(logging.WARNING if exc.status >= 500 else logging.INFO, "job %s failed after %d attempt(s): %s (%d) %s",
                taken.job_id, attempt, exc.code, exc.status, exc.message)

    # --- callbacks ---------------------------------------------------------------------------
    def _webhook_loop(self, consumer: str) -> None:
        """Take ended jobs' callbacks and deliver each in a thread of its own: at most
        DOODLEPOD_WEBHOOK_CONCURRENCY at once, and at most :data:`PER_RECEIVER` to one receiver
        (scheme, host and port), so a receiver that answers slowly holds back only its own callbacks;
        one over its receiver's or its client's share waits here (its entry kept alive by the
        heartbeat) until one of those deliveries ends, while the callbacks behind it in the stream go
        on (:data:`MAX_WAITING_CALLBACKS`)."""
        from .jobs.queue import WEBHOOKS_GROUP

        lanes = Lanes(self.settings.webhook_concurrency, PER_RECEIVER, self.settings.client_webhook_lanes)
        waiting: list[tuple[Any, tuple[str, str], dict[str, str] | None]] = []   # (taken, lane, raw job)
        backoff = 0.5
        while not self.stop.is_set():
            for item in list(waiting):
                if lanes.try_start(item[1]):
                    waiting.remove(item)
                    self._spawn_delivery(item, consumer, lanes)
            if not lanes.has_room() or len(waiting) >= MAX_WAITING_CALLBACKS:
                self.stop.wait(0.05)
                continue
            try:
                taken = self.queue.take(consumer, block_ms=200 if waiting else 1000, stream=self.queue.hooks,
                                        group=WEBHOOKS_GROUP)
                backoff = 0.5
            except Exception as exc:
                log.warning("webhooks %s: %s: %s", consumer, type(exc).__name__, exc)
                self.stop.wait(backoff)
                backoff = min(10.0, backoff * 2)
                continue
            if taken is None:
                continue
            self._track(self.queue.hooks, consumer, taken.entry_id, True)
            try:
                raw = self.queue.raw_job(taken.job_id)
            except Exception as exc:
                log.warning("webhook for job %s: %s: %s", taken.job_id, type(exc).__name__, exc)
                self._track(self.queue.hooks, consumer, taken.entry_id, False)
                continue
            item = (taken, (receiver_of(raw.get("callback_url", "") if raw else ""),
                            (raw or {}).get("client", "")), raw)
            if lanes.try_start(item[1]):
                self._spawn_delivery(item, consumer, lanes)
            else:
                waiting.append(item)

    def _spawn_delivery(self, item, consumer: str, lanes: Lanes) -> None:
        threading.Thread(target=self._deliver_one, args=(item, consumer, lanes), name=f"hook-{item[1][0][:40]}",
                         daemon=True).start()

    def _deliver_one(self, item, consumer: str, lanes: Lanes) -> None:
        from . import metrics
        from .jobs.queue import now_iso
        from .jobs.webhooks import Allowance, deliver

        s = self.settings
        taken, lane, raw = item
        held = [True]

        def pause(seconds: float) -> bool:
            """Backoff between attempts without the lane: others' callbacks go meanwhile."""
            lanes.end(lane)
            held[0] = False
            if self.stop.wait(seconds):
                return True
            while not lanes.try_start(lane):
                if self.stop.wait(0.05):
                    return True
            held[0] = True
            return False

        try:
            if not raw or not raw.get("callback_url") or not s.webhook_secret:
                self.queue.webhook_done(taken, "failed" if raw else "expired", 0)
                return
            job = self.queue.public(raw)
            job.pop("webhook", None)
            outcome = deliver(raw["callback_url"], job, s.webhook_secret, attempts=s.webhook_attempts,
                              timeout_s=s.webhook_timeout_s, now=now_iso, stop=self.stop,
                              allow=Allowance.parse(s.webhook_allow), resolve=self.resolver, pause=pause)
            if outcome.interrupted:
                return  # stopping: another worker takes it over after the visibility timeout
            metrics.WEBHOOKS.labels(outcome="delivered" if outcome.delivered else "failed").inc()
            if outcome.attempts > 1:
                metrics.WEBHOOKS.labels(outcome="retried").inc(outcome.attempts - 1)
            self.queue.webhook_done(taken, "delivered" if outcome.delivered else "failed", outcome.attempts,
                                    "" if outcome.delivered else outcome.detail)
        except Exception as exc:
            log.warning("webhook for job %s: %s: %s", taken.job_id, type(exc).__name__, exc)
        finally:
            if held[0]:
                lanes.end(lane)
            self._track(self.queue.hooks, consumer, taken.entry_id, False)


#: Callbacks one worker holds while their lanes are busy before it takes no more from the stream. A
#: client has at most DOODLEPOD_CLIENT_MAX_QUEUED of them (a job counts in that share until its callback
#: is delivered), so a few clients with slow receivers cannot fill it and stall everyone's callbacks.
MAX_WAITING_CALLBACKS = 512


def _progress_arg(run: Callable[..., Any], reporter: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """``{"progress": reporter}`` for a handler that takes it (a handler of the old five arguments
    reports none)."""
    import inspect

    try:
        params = inspect.signature(run).parameters
    except (TypeError, ValueError):
        return {}
    takes = "progress" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    return {"progress": reporter} if takes else {}


def _created_epoch(job: dict) -> float:
    from datetime import datetime
    try:
        return datetime.fromisoformat(job["created"].replace("Z", "+00:00")).timestamp()
    except (KeyError, ValueError):
        return time.time()


def _age_s(job: dict) -> float:
    return max(0.0, time.time() - _created_epoch(job))


def build(settings) -> Worker | None:
    """The worker of ``settings``: the same pipeline as the web app, and the pod's render slots."""
    from . import runtime_dir
    from .logs import configure_logging

    configure_logging(settings.log_level)
    from .native_logs import drop_native_noise

    drop_native_noise()  # the pose model's ~150 native INFO/WARNING lines per video job
    run_dir = runtime_dir(settings)  # sets PROMETHEUS_MULTIPROC_DIR before metrics is imported
    if not settings.redis_url:
        return None
    from .services import build_services

    return Worker(build_services(settings, run_dir, f"spill-worker-{os.getpid()}", workers=1), run_dir)


def alive(settings, max_age_s: float = 0.0) -> bool:
    """True if this pod's worker touched its heartbeat file within ``max_age_s`` (default 3 periods + 30 s)."""
    if not settings.runtime_dir:
        return False
    path = Path(settings.runtime_dir) / HEARTBEAT_FILE
    limit = max_age_s or settings.jobs_visibility_timeout_s + 30
    try:
        return time.time() - path.stat().st_mtime < limit
    except FileNotFoundError:
        return False


def _idle(settings) -> int:
    """No DOODLEPOD_REDIS_URL: async jobs are off. Stay up (the pod's worker container must not crash-loop)
    and keep the liveness file fresh until SIGTERM."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    log.warning("async jobs are off: DOODLEPOD_REDIS_URL is not set; this worker idles until it is")
    alive_file = Path(settings.runtime_dir) / HEARTBEAT_FILE if settings.runtime_dir else None
    while True:
        if alive_file is not None:
            alive_file.touch()
        if stop.wait(10):
            return 0


def main(argv: list[str] | None = None) -> int:
    from .config import load_settings

    argv = sys.argv[1:] if argv is None else argv
    settings = load_settings()
    if argv[:1] == ["--alive"]:
        return 0 if alive(settings) else 1
    if argv:
        print(__doc__)
        return 0 if argv[0] in ("-h", "--help") else 2
    worker = build(settings)
    if worker is None:
        return _idle(settings)
    signal.signal(signal.SIGTERM, lambda *_: worker.stop.set())
    signal.signal(signal.SIGINT, lambda *_: worker.stop.set())
    worker.pool.warm()
    try:
        worker.run()
    finally:
        worker.pool.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
