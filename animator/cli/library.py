"""The motion library for the command line: ``--motion dab`` names a motion as ``GET /motions`` does.

The library is a folder with a ``library.yaml`` (its format: app/motions/library.py, which serves it):
the built-in one is ``motions/`` beside this package in a checkout or an image, and an operator's
folder (``DOODLEPOD_MOTIONS_DIR``) is merged over it, entry by entry, as the server does. Only what
the command needs is read here: each name's motion config (or .bvh clip), its retarget config (None
for ``auto``: derived from the clip), its title, category and description.
"""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..errors import AnimatorError

#: The built-in library: motions/ at the repository root (beside the animator package).
BUILTIN = Path(__file__).resolve().parents[2] / "motions"


class UnknownMotion(AnimatorError):
    """``--motion`` is neither a file nor a motion of the library."""


@dataclass(frozen=True)
class LibraryMotion:
    name: str
    motion: Path
    retarget: Path | None  # None: 'auto', derived from the clip's skeleton
    title: str
    category: str
    description: str


def folders() -> list[Path]:
    """The library folders, the built-in one first (later ones win on the same name)."""
    out = [BUILTIN] if (BUILTIN / "library.yaml").is_file() else []
    extra = os.environ.get("DOODLEPOD_MOTIONS_DIR", "").strip()
    if extra and (Path(extra) / "library.yaml").is_file():
        out.append(Path(extra))
    return out


def load() -> dict[str, LibraryMotion]:
    """Every motion of the library folders, in library order."""
    motions: dict[str, LibraryMotion] = {}
    for folder in folders():
        index = folder / "library.yaml"
        try:
            doc = yaml.safe_load(index.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise AnimatorError(f"{index}: cannot read the motion library: {exc}") from None
        for name, entry in (doc.get("motions") or {}).items():
            if not isinstance(entry, dict) or "motion" not in entry:
                continue
            retarget = entry.get("retarget", "auto")
            motions[str(name)] = LibraryMotion(
                str(name), (folder / str(entry["motion"])).resolve(),
                None if retarget in (None, "auto") else (folder / str(retarget)).resolve(),
                str(entry.get("title") or str(name).replace("_", " ").title()), str(entry.get("category") or "other"),
                str(entry.get("description") or ""))
    return motions


def looks_like_a_name(text: str) -> bool:
    """A library name rather than a path: no folder part and no config or clip extension."""
    return bool(text) and os.sep not in text and "/" not in text \
        and not text.lower().endswith((".yaml", ".yml", ".bvh"))


def resolve(text: str) -> LibraryMotion:
    """The library motion ``text`` names; :class:`UnknownMotion` (with the nearest names) if none."""
    motions = load()
    if text in motions:
        return motions[text]
    if not motions:
        raise UnknownMotion(f"--motion {text}: not a file, and no motion library was found "
                            f"(expected {BUILTIN / 'library.yaml'} or DOODLEPOD_MOTIONS_DIR)")
    near = difflib.get_close_matches(text, list(motions), n=3)
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    raise UnknownMotion(f"--motion {text}: not a file, and not a motion of the library{hint} "
                        "(--list-motions lists them)")


def listing() -> str:
    """The library as lines for a person: name, category and title, then the description."""
    motions = load()
    if not motions:
        return f"no motion library found (expected {BUILTIN / 'library.yaml'} or DOODLEPOD_MOTIONS_DIR)\n"
    width = max(len(n) for n in motions)
    lines = [f"{m.name:<{width}}  {m.category:<8}  {m.title}: {m.description}".rstrip(": ")
             for m in sorted(motions.values(), key=lambda m: (m.category, m.name))]
    return "\n".join(lines) + f"\n({len(motions)} motions; use one with --motion NAME)\n"
