"""The pieces that bound what a client can store, in process: the rate limiter without Redis, the
client address behind trusted proxies, and the storage budget's count."""
from __future__ import annotations

import os

from app.clients import forwarded_client
from app.clients.ratelimit import LocalRateLimiter
from app.storage.budget import StorageBudget, folder_bytes


def test_the_local_rate_limiter_is_a_token_bucket_per_client():
    now = [100.0]
    limiter = LocalRateLimiter(per_min=60, burst=3, clock=lambda: now[0])
    assert [limiter.take("a").allowed for _ in range(4)] == [True, True, True, False]
    refused = limiter.take("a")
    assert not refused.allowed and refused.headers()["Retry-After"] == "1" and refused.remaining == 0
    assert limiter.take("b").allowed                      # another client: its own bucket
    now[0] += 1.0                                         # one token back after a second at 60/min
    assert limiter.take("a").allowed and not limiter.take("a").allowed


def test_the_local_rate_limiter_forgets_the_least_recent_clients_first():
    limiter = LocalRateLimiter(per_min=1, burst=1, max_clients=2, clock=lambda: 0.0)
    for client in ("a", "b", "c"):
        assert limiter.take(client).allowed
    assert not limiter.take("c").allowed and not limiter.take("b").allowed
    assert limiter.take("a").allowed                      # forgotten: a full bucket again


def test_forwarded_for_is_believed_only_from_trusted_proxies_and_only_from_the_right():
    trusted = ("10.0.0.0/8",)
    assert forwarded_client("203.0.113.9", ["1.2.3.4"], trusted) == "203.0.113.9"        # peer not trusted
    assert forwarded_client("10.0.0.5", [], trusted) == "10.0.0.5"
    assert forwarded_client("10.0.0.5", ["1.2.3.4"], trusted) == "1.2.3.4"
    # the client wrote the left part itself: the right-most untrusted hop is the client
    assert forwarded_client("10.0.0.5", ["6.6.6.6, 198.51.100.2, 10.0.0.7"], trusted) == "198.51.100.2"
    assert forwarded_client("10.0.0.5", ["6.6.6.6", "198.51.100.2:4711"], trusted) == "198.51.100.2"
    assert forwarded_client("10.0.0.5", ["[2001:db8::1]:80"], trusted) == "2001:db8::1"
    assert forwarded_client("10.0.0.5", ["not-an-address"], trusted) == "10.0.0.5"
    assert forwarded_client("10.0.0.5", ["1.2.3.4"], ()) == "10.0.0.5"                   # no setting: no trust


def test_the_budget_counts_the_files_stored_and_this_process_writes(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "x.gif").write_bytes(os.urandom(200_000))
    (tmp_path / "y.png").write_bytes(os.urandom(100_000))
    counted = folder_bytes(tmp_path)
    assert 300_000 <= counted <= 320_000
    budget = StorageBudget(tmp_path, budget_mb=1)
    assert budget.enabled and budget.left_bytes() == 2**20 - counted
    budget.wrote(900_000)                                 # before the next walk: still counted
    assert budget.left_bytes() == 2**20 - counted - 900_000 < 0
    assert not StorageBudget(tmp_path, 0).enabled and StorageBudget(tmp_path, 0).left_bytes() is None


def test_scratch_folders_of_stopped_processes_are_removed_at_start(tmp_path):
    import subprocess
    import sys
    import time

    from app.render.scratch import PREFIX, make_scratch

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    gone = tmp_path / f"{PREFIX}{dead.stdout.strip()}-abc"      # its process has exited
    reused = tmp_path / f"{PREFIX}{os.getpid()}-old"             # our pid, but made before we started
    live = tmp_path / f"{PREFIX}{os.getppid()}-live"             # a running process that made it after starting
    other = tmp_path / "someone-else"
    for folder in (gone, reused, live, other):
        (folder / "spill").mkdir(parents=True)
        (folder / "spill" / "x.in").write_bytes(b"x")
    os.utime(reused, (1.0, 1.0))
    now = time.time()
    os.utime(live, (now, now))
    mine = make_scratch(str(tmp_path))
    assert not gone.exists() and not reused.exists()
    assert live.exists() and other.exists() and mine.is_dir() and mine.name.startswith(f"{PREFIX}{os.getpid()}-")


def test_uploaded_clips_are_named_by_the_server(tmp_path):
    from types import SimpleNamespace

    from app.intake.bvh import Clip, check_upload
    from tests.conftest import BVH_DIR

    clip = Clip("bvh", (BVH_DIR / "cmu1" / "jumping_jacks.bvh").read_bytes())
    settings = SimpleNamespace(bvh_max_mb=4, bvh_max_joints=256, bvh_max_frames=20000, bvh_max_seconds=120)
    a = check_upload(clip, None, None, settings, tmp_path)
    b = check_upload(clip, None, 10, settings, tmp_path)
    assert a.motion_cfg != b.motion_cfg and a.motion_cfg.exists() and b.motion_cfg.exists()
    assert a.sha256 != b.sha256 and a.motion_cfg.parent == tmp_path


def test_a_16_bit_mask_keeps_its_black():
    import io

    import numpy as np
    from PIL import Image

    from app.render.steps import read_mask

    mask16 = np.zeros((20, 40), np.uint16)
    mask16[:, :20] = 65535
    buf = io.BytesIO()
    Image.fromarray(mask16).save(buf, format="PNG")
    got = read_mask(buf.getvalue(), (40, 20))
    assert got[:, :20].all() and not got[:, 20:].any()


def test_redis_errors_are_named_by_what_happened():
    import redis

    from app.jobs.queue import redis_trouble

    assert "out of memory" in redis_trouble(redis.exceptions.OutOfMemoryError("command not allowed when used memory"))
    assert "read-only" in redis_trouble(redis.exceptions.ReadOnlyError("You can't write against a read only replica."))
    assert "password" in redis_trouble(redis.exceptions.AuthenticationError("invalid password"))
    assert "not reachable" in redis_trouble(redis.exceptions.ConnectionError("refused"))


def test_a_runtime_folder_made_by_the_app_is_in_memory_where_it_can_be():
    import shutil
    from pathlib import Path

    from app import new_runtime_dir

    made = Path(new_runtime_dir())
    try:
        if os.access("/dev/shm", os.W_OK):
            assert made.parent == Path("/dev/shm")   # not beside the data a full disk would SIGBUS
        assert made.is_dir() and made.name.startswith("doodlepod-")
    finally:
        shutil.rmtree(made, ignore_errors=True)
