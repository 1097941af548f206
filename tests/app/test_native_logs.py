"""The worker's log without the pose model's native noise (issue 43: ~150 MediaPipe/LiteRT lines per video
job). A real process: the filter is installed, then lines are written straight to file descriptor 2 as
the native libraries write them, beside Python's own log lines; what reaches the process's stderr is read."""
from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

SCRIPT = r"""
import logging, os, sys
from app.native_logs import drop_native_noise
drop_native_noise()
noise = (b"INFO: [environment.cc:36] Creating LiteRT environment with options\n"
         + b"WARNING: [model_load.cc:402] Sparsity tensors may not yet be fully supported.\n" * 38
         + b"WARNING: Logging before InitGoogle() is written to STDERR\n"
         + b"W0000 00:00:1795940213.946556    5498 inference_runner_litert.cc:1433] Input tensor memory is not aligned\n")
noise += b"INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n"
os.write(2, noise + b"E0000 00:00:1795940213.9 5498 calculator_graph.cc:928] a real native error\n")
logging.basicConfig(stream=sys.stderr, format="%(message)s")
logging.getLogger("doodlepod").warning("the worker's own line")
print("a traceback line", file=sys.stderr)
"""


def test_native_info_and_warning_lines_are_dropped_the_rest_kept():
    run = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, timeout=60)
    assert run.returncode == 0, run.stderr
    err = run.stderr.decode()
    assert "Sparsity" not in err and "LiteRT" not in err and "InitGoogle" not in err and "not aligned" not in err
    assert "a real native error" in err and "the worker's own line" in err and "a traceback line" in err
    assert len(err.strip().splitlines()) == 3, err
