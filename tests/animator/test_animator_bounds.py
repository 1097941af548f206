"""The work one character may cause is bounded by its inputs.

Memory-hungry cases run in a child process whose address space is capped with ``RLIMIT_AS`` (set
in the child only, never on the machine): before these bounds they asked for gigabytes.
"""
from __future__ import annotations

import random
import resource
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from PIL import Image

import animator
from animator import CharacterError, load_character
from animator.arap import ARAP
from animator.character import MAX_JOINTS, Character, Joint, parents_first
from animator.mesh import build_mesh
from tests.conftest import AD_EXAMPLES, REPO


def _run_capped(code: str, limit_mb: int = 1024, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh Python whose address space is capped at ``limit_mb`` MiB."""
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit_mb * 2**20, limit_mb * 2**20))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, preexec_fn=cap,
                          capture_output=True, text=True, timeout=timeout)


def _passes_reference(joints):
    """parents_first as a plain loop: repeated passes, each placing the joints whose parent is placed."""
    ordered, placed, pending = [], set(), list(joints)
    while pending:
        waiting = [j for j in pending if not (j.parent is None or j.parent in placed)
                   or (ordered.append(j) or placed.add(j.name))]
        assert len(waiting) < len(pending)
        pending = waiting
    return ordered


def test_parents_first_is_linear_on_a_long_chain_listed_backwards() -> None:
    chain = [Joint(f"j{i}", (0.0, 0.0), f"j{i - 1}" if i else None) for i in range(20000)][::-1]
    t0 = time.perf_counter()
    out = parents_first(chain)
    assert time.perf_counter() - t0 < 2.0  # was quadratic: ~20 s for this chain
    assert [j.name for j in out] == [f"j{i}" for i in range(20000)]


def test_parents_first_keeps_the_order_of_repeated_passes() -> None:
    rng = random.Random(8)
    for _ in range(200):
        n = rng.randint(1, 40)
        joints = [Joint(f"n{i}", (0.0, 0.0), None if i == 0 else f"n{rng.randrange(i)}") for i in range(n)]
        rng.shuffle(joints)
        assert parents_first(joints) == _passes_reference(joints)


def test_a_skeleton_is_bounded_in_count_names_and_coordinates() -> None:
    ch = load_character(AD_EXAMPLES / "characters" / "char1")
    extra = [Joint(f"x{i}", (200.0, 300.0), "torso") for i in range(8000)]
    t0 = time.perf_counter()
    with pytest.raises(CharacterError, match=f"at most {MAX_JOINTS}"):
        Character(ch.texture, ch.mask, list(ch.skeleton) + extra)
    assert time.perf_counter() - t0 < 1.0
    with pytest.raises(CharacterError, match=f"at most {MAX_JOINTS}"):
        animator.character.skeleton_from_config([{"name": f"x{i}", "loc": [0, 0]} for i in range(MAX_JOINTS + 1)])
    Character(ch.texture, ch.mask, list(ch.skeleton) + extra[:40])  # a few extra limbs are fine
    with pytest.raises(CharacterError, match="joint names must be 1 to"):
        Character(ch.texture, ch.mask, list(ch.skeleton) + [Joint("x" * 1000, (1.0, 1.0), "torso")])
    far = [Joint(j.name, (1e9, 1e9) if j.name == "left_hand" else j.loc, j.parent) for j in ch.skeleton]
    with pytest.raises(CharacterError, match="left_hand.*far outside"):
        Character(ch.texture, ch.mask, far)
    with pytest.raises(CharacterError, match="expected"):
        animator.character.skeleton_from_config([{"name": "root", "loc": [10**400, 1]}])


def test_bone_sampling_is_bounded_by_the_mesh_not_the_bone() -> None:
    # a bone reaching far off the drawing used to be sampled along its whole length (7.7 GiB at 1e9)
    proc = _run_capped("""
        import numpy as np
        from animator.mesh import build_mesh, bone_distances
        m = np.zeros((200, 200), bool); m[50:150, 80:120] = True
        mesh = build_mesh(m, keep_points=np.array([[100.0, 100.0]]))
        d = bone_distances(mesh, np.array([[[100.0, 60.0], [1e9, 1e9]], [[100.0, 60.0], [100.0, 140.0]]]))
        assert np.isfinite(d).all() and d[:, 0].min() < mesh.cell  # the bone starts on the drawing
        print("ok")
    """, limit_mb=768)
    assert proc.returncode == 0 and proc.stdout.startswith("ok"), proc.stderr[-2000:]


def test_a_tiny_character_on_a_large_page_renders_in_bounded_memory() -> None:
    # a 6-pixel ring on a 1000x1000 page with every joint on its outline: the scale to fit it on
    # the canvas is ~180x, and resizing the whole page by that took 126 GiB
    proc = _run_capped("""
        import numpy as np
        from pathlib import Path
        import animator
        from animator.character import Character, Joint
        EX = Path("tests/fixtures/animated_drawings/examples")
        yy, xx = np.mgrid[:1000, :1000]
        r = np.hypot(xx - 500, yy - 500)
        mask = (r < 4) & (r > 2)
        tex = np.full((1000, 1000, 4), 255, np.uint8); tex[mask, :3] = 0
        ch1 = animator.load_character(EX / "characters" / "char1")
        ch = Character(tex, mask, [Joint(j.name, (503.0, 500.0), j.parent) for j in ch1.skeleton])
        res = animator.render(ch, animator.load_motion_config(EX / "config/motion/dab.yaml"),
                              animator.load_retarget_config(EX / "config/retarget/fair1_ppf.yaml"),
                              animator.RenderOptions(width=400, height=400, max_frames=5))
        print("ok", res.frame_count, res.scale)
    """, limit_mb=1536)
    assert proc.returncode == 0 and proc.stdout.startswith("ok 5"), proc.stderr[-2000:]
    scale = float(proc.stdout.split()[2])
    assert scale <= 2 * 400 / 7 + 1e-6  # at most twice the canvas (the ring is 7 px across)


@pytest.mark.parametrize("side", [40, 80, 120])
def test_small_characters_get_a_mesh_that_holds_them(side: int) -> None:
    # under ~120x120 px the mesh's sub-cells fell under a pixel and the mask shattered into pieces
    ch = load_character(AD_EXAMPLES / "characters" / "char1")
    h, w = ch.mask.shape
    k = side / max(h, w)
    size = (round(w * k), round(h * k))
    tex = np.asarray(Image.fromarray(ch.texture).resize(size))
    mask = np.asarray(Image.fromarray(ch.mask.astype(np.uint8) * 255).resize(size)) > 127
    skeleton = [Joint(j.name, (j.loc[0] * k, j.loc[1] * k), j.parent) for j in ch.skeleton]
    small = Character(tex, mask, skeleton)
    mesh = build_mesh(small.mask, keep_points=np.array([j.loc for j in skeleton]))
    assert mesh.sub >= 1.0 and mesh.dropped_pixels <= 0.02 * mask.sum()
    res = animator.render(small, animator.load_motion_config(AD_EXAMPLES / "config" / "motion" / "dab.yaml"),
                          animator.load_retarget_config(AD_EXAMPLES / "config" / "retarget" / "fair1_ppf.yaml"),
                          animator.RenderOptions(width=200, height=200, max_frames=5))
    assert res.frame_count == 5


def test_joints_off_the_drawing_are_the_inputs_fault() -> None:
    m = np.zeros((100, 100), bool)
    m[20:80, 40:60] = True
    mesh = build_mesh(m, keep_points=np.array([[50.0, 50.0]]))
    with pytest.raises(CharacterError, match="no skeleton joint lies"):  # was RenderError: a 500 in the app
        ARAP(mesh, np.array([[5.0, 5.0], [95.0, 95.0]]))
