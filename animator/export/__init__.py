"""Exports for makers: the clip in the forms games, video editors and 3D tools take.

Frame formats (RGBA frames in, one file out; the rendered frames of :func:`animator.render`):

- ``apng``: animated PNG with full alpha and exact frame timing (:mod:`.apng`);
- ``webm``: VP9 with alpha, yuva420p, through the bundled ffmpeg (:mod:`.webm`);
- ``frames``: a zip of RGBA PNG frames plus ``frames.json`` (:mod:`.frames`);
- ``sheet``: a zip of one sprite-sheet PNG plus its JSON Hash atlas (:mod:`.sheet`).

Rig formats (no frames are drawn):

- ``joints``: per-frame joint positions as JSON, with the skeleton's parent links (:mod:`.joints`);
- ``glb``: the textured mesh, skinned to the skeleton, with the motion as a glTF animation
  (:mod:`.gltf`, weights and transforms in :mod:`.skin`).
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

#: formats whose file is made from the RGBA frames
FRAME_FORMATS = ("apng", "webm", "frames", "sheet")
#: formats made from the character's rig and motion, without drawing frames
RIG_FORMATS = ("joints", "glb")


def encode_rgba(fmt: str, frames: Iterable[np.ndarray], n_frames: int, frame_time_s: float) -> bytes:
    """The file of format ``fmt`` (one of :data:`FRAME_FORMATS`) of ``n_frames`` RGBA frames
    ((H, W, 4) uint8, straight alpha, all one size), each shown ``frame_time_s`` seconds, looping."""
    if fmt == "apng":
        from .apng import encode_apng

        return encode_apng(frames, n_frames, frame_time_s)
    if fmt == "webm":
        from .webm import encode_webm

        return encode_webm(frames, frame_time_s)
    if fmt == "frames":
        from .frames import encode_frames_zip

        return encode_frames_zip(frames, n_frames, frame_time_s)
    if fmt == "sheet":
        from .sheet import encode_sheet_zip

        return encode_sheet_zip(frames, n_frames, frame_time_s)
    raise ValueError(f"not a frame format: {fmt!r}")


def encode_rig(fmt: str, character, mesh, motion, scale: float | None = None, offsets: np.ndarray | None = None,
               width: int | None = None, height: int | None = None, deformed: np.ndarray | None = None) -> bytes:
    """The file of format ``fmt`` (one of :data:`RIG_FORMATS`) of ``character``
    (:class:`animator.Character`) moved by ``motion`` (:class:`animator.Motion2D`, drawing pixels)
    over its ``mesh`` (:class:`animator.mesh.Mesh`). ``scale``, ``offsets``, ``width``, ``height``:
    the canvas placement of the rendered frames, recorded by ``joints``; ``deformed``: (F, V, 2) the
    mesh as ARAP deformed it per frame, which ``glb``'s skin weights are fitted to."""
    if fmt == "joints":
        from .joints import encode_joints, joints_document

        return encode_joints(joints_document(motion, character.skeleton, scale, offsets, width, height))
    if fmt == "glb":
        from .gltf import encode_glb

        names = list(motion.joint_names)
        by_name = {j.name: j for j in character.skeleton}
        order = [j.name for j in character.skeleton if j.name in set(names)]  # parents first
        pick = [names.index(n) for n in order]
        parents = []
        for n in order:
            p = by_name[n].parent
            while p is not None and p not in order:  # a joint the motion leaves out: its parent's
                p = by_name[p].parent
            parents.append(-1 if p is None else order.index(p))
        rest = np.array([by_name[n].loc for n in order], np.float64)
        from .gltf import draw_ranks

        ranks = draw_ranks(parents, order, motion.part_joints, motion.part_order)
        return encode_glb(character.texture, character.mask, mesh, order, rest, parents,
                          np.asarray(motion.positions)[:, pick], motion.frame_time_s, deformed, ranks)
    raise ValueError(f"not a rig format: {fmt!r}")
