"""animator.files.write_atomic: readers see the old file or the whole new one, never a part."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from animator.files import PARTIAL_PREFIX, write_atomic


def test_replaces_the_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "out.gif"
    target.write_bytes(b"old")
    write_atomic(target, b"new contents", durable=True)
    assert target.read_bytes() == b"new contents"
    assert oct(target.stat().st_mode & 0o777) == oct(0o644)
    write_atomic(target, lambda fh: fh.write(b"streamed"), mode=0o600)
    assert target.read_bytes() == b"streamed" and target.stat().st_mode & 0o777 == 0o600
    assert os.listdir(tmp_path) == ["out.gif"]


def test_a_failed_write_leaves_the_old_file_and_no_partial(tmp_path: Path) -> None:
    target = tmp_path / "out.gif"
    target.write_bytes(b"old")

    def half_then_fail(fh) -> None:
        fh.write(b"ha")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left") as info:
        write_atomic(target, half_then_fail)
    assert info.value.filename == str(target)              # names the file asked for, not the temp file
    assert target.read_bytes() == b"old"
    assert not [p for p in os.listdir(tmp_path) if p.startswith(PARTIAL_PREFIX)]


def test_a_missing_folder_names_the_target(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as info:
        write_atomic(tmp_path / "nope" / "x.gif", b"data")
    assert info.value.filename == str(tmp_path / "nope" / "x.gif")
