"""Dockerfile.app: hadolint-clean, a non-root user, and gunicorn exec'd as the container's process."""
from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import REPO


def test_dockerfile_app_is_hadolint_clean_non_root_and_execs_gunicorn() -> None:
    import shutil
    import subprocess
    import sys

    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    text = (REPO / "Dockerfile.app").read_text()
    result = subprocess.run([hadolint, str(REPO / "Dockerfile.app")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^USER 10001", text, re.M)
    assert 'ENTRYPOINT ["gunicorn", "-c", "app/gunicorn_conf.py", "app:create_app()"]' in text
    assert "-r requirements/app.txt" in text
    for line in (REPO / "requirements" / "app.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-r"):
            assert "==" in line, f"unpinned requirement {line!r}"
