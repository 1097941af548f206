"""A scene's render, as one render-process job: its characters' stored files in, one encoded file out.

Coordinates: the page is the stored work image of the photo (``page_png``, work pixels); each
character comes with its texture and mask PNGs, its joints in texture pixels and where its texture's
top-left corner lies on the page (work pixels) with the page pixels one texture pixel covers
(:mod:`animator.page_scene`).
"""
from __future__ import annotations

import io
import os
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import animator_boundary
from .steps import _configs, read_mask, read_texture

if TYPE_CHECKING:
    import animator


def _rgb(png: bytes) -> np.ndarray:
    from PIL import Image

    with Image.open(io.BytesIO(png)) as im:
        return np.asarray(im.convert("RGB"), np.uint8)


def render_scene(characters: list[dict[str, Any]], page_png: bytes | None, page_size: tuple[int, int],
                 background: dict[str, Any], background_png: bytes | None,
                 options: animator.RenderOptions, taken_out: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Render a scene. ``characters``: ``{"texture", "mask"}`` PNG bytes, ``"joints"`` [(name, (x, y),
    parent)], ``"origin"`` (x, y) and ``"scale"`` on the page, ``"drawn_at"`` (x, y) where its texture
    lay on the page's photo (None: not drawn on this page), ``"motion"`` and ``"retarget"`` config
    paths (retarget None: derived), ``"name"``. ``background``: ``{"kind": page|colour|image|none,
    "colour"?: [r, g, b]}`` (``page_png`` the page, ``background_png`` an uploaded picture).
    ``taken_out``: drawings of the page that are no character but are taken out of it (``{"mask"
    PNG, "origin", "scale"}``: a dropped character's). ``options``: its ``width``/``height`` are the
    canvas."""
    import animator
    from animator.page_scene import Background, Drawing, PageCharacter, PageScene, render_page_scene

    from .process import report_progress

    t0 = time.perf_counter()
    with animator_boundary("the scene cannot be animated"):
        chars = []
        for c in characters:
            character = animator.Character(read_texture(c["texture"]), read_mask(c["mask"]),
                                           [animator.Joint(n, tuple(loc), p) for n, loc, p in c["joints"]])
            motion_cfg, retarget_cfg = _configs(c["motion"], c["retarget"])
            drawn = c.get("drawn_at", c["origin"])
            chars.append(PageCharacter(character, motion_cfg, retarget_cfg, origin=tuple(c["origin"]),
                                       scale=float(c["scale"]), name=c.get("name", ""),
                                       drawn_at=None if drawn is None else tuple(drawn), on_page=drawn is not None))
        kind = background["kind"]
        image = _rgb(page_png) if kind == "page" and page_png else _rgb(background_png) if kind == "image" else None
        colour = tuple(background["colour"]) if kind == "colour" else None
        out = [Drawing(read_mask(d["mask"]), tuple(d["origin"]), float(d["scale"])) for d in taken_out or []]
        scene = PageScene(chars, (int(page_size[0]), int(page_size[1])), Background(kind, colour=colour, image=image),
                          taken_out=out)
        t1 = time.perf_counter()
        result = render_page_scene(scene, options, progress=report_progress)
    t2 = time.perf_counter()
    return {"data": result.data, "mime": result.mime, "extension": result.extension,
            "frame_count": int(result.frame_count), "duration_s": float(result.duration_s),
            "width": result.width, "height": result.height, "order": result.order,
            "travel_kept": [list(k) for k in result.travel_kept],
            "timings_ms": {"read": (t1 - t0) * 1e3, **{k: float(v) for k, v in result.timings_ms.items()},
                           "total": (t2 - t0) * 1e3}, "pid": os.getpid()}
