"""Per-client token buckets in Redis: every request that queues work takes one token.

A client (:mod:`.identity`: an IPv6 address by its /56, a mapped IPv4 address as IPv4) has one bucket.
A client's bucket holds up to ``burst`` tokens and refills at ``per_min / 60`` tokens per second;
a request that finds it empty is answered 429 with ``Retry-After`` (seconds until a token is back).
The bucket lives in one Redis hash updated by one Lua script (``token_bucket.lua`` beside this module)
with Redis' own clock, so every pod and worker of the deployment shares the same count.

Headers (IETF draft "RateLimit header fields for HTTP"), on every limited response:
``RateLimit-Limit`` (the burst), ``RateLimit-Remaining`` (whole tokens left), ``RateLimit-Reset``
(seconds until the bucket is full again) and ``RateLimit-Policy`` (``<burst>;w=<seconds to refill>``).

Without Redis, :class:`LocalRateLimiter` keeps the same buckets in the worker process's memory (each
gunicorn worker counts on its own), so a pod without Redis is still limited.
"""
from __future__ import annotations

import math
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from ..errors import ClientError, retry_after_header

#: The script that takes tokens from a bucket in Redis.
TOKEN_BUCKET_LUA = Path(__file__).resolve().with_name("token_bucket.lua")


class RateLimited(ClientError):
    """A request that stores work, over the client's rate limit (`DOODLEPOD_RATE_LIMIT_PER_MIN`,
    `DOODLEPOD_RATE_LIMIT_BURST`): `Retry-After` and `RateLimit-*` headers say when a token is back."""
    status, code, retryable = 429, "rate_limited", True


@dataclass
class Decision:
    allowed: bool
    limit: int
    remaining: int
    reset_s: float
    retry_after_s: float
    window_s: float

    def headers(self) -> dict[str, str]:
        out = {"RateLimit-Limit": str(self.limit), "RateLimit-Remaining": str(self.remaining),
               "RateLimit-Reset": str(math.ceil(self.reset_s)),
               "RateLimit-Policy": f"{self.limit};w={math.ceil(self.window_s)}"}
        if not self.allowed:
            out.update(retry_after_header(self.retry_after_s))
        return out


class RateLimiter:
    def __init__(self, redis_client, key_prefix: str, per_min: float, burst: int) -> None:
        self.redis = redis_client
        self.key_prefix = key_prefix
        self.rate = per_min / 60.0
        self.burst = burst
        self._take = redis_client.register_script(TOKEN_BUCKET_LUA.read_text())

    def take(self, client: str, cost: int = 1) -> Decision:
        """Take ``cost`` tokens from ``client``'s bucket (raises redis errors: the caller decides)."""
        allowed, tokens, retry, reset = self._take(keys=[self.key_prefix + client],
                                                   args=[self.rate, self.burst, cost])
        tokens_f = float(tokens)
        return Decision(bool(allowed), self.burst, int(math.floor(tokens_f + 1e-9)), float(reset), float(retry),
                        self.burst / self.rate)

    def refuse(self, decision: Decision) -> RateLimited:
        return RateLimited(f"rate limit of {self.burst} requests (refilling {self.rate * 60:g} per minute) "
                           f"used up; retry in {max(1, math.ceil(decision.retry_after_s))} s",
                           headers=decision.headers())


class LocalRateLimiter(RateLimiter):
    """The same token buckets in this process's memory (no Redis): at most ``max_clients`` remembered,
    the least recently seen forgotten first (a forgotten client starts again with a full bucket)."""

    def __init__(self, per_min: float, burst: int, max_clients: int = 100_000,
                 clock=time.monotonic) -> None:
        self.rate = per_min / 60.0
        self.burst = burst
        self.max_clients = max_clients
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()   # client -> (tokens, at)

    def take(self, client: str, cost: int = 1) -> Decision:
        now = self.clock()
        tokens, at = self._buckets.pop(client, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + max(0.0, now - at) * self.rate)
        allowed = tokens >= cost
        if allowed:
            tokens -= cost
        self._buckets[client] = (tokens, now)
        while len(self._buckets) > self.max_clients:
            self._buckets.popitem(last=False)
        retry = 0.0 if allowed else (cost - tokens) / self.rate
        return Decision(allowed, self.burst, int(math.floor(tokens + 1e-9)), (self.burst - tokens) / self.rate,
                        retry, self.burst / self.rate)
