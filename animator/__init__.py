"""animator: turn a rigged drawing and a BVH clip into an animation (GIF, WebP, MP4), or export it
for games, video edits and 3D tools (APNG, WebM with alpha, PNG frames, a sprite sheet, joint
tracks, a rigged glTF): every format is a module of :mod:`animator.formats`.

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
import types as _types

if "numpy" not in _sys.modules:
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        _os.environ.setdefault(_var, "1")

#: Public names -> the module that defines them. Each loads on first use: ``import animator.formats``
#: (the app checking a format name) loads neither numpy nor Pillow, and a render process starts faster.
_LAZY = {
    "RenderOptions": "api", "RenderResult": "api", "render": "api",
    "Character": "character", "Joint": "character", "load_character": "character",
    "MotionConfig": "config", "RetargetConfig": "config", "load_motion_config": "config",
    "load_retarget_config": "config",
    "FORMATS": "formats.registry",
    "AnimatorError": "errors", "BVHError": "errors", "CharacterError": "errors", "ConfigError": "errors",
    "OutputTooLarge": "errors", "RenderError": "errors",
    "DEFAULT_FPS": "frame_rate", "frame_indices_for": "frame_rate",
    "Motion2D": "retarget", "retarget": "retarget",
    "derive_motion_config": "auto_retarget", "derive_retarget_config": "auto_retarget",
    "load_scene": "scene", "render_scene": "scene", "RigCache": "rig_cache",
}


def __getattr__(name: str):
    from importlib import import_module

    if name not in _LAZY:
        try:  # a submodule not imported yet (``animator.rasterize``)
            return import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(import_module(f".{_LAZY[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


class _Package(_types.ModuleType):
    """``animator.retarget`` is the function, as it was when this file imported it eagerly: the
    import system sets a package's attribute to each submodule it loads, and the submodule
    :mod:`animator.retarget` must not replace the function of the same name."""

    def __setattr__(self, name: str, value) -> None:
        if name in _LAZY and isinstance(value, _types.ModuleType):
            return
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package


__all__ = [
    "AnimatorError", "BVHError", "Character", "CharacterError", "ConfigError", "DEFAULT_FPS", "FORMATS", "Joint",
    "Motion2D", "MotionConfig", "OutputTooLarge", "RenderError", "RenderOptions", "RenderResult", "RetargetConfig",
    "RigCache",
    "derive_motion_config", "derive_retarget_config", "frame_indices_for", "load_character", "load_motion_config",
    "load_retarget_config", "load_scene", "render", "render_scene", "retarget",
]
