"""Scene files (AnimatedDrawings' mvc configs) for the scene tests: two tinted characters on a sky."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml
from PIL import Image

from tests.conftest import REPO

EX = REPO / "tests" / "fixtures" / "animated_drawings" / "examples"
W, H = 400, 300
CAM_POS, CAM_FWD = (0.1, 1.3, 2.7), (0.0, 0.5, 2.0)


def tinted(src: str, dst: Path, channel: int) -> Path:
    """A copy of a character whose drawing is shades of one primary colour (0 red, 1 green)."""
    dst.mkdir(parents=True)
    folder = EX / "characters" / src
    rgba = np.asarray(Image.open(folder / "texture.png").convert("RGBA")).copy()
    grey = rgba[..., :3].mean(axis=2)
    out = np.zeros_like(rgba[..., :3])
    out[..., channel] = 140 + grey * 115 / 255
    Image.fromarray(np.dstack([out, rgba[..., 3]]).astype(np.uint8), "RGBA").save(dst / "texture.png")
    (dst / "mask.png").write_bytes((folder / "mask.png").read_bytes())
    (dst / "char_cfg.yaml").write_text((folder / "char_cfg.yaml").read_text())
    return dst / "char_cfg.yaml"


def retarget_at(src: str, dst: Path, start: tuple[float, float, float]) -> Path:
    """A copy of retarget config ``src`` whose character starts at ``start``."""
    text = (EX / "config" / "retarget" / src).read_text()
    dst.write_text(text.replace("char_starting_location: [0.0, 0.0, -0.5]", f"char_starting_location: {list(start)}"))
    return dst


def scene_file(tmp: Path, starts=((-0.45, 0.0, -0.5), (0.45, 0.0, -0.5)), **extra) -> Path:
    """``tmp/scene.yaml``: a red char1 doing the dab and a green char2 the jumping jacks, at ``starts``,
    on a sky, through the camera at :data:`CAM_POS`; ``extra``: more fields per section."""
    y, x = np.mgrid[0:150, 0:200]
    Image.fromarray(np.dstack([x * 0, y * 0 + 30, 120 + x * 0.5]).astype(np.uint8)).save(tmp / "sky.png")
    cfg = {
        "scene": {"ANIMATED_CHARACTERS": [
            {"character_cfg": str(tinted("char1", tmp / "red", 0)), "motion_cfg": str(EX / "config/motion/dab.yaml"),
             "retarget_cfg": str(retarget_at("fair1_ppf.yaml", tmp / "a.yaml", starts[0]))},
            {"character_cfg": str(tinted("char2", tmp / "green", 1)),
             "motion_cfg": str(EX / "config/motion/jumping_jacks.yaml"),
             "retarget_cfg": str(retarget_at("cmu1_pfp.yaml", tmp / "b.yaml", starts[1]))},
        ]},
        "view": {"WINDOW_DIMENSIONS": [W, H], "BACKGROUND_IMAGE": "sky.png", "CAMERA_POS": list(CAM_POS),
                 "CAMERA_FWD": list(CAM_FWD)},
        "controller": {"MODE": "video_render", "OUTPUT_VIDEO_PATH": "video.gif"},
    }
    for section, fields in extra.items():
        cfg.setdefault(section, {}).update(fields)
    (tmp / "scene.yaml").write_text(yaml.safe_dump(cfg))
    return tmp / "scene.yaml"
