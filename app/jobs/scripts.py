"""The Lua scripts of the queue (``app/jobs/lua/*.lua``): each Redis state change of a job is one
script, so a crash between two commands cannot leave it half done (a client's token bucket has its
own, beside :mod:`app.clients.ratelimit`). The scripts that end or move a job share ``prelude.lua``."""
from __future__ import annotations

from functools import cache
from pathlib import Path

LUA_DIR = Path(__file__).resolve().parent / "lua"


@cache
def lua(name: str, *, prelude: bool = False) -> str:
    """The text of ``lua/<name>.lua``, after ``lua/prelude.lua`` when ``prelude``."""
    text = (LUA_DIR / f"{name}.lua").read_text()
    return (LUA_DIR / "prelude.lua").read_text() + "\n" + text if prelude else text
