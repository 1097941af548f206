"""How much memory a render process may use: the container's memory limit shared among the render
processes (see DOODLEPOD_RENDER_PROCESS_MEMORY_MB), enforced by :func:`app.render.process.init_process`."""
from __future__ import annotations

from pathlib import Path

#: MiB left to each gunicorn worker (or the render worker's own process) beside its render processes.
WORKER_RESERVE_MB = 384
#: The least a render process is given, whatever the container's size.
MIN_PROCESS_MB = 256


def container_memory_mb(proc_cgroup: str | Path = "/proc/self/cgroup", root: str | Path = "/sys/fs/cgroup",
                        meminfo: str | Path = "/proc/meminfo") -> float:
    """The memory limit of this process's cgroup (the smallest on its path up to the root; cgroup v2
    ``memory.max`` or v1 ``memory.limit_in_bytes``, what a Kubernetes memory limit sets), else the
    machine's memory, in MiB."""
    limits = []
    root = Path(root)
    try:
        lines = Path(proc_cgroup).read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        hid, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if hid == "0" and not controllers:
            base, name = root, "memory.max"
        elif "memory" in controllers.split(","):
            base, name = root / "memory", "memory.limit_in_bytes"
        else:
            continue
        parts = [p for p in path.strip().split("/") if p]
        for depth in range(len(parts), -1, -1):
            try:
                text = (base.joinpath(*parts[:depth]) / name).read_text().strip()
            except OSError:
                continue
            if text.isdigit():
                limits.append(int(text) / 2**20)
    total = _meminfo_mb(meminfo)
    limits = [mb for mb in limits if mb < total]  # v1 writes "no limit" as a huge number
    return min(limits) if limits else total


def _meminfo_mb(meminfo: str | Path) -> float:
    try:
        for line in Path(meminfo).read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return float("inf")


def render_process_memory_mb(configured_mb: float, processes: int, workers: int,
                             container_mb: float | None = None) -> float:
    """Each render process's limit: ``configured_mb`` when set, else the container's memory less
    :data:`WORKER_RESERVE_MB` per worker, shared among ``workers`` x ``processes`` render processes."""
    if configured_mb > 0:
        return configured_mb
    if container_mb is None:
        container_mb = container_memory_mb()
    if container_mb == float("inf"):
        return 0
    share = (container_mb - WORKER_RESERVE_MB * max(1, workers)) / max(1, processes * max(1, workers))
    return max(MIN_PROCESS_MB, share)
