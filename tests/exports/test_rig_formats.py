"""The joint tracks (JSON) and the rigged glTF: the .glb passes the Khronos glTF-Validator, and the
skin's joint transforms put every joint where the motion has it."""
from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from animator.formats.gltf import gltf_frame
from animator.formats.skin import local_transforms, skin_weights
from tests.conftest import CHAR1, FAIR, MOTION_CONFIGS
from tests.exports.conftest import node_tools


def test_joints_json_has_names_parents_frames_and_the_canvas_placement(render_as, char1):
    r = render_as("joints")
    assert r.mime == "application/json" and r.extension == "json"
    doc = json.loads(r.data)
    names = [j.name for j in char1.skeleton]
    assert doc["joints"] == names
    assert doc["parents"] == [j.parent for j in char1.skeleton]
    assert "y down" in doc["coordinates"]
    frames = np.array(doc["frames"])
    assert frames.shape == (12, len(names), 2)
    gif = render_as("gif")                       # the same motion as the rendered frames
    assert np.allclose(frames, gif.motion.positions, atol=1e-3)
    canvas = doc["canvas"]
    assert (canvas["width"], canvas["height"]) == (160, 144)
    assert canvas["scale"] == pytest.approx(gif.scale, rel=1e-5)
    assert np.allclose(canvas["offsets"], gif.offsets, atol=1e-3)
    on_canvas = canvas["scale"] * frames + np.array(canvas["offsets"])[:, None, :]
    assert (on_canvas >= 0).all() and (on_canvas[..., 0] <= 160).all() and (on_canvas[..., 1] <= 144).all()


def test_cli_dump_joints_writes_the_joints_format(tmp_path):
    from tests.support.animator_cli import CHAR, DAB, FAIR, run

    r = run(CHAR, "--motion", DAB, "--retarget", FAIR, "-o", tmp_path / "a.json", "--format", "joints",
            "--size", "160x144", "--max-frames", "12", "--dump-joints", tmp_path / "d.json")
    assert r.returncode == 0, r.stderr
    a, d = json.loads((tmp_path / "a.json").read_text()), json.loads((tmp_path / "d.json").read_text())
    assert a == d and a["parents"][0] is None


def test_local_transforms_compose_back_to_the_posed_joints(render_as, char1):
    motion = render_as("gif").motion
    names = [j.name for j in char1.skeleton]
    parents = [-1 if j.parent is None else names.index(j.parent) for j in char1.skeleton]
    rest = np.array([j.loc for j in char1.skeleton])
    trans, ang = local_transforms(rest, motion.positions, parents)
    world_pos = np.zeros_like(motion.positions)
    world_ang = np.zeros(ang.shape)
    for j, p in enumerate(parents):
        if p < 0:
            world_pos[:, j], world_ang[:, j] = trans[:, j], ang[:, j]
            continue
        c, s = np.cos(world_ang[:, p]), np.sin(world_ang[:, p])
        t = trans[:, j]
        world_pos[:, j] = world_pos[:, p] + np.stack([c * t[:, 0] - s * t[:, 1], s * t[:, 0] + c * t[:, 1]], 1)
        world_ang[:, j] = world_ang[:, p] + ang[:, j]
    assert np.allclose(world_pos, motion.positions, atol=1e-9)
    # bones keep their length in the retargeting, so the translations below the root are the rest offsets
    rest_local = np.array([rest[j] - rest[p] for j, p in enumerate(parents) if p >= 0])
    assert np.allclose(trans[:, 1:], rest_local[None], atol=1e-6)


def test_skin_weights_are_normalised_and_follow_the_nearest_bones(char1):
    from animator.mesh import build_mesh

    rest = np.array([j.loc for j in char1.skeleton])
    names = [j.name for j in char1.skeleton]
    parents = [-1 if j.parent is None else names.index(j.parent) for j in char1.skeleton]
    mesh = build_mesh(char1.mask, keep_points=rest)
    joints, weights = skin_weights(mesh, rest, parents)
    assert joints.shape == weights.shape == (len(mesh.vertices), 4)
    assert np.allclose(weights.sum(axis=1), 1, atol=1e-6) and (weights >= 0).all()
    # a vertex at the left hand moves with the left elbow (the joint that turns the forearm)
    hand = rest[names.index("left_hand")]
    v = np.argmin(np.hypot(*(mesh.vertices - hand).T))
    assert joints[v, 0] == names.index("left_elbow") and weights[v, 0] == 1
    # leaf joints (hands, feet) drive no bone, so they weigh nothing
    leaves = {i for i in range(len(names)) if i not in parents}
    assert not any(j in leaves for j, w in zip(joints.ravel(), weights.ravel()) if w > 0)


def _validate(path) -> dict:
    tools = node_tools()
    out = subprocess.run(["node", str(tools / "validate_gltf.mjs"), str(path)], capture_output=True, text=True,
                         timeout=120, check=True)
    return json.loads(out.stdout)


def test_glb_passes_the_khronos_validator_with_a_skin_a_texture_and_the_animation(render_as, char1, tmp_path):
    r = render_as("glb", max_frames=None, fps=25)
    assert r.mime == "model/gltf-binary" and r.extension == "glb"
    path = tmp_path / "dab.glb"
    path.write_bytes(r.data)
    report = _validate(path)
    issues = report["issues"]
    assert issues["numErrors"] == 0, issues["messages"]
    assert issues["numWarnings"] == 0, issues["messages"]
    info = report["info"]
    assert info["animationCount"] == 1 and info["hasSkins"] and info["hasTextures"]
    assert info["maxInfluences"] == 4 and info["drawCallCount"] == 1
    image = next(res["image"] for res in info["resources"] if res["pointer"] == "/images/0")
    assert (image["width"], image["height"]) == char1.size and image["format"] == "rgba"


def test_the_validator_catches_a_broken_glb(render_as, tmp_path):
    data = bytearray(render_as("glb").data)
    js_len = int.from_bytes(data[12:16], "little")
    doc = json.loads(data[20:20 + js_len])
    doc["accessors"][0]["count"] += 5                   # positions now overrun their buffer view
    js = json.dumps(doc, separators=(",", ":")).encode()
    js += b" " * (js_len - len(js))
    assert len(js) == js_len  # the same length: the chunk layout holds
    data[20:20 + js_len] = js
    path = tmp_path / "broken.glb"
    path.write_bytes(bytes(data))
    assert _validate(path)["issues"]["numErrors"] > 0


def test_gltf_frame_is_y_up_in_drawing_units():
    pts = gltf_frame(np.array([[264.0, 397.0], [264.0, 97.0], [364.0, 397.0]]), (264.0, 397.0), 600.0)
    assert np.allclose(pts, [[0, 0], [0, 0.5], [1 / 6, 0]])
    assert CHAR1.is_dir()


def test_weights_fitted_to_arap_follow_the_animators_mesh_closer_than_nearest_bones(char1):
    import animator
    from animator.api import Rig, pose_clip
    from animator.formats.skin import blend, fit_weights

    motion = pose_clip(char1, animator.load_motion_config(MOTION_CONFIGS / "dab.yaml"),
                       animator.load_retarget_config(FAIR), fps=25)
    rig = Rig.build(char1, motion)
    arap, _ = rig.deform(motion)
    names = [j.name for j in char1.skeleton]
    assert motion.joint_names == names
    parents = [-1 if j.parent is None else names.index(j.parent) for j in char1.skeleton]
    rest = np.array([j.loc for j in char1.skeleton])
    errors = {}
    for how, (joints, weights) in {"nearest": skin_weights(rig.mesh, rest, parents),
                                   "fitted": fit_weights(rig.mesh, rest, parents, motion.positions, arap)}.items():
        assert np.allclose(weights.sum(axis=1), 1, atol=1e-6) and (weights >= 0).all()
        moved = blend(rest, motion.positions, parents, rig.mesh.vertices, joints, weights)
        errors[how] = np.hypot(*(moved - arap).transpose(2, 0, 1))
    print({k: (round(float(e.mean()), 2), round(float(np.percentile(e, 95)), 1)) for k, e in errors.items()})
    assert errors["fitted"].mean() < 0.75 * errors["nearest"].mean()
    assert np.percentile(errors["fitted"], 95) < 0.75 * np.percentile(errors["nearest"], 95)
    assert errors["fitted"].mean() < 0.015 * max(char1.size)      # within 1.5% of the drawing's size


def test_draw_ranks_follow_the_motions_part_order(render_as, char1):
    from animator.formats.gltf import draw_ranks

    motion = render_as("gif", max_frames=None, fps=25).motion
    names = [j.name for j in char1.skeleton]
    parents = [-1 if j.parent is None else names.index(j.parent) for j in char1.skeleton]
    ranks = draw_ranks(parents, names, motion.part_joints, motion.part_order)
    assert ranks.shape == (motion.n_frames, len(names))
    i = names.index
    groups = motion.part_joints                  # fair1: trunk, left arm, right arm, left leg, right leg
    for f in range(motion.n_frames):
        pos = {g: int(np.flatnonzero(motion.part_order[f] == g)[0]) for g in range(len(groups))}
        # a bone draws with its child joint's group: the elbow's node turns the forearm (arm group),
        # the shoulder's the upper arm (arm group), the torso's the neck and shoulders (trunk)
        assert ranks[f, i("left_elbow")] == pos[1] and ranks[f, i("left_shoulder")] == pos[1]
        assert ranks[f, i("torso")] == pos[0] and ranks[f, i("right_knee")] == pos[4]
    assert len(np.unique(ranks[:, i("left_elbow")])) > 1      # the order changes during the clip
    assert draw_ranks(parents, names, None, None) is None


def test_a_skeleton_other_than_the_humanoid_exports_a_valid_glb(tmp_path):
    import animator
    from tests.support.three_arms import three_arm_retarget, three_armed_char1

    char = animator.load_character(three_armed_char1(tmp_path / "three_arms"))
    r = animator.render(char, animator.load_motion_config(MOTION_CONFIGS / "dab.yaml"),
                        animator.load_retarget_config(three_arm_retarget(tmp_path / "r.yaml")),
                        animator.RenderOptions(format="glb", max_frames=20))
    path = tmp_path / "three_arms.glb"
    path.write_bytes(r.data)
    report = _validate(path)
    assert report["issues"]["numErrors"] == 0, report["issues"]["messages"]
    js_len = int.from_bytes(r.data[12:16], "little")
    doc = json.loads(r.data[20:20 + js_len])
    names = [n["name"] for n in doc["nodes"][1:]]
    assert names == [j.name for j in char.skeleton] and "left_hand2" in names
    assert len(doc["animations"][0]["channels"]) == 2 * len(names)


def test_glb_rotation_keys_never_flip_between_frames(render_as):
    data = render_as("glb", max_frames=None, fps=25).data
    js_len = int.from_bytes(data[12:16], "little")
    doc = json.loads(data[20:20 + js_len])
    binary = data[20 + js_len + 8:]
    for ch in doc["animations"][0]["channels"]:
        if ch["target"]["path"] != "rotation":
            continue
        acc = doc["accessors"][doc["animations"][0]["samplers"][ch["sampler"]]["output"]]
        view = doc["bufferViews"][acc["bufferView"]]
        q = np.frombuffer(binary, np.float32, acc["count"] * 4, view["byteOffset"]).reshape(-1, 4)
        assert np.allclose(np.linalg.norm(q, axis=1), 1, atol=1e-5)
        assert ((q[1:] * q[:-1]).sum(axis=1) > 0).all()   # the short way round from each key to the next
