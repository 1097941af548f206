"""A page scene (:mod:`animator.page_scene`) written as AnimatedDrawings' scene files.

AnimatedDrawings places characters in a 3-D world seen through a perspective camera
(:mod:`animator.scene`): each drawing is one world unit per ``max(width, height)`` of its pixels,
so it cannot say "this character, this size, here on the page" directly. Depth can: with the camera
at the origin looking along -z (``CAMERA_FWD [0, 0, 1]``), a character standing at distance ``d``
shows ``H / (2 d tan(17.5 deg))`` canvas pixels per world unit, so each character is put at the
distance that gives its drawn size, and at the x, y that puts its root joint where it was drawn.
Every mesh point then lands where the page scene puts it (tested, to a hundredth of a pixel at rest).

What differs, and why: AnimatedDrawings draws the nearer character in front (here: the larger one),
a page scene the one lower on the page; a shorter clip holds its last pose there and loops here;
a walking clip's travel is not scaled down to stay in frame (AD's scene has no such rule).

:func:`ad_scene_files` returns the files (a pure function: names -> bytes); ``python -m animator
scene ... --write-ad FOLDER`` writes them.
"""
from __future__ import annotations

import io
import math
from dataclasses import replace
from typing import Any

import numpy as np
import yaml

from .page_scene import PageScene, page_background, page_fit
from .scene import FOV_DEG


def _png(array: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(array).save(buf, "PNG")
    return buf.getvalue()


def placements(scene: PageScene, width: int, height: int) -> list[tuple[float, float, float]]:
    """Each character's ``char_starting_location`` (x, y, z) in AnimatedDrawings' world, for a
    ``width`` x ``height`` window seen from the origin along -z (module docstring)."""
    t = math.tan(math.radians(FOV_DEG) / 2)
    fit, pad = page_fit(scene.page_size, width, height)
    out = []
    for ch in scene.characters:
        d_px = float(max(ch.character.size))
        s = fit * ch.scale                                  # canvas px per drawing px
        depth = height / (2 * t * s * d_px)                 # where one world unit (d_px drawing px) is s * d_px px
        per_unit = s * d_px
        rx, ry = next(j.loc for j in ch.character.skeleton if j.name == "root")
        cx = fit * (ch.origin[0] + ch.scale * rx) + pad[0]
        cy = fit * (ch.origin[1] + ch.scale * ry) + pad[1]
        out.append(((cx - width / 2) / per_unit, -(cy - height / 2) / per_unit, -depth))
    return out


def _motion_yaml(cfg: Any) -> str:
    doc = {"filepath": str(cfg.bvh_path), "start_frame_idx": int(cfg.start_frame_idx),
           "end_frame_idx": cfg.end_frame_idx, "groundplane_joint": cfg.groundplane_joint,
           "forward_perp_joint_vectors": [list(p) for p in cfg.forward_perp_joint_vectors],
           "scale": float(cfg.scale), "up": cfg.up}
    if cfg.frame_time is not None:
        doc["frame_time"] = float(cfg.frame_time)
    return yaml.safe_dump(doc, sort_keys=False)


def ad_scene_files(scene: PageScene, width: int, height: int, output: str = "scene.gif") -> dict[str, bytes]:
    """``{relative path: content}``: ``scene.yaml`` (the mvc config), per character ``charK/``
    (char_cfg.yaml, texture.png, mask.png), ``charK_motion.yaml`` and ``charK_retarget.yaml``, and
    ``background.png`` (the page inpainted, or the picture, at the window's size) unless the
    background is a colour or none (then ``CLEAR_COLOR``)."""
    from .auto_retarget import retarget_config_yaml

    files: dict[str, bytes] = {}
    entries = []
    starts = placements(scene, width, height)
    for k, (ch, start) in enumerate(zip(scene.characters, starts)):
        c = ch.character
        folder = f"char{k}"
        files[f"{folder}/texture.png"] = _png(np.ascontiguousarray(c.texture))
        files[f"{folder}/mask.png"] = _png(c.mask.astype(np.uint8) * 255)
        cfg = {"width": int(c.size[0]), "height": int(c.size[1]),
               "skeleton": [{"name": j.name, "loc": [float(j.loc[0]), float(j.loc[1])], "parent": j.parent}
                            for j in c.skeleton]}
        files[f"{folder}/char_cfg.yaml"] = yaml.safe_dump(cfg, sort_keys=False).encode()
        files[f"{folder}_motion.yaml"] = _motion_yaml(ch.motion_cfg).encode()
        retarget = replace(ch.retarget_cfg, char_starting_location=tuple(float(v) for v in start))
        files[f"{folder}_retarget.yaml"] = retarget_config_yaml(retarget).encode()
        entries.append({"character_cfg": f"{folder}/char_cfg.yaml", "motion_cfg": f"{folder}_motion.yaml",
                        "retarget_cfg": f"{folder}_retarget.yaml"})
    view: dict[str, Any] = {"WINDOW_DIMENSIONS": [int(width), int(height)], "CAMERA_POS": [0.0, 0.0, 0.0],
                            "CAMERA_FWD": [0.0, 0.0, 1.0]}
    bg = scene.background
    if bg.kind in ("page", "image"):
        fit, pad = page_fit(scene.page_size, width, height)
        files["background.png"] = _png(page_background(scene, width, height, fit, pad))
        view["BACKGROUND_IMAGE"] = "background.png"
    elif bg.kind == "colour":
        view["CLEAR_COLOR"] = [round(v / 255, 4) for v in bg.colour] + [1.0]
    else:
        view["CLEAR_COLOR"] = [1.0, 1.0, 1.0, 0.0]
    doc = {"scene": {"ANIMATED_CHARACTERS": entries}, "view": view,
           "controller": {"MODE": "video_render", "OUTPUT_VIDEO_PATH": output}}
    files["scene.yaml"] = yaml.safe_dump(doc, sort_keys=False).encode()
    return files


__all__ = ["ad_scene_files", "placements"]
