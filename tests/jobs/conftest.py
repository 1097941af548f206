"""Fixtures of the async-jobs tests: a real Redis-compatible server (Valkey) on a loopback port."""
from __future__ import annotations

import pytest
import redis

from tests.support.jobstack import RedisServer


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "redis: needs a real Redis server (started by the test on loopback)")


@pytest.fixture(scope="module")
def redis_server():
    """A fresh server for the module, with the append-only file on; stopped and removed after."""
    server = RedisServer()
    try:
        yield server.start()
    finally:
        server.remove()


@pytest.fixture
def r(redis_server):
    """A client of the module's server, its database emptied for each test."""
    client = redis.Redis.from_url(redis_server.url)
    client.flushdb()
    return client
