"""A scene render's price, known before any of its work starts: what each character costs drawn at its
canvas scale, and the memory the render process will need for it (issue 41: a character from a
6300 px photo on the page of a 54 px one was drawn 91,000 px wide and the render process was killed
for memory, with its neighbours).

A character's texture (``texture_size``) is drawn at ``fit * scale`` canvas pixels per texture pixel
(``scale``: page work pixels per texture pixel, :func:`app.scenes.resource._placement`; ``fit``:
canvas pixels per page work pixel, :func:`animator.page_scene.page_fit`). Its sprite has at most that
many texels, each costing :data:`BYTES_PER_TEXEL` while the sprite is made and drawn (measured: a
character of 7.8 million texels took 465 MiB above a render process's 156 MiB at rest). The animator
refuses a sprite over :data:`animator.rasterize.MAX_SPRITE_TEXELS`; this says so before the render.
"""
from __future__ import annotations

from dataclasses import dataclass

#: Memory per drawn texel while a sprite is made and rasterized (sample points, weights, palette).
BYTES_PER_TEXEL = 64
#: Memory per canvas pixel (the background, its inpainting, the frame being encoded).
BYTES_PER_CANVAS_PIXEL = 48
#: A render process's own memory before any work (Python, numpy, the animator).
BASE_MB = 160


@dataclass(frozen=True)
class ScenePrice:
    """What one scene render will cost: each character's drawn texels (width x height at its canvas
    scale), the canvas and the memory (MiB) the render process needs."""

    texels: tuple[int, ...]
    canvas: tuple[int, int]
    frames: int

    @property
    def memory_mb(self) -> float:
        canvas = self.canvas[0] * self.canvas[1]
        return BASE_MB + (sum(self.texels) * BYTES_PER_TEXEL + canvas * BYTES_PER_CANVAS_PIXEL) / 2**20


def drawn_texels(texture_size: tuple[int, int], scale: float, fit: float) -> int:
    """Texels of a ``texture_size`` texture drawn at ``fit * scale`` canvas pixels per texture pixel."""
    s = fit * scale
    return int(round(texture_size[0] * s)) * int(round(texture_size[1] * s))


def price(textures: list[tuple[tuple[int, int], float]], page_size: tuple[int, int], canvas: tuple[int, int],
          frames: int) -> ScenePrice:
    """The price of drawing ``textures`` (each ``(texture_size, scale)``) on a ``canvas`` showing a page of
    ``page_size`` work pixels, for ``frames`` frames."""
    fit = min(canvas[0] / max(1, page_size[0]), canvas[1] / max(1, page_size[1]))
    return ScenePrice(tuple(drawn_texels(size, scale, fit) for size, scale in textures), canvas, frames)
