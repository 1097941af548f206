"""The command line's progress bar: frames made of the clip, on a terminal, redrawn at most 10 times a second.

``ProgressBar(stream)`` is an ``animator.render(..., progress=...)`` callback. It draws only when
``stream`` is a terminal (``isatty``): logs, pipes and benchmarks read by scripts get no bar. The
bar is one line rewritten in place (carriage return) and erased when the clip is done or the bar
is closed, so what the program prints next starts on a clean line.
"""
from __future__ import annotations

import time
from typing import TextIO

#: Seconds between redraws (the last frame is always drawn).
REDRAW_S = 0.1
#: Characters of the bar itself.
WIDTH = 30


class ProgressBar:
    def __init__(self, stream: TextIO, label: str = "", clock=time.monotonic) -> None:
        self.stream = stream
        self.label = label
        self.clock = clock
        self.active = _is_terminal(stream)
        self._started: float | None = None
        self._drawn_at = -REDRAW_S
        self._shown = False

    def __call__(self, done: int, total: int) -> None:
        if not self.active:
            return
        now = self.clock()
        if self._started is None or done == 0:
            self._started = now
        if done < total and now - self._drawn_at < REDRAW_S:
            return
        self._drawn_at = now
        self.stream.write("\r" + line(done, total, now - self._started, self.label) + "\033[K")
        self.stream.flush()
        self._shown = True
        if total and done >= total:
            self.close()

    def close(self) -> None:
        """Erase the bar (if one is shown)."""
        if self._shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._shown = False


def line(done: int, total: int, elapsed_s: float, label: str = "") -> str:
    """``label [#########.........]  42/120 frames  35%  ~2 s left`` (the estimate once a frame is made)."""
    fraction = done / total if total else 0.0
    filled = int(round(WIDTH * fraction))
    text = f"[{'#' * filled}{'.' * (WIDTH - filled)}] {done:>{len(str(total))}}/{total} frames {fraction:4.0%}"
    if 0 < done < total:
        text += f"  ~{elapsed_s * (total - done) / done:.0f} s left"
    return f"{label} {text}" if label else text


def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
