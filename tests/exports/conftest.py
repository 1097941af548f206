"""Renders of char1 dancing 'dab' in every export format, made once per test session, and the Node
tools (tools/node, installed by scripts/install_node_tools.sh) the glTF tests read the .glb with."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

import pytest

import animator
from tests.conftest import CHAR1, FAIR, MOTION_CONFIGS, REPO

NODE_TOOLS = REPO / "tools" / "node"


@pytest.fixture(scope="session")
def char1():
    return animator.load_character(CHAR1)


@pytest.fixture(scope="session")
def render_as(char1) -> Callable[..., animator.RenderResult]:
    """``render_as(format, **options)``: char1 + dab in that format (cached per arguments).

    Default: a 160x144 canvas, 12 frames (the clip's 11.3 s, so each frame lasts 0.94 s), which
    keeps the frame formats fast; options override."""
    motion = animator.load_motion_config(MOTION_CONFIGS / "dab.yaml")
    retarget = animator.load_retarget_config(FAIR)
    cache: dict = {}

    def render(fmt: str, **options) -> animator.RenderResult:
        opts = {"width": 160, "height": 144, "max_frames": 12, "threads": 1, **options, "format": fmt}
        key = tuple(sorted(opts.items()))
        if key not in cache:
            cache[key] = animator.render(char1, motion, retarget, animator.RenderOptions(**opts))
        return cache[key]

    return render


def node_tools() -> Path:
    """tools/node with its packages installed, or skip saying how to install them."""
    if shutil.which("node") is None:
        pytest.skip("GLTF TESTS SKIPPED: no node on this machine; run scripts/install_node_tools.sh as root")
    if not (NODE_TOOLS / "node_modules" / "gltf-validator").is_dir():
        pytest.skip("GLTF TESTS SKIPPED: tools/node has no node_modules; run scripts/install_node_tools.sh")
    return NODE_TOOLS
