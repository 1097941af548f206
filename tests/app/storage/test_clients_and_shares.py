"""Who a client is (app/clients.py) and the storage share's meter (app/shares.py), in process."""
from __future__ import annotations

from app.clients import client_id, fold_address
from app.shares import LocalStorageLedger, metering, stored, unmetered


def test_ipv6_clients_are_their_56_and_mapped_ipv4_is_ipv4():
    """Issue 41 S7: a home gets a /56, so a /64 per client gave each home 256 clients."""
    assert fold_address("2001:db8:1:2:aaaa:bbbb:cccc:dddd") == "2001:db8:1::/56"
    assert fold_address("2001:db8:1:2::1") == fold_address("2001:db8:1:ff:ffff::9")   # one home's 256 /64s
    assert fold_address("2001:db8:1:100::1") != fold_address("2001:db8:1:2::1")       # the next /56
    assert fold_address("2001:db8:1:2::1", 64) == "2001:db8:1:2::/64"                  # configurable
    assert fold_address("2001:db8:1:2::1", 64) != fold_address("2001:db8:1:3::1", 64)
    assert fold_address("::ffff:203.0.113.7") == "203.0.113.7" == fold_address("203.0.113.7")
    assert fold_address("fe80::1%eth0") == "fe80::/56"
    assert fold_address("not-an-address") == "not-an-address"
    assert client_id("", "::ffff:10.0.0.1") == client_id("", "10.0.0.1") == "a-10.0.0.1"
    assert client_id("tok", "2001:db8::1") == client_id("tok", "2001:db8:0:ff::2") != client_id("", "2001:db8::1")
    assert client_id("", "2001:db8::1", 128) != client_id("", "2001:db8::2", 128)


def test_the_meter_counts_what_is_stored_inside_it_only():
    stored(100)                                            # no meter: nothing to count
    with metering() as meter:
        stored(100)
        with unmetered():
            stored(5000)                                   # a queued video: another share
        stored(20)
    assert meter.bytes == 120


def test_the_local_ledger_counts_per_client_in_memory():
    now = [7200.0]
    ledger = LocalStorageLedger(window_s=3600, clock=lambda: now[0])
    ledger.charge("a", 10)
    ledger.charge("b", 5)
    assert ledger.usage("a")[0] == 10 and ledger.usage("b")[0] == 5
    now[0] += 3600
    assert ledger.usage("a")[0] == 0


def test_render_slots_say_whose_they_are_across_processes(tmp_path):
    from app.render.admission import InflightSlots

    slots = InflightSlots(tmp_path / "slots", 3)
    a = slots.acquire(owner="client-a")
    other_process_view = InflightSlots(tmp_path / "slots", 3)     # the files are the truth
    assert other_process_view.held_by("client-a") == 1 and other_process_view.held_by("client-b") == 0
    b = slots.acquire(owner="client-a")
    assert slots.held_by("client-a") == 2 and slots.held_by("") == 0
    a.release()
    b.release()
    assert slots.held_by("client-a") == 0


def test_a_client_holding_no_slot_may_wait_on_a_pod_that_turned_others_away(tmp_path):
    import threading
    import time

    from app.render.admission import InflightSlots

    slots = InflightSlots(tmp_path / "slots", 1)
    held = slots.acquire(owner="hostile")
    slots.retry_after()                                    # the pod turned someone away just now
    assert slots.overloaded()
    assert slots.acquire(wait_s=2.0, owner="good") is None  # the default: under overload nobody waits
    threading.Timer(0.3, held.release).start()
    t0 = time.monotonic()
    got = slots.acquire(wait_s=2.0, owner="good", share=1)
    assert got is not None and 0.2 < time.monotonic() - t0 < 2.0 and slots.held_by("good") == 1
    got.release()


def _wait_for(predicate, timeout=5.0):
    import time

    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


def test_the_room_lets_a_client_rendering_nothing_go_before_one_rendering_already(tmp_path):
    """A freed slot goes to the waiting client holding fewest slots, then to the one waiting longest:
    not to the one that polls fastest, nor to a client that came first but is rendering already."""
    import threading

    from app.render.admission import InflightSlots

    slots = InflightSlots(tmp_path / "slots", 2)
    slots.record(0.5)
    busy = slots.acquire(owner="busy")                       # a client rendering already
    other = slots.acquire(owner="someone")
    got: dict[str, object] = {}
    busy_again = threading.Thread(target=lambda: got.setdefault("busy", slots.acquire(wait_s=5.0, owner="busy")))
    busy_again.start()
    _wait_for(lambda: slots.waiting() == 1)                  # the busy client's second request came first
    idle = threading.Thread(target=lambda: got.setdefault("idle", slots.acquire(wait_s=5.0, owner="idle")))
    idle.start()
    _wait_for(lambda: slots.waiting() == 2)
    other.release()
    _wait_for(lambda: slots.held_by("idle") + slots.held_by("busy") == 2)
    assert slots.held_by("idle") == 1 and slots.held_by("busy") == 1 and slots.waiting() == 1
    idle.join()
    got["idle"].release()
    busy_again.join()
    assert got["busy"] is not None                           # then the busy one, within its wait
    got["busy"].release()
    busy.release()


def test_a_clients_waiting_request_counts_in_its_render_share(tmp_path):
    """With a share of one slot, a client whose first request waits in the room cannot send a second
    one into it too (each hostile thread would take a place, and a good client would find none)."""
    import threading

    from app.render.admission import InflightSlots

    slots = InflightSlots(tmp_path / "slots", 1, shares=True)
    assert slots.waiters == InflightSlots.SHARED_ROOM_PER_SLOT
    slots.record(0.5)                                        # renders take half a second
    held = slots.acquire(owner="someone")
    first = threading.Thread(target=lambda: slots.acquire(wait_s=1.0, owner="bad", share=1))
    first.start()
    _wait_for(lambda: slots.waiting() == 1)
    assert slots.claims("bad") == 1 and slots.claims("good") == 0
    assert slots.acquire(wait_s=1.0, owner="bad", share=1) is None   # at once: its share is used
    assert slots.waiting() == 1
    first.join()
    held.release()
