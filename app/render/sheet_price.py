"""A sprite sheet that cannot fit, refused before the render with what to choose instead (issue 43: at
768 or 1024 px one failed after 17-27 s of rendering, with words about ``max_frames``, a control the
studio does not have).

The bound is the animator's: a sheet holds at most :data:`animator.formats.sheet.MAX_PIXELS` pixels of
distinct trimmed frames. A frame's trimmed size is known only once it is drawn, so the price counts
:data:`FILL` of each canvas frame (a character, its motion's reach included, fills about half of a
canvas it was fitted to), times the frames the render will make (the animator's own frame plan). A
sheet priced over the bound is refused (422 ``output_too_large``) with the largest size and the most
frames that fit, in its message and under ``fits``. The one owner of the rule: the studio and the
scenes page show what the server answers. A sheet priced under the bound that still passes it (a
character filling more of its frames) is refused by the animator while packing, as before.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

from ..errors import OutputTooLarge

#: Share of each canvas frame a character's trimmed frame is priced at.
FILL = 0.5


def sheet_pixels(frames: int, width: int, height: int) -> float:
    """The priced pixels of a sheet of ``frames`` frames of a ``width`` x ``height`` canvas."""
    return frames * width * height * FILL


def check_sheet(fmt: str, frames: Mapping[str, int | None], canvas: tuple[int, int]) -> None:
    """Raise :class:`OutputTooLarge` when a ``sheet`` of any of ``frames`` (``{motion: frames it renders}``;
    None: not known here) on a ``canvas`` (width, height) is priced over the animator's bound."""
    from animator.formats.sheet import MAX_PIXELS

    if fmt != "sheet":
        return
    width, height = canvas
    over = {name: n for name, n in frames.items() if n and sheet_pixels(n, width, height) > MAX_PIXELS}
    if not over:
        return
    most = max(over.values())
    longer = max(width, height)
    # the longer side that fits these frames (the canvas keeps its shape), and the frames that fit this size
    size = math.floor(math.sqrt(MAX_PIXELS / sheet_pixels(most, width / longer, height / longer)))
    max_frames = max(1, math.floor(MAX_PIXELS / sheet_pixels(1, width, height)))
    names = ", ".join(f"{name} ({n} frames)" for name, n in over.items())
    exc = OutputTooLarge(
        f"a sprite sheet of {names} at {longer} px would hold about {sheet_pixels(most, width, height) / 1e6:.0f} "
        f"million pixels of frames, over the {MAX_PIXELS / 1e6:.0f} million one sheet holds: ask for size {size} or "
        f"smaller, or max_frames {max_frames} or fewer, or the frames format (PNG frames in a zip: no such bound)")
    exc.details["fits"] = {"size": size, "max_frames": max_frames}
    raise exc
