"""A memory cgroup of a pod container's size for a test's processes, so that what the pod's memory
limit does to them (the OOM killer) happens here too. Needs root and a writable cgroup hierarchy
(cgroup v2 with the memory controller, or v1's memory hierarchy); the test is skipped, saying why,
elsewhere."""
from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path("/sys/fs/cgroup")


def _own(hierarchy: str) -> str | None:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hid, controllers, path = line.split(":", 2)
        if hierarchy == "v2" and hid == "0" and not controllers:
            return path
        if hierarchy == "v1" and "memory" in controllers.split(","):
            return path
    return None


def _parent() -> tuple[Path, str, str] | None:
    """(parent folder, limit file, oom counter) of a memory cgroup this process may make."""
    if (ROOT / "cgroup.controllers").exists() and "memory" in (ROOT / "cgroup.controllers").read_text().split():
        own = _own("v2")
        if own is not None:
            # a v2 cgroup with processes may not have children with controllers: make a sibling
            # under its parent, whose subtree_control offers memory
            base = ROOT / own.strip("/")
            parent = base.parent if (base / "cgroup.procs").read_text().strip() else base
            if "memory" in (parent / "cgroup.subtree_control").read_text().split():
                return parent, "memory.max", "memory.events"
    v1 = ROOT / "memory"
    own = _own("v1")
    if (v1 / "memory.limit_in_bytes").exists() and own is not None:
        return v1 / own.strip("/"), "memory.limit_in_bytes", "memory.failcnt"
    return None


@contextlib.contextmanager
def memory_cgroup(limit_mb: int) -> Iterator[Path]:
    """A fresh memory cgroup limited to ``limit_mb``; yields its ``cgroup.procs`` (write a pid to it,
    e.g. from ``preexec_fn``, and its children are in it too). Removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("a memory cgroup needs root (CI runs as root)")
    found = _parent()
    if found is None:
        pytest.skip("no writable memory cgroup hierarchy here (cgroup v2 memory controller or v1 memory)")
    parent, limit_file, _ = found
    path = parent / f"doodlepod-test-{os.getpid()}-{time.monotonic_ns()}"
    try:
        path.mkdir()
        (path / limit_file).write_text(str(limit_mb * 2**20))
    except OSError as exc:
        pytest.skip(f"cannot make a memory cgroup under {parent}: {exc}")
    try:
        yield path / "cgroup.procs"
    finally:
        for _ in range(50):  # its processes may take a moment to be reaped
            try:
                path.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def peak_mb(procs: Path) -> float:
    """The most memory the cgroup of ``procs`` has used, in MiB (v2 ``memory.peak``, v1
    ``memory.max_usage_in_bytes``)."""
    for name in ("memory.peak", "memory.max_usage_in_bytes"):
        if (procs.parent / name).exists():
            return int((procs.parent / name).read_text().split()[0]) / 2**20
    pytest.skip("this kernel's memory cgroup keeps no peak")


def join(procs: Path) -> None:
    """In a child (``preexec_fn``): move this process into the cgroup whose ``cgroup.procs`` is given."""
    with open(procs, "w") as fh:
        fh.write(str(os.getpid()))
