"""The storage share's ledger in a real Redis server (Valkey on loopback), with a clock the test moves."""
from __future__ import annotations

import pytest

from app.config import load_settings
from app.shares import Shares, StorageLedger, StorageShareUsed

pytestmark = [pytest.mark.redis, pytest.mark.timeout(60)]


def test_the_ledger_counts_per_client_and_forgets_what_expired(r):
    now = [1_000_000 * 3600.0]
    ledger = StorageLedger(r, "t:", window_s=3 * 3600, clock=lambda: now[0])
    ledger.charge("a-1.2.3.4", 1000)
    now[0] += 3600
    ledger.charge("a-1.2.3.4", 500)
    assert ledger.usage("a-1.2.3.4")[0] == 1500 and ledger.usage("a-5.6.7.8")[0] == 0
    ledger.charge("a-1.2.3.4", -200)                       # a delete gives bytes back
    assert ledger.usage("a-1.2.3.4")[0] == 1300
    now[0] += 2 * 3600                                     # the first hour's files expired
    assert ledger.usage("a-1.2.3.4")[0] == 300
    now[0] += 3600
    assert ledger.usage("a-1.2.3.4")[0] == 0
    assert 0 < r.ttl("t:share:storage:" + __import__("app.clients").clients.digest("a-1.2.3.4")) <= 4 * 3600


def test_shares_refuse_the_client_past_its_share_with_the_time_until_room(r):
    settings = load_settings({}, redis_prefix="s:", client_storage_mb=1.0, expiry_hours=2.0)
    shares = Shares(settings, r)
    shares.check_storage("a-1.2.3.4")
    shares.charge_storage("a-1.2.3.4", 2**20)
    with pytest.raises(StorageShareUsed) as refused:
        shares.check_storage("a-1.2.3.4")
    assert refused.value.status == 429 and refused.value.code == "storage_share_used"
    assert 1 <= int(refused.value.headers["Retry-After"]) <= 2 * 3600
    shares.check_storage("a-5.6.7.8")                      # another client: its own share
    shares.charge_storage("a-1.2.3.4", -10 * 2**20)       # never below zero
    assert shares.ledger.usage("a-1.2.3.4")[0] == 0


def test_the_default_share_is_a_tenth_of_the_budget_and_none_without_one(r):
    assert Shares(load_settings({}, storage_budget_mb=1000.0), r).storage_bytes == 100 * 2**20
    assert Shares(load_settings({}, storage_budget_mb=0.0), r).storage_bytes == 0
    assert Shares(load_settings({}, storage_budget_mb=1000.0, client_storage_mb=5.0), r).storage_bytes == 5 * 2**20
