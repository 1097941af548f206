"""Async render jobs on Redis Streams: submit, take, heartbeat, finish, retry, dead-letter.

The queue is one Redis stream read by one consumer group; every state change of a job is one Lua
script (``app/jobs/lua/``), so a crash between two commands cannot leave a job half-moved. Keys, all under
``DOODLEPOD_REDIS_PREFIX`` (default ``doodlepod:``)::

    jobs              stream of unfinished render jobs (group "workers"); an entry is acknowledged AND
                      deleted when its job ends, so XLEN = jobs queued + running
    jobs:video        the same for video jobs (:data:`VIDEO_KINDS`), read by the worker's video threads,
                      which hold no render slot: video work has capacity of its own
    delayed           sorted set of queued jobs waiting out a retry delay (score: not-before time,
    delayed:video     Redis' clock); moved back into their stream when due. XLEN + ZCARD of both is
                      the queue bound
    job:<id>          hash: id, kind, status, payload, result, error, attempts, owner, times
    job:<id>:input    the uploaded image; deleted when the job ends (a video is not here: it waits in
                      the storage, and the job names it)
    client:<digest>:jobs, client:<digest>:videos
                      a client's unfinished jobs (score: input bytes) and videos: its shares
                      (app/shares.py), checked atomically with each submission
    storage:reserved  sorted set of the unfinished jobs' storage reservations (member: job id, score:
                      their price in bytes, app/jobs/price.py), given back when the job ends
    turns             sorted set of the clients with render jobs never delivered, by the render CPU
    turns:last        price of their jobs served, and by when each was last served (a number from
    turns:count       turns:count): the render stream is taken in clients' turns, not in its order
                      (app/jobs/lua/turn.lua)
    webhooks          stream of ended jobs whose callback is due (group "webhooks")
    dead              capped stream of jobs that used up their attempts (for operators)

Delivery is at least once: a worker takes an entry with XREADGROUP and renews it with a heartbeat
(XCLAIM to itself, JUSTID) while it works. An entry whose worker stopped renewing it for
``visibility_s`` is taken over by another worker with XAUTOCLAIM. Each take counts an attempt; a
job whose attempts are used up ends ``failed`` (dead letter) and stays readable. The ``owner``
field (consumer/attempt) fences a worker that lost its job: only the current owner may end it.
A job the worker retries (:mod:`app.jobs.retry` decides) leaves the stream for ``delayed`` until its
not-before time, so no worker thread holds or sleeps on it meanwhile.
"""
from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import redis

from ..errors import Unavailable
from .scripts import lua

log = logging.getLogger("doodlepod.jobs")

WORKERS_GROUP = "workers"
WEBHOOKS_GROUP = "webhooks"
STATUSES = ("queued", "running", "succeeded", "failed")

#: What a dead Redis raises through redis-py (refused, reset, timed out, read-only replica, OOM...).
REDIS_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
                redis.exceptions.BusyLoadingError, redis.exceptions.ReadOnlyError,
                redis.exceptions.ResponseError)


class JobsUnavailable(Unavailable):
    """An async request or `GET /jobs` while Redis is not configured or not reachable."""
    status, code = 503, "jobs_unavailable"


#: Seconds between two looks for a render job when :meth:`JobQueue.take` is asked to wait for one.
TURN_POLL_S = 0.05

#: Job kinds that run on the worker's video threads (their own stream), not under a render slot.
VIDEO_KINDS = frozenset({"motion_from_video"})


class QueueFull(Unavailable):
    """An async request while `DOODLEPOD_JOBS_MAX_QUEUED` jobs are unfinished."""
    status, code = 503, "queue_full"


def now_iso() -> str:
    """UTC now as ISO 8601 with milliseconds, e.g. ``2026-11-23T06:01:02.345Z``."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_job_id() -> str:
    return uuid.uuid4().hex


@dataclass
class Submitted:
    """The answer to :meth:`JobQueue.submit`: the job's record, and whether it already existed."""

    job: dict[str, Any]
    duplicate_of: str | None = None   # the idempotency record found instead (JSON text), if any


@dataclass
class Taken:
    """A stream entry a worker took: ``redelivered`` when claimed from a worker that stopped."""

    entry_id: str
    job_id: str
    redelivered: bool
    stream: str = ""      # the stream it came from ('' : the render stream)
    client: str = ""      # whose job it is (render stream entries)


@dataclass
class Started:
    """:meth:`JobQueue.start`'s verdict: ``run`` (owner set), or ``gone``/``done``/``dead``."""

    verdict: str
    owner: str = ""
    job: dict[str, Any] | None = None
    input: bytes | None = None
    released: Ended | None = None   # a dead job's reservation, given back with it


@dataclass
class Ended:
    """A job's end (true when it was the caller's to end) and the bytes of storage its admission had
    reserved, which leave the pod's reservations with it (0: none, or given back by an earlier end);
    the caller gives them back to ``client``'s share (a dead job's: :attr:`Started.released`)."""

    done: bool
    released: int = 0
    client: str = ""

    def __bool__(self) -> bool:
        return self.done


@dataclass
class QueueStats:
    queued: int
    running: int
    oldest_age_s: float


def _progress(h: dict[str, str]) -> dict[str, Any]:
    """The job's progress as GET /jobs/{id} shows it: ``{"stage"}`` (queued, starting, preparing,
    rendering, storing, stored, succeeded, failed) and, once frames are counted, ``frames_done``,
    ``frames_total`` and per motion ``motions: {name: {"frames_done", "frames_total"}}`` (a total is
    null until that motion's render has begun)."""
    status = h["status"]
    if status == "queued":  # a retried job's figures are those of an attempt that ended
        return {"stage": "queued"}
    try:
        saved = json.loads(h["progress"]) if h.get("progress") else {}
    except ValueError:
        saved = {}
    if status in ("succeeded", "failed"):
        saved["stage"] = status
    return saved if saved.get("stage") else {**saved, "stage": "starting"}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class JobQueue:
    """One Redis connection pool and the queue's operations (web side and worker side)."""

    def __init__(self, url: str, prefix: str = "doodlepod:", *, timeout_s: float = 2.0, max_queued: int = 100,
                 max_attempts: int = 3, visibility_s: float = 60.0, job_ttl_s: int = 7 * 86400,
                 retry_after_s: int = 3, client_max_jobs: int = 10**6, client_max_bytes: int = 2**62,
                 client_max_videos: int = 10**6) -> None:
        self.url = url
        self.prefix = prefix
        self.max_queued = max_queued
        self.max_attempts = max_attempts
        self.visibility_s = visibility_s
        self.job_ttl_s = job_ttl_s
        self.retry_after_s = retry_after_s
        self.client_max_jobs = client_max_jobs
        self.client_max_bytes = client_max_bytes
        self.client_max_videos = client_max_videos
        # Operations are short; a blocking read (worker) passes its own, longer, socket timeout.
        self.redis = redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s + 3,
                                          health_check_interval=15, retry_on_timeout=False)
        self.stream = self.key("jobs")
        self.hooks = self.key("webhooks")
        self.dead = self.key("dead")
        self.delayed = self.key("delayed")
        self.video_stream = self.key("jobs", "video")
        self.video_delayed = self.key("delayed", "video")
        self._submit = self.redis.register_script(lua("submit"))
        self._start = self.redis.register_script(lua("start", prelude=True))
        self._finish = self.redis.register_script(lua("finish", prelude=True))
        self._retry = self.redis.register_script(lua("retry", prelude=True))
        self._promote = self.redis.register_script(lua("promote", prelude=True))
        self._heartbeat = self.redis.register_script(lua("heartbeat"))
        self._progress = self.redis.register_script(lua("progress"))
        self._turn = self.redis.register_script(lua("turn"))
        self._reserved = self.redis.register_script(lua("reserved"))
        self.reservations = self.key("storage", "reserved")
        self.turns = self.key("turns")
        self._groups_made = False
        self.last_error = ""

    @classmethod
    def from_settings(cls, settings) -> JobQueue | None:
        """The queue of ``DOODLEPOD_REDIS_URL``, or None when it is empty (async jobs off)."""
        if not settings.redis_url:
            return None
        return cls(settings.redis_url, settings.redis_prefix, timeout_s=settings.redis_timeout_s,
                   max_queued=settings.jobs_max_queued, max_attempts=settings.jobs_max_attempts,
                   visibility_s=settings.jobs_visibility_timeout_s,
                   job_ttl_s=max(settings.jobs_ttl_s, settings.idempotency_ttl_s),
                   retry_after_s=settings.retry_after_s or 5,  # 0 = "measured" for renders; 5 s here
                   client_max_jobs=settings.client_max_queued,
                   client_max_bytes=int(settings.client_queued_mb * 2**20),
                   client_max_videos=settings.client_max_videos)

    def key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    def stream_for(self, kind: str) -> str:
        return self.video_stream if kind in VIDEO_KINDS else self.stream

    def delayed_for(self, stream: str) -> str:
        return self.video_delayed if stream == self.video_stream else self.delayed

    def job_key(self, job_id: str) -> str:
        return self.key("job", job_id)

    def input_key(self, job_id: str) -> str:
        return self.key("job", job_id, "input")

    def unavailable(self, exc: BaseException) -> JobsUnavailable:
        """The API error for a Redis failure (and remember it for /ping)."""
        self.last_error = f"{type(exc).__name__}: {exc}"
        log.warning("redis %s unavailable: %s", self.safe_url(), self.last_error)
        return JobsUnavailable(f"async jobs are unavailable: {redis_trouble(exc)}; "
                               f"retry later, or send the request without 'Prefer: respond-async'",
                               self.retry_after_s)

    def safe_url(self) -> str:
        """The Redis URL without its password (for logs and /ping)."""
        kw = self.redis.connection_pool.connection_kwargs
        return f"redis://{kw.get('host', '?')}:{kw.get('port', '?')}/{kw.get('db', 0)}"

    # --- health and metrics ------------------------------------------------------------------
    def check(self) -> dict[str, Any]:
        """For /ping: reachable or why not, and the queue's state."""
        try:
            self.redis.ping()
            stats = self.stats()
        except REDIS_ERRORS as exc:
            self.last_error = f"{type(exc).__name__}: {exc}"
            return {"ok": False, "detail": f"Redis at {self.safe_url()}: {redis_trouble(exc)} ({self.last_error}); "
                                           "async requests answer 503, synchronous ones work"}
        return {"ok": True, "queued": stats.queued, "running": stats.running,
                "max_queued": self.max_queued, "oldest_age_s": round(stats.oldest_age_s, 1)}

    def stats(self) -> QueueStats:
        queued = running = 0
        oldest = 0.0
        for stream in (self.stream, self.video_stream):
            pipe = self.redis.pipeline(transaction=False)
            pipe.xlen(stream)
            pipe.xrange(stream, "-", "+", count=1)
            pipe.zcard(self.delayed_for(stream))
            length, first, delayed = pipe.execute()
            busy = 0
            try:
                for group in self.redis.xinfo_groups(stream):
                    if _text(group["name"]) == WORKERS_GROUP:
                        busy = int(group["pending"])
            except redis.exceptions.ResponseError:  # no stream yet
                pass
            if first:
                fields = first[0][1]
                created = float(fields.get(b"created", b"0") or 0)
                oldest = max(oldest, max(0.0, time.time() - created) if created else 0.0)
            queued += max(0, length - busy) + delayed
            running += busy
        return QueueStats(queued, running, oldest)

    # --- web side ----------------------------------------------------------------------------
    def submit(self, kind: str, payload: dict[str, Any], input_data: bytes | None = None, *,
               callback_url: str = "", client: str = "", idem_key: str = "", idem_record: dict | None = None,
               idem_ttl_s: int = 86400, input_bytes: int | None = None, reserve: int = 0,
               cost: float = 0.0) -> Submitted:
        """Queue a job (atomically with its idempotency record, under the queue bound and the client's
        shares; ``input_bytes``: the size of an input kept elsewhere, e.g. a video in the storage), and
        reserve ``reserve`` bytes of storage for it until it ends (:meth:`reserved_bytes`; the job's end
        answers them back: :class:`Ended`). ``cost``: its render CPU price (app/jobs/price.py), what its
        client's turn is charged when it is taken (app/jobs/lua/turn.lua).

        Raises :class:`QueueFull` past ``max_queued``, a :class:`app.shares.ShareUsed` (429) past one of
        the client's shares, and :class:`JobsUnavailable` when Redis fails.
        With ``idem_key`` set and a record already there, nothing is queued: ``duplicate_of`` holds it.
        """
        from ..clients import digest
        from ..shares import JobsShareUsed, QueuedBytesShareUsed, VideoShareUsed

        stream = self.stream_for(kind)
        other = self.video_stream if stream == self.stream else self.stream
        size = len(input_data or b"") if input_bytes is None else int(input_bytes)
        who = digest(client)
        job_id = new_job_id()
        now = now_iso()
        fields = {"id": job_id, "kind": kind, "status": "queued", "created": now, "updated": now, "attempts": "0",
                  "payload": json.dumps(payload, separators=(",", ":")), "callback_url": callback_url,
                  "client": client}
        if cost > 0:  # none: a turn costs 1
            fields["cost"] = f"{float(cost):g}"
        record = json.dumps({**(idem_record or {}), "job": job_id}, separators=(",", ":"))
        flat: list[Any] = []
        for k, v in fields.items():
            flat += [k, v]
        try:
            self._ensure_groups()
            verdict, detail = self._submit(
                keys=[stream, self.job_key(job_id), self.input_key(job_id), idem_key, self.delayed_for(stream),
                      other, self.delayed_for(other), self.key("client", who, "jobs"),
                      self.key("client", who, "videos"), self.reservations],
                args=[self.max_queued, job_id, record, idem_ttl_s, self.job_ttl_s, input_data or b"",
                      "1" if input_data is not None else "0", f"{time.time():.3f}", self.client_max_jobs,
                      self.client_max_bytes, self.client_max_videos, size, "1" if kind in VIDEO_KINDS else "0",
                      self.key("job", ""), max(0, int(reserve)), *flat])
        except REDIS_ERRORS as exc:
            raise self.unavailable(exc) from None
        verdict = _text(verdict)
        if verdict == "duplicate":
            return Submitted({}, duplicate_of=_text(detail))
        if verdict == "full":
            raise QueueFull(f"the render queue is full ({self.max_queued} jobs queued or running); retry in "
                            f"{self.retry_after_s} s", self.retry_after_s)
        if verdict == "jobs_share":
            raise JobsShareUsed(f"this client has {_text(detail)} jobs queued, running or waiting for "
                                f"their callback, its share (DOODLEPOD_CLIENT_MAX_QUEUED); retry once one ended",
                                self.retry_after_s)
        if verdict == "bytes_share":
            raise QueuedBytesShareUsed(
                f"this client's queued jobs hold {int(_text(detail)) / 2**20:.1f} MiB of uploads; with this one "
                f"({size / 2**20:.1f} MiB) they would pass its share of {self.client_max_bytes / 2**20:g} MiB "
                "(DOODLEPOD_CLIENT_QUEUED_MB); retry once one ended", self.retry_after_s)
        if verdict == "video_share":
            raise VideoShareUsed(f"this client has {_text(detail)} videos queued or being read, its share "
                                 f"(DOODLEPOD_CLIENT_MAX_VIDEOS); retry once one ended", self.retry_after_s)
        log.info("job %s queued kind=%s entry=%s", job_id, kind, _text(detail))
        return Submitted(self.public(fields))

    def get(self, job_id: str) -> dict[str, Any] | None:
        """The job's public record, or None if there is no such job (or it expired)."""
        try:
            raw = self.redis.hgetall(self.job_key(job_id))
        except REDIS_ERRORS as exc:
            raise self.unavailable(exc) from None
        if not raw:
            return None
        return self.public({_text(k): _text(v) for k, v in raw.items()})

    @staticmethod
    def public(h: dict[str, str]) -> dict[str, Any]:
        """The job as GET /jobs/{id} answers it."""
        out: dict[str, Any] = {"id": h["id"], "status": h["status"], "kind": h.get("kind", ""),
                               "created": h["created"], "updated": h["updated"],
                               "attempts": int(h.get("attempts") or 0)}
        if h.get("result"):  # what the synchronous answer holds; never over the job's own fields
            for key, value in json.loads(h["result"]).items():
                out.setdefault(key, value)
        if h.get("error"):
            out["error"] = json.loads(h["error"])
        out["progress"] = _progress(h)
        if h.get("callback_url"):
            out["webhook"] = {"url": without_credentials(h["callback_url"]),
                              "status": h.get("webhook_status") or "not_sent",
                              "attempts": int(h.get("webhook_attempts") or 0)}
            if h.get("webhook_detail"):  # why the last attempt failed: the rule, the status, "timeout"
                out["webhook"]["detail"] = h["webhook_detail"]
        return out

    # --- worker side -------------------------------------------------------------------------
    def _ensure_groups(self) -> None:
        if self._groups_made:
            return
        for stream, group in ((self.stream, WORKERS_GROUP), (self.video_stream, WORKERS_GROUP),
                              (self.hooks, WEBHOOKS_GROUP)):
            try:
                self.redis.xgroup_create(stream, group, id="0", mkstream=True)
            except redis.exceptions.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
        self._groups_made = True

    def has_work(self, *, stream: str | None = None, group: str = WORKERS_GROUP,
                 visibility_s: float | None = None, skip: tuple[str, ...] = ()) -> bool:
        """Whether :meth:`take` would find an entry now: one never delivered to ``group`` (on the render
        stream: of a client not in ``skip``), or one whose worker stopped (idle past the visibility
        timeout). Consumes nothing, so a worker can ask before it takes a render slot (an idle worker must
        not hold one)."""
        stream = stream or self.stream
        self._ensure_groups()
        if stream in (self.stream, self.video_stream):
            self.promote_due(stream=stream)
        idle_ms = int(1000 * (visibility_s or self.visibility_s))
        if stream == self.stream and group == WORKERS_GROUP:
            return bool(self._turn_of("", skip, peek=True)) or self._abandoned(stream, group, idle_ms)
        info = next((g for g in self.redis.xinfo_groups(stream) if _text(g["name"]) == group), None)
        if info is None:
            return False
        lag = info.get("lag")
        if lag is None or lag > 0:  # None: the server cannot tell (entries deleted): look
            return True
        if not info.get("pending"):
            return False
        return self._abandoned(stream, group, idle_ms)

    def _abandoned(self, stream: str, group: str, idle_ms: int) -> bool:
        return bool(self.redis.xpending_range(stream, group, min="-", max="+", count=1, idle=idle_ms))

    def _turn_of(self, consumer: str, skip: tuple[str, ...], peek: bool = False) -> Taken | None:
        """The render stream's next entry by clients' turns (app/jobs/lua/turn.lua), delivered to
        ``consumer`` unless ``peek``."""
        got = self._turn(keys=[self.stream, self.turns, self.key("turns", "count"), self.key("turns", "last")],
                         args=[WORKERS_GROUP, consumer or "-", self.key("job", ""), "1" if peek else "0",
                               self.job_ttl_s, *skip])
        if not got:
            return None
        return Taken(_text(got[0]), _text(got[1]), False, self.stream, _text(got[2]))

    def take(self, consumer: str, block_ms: int, *, stream: str | None = None,
             group: str = WORKERS_GROUP, visibility_s: float | None = None, skip: tuple[str, ...] = ()) -> Taken | None:
        """The next entry for ``consumer``: one whose worker stopped (idle past the visibility
        timeout) first, else a new one (waiting up to ``block_ms``, 0: not at all); None if there is none.
        On the render stream a new one comes by clients' turns: the oldest job of the client served longest
        ago, none of the clients in ``skip`` (the worker's clients whose jobs hold their render share)."""
        stream = stream or self.stream
        self._ensure_groups()
        if stream in (self.stream, self.video_stream):
            self.promote_due(stream=stream)
        idle_ms = int(1000 * (visibility_s or self.visibility_s))
        try:
            _, claimed, _deleted = self.redis.xautoclaim(stream, group, consumer, idle_ms, "0-0", count=1)
        except redis.exceptions.ResponseError as exc:
            if "NOGROUP" in str(exc):  # Redis lost its data (no AOF, flushed): make the groups again
                self._groups_made = False
            raise
        if claimed:
            entry_id, fields = claimed[0]
            if fields:  # None when the entry was deleted meanwhile
                job_id = _text(fields[b"job"])
                who = _text(self.redis.hget(self.job_key(job_id), "client") or b"") if stream == self.stream else ""
                return Taken(_text(entry_id), job_id, True, stream, who)
        if stream == self.stream and group == WORKERS_GROUP:
            end = time.monotonic() + block_ms / 1000
            while True:
                taken = self._turn_of(consumer, skip)
                if taken is not None or time.monotonic() >= end:
                    return taken
                time.sleep(TURN_POLL_S)
        answer = self.redis.xreadgroup(group, consumer, {stream: ">"}, count=1,
                                       block=block_ms if block_ms > 0 else None)  # BLOCK 0 would wait forever
        if not answer:
            return None
        entry_id, fields = answer[0][1][0]
        return Taken(_text(entry_id), _text(fields[b"job"]), False, stream)

    def start(self, taken: Taken, consumer: str) -> Started:
        """Count an attempt and make ``consumer`` the job's owner; or say why the job is not run."""
        dead_error = json.dumps({"code": "attempts_exhausted", "status": 500,
                                 "message": f"the job's worker stopped {self.max_attempts} times before "
                                            "finishing it; it will not be retried"})
        verdict, owner, *rest = self._start(
            keys=[self.job_key(taken.job_id), taken.stream or self.stream, self.input_key(taken.job_id), self.hooks,
                  self.dead, self.reservations],
            args=[WORKERS_GROUP, taken.entry_id, consumer, self.max_attempts, now_iso(), dead_error, taken.job_id,
                  self.job_ttl_s])
        verdict, owner = _text(verdict), _text(owner)
        if verdict == "dead":
            return Started(verdict, released=Ended(True, int(float(_text(rest[0]))), _text(rest[1])))
        if verdict != "run":
            return Started(verdict)
        pipe = self.redis.pipeline(transaction=False)
        pipe.hgetall(self.job_key(taken.job_id))
        pipe.get(self.input_key(taken.job_id))
        raw, data = pipe.execute()
        job = {_text(k): _text(v) for k, v in raw.items()}
        return Started("run", owner, job, data)

    def progress(self, job_id: str, progress: dict[str, Any]) -> bool:
        """Write a running job's progress (the worker throttles the calls); False once it ended."""
        return bool(self._progress(keys=[self.job_key(job_id)], args=[json.dumps(progress, separators=(",", ":"))]))

    def heartbeat(self, consumer: str, entry_ids: list[str], *, stream: str | None = None,
                  group: str = WORKERS_GROUP) -> set[str]:
        """Renew ``consumer``'s entries; returns those still its own."""
        if not entry_ids:
            return set()
        kept = self._heartbeat(keys=[stream or self.stream], args=[group, consumer, *entry_ids])
        return {_text(k) for k in kept}

    def succeed(self, taken: Taken, owner: str, result: dict[str, Any]) -> Ended:
        return self._end(taken, owner, {"status": "succeeded", "result": json.dumps(result, separators=(",", ":"))})

    def fail(self, taken: Taken, owner: str, error: dict[str, Any], *, dead_letter: bool) -> Ended:
        return self._end(taken, owner, {"status": "failed", "error": json.dumps(error)}, dead_letter=dead_letter)

    def _end(self, taken: Taken, owner: str, fields: dict[str, str], dead_letter: bool = False) -> Ended:
        """End the job if ``owner`` still owns it (false: another worker took it over)."""
        fields = {**fields, "updated": now_iso(), "owner": ""}
        flat: list[str] = []
        for k, v in fields.items():
            flat += [k, v]
        done = self._finish(
            keys=[self.job_key(taken.job_id), taken.stream or self.stream, self.input_key(taken.job_id), self.hooks,
                  self.dead, self.reservations],
            args=[WORKERS_GROUP, taken.entry_id, owner, self.job_ttl_s, taken.job_id, "1" if dead_letter else "0",
                  *flat])
        if not done:
            return Ended(False)
        return Ended(True, int(float(_text(done[1]))))

    def reserved_bytes(self) -> int:
        """The bytes of storage the unfinished jobs reserved (the pod's storage budget counts them)."""
        return int(self._reserved(keys=[self.reservations], args=[self.key("job", "")]))

    def retry(self, taken: Taken, owner: str, error: dict[str, Any], created_epoch: float,
              delay_s: float = 0.0) -> float | None:
        """Put the job back as queued, to be taken again ``delay_s`` seconds from now (Redis' clock; its
        attempt counted). It waits in the delayed set, not in the stream, so no worker holds it meanwhile.
        Returns its not-before time (epoch seconds), or None if the job was not ``owner``'s any more."""
        fields = {"status": "queued", "last_error": json.dumps(error), "updated": now_iso(), "owner": ""}
        flat: list[str] = []
        for k, v in fields.items():
            flat += [k, v]
        stream = taken.stream or self.stream
        not_before = self._retry(keys=[self.job_key(taken.job_id), stream, self.delayed_for(stream)],
                                 args=[WORKERS_GROUP, taken.entry_id, owner, taken.job_id, f"{max(0.0, delay_s):.3f}",
                                       f"{created_epoch:.3f}", *flat])
        return float(_text(not_before)) if not_before else None

    def promote_due(self, most: int = 100, stream: str | None = None) -> int:
        """Move delayed jobs whose not-before time has come back into their stream; how many moved."""
        stream = stream or self.stream
        return int(self._promote(keys=[self.delayed_for(stream), stream], args=[self.key("job", ""), most]))

    # --- webhooks bookkeeping (delivery itself: app/jobs/webhooks.py) ------------------------------
    def webhook_done(self, taken: Taken, status: str, attempts: int, detail: str = "") -> None:
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(self.job_key(taken.job_id), mapping={"webhook_status": status, "webhook_attempts": attempts,
                                                       "webhook_detail": detail[:300]})
        pipe.xack(self.hooks, WEBHOOKS_GROUP, taken.entry_id)
        pipe.xdel(self.hooks, taken.entry_id)
        pipe.execute()

    def raw_job(self, job_id: str) -> dict[str, str]:
        return {_text(k): _text(v) for k, v in self.redis.hgetall(self.job_key(job_id)).items()}

    def forget_idle_consumers(self, idle_s: float = 3600.0) -> int:
        """Drop consumers (of stopped workers) that hold nothing and were idle for ``idle_s``."""
        dropped = 0
        for stream, group in ((self.stream, WORKERS_GROUP), (self.video_stream, WORKERS_GROUP),
                              (self.hooks, WEBHOOKS_GROUP)):
            try:
                consumers = self.redis.xinfo_consumers(stream, group)
            except redis.exceptions.ResponseError:
                continue
            for c in consumers:
                if int(c["pending"]) == 0 and int(c["idle"]) > idle_s * 1000:
                    self.redis.xgroup_delconsumer(stream, group, c["name"])
                    dropped += 1
        return dropped


def without_credentials(url: str) -> str:
    """``url`` without a user name or password (those are refused at submit; older records may hold them)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def redis_trouble(exc: BaseException) -> str:
    """What a Redis error means, in words: a server that answered and refused (out of memory, read
    only, wrong password, a refused command) is not an unreachable one."""
    e = redis.exceptions
    if isinstance(exc, e.OutOfMemoryError) or str(exc).startswith("OOM"):
        return "Redis is out of memory (its maxmemory is reached) and refuses writes"
    if isinstance(exc, e.ReadOnlyError):
        return "Redis is a read-only replica"
    if isinstance(exc, e.AuthenticationError) or str(exc).startswith(("NOAUTH", "WRONGPASS", "invalid password")):
        return "Redis refused the password"
    if isinstance(exc, e.BusyLoadingError):
        return "Redis is loading its data"
    if isinstance(exc, e.ResponseError):
        return f"Redis refused the command ({str(exc)[:60]})"
    if isinstance(exc, e.TimeoutError):
        return f"Redis did not answer in time ({type(exc).__name__})"
    return f"Redis is not reachable ({type(exc).__name__})"
