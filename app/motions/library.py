"""The motion library: which motions exist and where their motion and retarget configs are.

A library is a folder with a ``library.yaml``::

    categories: [dance, funny, jumping, walking]   # optional: the order categories are listed in
    motions:
      dab:                                   # the name clients ask for
        motion: loops/dab.yaml               # AnimatedDrawings motion config, or a .bvh clip
        retarget: examples/config/retarget/fair1_ppf.yaml  # retarget config, or 'auto' (derived)
        title: Dab                           # optional, for people (default: the name)
        category: dance                      # optional (default: other)
        description: A dab.                  # optional; these and the rest are shown by GET /motions
        source: AnimatedDrawings example clip
        licence: MIT (LICENSE)
        cmu_trial: ''                        # the CMU database trial, for CMU clips
        travels: false                       # the character ends far from where it started
        loop_gap_pct: 0.31                   # pose jump last -> first frame, % of char1's height

Paths are relative to the folder holding ``library.yaml``. The built-in library is ``motions/`` at the
repository root; an operator's folder (``DOODLEPOD_MOTIONS_DIR``) is merged over it, entry by entry.
Motions are listed by category (the libraries' category order, new categories after) and within a
category in library order. Only file existence is checked here; the configs are parsed by
:mod:`animator` in the render processes (a .bvh clip with ``retarget: auto`` gets both configs derived).
"""
from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from ..errors import UnknownMotion

BUILTIN_DIR = Path(__file__).resolve().parents[2] / "motions"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
#: Category of an entry that names none.
OTHER = "other"


class LibraryError(ValueError):
    """A library.yaml is missing, malformed or names files that do not exist."""


@dataclass(frozen=True)
class Motion:
    name: str
    motion_cfg: Path  # an AnimatedDrawings motion config, or a .bvh clip (its motion config derived)
    retarget_cfg: Path | None  # None: derived from the clip's skeleton ('retarget: auto')
    description: str
    source: str  # "builtin" or the operator folder
    seconds: float = 0.0  # playing time of the clip (see clip_seconds), read once when the library loads
    title: str = ""
    category: str = OTHER
    origin: str = ""  # where the clip comes from (the entry's 'source')
    licence: str = ""
    cmu_trial: str = ""
    travels: bool = False
    loop_gap_pct: float | None = None
    sha256: str = ""  # of the files it plays (see clip_digest): render caches key on it, so a changed clip renders anew
    clip: tuple[int, float] | None = None  # (frames in its range, seconds per frame): a render's frame count

    def as_json(self) -> dict:
        return {"name": self.name, "title": self.title or self.name.replace("_", " ").title(),
                "category": self.category, "description": self.description, "seconds": round(self.seconds, 2),
                "travels": self.travels, "loop_gap_pct": self.loop_gap_pct, "origin": self.origin,
                "licence": self.licence, "cmu_trial": self.cmu_trial or None, "source": self.source,
                "motion_config": self.motion_cfg.name,
                "retarget_config": "auto" if self.retarget_cfg is None else self.retarget_cfg.name}


@dataclass(frozen=True)
class UploadedMotion:
    """A client's clip (uploaded with a request, or one of its own motions made from a video), checked,
    shaped like a library :class:`Motion` for the pipeline.

    ``motion_cfg`` is the .bvh file itself, already cut to the chosen frames (the render process
    derives both configs from it); ``retarget_cfg`` is None (derived). ``sha256`` identifies the
    cut clip (render caches key on it).
    """

    name: str
    motion_cfg: Path
    frames: int
    joints: int
    frame_time_s: float
    family: str
    sha256: str
    retarget_cfg: None = None

    def remove(self) -> None:
        try:
            os.unlink(self.motion_cfg)
        except FileNotFoundError:
            pass


def _read_index(folder: Path) -> tuple[Path, dict]:
    index = folder / "library.yaml"
    try:
        doc = yaml.safe_load(index.read_text())
    except FileNotFoundError:
        raise LibraryError(f"{index}: not found (a motion folder needs a library.yaml)") from None
    except yaml.YAMLError as exc:
        raise LibraryError(f"{index}: not valid YAML: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("motions"), dict):
        raise LibraryError(f"{index}: expected a mapping under 'motions'")
    return index, doc


def load_categories(folder: str | Path) -> list[str]:
    """The category order ``folder/library.yaml`` declares (``categories:``), empty when it declares none."""
    index, doc = _read_index(Path(folder))
    cats = doc.get("categories") or []
    if not isinstance(cats, list) or not all(isinstance(c, str) and _NAME.match(c) for c in cats):
        raise LibraryError(f"{index}: 'categories' must be a list of names (letters, digits, '_', '-', '.')")
    return list(cats)


def load_library(folder: str | Path, source: str) -> dict[str, Motion]:
    """Read ``folder/library.yaml`` (entries in file order); raises :class:`LibraryError` naming the bad entry."""
    folder = Path(folder)
    index, doc = _read_index(folder)
    out: dict[str, Motion] = {}
    for name, entry in doc["motions"].items():
        name = str(name)
        if not _NAME.match(name):
            raise LibraryError(f"{index}: motion name {name!r} must be letters, digits, '_', '-', '.'")
        if not isinstance(entry, dict) or "motion" not in entry or "retarget" not in entry:
            raise LibraryError(f"{index}: motion {name!r} needs 'motion' and 'retarget' config paths")
        paths: list[Path | None] = []
        for field in ("motion", "retarget"):
            if field == "retarget" and entry[field] == "auto":
                if paths[0].suffix.lower() != ".bvh":  # type: ignore[union-attr]
                    raise LibraryError(f"{index}: motion {name!r}: 'retarget: auto' needs a .bvh clip as 'motion'")
                paths.append(None)
                continue
            path = (folder / str(entry[field])).resolve()
            if not path.is_file():
                raise LibraryError(f"{index}: motion {name!r}: {field} config {entry[field]} not found")
            paths.append(path)
        category = str(entry.get("category") or OTHER)
        if not _NAME.match(category):
            raise LibraryError(f"{index}: motion {name!r}: category {category!r} must be a name")
        gap = entry.get("loop_gap_pct")
        out[name] = Motion(name, paths[0], paths[1], str(entry.get("description", "")), source,  # type: ignore[arg-type]
                           clip_seconds(paths[0]), title=str(entry.get("title") or ""), category=category,
                           origin=str(entry.get("source") or ""), licence=str(entry.get("licence") or ""),
                           cmu_trial=str(entry.get("cmu_trial") or ""), travels=bool(entry.get("travels", False)),
                           loop_gap_pct=None if gap is None else float(gap), sha256=clip_digest(paths[0], paths[1]),
                           clip=clip_frames(paths[0]))
    return out


def load_motions(extra_dir: str | Path | None = None) -> dict[str, Motion]:
    """The built-in library with ``extra_dir``'s entries merged over it, grouped by category (see
    :func:`categories`), each category in library order (the built-ins first)."""
    motions = load_library(BUILTIN_DIR, "builtin")
    if extra_dir:
        motions.update(load_library(extra_dir, str(extra_dir)))
    order = category_order(extra_dir, motions.values())
    return dict(sorted(motions.items(), key=lambda kv: order.index(kv[1].category)))


def category_order(extra_dir: str | Path | None, motions) -> list[str]:
    """Categories in listing order: the built-in library's, then the operator's new ones, then any
    other a motion names (in the order motions name them)."""
    order = load_categories(BUILTIN_DIR)
    extra = load_categories(extra_dir) if extra_dir else []
    for c in [*extra, *(m.category for m in motions)]:
        if c not in order:
            order.append(c)
    return order


def categories(motions: dict[str, Motion]) -> list[dict]:
    """``[{"name": category, "motions": [names]}]`` in the order of ``motions`` (see :func:`load_motions`)."""
    out: dict[str, list[str]] = {}
    for m in motions.values():
        out.setdefault(m.category, []).append(m.name)
    return [{"name": c, "motions": names} for c, names in out.items()]


def motion_files(motion_cfg: Path, retarget_cfg: Path | None) -> list[Path]:
    """Every file a motion plays: its motion config (and the clip a config names), its retarget config."""
    files = [motion_cfg]
    if motion_cfg.suffix.lower() != ".bvh":
        from animator.config import load_motion_config

        try:
            files.append(Path(load_motion_config(motion_cfg).bvh_path))
        except Exception:  # noqa: BLE001 - the render process reports a bad config; the digest then covers the config
            pass
    return files + ([retarget_cfg] if retarget_cfg is not None else [])


def clip_digest(motion_cfg: Path, retarget_cfg: Path | None) -> str:
    """sha256 (hex) of the files a motion plays (:func:`motion_files`) and whether its retarget config
    is derived: a changed clip, cut or config gives another digest."""
    digest = hashlib.sha256(b"auto" if retarget_cfg is None else b"")
    for path in motion_files(motion_cfg, retarget_cfg):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def clip_seconds(motion_cfg: str | Path) -> float:
    """Playing time in seconds of the clip a motion config (or a .bvh clip) plays (its BVH header and
    frame range), 0.0 when it cannot be read here (the render process reports the real error).
    Renders take about as long as their clips, so the pipeline starts the longest first."""
    clip = clip_frames(motion_cfg)
    return clip[0] * clip[1] if clip else 0.0


def clip_frames(motion_cfg: str | Path) -> tuple[int, float] | None:
    """(source frames in the config's range, seconds per frame) of the clip a motion config (or a .bvh
    clip) plays, from its BVH header: what the render's frame count follows from (a job's progress
    total is known before the render starts). None when it cannot be read here."""
    try:
        return _clip_frames(str(motion_cfg), os.stat(motion_cfg).st_mtime)
    except Exception:  # noqa: BLE001 - an estimate; the render names any problem
        return None


@lru_cache(maxsize=256)
def _clip_frames(motion_cfg: str, _mtime: float) -> tuple[int, float] | None:
    from animator.config import load_motion_config

    cfg = None if motion_cfg.lower().endswith(".bvh") else load_motion_config(motion_cfg)
    frames = frame_time = None
    with open(motion_cfg if cfg is None else cfg.bvh_path, encoding="utf-8", errors="replace") as fh:
        for line in fh:  # the header only: 'Frames:' and 'Frame Time:' follow the hierarchy
            key, _, value = line.strip().partition(":")
            if key == "Frames":
                frames = int(value)
            elif key == "Frame Time":
                frame_time = float(value)
                break
    if not frames or not frame_time:
        return None
    if cfg is None:
        return frames, frame_time
    start, end = cfg.frame_range(frames)
    return end - start, cfg.frame_time or frame_time


def pick(library: Mapping[str, Motion], names: Iterable[str], own: Mapping[str, Any] | None = None) -> list[Any]:
    """The motions ``names`` name, each once, in the order asked: the library's, else ``own``'s (a client's
    own motions, looked up by the caller). 400 ``unknown_motion`` naming the others: the one place a
    request's or a job's motion names are checked."""
    own = own or {}
    names = list(dict.fromkeys(names))
    unknown = [n for n in names if n not in library and n not in own]
    if unknown:
        shown = ", ".join(repr(n[:40]) for n in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
        raise UnknownMotion(f"unknown motion(s): {shown}; GET /motions lists the {len(library)} available")
    return [library[n] if n in library else own[n] for n in names]


def resolve(library: Mapping[str, Motion], names: Sequence[str], defaults: Sequence[str] = (),
            own: Callable[[list[str]], dict[str, Any]] | None = None) -> list[Any]:
    """The motions a request names (:func:`pick`), ``defaults`` when it names none; ``own(names)``: the
    asking client's own motions among the names the library lacks (copied for the request: the caller
    removes them when it ends; removed here when another name is unknown)."""
    names = list(names) or list(defaults)
    unknown = [n for n in names if n not in library]
    found = own(unknown) if own is not None and unknown else {}
    try:
        return pick(library, names, found)
    except UnknownMotion:
        for motion in found.values():
            motion.remove()
        raise
