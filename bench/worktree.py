"""Our own code at a git ref, checked out into a temporary ``git worktree``, for same-run A/B benches."""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import REPO


def compile_tree(root: Path) -> None:
    """Write the bytecode of ``root``'s packages, as the app image does at build time: a process
    started by a bench then loads them as a deployed one would, whichever tree it runs (this
    machine sets PYTHONDONTWRITEBYTECODE, so nothing would write it otherwise)."""
    packages = [str(root / p) for p in ("animator", "app", "handlers") if (root / p).is_dir()]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *packages], check=True, stdout=subprocess.DEVNULL)


def build_kernel(root: Path) -> None:
    """Compile the animator's kernels in place in ``root`` when its code has any (setup.py) and one
    is not built yet: a checkout of a ref has none (build outputs are not committed)."""
    unbuilt = [p for p in (root / "animator").glob("_*.pyx") if not list(p.parent.glob(f"{p.stem}.*.so"))]
    if (root / "setup.py").is_file() and unbuilt:
        subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=root, check=True,
                       stdout=subprocess.DEVNULL)


class Baseline:
    """The repository at ``ref`` in a temporary worktree (detached HEAD); :meth:`close` removes it."""

    def __init__(self, ref: str) -> None:
        self.ref = ref
        self.dir = Path(tempfile.mkdtemp(prefix="dp-baseline-"))
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(self.dir), ref],
                       check=True)
        self.commit = subprocess.run(["git", "-C", str(self.dir), "rev-parse", "--short", "HEAD"], check=True,
                                     capture_output=True, text=True).stdout.strip()
        build_kernel(self.dir)
        compile_tree(self.dir)

    def close(self) -> None:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(self.dir)], check=False)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "Baseline":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
