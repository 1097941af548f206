"""Reuse of a character's per-render setup: its rig (mesh + ARAP operators) and sprites.

Building the rig and the sprite is about half of a short render's CPU, and depends only on the
character, the mesh size, the motion's joints and (for the sprite) the output scale and palette
options, not on the clip. A :class:`RigCache` keeps them for the last few characters, so a process
rendering several motions of one character (or one motion in several sizes or formats) builds each
once. Entries are keyed by the character's content (texture, mask and skeleton), so a changed
character can never meet a stale rig. Reused objects are never modified: renders are the same byte
for byte with or without a cache.
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from .character import Character


def fingerprint(character: Character) -> str:
    """A digest of everything a rig depends on: texture and mask pixels, joint names, places, parents."""
    h = hashlib.blake2b(digest_size=16)
    for array in (character.texture, character.mask):
        a = np.ascontiguousarray(array)
        h.update(repr((a.shape, a.dtype.str)).encode())
        h.update(a.data)
    h.update(repr([(j.name, tuple(float(v) for v in j.loc), j.parent) for j in character.skeleton]).encode())
    return h.hexdigest()


class RigCache:
    """Rigs and sprites of the last ``max_characters`` characters used (least recently used go first).

    ``sprites_per_character`` bounds the sprites kept per character (one per scale and palette
    options). Safe to share between threads.
    """

    def __init__(self, max_characters: int = 4, sprites_per_character: int = 4) -> None:
        self.max_characters = int(max_characters)
        self.sprites_per_character = int(sprites_per_character)
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = {"rig": 0, "sprite": 0}

    def rig(self, character: Character, motion: Any, mesh_cells: int):
        """:meth:`animator.api.Rig.build` for ``character`` and the joints of ``motion``, or the one built before."""
        from .api import Rig

        key = (int(mesh_cells), tuple(motion.joint_names))
        return self._reuse("rig", self._entry(character).rigs, key, lambda: Rig.build(character, motion, mesh_cells))

    def sprite(self, rig: Any, motion: Any, scale: float, opts: Any, colours: int):
        """:meth:`animator.api.Rig.sprite` of ``rig`` (built with ``opts.mesh_cells`` cells), or the one made
        before with the same scale, body-part groups and palette options."""
        key = (int(opts.mesh_cells), float(scale), tuple(tuple(p) for p in motion.part_joints), int(colours),
               opts.smooth, opts.flatten, float(opts.merge))
        return self._reuse("sprite", self._entry(rig.character).sprites, key,
                           lambda: rig.sprite(motion, scale, opts, colours))

    def _reuse(self, kind: str, table: OrderedDict, key: Any, build: Any) -> Any:
        """``table[key]`` (counted in ``hits[kind]``), or what ``build()`` makes, kept in ``table`` (at most
        ``sprites_per_character`` entries, least recently used go first). Built outside the lock."""
        with self._lock:
            value = table.get(key)
            if value is not None:
                table.move_to_end(key)
                self.hits[kind] += 1
                return value
        value = build()
        with self._lock:
            table[key] = value
            table.move_to_end(key)
            while len(table) > max(1, self.sprites_per_character):
                table.popitem(last=False)
        return value

    def _entry(self, character: Character) -> "_Entry":
        key = fingerprint(character)  # each time: a character's arrays could be changed in place
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry()
                while len(self._entries) > self.max_characters:
                    self._entries.popitem(last=False)
            self._entries.move_to_end(key)
            return entry


class _Entry:
    def __init__(self) -> None:
        self.rigs: OrderedDict = OrderedDict()
        self.sprites: OrderedDict = OrderedDict()

