"""A drawing with a skeleton AnimatedDrawings' has not: char1 with a second left arm, and the
retarget config that maps it."""
from __future__ import annotations

from pathlib import Path

import yaml
from PIL import Image, ImageDraw

from tests.conftest import AD_EXAMPLES

FAIR1 = AD_EXAMPLES / "config" / "retarget" / "fair1_ppf.yaml"
#: The extra arm, drawing pixels: shoulder on char1's torso, elbow and hand out to the right.
ARM = {"left_shoulder2": (320.0, 300.0), "left_elbow2": (385.0, 335.0), "left_hand2": (445.0, 372.0)}
RED = (230, 20, 20)


def three_armed_char1(folder: Path) -> Path:
    """char1 with a red second left arm drawn onto texture.png and mask.png and added to char_cfg.yaml."""
    folder.mkdir(parents=True, exist_ok=True)
    src = AD_EXAMPLES / "characters" / "char1"
    tex = Image.open(src / "texture.png").convert("RGBA")
    mask = Image.open(src / "mask.png").convert("L")
    pts = list(ARM.values())
    ImageDraw.Draw(tex).line(pts, fill=RED + (255,), width=16, joint="curve")
    ImageDraw.Draw(mask).line(pts, fill=255, width=16, joint="curve")
    for p in (pts[0], pts[-1]):  # round ends, so the joints lie well inside the mask
        box = (p[0] - 8, p[1] - 8, p[0] + 8, p[1] + 8)
        ImageDraw.Draw(tex).ellipse(box, fill=RED + (255,))
        ImageDraw.Draw(mask).ellipse(box, fill=255)
    tex.save(folder / "texture.png")
    mask.save(folder / "mask.png")
    cfg = yaml.safe_load((src / "char_cfg.yaml").read_text())
    parent = {"left_shoulder2": "torso", "left_elbow2": "left_shoulder2", "left_hand2": "left_elbow2"}
    cfg["skeleton"] += [{"name": n, "loc": [int(x), int(y)], "parent": parent[n]} for n, (x, y) in ARM.items()]
    (folder / "char_cfg.yaml").write_text(yaml.safe_dump(cfg))
    return folder


def three_arm_retarget(path: Path, drop: str | None = None, bvh_for_hand2: str = "LeftHand") -> Path:
    """fair1_ppf plus mappings and a draw group for the second left arm."""
    cfg = yaml.load(FAIR1.read_text(), Loader=yaml.UnsafeLoader)  # noqa: S506 - our own fixture (!!python/tuple)
    mapping = {k: list(v) for k, v in cfg["char_joint_bvh_joints_mapping"].items()}
    mapping["left_elbow2"] = ["LeftArm", "LeftForeArm"]
    mapping["left_hand2"] = ["LeftForeArm", bvh_for_hand2]
    if drop:
        mapping.pop(drop)
    cfg["char_joint_bvh_joints_mapping"] = mapping
    cfg["char_bodypart_groups"][0]["char_joints"].append("left_shoulder2")
    cfg["char_bodypart_groups"].append({"bvh_depth_drivers": ["LeftHand"],
                                        "char_joints": ["left_elbow2", "left_hand2"]})
    path.write_text(yaml.safe_dump(cfg))
    return path
