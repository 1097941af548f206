"""Each client's free refusals a second (app/clients/refusals.py): past them each refusal is held back,
the hold never over its bound, other clients untouched, and the table of clients bounded.
The hostile-neighbour test (tests/app/test_hostile_neighbours_e2e.py) plays it over gunicorn."""
from __future__ import annotations

from app.clients.refusals import RefusalPacer


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_is_free_then_refusals_are_held_at_the_rate():
    clock = Clock()
    pacer = RefusalPacer(per_s=5, max_hold_s=1.0, clock=clock)
    assert [pacer.hold_s("a") for _ in range(5)] == [0.0] * 5
    holds = [pacer.hold_s("a") for _ in range(3)]
    assert all(abs(h - e) < 1e-9 for h, e in zip(holds, [0.2, 0.4, 0.6], strict=True)), holds
    # a client that waits out its holds is refused at the rate, no faster and no slower
    clock.now += 0.6
    assert abs(pacer.hold_s("a") - 0.2) < 1e-9


def test_the_hold_is_bounded_however_fast_the_client_sends():
    clock = Clock()
    pacer = RefusalPacer(per_s=20, max_hold_s=1.0, clock=clock)
    holds = [pacer.hold_s("a") for _ in range(1000)]
    assert max(holds) == 1.0
    clock.now += 1.0  # one second later the debt is gone: bounded at one hold's worth
    assert pacer.hold_s("a") < 0.1


def test_another_client_is_not_held_and_off_means_off():
    clock = Clock()
    pacer = RefusalPacer(per_s=2, clock=clock)
    for _ in range(50):
        pacer.hold_s("hostile")
    assert pacer.hold_s("good") == 0.0
    assert RefusalPacer(per_s=0).hold_s("hostile") == 0.0


def test_the_table_of_clients_stays_bounded():
    clock = Clock()
    pacer = RefusalPacer(per_s=2, clock=clock, max_clients=100)
    for i in range(1000):
        pacer.hold_s(f"c{i}")
        pacer.hold_s(f"c{i}")
        pacer.hold_s(f"c{i}")
    assert len(pacer._buckets) <= 100
