"""The rigged character as a glTF 2.0 binary (``.glb``) that plays its motion in any glTF viewer.

Contents: one triangle mesh (the animator's mesh over the mask, :mod:`animator.mesh`) textured
with the drawing (alpha = the mask, ``alphaMode: MASK``, unlit: ``KHR_materials_unlit``, drawn
from both sides); one skin whose joints are the character's skeleton (one node per joint, the
node tree is the skeleton's parent links), with inverse bind matrices of the rest pose; per-vertex
``JOINTS_0``/``WEIGHTS_0`` (:mod:`animator.formats.skin` says how they approximate the animator's
ARAP deformation); one animation, ``motion``, with a translation and a rotation track per joint,
one keyframe per output frame, linearly interpolated. The body-part groups keep the animator's
per-frame draw order as layers: each joint is lifted towards the viewer by its group's draw
position times :data:`LAYER` (:func:`draw_ranks`).

Coordinates: glTF's, y up, 1 unit = the drawing's larger side (AnimatedDrawings' rig unit), the
character in the z = 0 plane facing +z; the origin lies under the root joint's rest position, on
the line of the mask's lowest pixel, so the character stands on y = 0. A drawing pixel (x, y)
(y down) is at ((x - root_x) / D, (bottom - y) / D, 0).

Written with numpy and struct: the JSON chunk and one binary chunk, every buffer view 4-byte aligned.
"""
from __future__ import annotations

import json
import struct
from typing import Any, Sequence

import numpy as np

from ..errors import RenderError
from .png import png_bytes
from .skin import fit_weights, local_transforms, skin_weights

FLOAT, UBYTE, USHORT, UINT = 5126, 5121, 5123, 5125
ARRAY_BUFFER, ELEMENT_ARRAY_BUFFER = 34962, 34963


class _Bin:
    """The binary chunk being built: buffer views and accessors over it."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.length = 0
        self.views: list[dict[str, Any]] = []
        self.accessors: list[dict[str, Any]] = []

    def view(self, data: bytes, target: int | None = None) -> int:
        pad = (-self.length) % 4
        if pad:
            self.parts.append(b"\0" * pad)
            self.length += pad
        v: dict[str, Any] = {"buffer": 0, "byteOffset": self.length, "byteLength": len(data)}
        if target is not None:
            v["target"] = target
        self.parts.append(data)
        self.length += len(data)
        self.views.append(v)
        return len(self.views) - 1

    def accessor(self, array: np.ndarray, kind: str, target: int | None = None, bounds: bool = False) -> int:
        component = {np.float32: FLOAT, np.uint8: UBYTE, np.uint16: USHORT, np.uint32: UINT}[array.dtype.type]
        a: dict[str, Any] = {"bufferView": self.view(np.ascontiguousarray(array).tobytes(), target),
                             "componentType": component, "count": int(len(array)), "type": kind}
        if bounds:
            flat = array.reshape(len(array), -1)
            a["min"] = [float(v) for v in flat.min(axis=0)] if component == FLOAT else [int(v) for v in flat.min(0)]
            a["max"] = [float(v) for v in flat.max(axis=0)] if component == FLOAT else [int(v) for v in flat.max(0)]
        self.accessors.append(a)
        return len(self.accessors) - 1

    def data(self) -> bytes:
        return b"".join(self.parts)


#: glTF units between two body-part groups' layers (about 2 px of a 600 px drawing): enough for a
#: depth buffer to tell them apart, too little to see from the front.
LAYER = 1.0 / 256


def draw_ranks(parents: Sequence[int], names: Sequence[str], part_joints: Sequence[Sequence[str]] | None,
               part_order: np.ndarray | None) -> np.ndarray | None:
    """(F, J) per frame, the back-to-front position of the body-part group each joint's bones draw
    with (0 farthest back), as the rasteriser orders them: a bone belongs to its child joint's group,
    a joint in no group to its nearest ancestor's (else the first group). None without groups."""
    if not part_joints or part_order is None or np.ndim(part_order) != 2 or part_order.shape[1] != len(part_joints):
        return None
    group: dict[str, int] = {}
    for g, joints in enumerate(part_joints):
        for n in joints:
            group.setdefault(n, g)

    def group_of(j: int) -> int:
        while j >= 0 and names[j] not in group:
            j = parents[j]
        return group[names[j]] if j >= 0 else 0

    node_group = []
    for j in range(len(names)):
        children = [c for c, p in enumerate(parents) if p == j]
        node_group.append(group_of(children[0] if children else j))
    rank = np.argsort(np.asarray(part_order), axis=1)          # (F, P): group -> its draw position
    return rank[:, node_group].astype(np.float64)


def gltf_frame(points: np.ndarray, origin: tuple[float, float], unit: float) -> np.ndarray:
    """Drawing pixels (..., 2), y down, to glTF (..., 2) x right, y up, in units of ``unit`` pixels."""
    p = np.asarray(points, np.float64)
    return np.stack([(p[..., 0] - origin[0]) / unit, (origin[1] - p[..., 1]) / unit], axis=-1)


def encode_glb(texture: np.ndarray, mask: np.ndarray, mesh: Any, joint_names: Sequence[str],
               rest: np.ndarray, parents: Sequence[int], positions: np.ndarray, frame_time_s: float,
               deformed: np.ndarray | None = None, ranks: np.ndarray | None = None,
               name: str = "character") -> bytes:
    """The ``.glb`` of a character and its motion.

    Args:
        texture: (H, W, 4) uint8 RGBA drawing; mask: (H, W) bool, True on the character.
        mesh: :class:`animator.mesh.Mesh` over the mask (drawing pixels).
        joint_names, rest, parents: the skeleton: J names, (J, 2) rest positions (drawing pixels),
            parent index per joint (-1 for the top joint), parents before children.
        positions: (F, J, 2) posed joints per frame (drawing pixels), same joint order.
        frame_time_s: seconds per frame.
        deformed: (F, V, 2) the mesh's vertices per frame as the animator's ARAP put them: the skin
            weights are fitted to them (:func:`animator.formats.skin.fit_weights`); None: nearest-bone
            weights only.
        ranks: (F, J) draw position of each joint's body-part group per frame (:func:`draw_ranks`):
            joints are lifted ``rank * LAYER`` towards the viewer (+z), so overlapping parts show in
            the animator's order instead of fighting in one plane; None: all in z = 0.
    """
    parents = [int(p) for p in parents]
    J, F = len(joint_names), int(positions.shape[0])
    if positions.shape[1:] != (J, 2) or rest.shape != (J, 2) or len(parents) != J:
        raise RenderError("glTF export: skeleton and motion disagree on the joints")
    if any(p >= j for j, p in enumerate(parents)) or parents.count(-1) != 1:
        raise RenderError("glTF export: the skeleton must be one tree listed parents first")
    H, W = mask.shape
    top = parents.index(-1)
    rows = np.flatnonzero(mask.any(axis=1))
    origin = (float(rest[top, 0]), float(rows[-1] + 1))
    unit = float(max(H, W))

    b = _Bin()
    verts = gltf_frame(mesh.vertices, origin, unit)
    pos3 = np.zeros((len(verts), 3), np.float32)
    pos3[:, :2] = verts
    uv = (mesh.vertices / np.array([W, H], np.float64)).astype(np.float32)
    if deformed is None:
        joints, weights = skin_weights(mesh, rest, parents)
    else:
        joints, weights = fit_weights(mesh, rest, parents, np.asarray(positions, np.float64), deformed)
    tris = np.asarray(mesh.triangles, np.int64)
    idx = tris.astype(np.uint16 if len(verts) < 65536 else np.uint32).reshape(-1)
    a_pos = b.accessor(pos3, "VEC3", ARRAY_BUFFER, bounds=True)
    a_uv = b.accessor(uv, "VEC2", ARRAY_BUFFER)
    a_joints = b.accessor(joints, "VEC4", ARRAY_BUFFER)
    a_weights = b.accessor(weights, "VEC4", ARRAY_BUFFER)
    a_idx = b.accessor(idx, "SCALAR", ELEMENT_ARRAY_BUFFER)

    rest_g = gltf_frame(rest, origin, unit)
    ibm = np.tile(np.eye(4, dtype=np.float32), (J, 1, 1))
    ibm[:, 3, :2] = -rest_g        # column-major: the translation is the 4th column, stored 4th
    a_ibm = b.accessor(ibm.reshape(J, 16), "MAT4")

    rgba = np.array(texture, np.uint8)
    rgba[..., 3] = np.where(mask, rgba[..., 3], 0)
    image_view = b.view(png_bytes(rgba))

    times = (np.arange(F) * frame_time_s).astype(np.float32)
    a_time = b.accessor(times, "SCALAR", bounds=True)
    trans, ang = local_transforms(rest_g, gltf_frame(positions, origin, unit), parents)
    ang = np.unwrap(ang, axis=0)   # no 2-pi jumps between frames: consecutive quaternions stay on one side
    samplers, channels = [], []
    z = np.zeros((F, J)) if ranks is None else np.asarray(ranks, np.float64) * LAYER
    for j in range(J):
        t3 = np.zeros((F, 3), np.float32)
        t3[:, :2] = trans[:, j]
        t3[:, 2] = z[:, j] - (z[:, parents[j]] if parents[j] >= 0 else 0.0)
        q = np.zeros((F, 4), np.float32)
        q[:, 2], q[:, 3] = np.sin(ang[:, j] / 2), np.cos(ang[:, j] / 2)
        for path, values, kind in (("translation", t3, "VEC3"), ("rotation", q, "VEC4")):
            samplers.append({"input": a_time, "output": b.accessor(values, kind), "interpolation": "LINEAR"})
            channels.append({"sampler": len(samplers) - 1, "target": {"node": 1 + j, "path": path}})

    rest_local = [rest_g[j] - (rest_g[p] if p >= 0 else 0.0) for j, p in enumerate(parents)]
    joint_nodes = []
    for j in range(J):
        node: dict[str, Any] = {"name": str(joint_names[j]),
                                "translation": [float(rest_local[j][0]), float(rest_local[j][1]), 0.0]}
        kids = [1 + c for c, p in enumerate(parents) if p == j]
        if kids:
            node["children"] = kids
        joint_nodes.append(node)
    doc = {
        "asset": {"version": "2.0", "generator": "doodlepod animator"},
        "extensionsUsed": ["KHR_materials_unlit"],
        "scene": 0,
        "scenes": [{"name": name, "nodes": [0, 1 + top]}],
        "nodes": [{"name": name, "mesh": 0, "skin": 0}] + joint_nodes,
        "meshes": [{"name": name, "primitives": [{
            "attributes": {"POSITION": a_pos, "TEXCOORD_0": a_uv, "JOINTS_0": a_joints, "WEIGHTS_0": a_weights},
            "indices": a_idx, "material": 0, "mode": 4}]}],
        "skins": [{"name": "skeleton", "joints": [1 + j for j in range(J)], "inverseBindMatrices": a_ibm,
                   "skeleton": 1 + top}],
        "materials": [{"name": "drawing", "doubleSided": True, "alphaMode": "MASK", "alphaCutoff": 0.5,
                       "pbrMetallicRoughness": {"baseColorTexture": {"index": 0}, "metallicFactor": 0.0,
                                                "roughnessFactor": 1.0},
                       "extensions": {"KHR_materials_unlit": {}}}],
        "textures": [{"sampler": 0, "source": 0}],
        "samplers": [{"magFilter": 9729, "minFilter": 9729, "wrapS": 33071, "wrapT": 33071}],
        "images": [{"name": "texture", "bufferView": image_view, "mimeType": "image/png"}],
        "animations": [{"name": "motion", "samplers": samplers, "channels": channels}],
        "accessors": b.accessors,
        "bufferViews": b.views,
        "buffers": [{"byteLength": b.length}],
    }
    return glb(doc, b.data())


def glb(doc: dict[str, Any], binary: bytes) -> bytes:
    """The GLB container: 12-byte header, JSON chunk (space-padded), BIN chunk (zero-padded)."""
    js = json.dumps(doc, separators=(",", ":")).encode()
    js += b" " * ((-len(js)) % 4)
    binary += b"\0" * ((-len(binary)) % 4)
    total = 12 + 8 + len(js) + 8 + len(binary)
    return (struct.pack("<4sII", b"glTF", 2, total) + struct.pack("<I4s", len(js), b"JSON") + js
            + struct.pack("<I4s", len(binary), b"BIN\0") + binary)


def glb_of_rig(character: Any, mesh: Any, motion: Any, deformed: np.ndarray | None = None) -> bytes:
    """:func:`encode_glb` of ``character`` (:class:`animator.Character`) moved by ``motion``
    (:class:`animator.Motion2D`): the joints the motion moves, parents first, each joint the motion
    leaves out replaced by its nearest ancestor that it keeps."""
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
    ranks = draw_ranks(parents, order, motion.part_joints, motion.part_order)
    return encode_glb(character.texture, character.mask, mesh, order, rest, parents,
                      np.asarray(motion.positions)[:, pick], motion.frame_time_s, deformed, ranks)
