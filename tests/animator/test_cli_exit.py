"""The command leaves like any Python program: its exit code, and the interpreter's exit handlers run."""
import subprocess
import sys

from tests.conftest import AD_ROOT, REPO

PROGRAM = """
import atexit, sys
marker, output = sys.argv[1:3]
atexit.register(lambda: open(marker, "w").write("ran"))
sys.argv = ["animator", "examples/characters/nobody", "-m", "examples/bvh/fair1/dab.bvh", "-o", output]
from animator.cli.main import run
run()
"""


def test_exit_handlers_run_and_the_exit_code_is_mains(tmp_path):
    marker = tmp_path / "atexit"
    r = subprocess.run([sys.executable, "-c", PROGRAM, str(marker), str(tmp_path / "x.gif")], cwd=AD_ROOT,
                       env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1, r.stderr   # a missing character: exit 1, one line on stderr
    assert marker.read_text() == "ran"   # coverage, logging's flush and the like run at exit
