"""animator: turn a rigged drawing and a BVH clip into an animation (GIF, WebP, MP4).

A plain library (numpy + Pillow; no Flask, no torch, no OpenGL) used by the app and the CLI
(``python -m animator --help``). Data flows one way:
character (texture, mask, skeleton) -> motion (2D bone angles per frame) -> mesh poses -> frames
-> encoded bytes.
"""
from .character import Character, Joint, load_character
from .errors import AnimatorError, BVHError, CharacterError, ConfigError, RenderError

__all__ = [
    "AnimatorError", "BVHError", "Character", "CharacterError", "ConfigError", "Joint",
    "RenderError", "load_character",
]
