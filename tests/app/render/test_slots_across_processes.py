"""Render slots (app/render/admission.py) shared by processes, never waited for by try_acquire."""
from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

from app.render.admission import InflightSlots


def _hold_slot(folder: str, count: int, ready, done) -> None:
    slots = InflightSlots(folder, count)
    slot = slots.try_acquire()
    ready.put(slot is not None)
    done.get(timeout=30)
    os._exit(0)  # die holding the slot, without releasing it


def test_inflight_slots_are_shared_across_processes_and_never_wait(tmp_path: Path) -> None:
    slots = InflightSlots(tmp_path, 2)
    first = slots.try_acquire()
    assert first is not None
    ctx = multiprocessing.get_context("spawn")
    ready, done = ctx.Queue(), ctx.Queue()
    other = ctx.Process(target=_hold_slot, args=(str(tmp_path), 2, ready, done))
    other.start()
    try:
        assert ready.get(timeout=60) is True          # the other process got the second slot
        assert slots.try_acquire() is None            # both taken: refused at once
        first.release()
        again = slots.try_acquire()
        assert again is not None
        again.release()
    finally:
        done.put(True)
        other.join(30)
    assert other.exitcode == 0
    # the process died holding its slot: the kernel dropped its lock, so both slots are free again
    a, b = slots.try_acquire(), slots.try_acquire()
    assert a is not None and b is not None
