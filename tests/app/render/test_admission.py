"""How many requests a pod admits (from its CPUs) and the Retry-After its 503s carry (measured)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.config import available_cpus, default_max_inflight, load_settings
from app.render import admission
from app.render.admission import InflightSlots

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("cpus,motions,want", [(2, 3, 1), (3, 3, 1), (4, 3, 2), (8, 3, 3), (16, 1, 16), (1, 5, 1)])
def test_admitted_requests_are_what_the_cpus_can_run(cpus, motions, want):
    """One motion per CPU: enough requests to keep every CPU busy, not so many that one request's
    motions queue behind another's."""
    assert default_max_inflight(motions, cpus=cpus) == want


def test_settings_derive_max_inflight_unless_set():
    auto = load_settings({})
    assert auto.max_inflight == default_max_inflight(len(auto.default_motions))
    assert load_settings({"DOODLEPOD_MAX_INFLIGHT": "5"}).max_inflight == 5
    one = load_settings({"DOODLEPOD_DEFAULT_MOTIONS": "dab"})
    assert one.max_inflight == available_cpus()
    with pytest.raises(Exception, match="DOODLEPOD_MAX_INFLIGHT"):
        load_settings({"DOODLEPOD_MAX_INFLIGHT": "-1"})


def test_available_cpus_follows_the_affinity_mask_and_the_cgroup_quota(tmp_path):
    code = ("import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
            "from app.config import available_cpus; print(available_cpus())")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("150000 100000\n")   # a limit of 1.5 CPUs
    assert available_cpus(cpu_max) == min(2, available_cpus())
    cpu_max.write_text("max 100000\n")      # no limit
    assert available_cpus(cpu_max) == available_cpus(tmp_path / "missing")


def _stored(slot) -> float:
    """A held slot's taken time as its file holds it, rounded to the millisecond: read against the
    raw clock, a time rounded up could lie after "now", and a Retry-After would round up a second."""
    return float(f"{slot.taken:.3f}")


def test_retry_after_is_the_time_until_a_slot_is_likely_free(tmp_path, monkeypatch):
    slots = InflightSlots(tmp_path, 1)
    held = slots.try_acquire()
    assert held is not None and slots.try_acquire() is None
    assert slots.retry_after(fallback=2.0) == 2          # nothing measured yet
    slots.record(10.0)
    slots.record(0.0)                                    # moving average: 0.7 * 10 + 0.3 * 0
    assert slots.mean_duration() == pytest.approx(7.0)
    now = _stored(held)                                  # the taken time as the slot wrote it (ms)
    clock = [now + 60]                                   # past the window of the refusal above
    monkeypatch.setattr(admission.time, "time", lambda: clock[0])
    clock[0] = now                                       # the slot was just taken
    slots._refused.clear()
    assert slots.retry_after() == 7
    clock[0] = now + 4.5                                 # held 4.5 s of the usual 7 ...
    assert slots.retry_after() == 6                      # ... and one client was turned away before:
    assert slots.retry_after() == 10                     # half a slot time (3.5 s) more per client
    clock[0] = now + 30                                  # those refusals are older than a slot time
    assert slots.retry_after() == 1                      # overdue: soon, but never 0
    slots.record(500.0)
    clock[0] = now + 31
    assert slots.retry_after(longest=60) == 60           # capped
    held.release()


def test_several_slots_share_the_waiting(tmp_path, monkeypatch):
    slots = InflightSlots(tmp_path, 2)
    held = [slots.try_acquire(), slots.try_acquire()]
    slots.record(8.0)
    now = max(_stored(h) for h in held)                  # the newer slot's taken time, as written
    monkeypatch.setattr(admission.time, "time", lambda: now + 2)
    # the first slot frees in about 6 s; each client turned away before adds half a slot time per slot
    assert [slots.retry_after() for _ in range(5)] == [6, 8, 10, 12, 14]
    for h in held:
        h.release()


def test_only_completed_requests_feed_the_average_and_every_worker_sees_it(tmp_path):
    slots = InflightSlots(tmp_path, 2)
    with pytest.raises(ValueError):
        with slots.try_acquire():
            raise ValueError("a bad upload: its quick 400 says nothing about render time")
    assert slots.mean_duration() is None
    with slots.try_acquire():
        pass
    other_worker = InflightSlots(tmp_path, 2)
    assert other_worker.mean_duration() is not None and other_worker.mean_duration() < 1.0
    # a free slot's file is empty, so only held slots' ages count
    assert all((tmp_path / f"slot-{i}").read_text() == "" for i in range(2))


def test_clip_seconds_is_the_clips_playing_time_so_the_longest_starts_first():
    """The pipeline submits motions longest clip first; the estimate (BVH header and frame range
    only) must agree with what the animator plays."""
    import animator
    from app.motions.library import clip_seconds, load_motions

    lib = load_motions()
    for name in ("dab", "jumping", "zombie", "jumping_jacks"):
        m = lib[name]
        full = animator.retarget(animator.load_character(REPO / "tests/fixtures/animated_drawings/examples/characters/char1"),
                                 animator.load_motion_config(m.motion_cfg), animator.load_retarget_config(m.retarget_cfg))
        assert m.seconds == clip_seconds(m.motion_cfg) == pytest.approx(full.n_frames * full.frame_time_s, rel=1e-6), name
    assert sorted(["dab", "jumping", "zombie"], key=lambda n: lib[n].seconds, reverse=True) == \
        ["zombie", "dab", "jumping"]


def test_background_work_gives_its_slot_to_a_request_and_stays_away_while_one_wants_it(tmp_path):
    from app.errors import Overloaded
    from app.render.admission import BACKGROUND

    slots = InflightSlots(tmp_path, 1)
    preview = slots.acquire(BACKGROUND)
    assert preview is not None
    preview.check()                                      # nobody wants the slot: carries on
    assert slots.expected_wait() == 0.0                  # a request would get it at once
    assert slots.acquire() is None                       # a request (no wait): refused, but it asked ...
    assert preview.asked_to_yield()
    with pytest.raises(Overloaded, match="retry in"):    # ... so the preview gives up (its renders stop)
        preview.check()
    preview.release()
    assert slots.try_acquire(BACKGROUND) is None         # the request still wants it: no new preview
    render = slots.try_acquire()
    assert render is not None and not render.asked_to_yield()
    render.check()                                       # a person's work is never asked to yield
    slots.want()
    assert not render.asked_to_yield()
    render.release(completed=True)
    assert slots.mean_duration() is not None


def test_background_time_does_not_feed_the_estimate(tmp_path):
    from app.render.admission import BACKGROUND

    slots = InflightSlots(tmp_path, 1)
    with slots.acquire(BACKGROUND):
        pass
    assert slots.mean_duration() is None


def test_a_request_waits_a_bounded_time_for_a_slot_one_per_slot(tmp_path):
    import threading
    import time as clock

    slots = InflightSlots(tmp_path, 1)
    slots.record(1.0)
    held = slots.try_acquire()
    threading.Timer(0.4, held.release).start()
    t0 = clock.monotonic()
    got = slots.acquire(wait_s=5.0)                      # the holder finishes in 0.4 s: waited for
    assert got is not None and 0.3 < clock.monotonic() - t0 < 2.0
    # the slot held and the waiting room taken: the next request is refused at once
    results = []
    waiter = threading.Thread(target=lambda: results.append(slots.acquire(wait_s=1.5)))
    waiter.start()
    deadline = clock.monotonic() + 2
    while slots.waiting() == 0 and clock.monotonic() < deadline:
        clock.sleep(0.01)
    assert slots.waiting() == 1
    t0 = clock.monotonic()
    assert slots.acquire(wait_s=5.0) is None
    assert clock.monotonic() - t0 < 0.2
    waiter.join()
    assert results == [None]                             # the slot never freed: it gave up after 1.5 s
    assert slots.waiting() == 0                          # and left the room
    got.release()


def test_no_wait_when_the_slot_is_not_expected_free_in_time(tmp_path):
    import time as clock

    slots = InflightSlots(tmp_path, 1)
    slots.record(30.0)                                   # renders hold a slot 30 s
    held = slots.try_acquire()
    t0 = clock.monotonic()
    assert slots.acquire(wait_s=10.0) is None            # 503 at once: waiting would be in vain
    assert clock.monotonic() - t0 < 0.2
    held.release()


def test_retry_after_counts_the_requests_waiting(tmp_path, monkeypatch):
    slots = InflightSlots(tmp_path, 1)
    held = slots.try_acquire()
    slots.record(8.0)
    now = _stored(held)
    monkeypatch.setattr(admission.time, "time", lambda: now + 2)
    (tmp_path / "wait-0").write_text("12345")            # a request in the waiting room (its pid)
    assert slots.retry_after() == 6 + 8                  # the holder's 6 s left, then the waiter's 8 s
    held.release()


def test_a_newcomer_does_not_pass_a_waiting_request(tmp_path):
    slots = InflightSlots(tmp_path, 1)
    (tmp_path / "wait-0").write_text("12345")            # a request in the waiting room (its pid)
    assert slots.acquire() is None                       # the slot is free, but it is the waiter's
    (tmp_path / "wait-0").write_text("")
    held = slots.acquire()
    assert held is not None
    held.release()


def test_nobody_waits_on_a_pod_that_turns_clients_away(tmp_path):
    """Overloaded (a client refused within a slot time): a waiting room would only add a slot time to
    every admitted request; requests are refused at once until the pod is merely busy again."""
    import os
    import time as clock

    slots = InflightSlots(tmp_path, 1)
    slots.record(3.0)
    held = slots.try_acquire()
    assert not slots.overloaded()
    slots.retry_after()                                  # a client turned away
    assert slots.overloaded()
    t0 = clock.monotonic()
    assert slots.acquire(wait_s=10.0) is None and clock.monotonic() - t0 < 0.2
    old = clock.time() - 4.0                             # that refusal is older than a slot time (3 s)
    os.utime(tmp_path / "refused", (old, old))
    assert not slots.overloaded()
    held.release()
