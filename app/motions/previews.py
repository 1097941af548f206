"""Motion previews: every library motion played by the reference character (AnimatedDrawings' char1,
``motions/reference/char1``), rendered once and kept in the storage.

``GET /motions`` answers, per motion, the URL of ``GET /motions/<name>/preview.gif``; that endpoint
makes the preview on its first call (one small render in the process pool) and redirects to the
stored file, then and ever after. The storage key holds a digest of what the
preview is made of (the clip, its configs, the reference character, the render options), so a
changed clip gets a new preview and an unchanged one is never rendered twice, whichever worker or
pod asks. A worker makes one preview at a time (the others' requests wait their turn) and holds no
render slot for it: on a 2-CPU pod there is one slot, and a fresh server's first visitor, whose
browser asks for a dozen previews at once, would otherwise be told "busy" for their own upload and
previews. The extra work is bounded: one 128 px render (about 0.3-1 s) per worker at a time, 36
per library and storage, ever.
"""
from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import asdict
from typing import Any, Callable

from ..deadline import Deadline
from .library import BUILTIN_DIR, Motion, clip_digest

#: The character every preview shows.
REFERENCE_DIR = BUILTIN_DIR / "reference" / "char1"
#: Preview size (px, square) and frame cap: the studio's own previews' (a thumbnail renders fast).
PREVIEW_SIDE = 128
PREVIEW_FRAMES = 40
#: Where previews live in the storage.
PREFIX = "motions/previews/"


class MotionPreviews:
    """The previews of one worker's library: their storage keys, and making the missing ones."""

    def __init__(self, storage: Any, pipeline: Any, task: Callable[..., dict[str, Any]] | None = None):
        """``task``: what renders a preview in the pool, given the reference character's folder
        (:func:`app.render.steps.render_reference`, handed in by the services)."""
        self.storage = storage
        self.pipeline = pipeline
        self.task = task
        self._keys: dict[str, str] = {}
        self._stored: set[str] = set()
        self._making = threading.Lock()  # gevent-patched in the app: a greenlet lock

    def options(self) -> Any:
        """The previews' :class:`animator.RenderOptions`."""
        return self.pipeline.render_options("gif", PREVIEW_SIDE, PREVIEW_FRAMES)

    def key(self, motion: Motion) -> str:
        """``motions/previews/<name>-<digest>.gif`` (digest over the clip, configs, character, options)."""
        if motion.name not in self._keys:
            digest = hashlib.sha256((motion.sha256 or clip_digest(motion.motion_cfg, motion.retarget_cfg)).encode())
            for path in sorted(REFERENCE_DIR.iterdir()):
                digest.update(path.name.encode() + b"\0" + path.read_bytes())
            digest.update(json.dumps(asdict(self.options()), sort_keys=True).encode())
            self._keys[motion.name] = f"{PREFIX}{motion.name}-{digest.hexdigest()[:16]}.gif"
        return self._keys[motion.name]

    def ensure(self, motion: Motion, deadline: Deadline, base_url: str) -> str:
        """The preview's URL, rendering and storing it first when the storage lacks it."""
        key = self.key(motion)
        if key in self._stored:
            return self.storage.url(key, base_url)
        if not self._making.acquire(timeout=deadline.check("motion preview")):
            raise deadline.exceeded("motion preview", "waiting for another motion's preview")
        try:
            if key not in self._stored and not self.storage.exists(key, deadline):
                self._render(motion, key, deadline)
            self._stored.add(key)
        finally:
            self._making.release()
        return self.storage.url(key, base_url)

    def _render(self, motion: Motion, key: str, deadline: Deadline) -> None:
        def store(_: Motion, out: dict[str, Any]) -> str:
            self.storage.put(key, out["data"], out["mime"], deadline)
            return key
        self.pipeline.render((str(REFERENCE_DIR),), [motion], self.options(), deadline, {}, store,
                             task=self.task)
