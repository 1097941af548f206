"""Two checkouts share one venv and each still runs its own code (scripts/bootstrap.sh).

The shared venv (``$DOODLEPOD_CACHE/venv``) holds the third-party packages only; each checkout's
``.venv/`` reads it through a .pth file and holds that checkout's editable install, console scripts
and kernels. The test makes a second checkout (a copy of the committed files, with a marker in its
``animator/__init__.py``), prepares it with ``bootstrap.sh --app`` against this run's shared venv,
and checks that each checkout's ``python -m animator``, ``doodlepod-animate`` and ``gunicorn`` import
their own code, from any folder, and that the shared venv imports neither.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

CHECKOUT_VENV = REPO / ".venv"
WHERE = "import animator, os; print(os.path.realpath(animator.__file__))"


def _shared_python() -> Path:
    """The shared venv's Python: the one this checkout's venv reads through its .pth file."""
    pth = next(CHECKOUT_VENV.glob("lib/python3*/site-packages/zz_doodlepod_shared_venv.pth"))
    site = Path(pth.read_text().split("addsitedir(", 1)[1].split(")")[0].strip("'\""))
    return site.parents[2] / "bin" / "python"


@pytest.fixture(scope="module")
def second_checkout(tmp_path_factory) -> Path:
    if Path(sys.prefix).resolve() != CHECKOUT_VENV.resolve():
        pytest.skip("runs under the checkout's own venv (make test / .venv/bin/python -m pytest): "
                    f"this Python is {sys.prefix}")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    other = tmp_path_factory.mktemp("other") / "checkout"
    for name in filter(None, listed.decode().split("\0")):
        src = REPO / name
        if src.is_file() and not name.startswith(("tests/fixtures/", "docs/")):
            (other / name).parent.mkdir(parents=True, exist_ok=True)
            (other / name).write_bytes(src.read_bytes())
            (other / name).chmod(src.stat().st_mode)
    init = other / "animator" / "__init__.py"
    init.write_text(init.read_text() + "\nSECOND_CHECKOUT = True\n")
    shared = _shared_python()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["DOODLEPOD_VENV"] = str(shared.parents[1])
    result = subprocess.run(["scripts/bootstrap.sh", "--app"], cwd=other, env=env, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return other


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_each_checkout_imports_its_own_code_from_any_folder(second_checkout: Path, tmp_path: Path) -> None:
    for checkout in (REPO, second_checkout):
        bin_ = checkout / ".venv" / "bin"
        found = _run([str(bin_ / "python"), "-c", WHERE], cwd=tmp_path)
        assert found.returncode == 0, found.stderr
        assert Path(found.stdout.strip()) == (checkout / "animator" / "__init__.py").resolve(), found.stdout
        # the kernels are the checkout's own, compiled in place
        kernel = _run([str(bin_ / "python"), "-c", "import animator._raster as r; print(r.__file__)"], cwd=tmp_path)
        assert kernel.returncode == 0 and Path(kernel.stdout.strip()).parent == (checkout / "animator").resolve()
        for command in ([str(bin_ / "doodlepod-animate"), "--help"], [str(bin_ / "python"), "-m", "animator", "--help"]):
            result = _run(command, cwd=tmp_path)
            assert result.returncode == 0 and "--motion" in result.stdout, result.stderr
        # the shared venv's console scripts run the checkout's Python, so they see its code too
        assert (bin_ / "gunicorn").read_text().splitlines()[0] == f"#!{bin_}/python"
    marker = _run([str(second_checkout / ".venv/bin/python"), "-c", "import animator; print(animator.SECOND_CHECKOUT)"],
                  cwd=tmp_path)
    assert marker.stdout.strip() == "True", marker.stderr
    mine = _run([str(CHECKOUT_VENV / "bin/python"), "-c", "import animator; print(hasattr(animator, 'SECOND_CHECKOUT'))"],
                cwd=tmp_path)
    assert mine.stdout.strip() == "False", "preparing a second checkout changed what this one imports"


def test_the_shared_venv_holds_no_checkout(second_checkout: Path, tmp_path: Path) -> None:
    shared = _shared_python()
    found = _run([str(shared), "-c", WHERE], cwd=tmp_path)
    assert found.returncode != 0 and "No module named 'animator'" in found.stderr, found.stdout
    assert not (shared.parent / "doodlepod-animate").exists()
