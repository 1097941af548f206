"""The project as a package: pyproject.toml against the pinned requirements, the installed CLI, and
the README's animator example run exactly as written from the folder it names.

``make venv`` (scripts/bootstrap.sh) installs this checkout in editable mode into its own venv
(``.venv/``, on top of the shared one), so ``python -m animator`` and ``doodlepod-animate`` work from
any folder with that venv active.
"""
from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from tests.conftest import REPO

README = REPO / "README.md"
VENV_BIN = Path(sys.executable).parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def _names_in_requirements(path: Path) -> set[str]:
    names = set()
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            names.add(_canonical(re.split(r"[=<>\[;]", line)[0]))
    return names


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower().strip()


def _names_in_pyproject(specs: list[str]) -> set[str]:
    return {_canonical(re.split(r"[=<>\[;]", s)[0]) for s in specs} - {"doodlepod"}


@pytest.mark.parametrize("extra, requirements", [(None, "animator.txt"), ("app", "app.txt"), ("pose", "pose.txt"),
                                                      ("test", "test.txt")])
def test_pyproject_names_the_pinned_packages(extra, requirements) -> None:
    project = PYPROJECT["project"]
    specs = project["dependencies"] if extra is None else project["optional-dependencies"][extra]
    assert _names_in_pyproject(specs) == _names_in_requirements(REPO / "requirements" / requirements), (
        f"pyproject.toml's {extra or 'dependencies'} and requirements/{requirements} list different packages")


def _activated_env() -> dict[str, str]:
    """The environment of a shell with the venv activated (no PYTHONPATH: the install must do)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(VENV_BIN.parent)
    return env


def _require_this_checkout_installed() -> None:
    found = subprocess.run(["python", "-c", "import animator; print(animator.__file__)"], cwd="/",
                           env=_activated_env(), capture_output=True, text=True, timeout=60)
    assert found.returncode == 0, ("the venv cannot import animator from outside the repo: `make venv` "
                                   f"installs the project in editable mode\n{found.stderr}")
    installed = Path(found.stdout.strip()).resolve().parents[1]
    if installed != REPO.resolve():
        message = (f"this Python imports another checkout's code ({installed}); run the tests with this "
                   "checkout's .venv/bin/python (`make venv` prepares it)")
        if os.environ.get("CI"):  # CI runs `make test`, whose `make venv` must have re-pointed it
            pytest.fail(message)
        pytest.skip(message)


def test_console_script_and_module_run_from_any_folder(tmp_path: Path) -> None:
    _require_this_checkout_installed()
    for command in (["doodlepod-animate", "--help"], ["python", "-m", "animator", "--help"]):
        result = subprocess.run(command, cwd=tmp_path, env=_activated_env(), capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 0, result.stderr
        assert "--motion" in result.stdout and "exit codes" in result.stdout


def readme_cli_example() -> str:
    """The README's block marked ``animator-cli-example``: shell lines, continuations kept."""
    text = README.read_text()
    m = re.search(r"<!-- animator-cli-example[^>]*-->\s*```sh\n(.*?)```", text, re.S)
    assert m, "README.md has no block marked <!-- animator-cli-example -->"
    return m.group(1)


def test_readme_cli_example_runs_as_written() -> None:
    from PIL import Image

    _require_this_checkout_installed()
    script = readme_cli_example()
    folder = re.match(r"cd (\S+)\n", script)
    assert folder, "the example starts in the folder it names"
    output = re.search(r"-o (\S+)", script)
    assert output, "the example names its output file"
    made = REPO / folder.group(1) / output.group(1)
    made.unlink(missing_ok=True)
    try:
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=REPO, env=_activated_env(),
                                 capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
        with Image.open(made) as im:
            size = re.search(r"--size (\d+)(?:x(\d+))?", script)
            assert im.format == "GIF" and im.n_frames > 10
            assert size is None or im.size == (int(size.group(1)), int(size.group(2) or size.group(1)))
    finally:
        made.unlink(missing_ok=True)


# --- the docs ------------------------------------------------------------------------------------

DOCS = sorted((REPO / "docs").glob("*.md"))


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.M)}


def test_readme_is_a_front_door_to_every_docs_page() -> None:
    text = README.read_text()
    assert len(text.encode()) < 10_000, "README.md is the front door: keep it under 10 KB, move detail to docs/"
    unlinked = [p.name for p in DOCS if f"](docs/{p.name})" not in text]
    assert not unlinked, f"README.md's docs table does not link {unlinked}"


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: p.name)
def test_relative_links_and_anchors_resolve(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(target)
    assert not broken, f"{page.name}: broken links {broken}"


# --- the compiled frame kernel ----------------------------------------------------------------------

def test_build_requirements_are_the_pinned_ones() -> None:
    requires = _names_in_pyproject(PYPROJECT["build-system"]["requires"])
    assert requires == _names_in_requirements(REPO / "requirements" / "build.txt"), (
        "pyproject.toml's [build-system] requires and requirements/build.txt list different packages")
    assert "-r build.txt" in (REPO / "requirements" / "test.txt").read_text(), (
        "the venv needs the build requirements: scripts/bootstrap.sh builds the kernel without isolation")


#: Drawn by the installed kernel: one point in a unit triangle mapped 10x onto (2, 2)-(12, 12).
KERNEL_CHECK = r"""
import sys, numpy as np, animator, animator._raster as r
k = r.FrameKernel(np.array([[0.25], [0.25]], np.float32), np.array([3], np.uint8), [0], [1], [[0, 1, 2]],
                  np.eye(2)[None], 10.0, [[0, 1]], [0, 1], [(0.0, 0.0)], 3)
out = np.empty((16, 16), np.uint8)
k.draw(out, np.array([[2, 2], [12, 2], [2, 12]], np.float32), np.array([0], np.int32), np.zeros(1, np.uint8), 9)
print(animator.__file__, r.__file__, int((out == 3).sum()), int(out[4, 4]))
"""


def test_pip_install_from_a_clean_copy_builds_the_kernel(tmp_path: Path) -> None:
    """`pip install .` of the committed files alone (no compiled module lying around) compiles every
    kernel into the installed package, whose frame kernel imports and draws from outside the repo."""
    listed = subprocess.run(["git", "ls-files", "-z", "pyproject.toml", "setup.py", "README.md", "animator",
                             "app", "handlers"], cwd=REPO, capture_output=True, check=True).stdout
    src = tmp_path / "src"
    for name in filter(None, listed.decode().split("\0")):
        if (REPO / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    kernels = sorted(p.stem for p in (src / "animator").glob("_*.pyx"))
    assert "_raster" in kernels and not list((src / "animator").glob("_*.so"))
    site = tmp_path / "site"
    env = _activated_env()
    # no build isolation: the venv holds the pinned build requirements (requirements/build.txt)
    result = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                             "--target", str(site), str(src)], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    # the app's files that are no Python: its pages' templates, the OpenAPI document, the Lua scripts
    for data in ("templates/base.html", "templates/studio.html", "http/openapi.yaml", "jobs/lua/submit.lua",
                 "clients/token_bucket.lua", "static/studio/studio.css"):
        assert (site / "app" / data).is_file(), data
    built = list((site / "animator").glob("_raster*.so"))
    assert sorted(p.name.split(".")[0] for p in (site / "animator").glob("_*.so")) == kernels, (
        sorted(p.name for p in (site / "animator").iterdir()))
    check = subprocess.run([sys.executable, "-c", KERNEL_CHECK], cwd=tmp_path, env=dict(env, PYTHONPATH=str(site)),
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stderr
    package, module, drawn, centre = check.stdout.split()
    assert Path(package).is_relative_to(site) and Path(module) == built[0]
    assert int(drawn) == 1 and int(centre) == 3   # the point lands at 2 + 10 * 0.25 = 4.5 -> pixel (4, 4)


def test_app_image_compiles_the_kernel_in_a_build_stage() -> None:
    """Docker cannot build here: Dockerfile.app read as text. A build stage with the compiler runs
    setup.py's build_ext; the runtime (last) stage copies the built module and installs no compiler."""
    text = re.sub(r"\\\n", " ", (REPO / "Dockerfile.app").read_text())
    stages = re.split(r"^FROM\s+", text, flags=re.M)[1:]
    assert len(stages) >= 2, "Dockerfile.app needs a build stage for the kernel"
    build_name = re.match(r"\S+\s+AS\s+(\S+)", stages[0], re.I)
    assert build_name and "gcc" in stages[0] and "setup.py build_ext --inplace" in stages[0]
    assert "-r requirements/build.txt" in stages[0]
    copied = re.findall(r"^COPY\s+(.+?)\s+animator/\s*$", stages[0], re.M)
    for kernel in (REPO / "animator").glob("_*.pyx"):  # every kernel's source reaches the build
        assert any(fnmatch.fnmatch(f"animator/{kernel.name}", pattern) for c in copied for pattern in c.split()), (
            f"the build stage does not copy {kernel.name}")
    runtime = stages[-1]
    assert re.search(rf"^COPY --from={build_name.group(1)} \S+\.so animator/", runtime, re.M)
    assert not re.search(r"\b(gcc|g\+\+|build-essential|cython)\b", runtime, re.I), "a compiler in the runtime image"
