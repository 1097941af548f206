"""Our own code at a git ref, checked out into a temporary ``git worktree``, for same-run A/B benches."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def load_avg() -> str:
    """The 1, 5 and 15 minute load averages, as ``uptime`` prints them."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


class Baseline:
    """The repository at ``ref`` in a temporary worktree (detached HEAD); :meth:`close` removes it."""

    def __init__(self, ref: str) -> None:
        self.ref = ref
        self.dir = Path(tempfile.mkdtemp(prefix="dp-baseline-"))
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(self.dir), ref],
                       check=True)
        self.commit = subprocess.run(["git", "-C", str(self.dir), "rev-parse", "--short", "HEAD"], check=True,
                                     capture_output=True, text=True).stdout.strip()

    def close(self) -> None:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(self.dir)], check=False)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "Baseline":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
