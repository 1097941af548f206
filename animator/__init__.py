"""animator: turn a rigged drawing and a BVH clip into an animation (GIF, WebP, MP4), or export it
for games, video edits and 3D tools (APNG, WebM with alpha, PNG frames, a sprite sheet, joint
tracks, a rigged glTF: :mod:`animator.export`).

A plain library (numpy + Pillow; no Flask, no torch, no OpenGL) used by the app and the CLI
(``python -m animator --help``). Data flows one way:
character (texture, mask, skeleton) -> motion (2D bone angles per frame) -> mesh poses -> frames
-> encoded bytes.

    import animator
    char = animator.load_character("examples/characters/char1")
    result = animator.render(char, animator.load_motion_config("examples/config/motion/dab.yaml"),
                             animator.load_retarget_config("examples/config/retarget/fair1_ppf.yaml"),
                             animator.RenderOptions(width=500, height=500, format="gif"))
    open("dab.gif", "wb").write(result.data)

Without a hand-written retarget config: ``animator.derive_retarget_config(bvh)`` (see
:mod:`animator.auto_retarget`); several characters in one picture: :func:`animator.load_scene` and
:func:`animator.render_scene` (AnimatedDrawings' mvc config files, :mod:`animator.scene`).

Threads: the matrices here are small, and a multi-threaded BLAS only fights other processes for
the cores, so unless the caller chose otherwise (or numpy is already loaded) BLAS runs one thread.
"""
import os as _os
import sys as _sys

if "numpy" not in _sys.modules:
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        _os.environ.setdefault(_var, "1")

from .api import RenderOptions, RenderResult, render  # noqa: E402
from .character import Character, Joint, load_character  # noqa: E402
from .config import MotionConfig, RetargetConfig, load_motion_config, load_retarget_config  # noqa: E402
from .encode import FORMATS  # noqa: E402
from .errors import AnimatorError, BVHError, CharacterError, ConfigError, OutputTooLarge, RenderError  # noqa: E402
from .prune import DEFAULT_FPS, frame_indices_for  # noqa: E402
from .retarget import Motion2D, retarget  # noqa: E402

#: Names whose modules load on first use: most renders need neither, and a render process starts faster.
_LAZY = {"derive_motion_config": "auto_retarget", "derive_retarget_config": "auto_retarget",
         "load_scene": "scene", "render_scene": "scene", "RigCache": "rig_cache"}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{_LAZY[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

__all__ = [
    "AnimatorError", "BVHError", "Character", "CharacterError", "ConfigError", "DEFAULT_FPS", "FORMATS", "Joint",
    "Motion2D", "MotionConfig", "OutputTooLarge", "RenderError", "RenderOptions", "RenderResult", "RetargetConfig",
    "RigCache",
    "derive_motion_config", "derive_retarget_config", "frame_indices_for", "load_character", "load_motion_config",
    "load_retarget_config", "load_scene", "render", "render_scene", "retarget",
]
