"""Signed job callbacks: when a job with a ``callback_url`` ends, the worker POSTs its record there.

Body (JSON): ``{"event": "job.succeeded" | "job.failed", "job": <as GET /jobs/{id}>, "sent_at": ISO time}``.
Headers: ``X-Doodlepod-Signature: sha256=<hex HMAC-SHA256 of the raw body, keyed with
DOODLEPOD_WEBHOOK_SECRET>``, ``X-Doodlepod-Event``, and ``X-Doodlepod-Delivery`` (the same on every
retry of one callback, so a receiver can drop repeats). A receiver recomputes the HMAC over the
bytes it received and compares in constant time (:func:`verify` shows how).

Delivery is retried on connection errors, timeouts, 408, 425, 429 and 5xx answers with exponential
backoff (1, 2, 4 ... s, at most 60 s, or the receiver's Retry-After) up to
DOODLEPOD_WEBHOOK_ATTEMPTS times; any other answer ends it. The outcome (``delivered`` or
``failed``, and the number of attempts) is kept in the job's record.
"""
from __future__ import annotations

import hashlib
import hmac
import http.client
import io
import json
import logging
import random
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..clients.lookups import BoundedResolver, Resolver, ResolverBusy, ResolveTimeout, submit_resolver, system_resolver
from ..errors import BadRequest, CallbackDnsBusy, retry_after_s
from .egress import Allowance, CallbackRefused, Target, check_callback

log = logging.getLogger("doodlepod.webhooks")

SIGNATURE_HEADER = "X-Doodlepod-Signature"
MAX_URL_LENGTH = 2048
_RETRY_STATUSES = {408, 425, 429}


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, header: str) -> bool:
    """What a receiver does: recompute the signature over the raw body, compare in constant time."""
    return hmac.compare_digest(sign(secret, body), header or "")


def callback_syntax(raw: str | None, settings: Any) -> str:
    """The callback URL of a request ('' if none), its text alone (no lookup: what a request's model
    checks): 400 unless an http(s) URL and webhooks are configured."""
    url = (raw or "").strip()
    if not url:
        return ""
    if not settings.webhook_secret:
        raise BadRequest("callback_url is not available: this server has no DOODLEPOD_WEBHOOK_SECRET to sign "
                         "callbacks with; poll GET /jobs/{id} instead")
    parts = urlsplit(url)
    if (len(url) > MAX_URL_LENGTH or parts.scheme not in ("http", "https") or not parts.hostname
            or any(ord(c) <= 32 or ord(c) == 127 for c in url)):
        raise BadRequest(f"callback_url must be an http(s) URL of at most {MAX_URL_LENGTH} characters, "
                         "without spaces or control characters")
    return url


def validate_callback_url(raw: str | None, settings: Any, resolve: Resolver | None = None, client: str = "") -> str:
    """The callback URL of a request ('' if none), checked before its job is queued: :func:`callback_syntax`,
    then 422 ``callback_url_refused`` when it names an address the server does not call (app/jobs/egress.py),
    or whose name does not resolve within DOODLEPOD_WEBHOOK_DNS_TIMEOUT_S (rule ``dns_timeout``); 429
    ``callback_dns_share_used`` while the same client (``client``, default the request's) has a lookup
    running: a client's slow names hold at most one of the lookup threads."""
    url = callback_syntax(raw, settings)
    if not url:
        return ""
    parts = urlsplit(url)
    allow = Allowance.parse(settings.webhook_allow)
    if resolve is not None:
        check_callback(url, allow, resolve)
        return url
    if not client:
        from ..clients import current
        client = current()
    resolver = submit_resolver(settings)
    try:
        check_callback(url, allow, lambda host, port: resolver(host, port, owner=client or "-"))
    except ResolveTimeout:
        raise CallbackRefused("dns_timeout", f"{parts.hostname!r} did not resolve within "
                              f"{settings.webhook_dns_timeout_s:g} s (DOODLEPOD_WEBHOOK_DNS_TIMEOUT_S)") from None
    except ResolverBusy as exc:
        if exc.reason == "owner":
            from ..shares import CallbackDnsShareUsed
            raise CallbackDnsShareUsed("this client has a callback_url being looked up already (until its name "
                                       "server answers or gives up); one at a time per client",
                                       settings.webhook_dns_timeout_s) from None
        raise CallbackDnsBusy(f"every callback name lookup thread ({resolver.threads}, "
                              "DOODLEPOD_WEBHOOK_DNS_THREADS) is waiting on a slow name server; retry shortly, or "
                              "send no callback_url and poll the job", settings.webhook_dns_timeout_s) from None
    return url


def body_for(job: dict[str, Any], sent_at: str) -> bytes:
    return json.dumps({"event": f"job.{job['status']}", "job": job, "sent_at": sent_at},
                      separators=(",", ":")).encode()


@dataclass
class Outcome:
    delivered: bool
    attempts: int
    detail: str
    interrupted: bool = False  # the worker is stopping: leave the callback for another worker


def deliver(url: str, job: dict[str, Any], secret: str, *, attempts: int, timeout_s: float,
            now: Callable[[], str], allow: Allowance = Allowance(), stop: threading.Event | None = None,
            base_backoff_s: float = 1.0, resolve: Resolver = system_resolver,
            pause: Callable[[float], bool] | None = None) -> Outcome:
    """POST the signed record of ``job`` to ``url`` until a 2xx, a final answer, or ``attempts`` tries.

    Each attempt checks the URL again (:func:`app.jobs.egress.check_callback`: the name is resolved anew
    and every address checked), connects to the address it checked, and ends within ``timeout_s``
    in all (looking the name up, connecting, sending and reading the answer's head together; a
    :class:`BoundedResolver` as ``resolve`` is given what is left of it), however slowly the
    receiver or its name server answers. A URL refused by the rules ends delivery at once, not retried.
    Between attempts ``pause(seconds)`` waits (True: stop now); the worker's gives the callback's
    lane up meanwhile, so backoff holds no lane.
    """
    if pause is None:
        def pause(seconds: float) -> bool:
            if stop is not None:
                return stop.wait(seconds)
            time.sleep(seconds)
            return False
    delivery = f"{job['id']}.{job['status']}"
    detail = ""
    shown = _host(url)
    for attempt in range(1, attempts + 1):
        body = body_for(job, now())
        headers = {"Content-Type": "application/json", SIGNATURE_HEADER: sign(secret, body),
                   "X-Doodlepod-Event": f"job.{job['status']}", "X-Doodlepod-Delivery": delivery,
                   "User-Agent": "doodlepod-webhooks/1"}
        wait = min(60.0, base_backoff_s * 2 ** (attempt - 1)) * random.uniform(0.8, 1.2)
        end = time.monotonic() + timeout_s
        bounded = resolve
        if isinstance(resolve, BoundedResolver):  # the lookup counts in the attempt's bound
            bounded = lambda h, p, end=end: resolve(h, p, end - time.monotonic())  # noqa: E731
        try:
            target = check_callback(url, allow, bounded)
            status, retry_after = post(target, body, headers, end - time.monotonic())
        except CallbackRefused as exc:
            log.warning("webhook job=%s to %s not sent: %s", job["id"], shown, exc.message)
            return Outcome(False, attempt, f"refused: {exc.rule}: {exc.message}")
        except (OSError, ValueError) as exc:
            detail = "timeout" if isinstance(exc, (socket.timeout, TimeoutError)) else type(exc).__name__
        else:
            if 200 <= status < 300:
                log.info("webhook job=%s delivered to %s (attempt %d)", job["id"], shown, attempt)
                return Outcome(True, attempt, f"HTTP {status}")
            detail = f"HTTP {status}"
            if status not in _RETRY_STATUSES and status < 500:
                log.warning("webhook job=%s refused by %s: %s; not retried", job["id"], shown, detail)
                return Outcome(False, attempt, detail)
            if retry_after is not None:
                wait = min(60.0, retry_after)
        if attempt < attempts:
            log.info("webhook job=%s to %s failed (%s), attempt %d/%d; retrying in %.1f s", job["id"], shown,
                     detail, attempt, attempts, wait)
            if pause(wait):
                return Outcome(False, attempt, detail, interrupted=True)
    log.warning("webhook job=%s to %s failed after %d attempts: %s", job["id"], shown, attempts, detail)
    return Outcome(False, attempts, detail)


#: Most bytes of an answer's status line and headers read; the body is never read.
MAX_ANSWER_HEAD = 16 * 1024


def post(target: Target, body: bytes, headers: dict[str, str], timeout_s: float) -> tuple[int, float | None]:
    """POST ``body`` to ``target`` with :mod:`http.client`, connecting to its checked address (never a name
    looked up again), and read the answer's head (at most :data:`MAX_ANSWER_HEAD` bytes), all within
    ``timeout_s``. Returns the status and the delay its Retry-After asks (None if none); raises OSError
    (``TimeoutError`` past the deadline) or ValueError (not an HTTP answer)."""
    end = time.monotonic() + timeout_s

    def left() -> float:
        remaining = end - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("callback attempt deadline")
        return remaining

    connection = _Pinned(target, left)
    try:
        connection.request("POST", target.path, body, {**headers, "Connection": "close"})
        answer = connection.getresponse()
        return answer.status, retry_after_s(answer.headers)
    except http.client.HTTPException as exc:  # a status line or head that is not HTTP
        raise ValueError(f"not an HTTP answer ({type(exc).__name__})") from None
    finally:
        connection.close()


class _Pinned(http.client.HTTPConnection):
    """A connection to the address the egress check passed (``target.address``), saying the URL's own host
    (Host header, TLS server name); every socket operation within what ``left()`` says is left."""

    def __init__(self, target: Target, left: Callable[[], float]) -> None:
        super().__init__(target.host, target.port)
        self.default_port = 443 if target.scheme == "https" else 80  # the Host header names other ports
        self._target, self._left = target, left

    def connect(self) -> None:
        sock = socket.create_connection((self._target.address, self._target.port), timeout=self._left())
        if self._target.scheme == "https":
            sock.settimeout(self._left())
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=self._target.host)
        self.sock = _Bounded(sock, self._left)


class _Bounded:
    """The connection's socket as :mod:`http.client` uses it (sendall, makefile, close): each operation's
    timeout is what is left of the attempt, and the answer read is its first :data:`MAX_ANSWER_HEAD`
    bytes (then an end of file: the head is parsed from what came, as a cut-off answer would be)."""

    def __init__(self, sock: socket.socket, left: Callable[[], float]) -> None:
        self._sock, self._left = sock, left

    def sendall(self, data: bytes) -> None:
        self._sock.settimeout(self._left())
        self._sock.sendall(data)

    def makefile(self, mode: str = "rb") -> io.BufferedReader:
        return io.BufferedReader(_HeadReader(self._sock, self._left))

    def close(self) -> None:
        self._sock.close()


class _HeadReader(io.RawIOBase):
    def __init__(self, sock: socket.socket, left: Callable[[], float]) -> None:
        self._sock, self._left, self._read = sock, left, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        room = MAX_ANSWER_HEAD - self._read
        if room <= 0:
            return 0
        self._sock.settimeout(self._left())
        got = self._sock.recv_into(memoryview(buffer)[:room])
        self._read += got
        return got


def _host(url: str) -> str:
    """The URL's host and port, for logs (never its user or password)."""
    netloc = urlsplit(url).netloc
    return netloc.rsplit("@", 1)[-1]
