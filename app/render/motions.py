"""The motion library: which motions exist and where their motion and retarget configs are.

A library is a folder with a ``library.yaml``::

    motions:
      dab:                                   # the name clients ask for
        motion: examples/config/motion/dab.yaml          # AnimatedDrawings motion config
        retarget: examples/config/retarget/fair1_ppf.yaml # AnimatedDrawings retarget config
        description: A dab.                  # optional, shown by GET /motions

Paths are relative to the folder holding ``library.yaml``. The built-in library is ``motions/`` at the
repository root; an operator's folder (``DOODLEPOD_MOTIONS_DIR``) is merged over it, entry by entry.
Only file existence is checked here; the configs are parsed by :mod:`animator` in the render processes.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

BUILTIN_DIR = Path(__file__).resolve().parents[2] / "motions"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class LibraryError(ValueError):
    """A library.yaml is missing, malformed or names files that do not exist."""


@dataclass(frozen=True)
class Motion:
    name: str
    motion_cfg: Path
    retarget_cfg: Path
    description: str
    source: str  # "builtin" or the operator folder
    seconds: float = 0.0  # playing time of the clip (see clip_seconds), read once when the library loads

    def as_json(self) -> dict:
        return {"name": self.name, "description": self.description, "source": self.source,
                "motion_config": self.motion_cfg.name, "retarget_config": self.retarget_cfg.name}


def load_library(folder: str | Path, source: str) -> dict[str, Motion]:
    """Read ``folder/library.yaml``; raises :class:`LibraryError` naming the bad entry."""
    folder = Path(folder)
    index = folder / "library.yaml"
    try:
        doc = yaml.safe_load(index.read_text())
    except FileNotFoundError:
        raise LibraryError(f"{index}: not found (a motion folder needs a library.yaml)") from None
    except yaml.YAMLError as exc:
        raise LibraryError(f"{index}: not valid YAML: {exc}") from None
    entries = (doc or {}).get("motions") if isinstance(doc, dict) else None
    if not isinstance(entries, dict):
        raise LibraryError(f"{index}: expected a mapping under 'motions'")
    out: dict[str, Motion] = {}
    for name, entry in entries.items():
        name = str(name)
        if not _NAME.match(name):
            raise LibraryError(f"{index}: motion name {name!r} must be letters, digits, '_', '-', '.'")
        if not isinstance(entry, dict) or "motion" not in entry or "retarget" not in entry:
            raise LibraryError(f"{index}: motion {name!r} needs 'motion' and 'retarget' config paths")
        paths = []
        for field in ("motion", "retarget"):
            path = (folder / str(entry[field])).resolve()
            if not path.is_file():
                raise LibraryError(f"{index}: motion {name!r}: {field} config {entry[field]} not found")
            paths.append(path)
        out[name] = Motion(name, paths[0], paths[1], str(entry.get("description", "")), source,
                           clip_seconds(paths[0]))
    return out


def load_motions(extra_dir: str | Path | None = None) -> dict[str, Motion]:
    """The built-in library with ``extra_dir``'s entries merged over it, sorted by name."""
    motions = load_library(BUILTIN_DIR, "builtin")
    if extra_dir:
        motions.update(load_library(extra_dir, str(extra_dir)))
    return dict(sorted(motions.items()))


def clip_seconds(motion_cfg: str | Path) -> float:
    """Playing time in seconds of the clip a motion config plays (its BVH header and frame range),
    0.0 when it cannot be read here (the render process reports the real error). Renders take about
    as long as their clips, so the pipeline starts the longest first."""
    try:
        return _clip_seconds(str(motion_cfg), os.stat(motion_cfg).st_mtime)
    except Exception:  # noqa: BLE001 - an estimate; the render names any problem
        return 0.0


@lru_cache(maxsize=256)
def _clip_seconds(motion_cfg: str, _mtime: float) -> float:
    from animator.config import load_motion_config

    cfg = load_motion_config(motion_cfg)
    frames = frame_time = None
    with open(cfg.bvh_path, encoding="utf-8", errors="replace") as fh:
        for line in fh:  # the header only: 'Frames:' and 'Frame Time:' follow the hierarchy
            key, _, value = line.strip().partition(":")
            if key == "Frames":
                frames = int(value)
            elif key == "Frame Time":
                frame_time = float(value)
                break
    if not frames or not frame_time:
        return 0.0
    start, end = cfg.frame_range(frames)
    return (end - start) * (cfg.frame_time or frame_time)
