"""Each client's share of what all clients share, and the answer when a client used up its own.

The pod has pools every client draws from: the storage budget, the job queue (and Redis' memory),
the render worker's video capacity and its callback lanes. Global bounds keep the pod alive; they do
not keep one client from taking a whole pool. So each client (:mod:`app.clients`: an IPv6 address by
its /56, a mapped IPv4 address as IPv4, with its token when tokens are checked) has a share of each,
set in app/config.py; a client past one of its shares gets ``429`` with ``Retry-After`` and the
error code of that share, and nobody else is refused for it. :data:`SHARES` is the one table of them
(the answer past each, its setting, what it counts, where it is enforced); docs/operations.md prints it
(``python -m app.http.codes --shares``).

The storage share counts what the client's requests and jobs stored (:func:`metering` around the
work, :func:`stored` in the storage backends) in hourly buckets kept for DOODLEPOD_EXPIRY_HOURS, the
time the files themselves are kept; a deleted character gives its bytes back. The check is made when
work is admitted, so one request can go over by what it stores itself (bounded per request). An async
job reserves its price (:mod:`app.jobs.price`) when it is queued, given back when it ends while what
it stored counts, so queued jobs count in the share before they store anything; a job whose client is
past its share when it starts fails alone (:meth:`Shares.check_job_storage`). The
queue's shares are checked atomically with the submission (app/jobs/lua/submit.lua); the callback
lanes in the worker (app/worker.py).

The counts live in Redis when DOODLEPOD_REDIS_URL is set (shared by the pod's processes and pods),
else in this process's memory.
"""
from __future__ import annotations

import contextvars
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from .clients import digest
from .errors import ApiError, ClientError, TooManyConnections, TooManyMotions, retry_after_header

#: Seconds of one bucket of the storage ledger.
BUCKET_S = 3600


class ShareUsed(ClientError):
    """A client used up one of its shares (429 with Retry-After); the subclass's code names the share."""
    status, code, retryable = 429, "share_used", True

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message, headers=retry_after_header(retry_after_s))


class StorageShareUsed(ShareUsed):
    """The client stored its share within the expiry period (`DOODLEPOD_CLIENT_STORAGE_MB`; its queued
    jobs' prices and videos count from their admission): `Retry-After` until its oldest hour expires;
    `DELETE /characters/{id}` gives room back. An async job whose client is past it when the job starts
    ends `failed` with it, not retried."""
    code = "storage_share_used"


class JobsShareUsed(ShareUsed):
    """The client has `DOODLEPOD_CLIENT_MAX_QUEUED` async jobs queued, running or with their callback still to
    deliver."""
    code = "jobs_share_used"


class QueuedBytesShareUsed(ShareUsed):
    """The uploads of the client's queued jobs reached `DOODLEPOD_CLIENT_QUEUED_MB`."""
    code = "queued_bytes_share_used"


class VideoShareUsed(ShareUsed):
    """The client has `DOODLEPOD_CLIENT_MAX_VIDEOS` videos queued or being read."""
    code = "video_share_used"


class RenderShareUsed(ShareUsed):
    """The client's synchronous requests hold or wait for `DOODLEPOD_CLIENT_RENDER_SLOTS` render slots
    already (answered at once)."""
    code = "render_share_used"


class CallbackDnsShareUsed(ShareUsed):
    """The client has a `callback_url` name being looked up already: until the lookup ends (answered or
    given up by the system's resolver), not only until its request stopped waiting for it."""
    code = "callback_dns_share_used"


# --- the table of shares -------------------------------------------------------------------------

@dataclass(frozen=True)
class Share:
    """One share: the answer past it (an error class, or what happens instead), the setting that sizes
    it (``""``: fixed, ``default`` says how), what it counts and where it is enforced."""

    answer: type[ApiError] | str
    setting: str
    counts: str
    enforced: str
    default: str = ""   # said instead of the setting's own default ("{}" stands for it)


#: Every share a client has, in the order docs/operations.md lists them.
SHARES: tuple[Share, ...] = (
    Share(StorageShareUsed, "DOODLEPOD_CLIENT_STORAGE_MB",
          "Bytes stored within `DOODLEPOD_EXPIRY_HOURS`, an async job's counted from its admission (its price "
          "reserved, given back when it ends, whoever ends it, while what it stored counts: `app/jobs/price.py`), "
          "a queued video's from its upload until its job ends; `Retry-After` until its oldest hour expires, "
          "`DELETE /characters/{id}` gives room back",
          "`Shares.check_storage` (`app/shares.py`) when work is admitted (`app/http/jobs.py`), and "
          "`Shares.check_job_storage` when a job starts (`app/worker.py`: the job fails alone)",
          default="a tenth of the storage budget: 153 MiB in the pod"),
    Share(JobsShareUsed, "DOODLEPOD_CLIENT_MAX_QUEUED",
          "Async jobs queued, running, or ended with their callback still to deliver",
          "`app/jobs/lua/submit.lua`, atomically with the submission"),
    Share(QueuedBytesShareUsed, "DOODLEPOD_CLIENT_QUEUED_MB", "Bytes of those jobs' uploads",
          "`app/jobs/lua/submit.lua`, atomically with the submission"),
    Share(VideoShareUsed, "DOODLEPOD_CLIENT_MAX_VIDEOS", "Videos queued or being read",
          "`app/jobs/lua/submit.lua`, atomically with the submission"),
    Share(RenderShareUsed, "DOODLEPOD_CLIENT_RENDER_SLOTS",
          "Render slots held or waited for by its synchronous requests (answered at once)",
          "`render_slot` (`app/http/api.py`) over the slots' owners (`app/render/admission.py`)",
          default="1 in pod.yaml and deploy/; the app's own default 0: off, for a backend sending for many "
                  "people through one address, and for `make run`, where one person's studio and phone are one "
                  "loopback client"),
    Share(TooManyMotions, "DOODLEPOD_SCENE_MAX_MOTIONS",
          "Motions of one `POST /animate` with `every_character` (a scene render each, one after the other)",
          "the request's model (`AnimateForm`, `app/intake/models.py`)"),
    Share(CallbackDnsShareUsed, "", "Callback name lookups at submit",
          "the callback name lookups (`submit_resolver`, `app/clients/lookups.py`) when a job is submitted",
          default="one at a time"),
    Share("waits its turn (never refused)", "DOODLEPOD_CLIENT_WEBHOOK_LANES", "Callbacks being delivered",
          "the callback lanes (`app/clients/lanes.py`) of the render worker (`app/worker.py`)",
          default="{} per worker"),
    Share(TooManyConnections, "DOODLEPOD_CLIENT_CONNECTIONS",
          "Connections held open to one gunicorn worker (peers in `DOODLEPOD_TRUSTED_PROXIES` are not capped: "
          "they carry many clients)",
          "the gunicorn worker (`app/gunicorn_worker.py`, `app/clients/connections.py`), before a request is read",
          default="{} per worker"),
    Share("held back (never refused)", "DOODLEPOD_CLIENT_REFUSALS_PER_S",
          "Refusals (4xx answers) a second; past them each next refusal is held back, up to 1 s, before it is "
          "sent, so a client that sends again at once cannot keep a worker's event loop busy refusing it",
          "the request hooks (`app/http/hooks.py`) over each client's bucket (`app/clients/refusals.py`), per worker",
          default="20 a second in pod.yaml and deploy/; the app's own default 0: off"),
)


# --- metering what a piece of work stores ---------------------------------------------------------

@dataclass
class Meter:
    """Bytes stored by the work running under :func:`metering`."""

    bytes: int = 0


_METER: contextvars.ContextVar[Meter | None] = contextvars.ContextVar("doodlepod_meter", default=None)


def stored(nbytes: int) -> None:
    """The storage wrote ``nbytes`` for the current work (called by the storage backends)."""
    meter = _METER.get()
    if meter is not None:
        meter.bytes += max(0, int(nbytes))


def freed(nbytes: int) -> None:
    """The storage deleted ``nbytes`` for the current work (a deleted character gives its share back)."""
    meter = _METER.get()
    if meter is not None:
        meter.bytes -= max(0, int(nbytes))


def start_metering() -> tuple[Meter, contextvars.Token]:
    meter = Meter()
    return meter, _METER.set(meter)


def stop_metering(token: contextvars.Token) -> None:
    _METER.reset(token)


@contextmanager
def metering() -> Iterator[Meter]:
    """Count what the storage writes inside the block (in this thread or greenlet, and in greenlets
    spawned with a copy of its context)."""
    meter, token = start_metering()
    try:
        yield meter
    finally:
        stop_metering(token)


@contextmanager
def unmetered() -> Iterator[None]:
    """Writes inside the block are not charged (a queued video: the queued-bytes share covers it)."""
    token = _METER.set(None)
    try:
        yield
    finally:
        _METER.reset(token)


# --- the storage ledger ---------------------------------------------------------------------------

class StorageLedger:
    """Bytes each client stored, in hourly buckets kept ``window_s`` (the files' expiry), in Redis."""

    def __init__(self, redis: Any, key_prefix: str, window_s: float, bucket_s: int = BUCKET_S,
                 clock=time.time) -> None:
        self.redis = redis
        self.key_prefix = key_prefix
        self.bucket_s = bucket_s
        self.buckets = max(1, math.ceil(window_s / bucket_s))
        self.clock = clock

    def _key(self, client: str) -> str:
        return f"{self.key_prefix}share:storage:{digest(client)}"

    def _now_bucket(self) -> int:
        return int(self.clock() // self.bucket_s)

    def _live(self, raw: dict) -> dict[int, int]:
        first = self._now_bucket() - self.buckets + 1
        out: dict[int, int] = {}
        for k, v in raw.items():
            b = int(k)
            if b >= first:
                out[b] = int(v)
        return out

    def usage(self, client: str) -> tuple[int, dict[int, int]]:
        raw = self.redis.hgetall(self._key(client))
        live = self._live(raw)
        return max(0, sum(live.values())), live

    def charge(self, client: str, nbytes: int) -> None:
        """Add ``nbytes`` (negative: bytes given back by a delete) to the client's current bucket."""
        if not nbytes:
            return
        key = self._key(client)
        now_b = self._now_bucket()
        pipe = self.redis.pipeline(transaction=True)
        pipe.hincrby(key, str(now_b), int(nbytes))
        pipe.hkeys(key)
        pipe.expire(key, (self.buckets + 1) * self.bucket_s)
        _, keys, _ = pipe.execute()
        stale = [k for k in keys if int(k) < now_b - self.buckets + 1]
        if stale:
            self.redis.hdel(key, *stale)

    def retry_after_s(self, live: dict[int, int], over_by: int) -> float:
        """Seconds until enough of the oldest buckets age out to bring the client under its share."""
        first = self._now_bucket() - self.buckets + 1
        freed = 0
        for b in sorted(live):
            freed += live[b]
            if freed >= over_by:
                return max(1.0, (b - first + 1) * self.bucket_s - (self.clock() % self.bucket_s))
        return float(self.buckets * self.bucket_s)


class LocalStorageLedger(StorageLedger):
    """The same ledger in this process's memory (no Redis), at most ``max_clients`` remembered."""

    def __init__(self, window_s: float, bucket_s: int = BUCKET_S, clock=time.time,
                 max_clients: int = 100_000) -> None:
        super().__init__(None, "", window_s, bucket_s, clock)
        self._lock = threading.Lock()
        self._clients: OrderedDict[str, dict[int, int]] = OrderedDict()
        self.max_clients = max_clients

    def usage(self, client: str) -> tuple[int, dict[int, int]]:
        with self._lock:
            live = self._live(dict(self._clients.get(client, {})))
        return max(0, sum(live.values())), live

    def charge(self, client: str, nbytes: int) -> None:
        if not nbytes:
            return
        with self._lock:
            buckets = self._live(self._clients.pop(client, {}))
            now_b = self._now_bucket()
            buckets[now_b] = buckets.get(now_b, 0) + int(nbytes)
            self._clients[client] = buckets
            while len(self._clients) > self.max_clients:
                self._clients.popitem(last=False)


# --- the shares of one deployment -----------------------------------------------------------------

def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.1f} MiB" if nbytes < 10 * 2**20 else f"{nbytes / 2**20:.0f} MiB"


def storage_share_bytes(settings: Any) -> int:
    """DOODLEPOD_CLIENT_STORAGE_MB in bytes; its default (0) is a tenth of DOODLEPOD_STORAGE_BUDGET_MB
    (no share when neither is set)."""
    mb = settings.client_storage_mb or settings.storage_budget_mb / 10
    return int(mb * 2**20)


class Shares:
    """The per-client shares of one deployment (built once per process by :func:`app.services.build_services`)."""

    def __init__(self, settings: Any, redis: Any = None) -> None:
        self.settings = settings
        self.storage_bytes = storage_share_bytes(settings)
        window = settings.expiry_hours * 3600
        self.ledger: StorageLedger = (StorageLedger(redis, settings.redis_prefix, window) if redis is not None
                                      else LocalStorageLedger(window))

    def check_storage(self, client: str) -> None:
        """429 ``storage_share_used`` when ``client`` stored its share already."""
        if self.storage_bytes <= 0:
            return
        used, live = self.ledger.usage(client)
        if used < self.storage_bytes:
            return
        wait = self.ledger.retry_after_s(live, used - self.storage_bytes + 1)
        raise StorageShareUsed(
            f"this client stored {_mib(used)} within {self.settings.expiry_hours:g} h, its share of "
            f"{_mib(self.storage_bytes)} (DOODLEPOD_CLIENT_STORAGE_MB); files expire after "
            f"{self.settings.expiry_hours:g} h and DELETE /characters/{{id}} gives room back: retry in "
            f"{max(1, math.ceil(wait))} s", wait)

    def check_job_storage(self, client: str, reserved: int) -> None:
        """Raise :class:`StorageShareUsed` (not retryable) when ``client`` stored its share already, the job's own
        ``reserved`` bytes left out: its admission checked the share, but the client's synchronous work may
        have stored more since."""
        if self.storage_bytes <= 0 or not client:
            return
        used, live = self.ledger.usage(client)
        used -= max(0, reserved)
        if used < self.storage_bytes:
            return
        wait = self.ledger.retry_after_s(live, used - self.storage_bytes + 1)
        error = StorageShareUsed(
            f"this client had stored {_mib(used)} within {self.settings.expiry_hours:g} h when the job started, "
            f"its share of {_mib(self.storage_bytes)} (DOODLEPOD_CLIENT_STORAGE_MB): the job did not run and "
            f"stored nothing; queue it again once files expired (in about {max(1, math.ceil(wait))} s) or "
            "DELETE /characters/{id} made room", wait)
        error.retryable = False  # the job fails alone: the share frees by the hour, past any retry's delay
        raise error

    def charge_storage(self, client: str, nbytes: int) -> None:
        """Count ``nbytes`` stored (negative: deleted) for ``client``."""
        if self.storage_bytes > 0 and client and nbytes:
            if nbytes < 0:  # never give back more than the live buckets hold
                nbytes = -min(-nbytes, self.ledger.usage(client)[0])
            self.ledger.charge(client, nbytes)
