"""The animator's command line as the tests run it: ``python -m animator`` in a fresh process, in
AnimatedDrawings' folder of examples (the fixtures), with the config files they name."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import AD_ROOT, REPO

CHAR = "examples/characters/char1"
DAB = "examples/config/motion/dab.yaml"
JJ = "examples/config/motion/jumping_jacks.yaml"
FAIR = "examples/config/retarget/fair1_ppf.yaml"
CMU = "examples/config/retarget/cmu1_pfp.yaml"


def run(*args, cwd: str | Path = AD_ROOT, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m animator ARGS`` in ``cwd`` with this checkout first on the path: its exit code,
    stdout and stderr."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "animator", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
