"""Fixtures of the async-jobs tests: a real Redis-compatible server (Valkey) on a loopback port."""
from __future__ import annotations

import pytest

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
