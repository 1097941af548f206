"""Writing files so that a reader never sees half of one.

:func:`write_atomic` writes a temporary file beside the target (named ``.partial-<random><suffix>``,
so listings can skip it) and renames it over the target, which POSIX makes atomic within one
filesystem: readers see the old file or the whole new one. The CLI, the app's local storage and
its render processes' result files all write this way.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable

#: Name prefix of the temporary files :func:`write_atomic` leaves in place until the rename.
PARTIAL_PREFIX = ".partial-"


def write_atomic(path: str | os.PathLike, data: bytes | Callable[[BinaryIO], object], *,
                 durable: bool = False, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` (bytes, or a function that writes to the open file) at once.

    ``durable``: fsync the data before the rename (survives a power cut, costs milliseconds).
    ``mode``: the file's permissions. On any failure the temporary file is removed and the target
    is left as it was; an :class:`OSError` names ``path``, not the temporary file.
    """
    target = Path(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(suffix=target.suffix, prefix=PARTIAL_PREFIX, dir=target.parent)
        with os.fdopen(fd, "wb") as fh:
            if callable(data):
                data(fh)
            else:
                fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename != str(target):
            raise OSError(exc.errno, exc.strerror, str(target)) from exc
        raise

