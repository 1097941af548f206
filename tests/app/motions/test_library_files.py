"""The motion library's files: the built-ins, an operator's library merged over them, and a bad one
named (app/motions/library.py)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.motions.library import BUILTIN_DIR, LibraryError, load_library, load_motions


def test_builtin_library_has_the_old_clients_motions_and_license() -> None:
    motions = load_motions()
    assert {"dab", "jumping", "zombie"} <= set(motions)
    assert (BUILTIN_DIR / "LICENSE").read_text().strip().startswith("MIT License")
    for m in motions.values():
        assert m.motion_cfg.is_file() and (m.retarget_cfg is None or m.retarget_cfg.is_file())
        assert m.retarget_cfg is not None or m.motion_cfg.suffix == ".bvh"  # 'auto' derives from a clip


def test_operator_library_merges_over_builtins(tmp_path: Path) -> None:
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "m.yaml").write_text("filepath: x.bvh\n")
    (tmp_path / "cfg" / "r.yaml").write_text("{}\n")
    (tmp_path / "library.yaml").write_text(
        "motions:\n  dab: {motion: cfg/m.yaml, retarget: cfg/r.yaml, description: my dab}\n"
        "  hop: {motion: cfg/m.yaml, retarget: cfg/r.yaml}\n")
    motions = load_motions(tmp_path)
    assert motions["dab"].description == "my dab" and motions["dab"].source == str(tmp_path)
    assert motions["hop"].motion_cfg == (tmp_path / "cfg" / "m.yaml").resolve()
    assert motions["zombie"].source == "builtin"


@pytest.mark.parametrize("text, fragment", [
    ("motions: [a]", "mapping under 'motions'"),
    ("motions:\n  x: {motion: nope.yaml, retarget: nope.yaml}", "not found"),
    ("motions:\n  '../x': {motion: a, retarget: b}", "motion name"),
    ("motions:\n  x: {motion: a}", "needs 'motion' and 'retarget'"),
    ("motions: [", "not valid YAML"),
])
def test_bad_library_is_named(tmp_path: Path, text: str, fragment: str) -> None:
    (tmp_path / "library.yaml").write_text(text)
    with pytest.raises(LibraryError, match=re.escape(fragment)):
        load_library(tmp_path, "ops")
    with pytest.raises(LibraryError, match="not found"):
        load_library(tmp_path / "missing", "ops")
