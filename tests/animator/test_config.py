"""Motion and retarget config readers (animator.config), on AnimatedDrawings' own files."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from animator.bvh import load_bvh
from animator.config import (
    check_against_bvh,
    check_against_character,
    load_motion_config,
    load_retarget_config,
    read_yaml,
)
from animator.errors import ConfigError
from tests.conftest import AD_EXAMPLES, AD_ROOT

CFG = AD_EXAMPLES / "config"
MOTIONS = ["dab", "jumping", "jumping_jacks", "wave_hello", "zombie"]


@pytest.mark.parametrize("name", MOTIONS)
def test_fixture_motion_configs_load_from_anywhere(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the AnimatedDrawings root: found via the config's parents
    cfg = load_motion_config(CFG / "motion" / f"{name}.yaml")
    assert Path(cfg.bvh_path).is_file()
    assert Path(cfg.bvh_path).resolve() == (AD_ROOT / yaml.safe_load((CFG / "motion" / f"{name}.yaml").read_text())["filepath"]).resolve()
    assert cfg.up in ("+y", "+z") and cfg.scale == 0.025
    assert len(cfg.forward_perp_joint_vectors) == 2
    check_against_bvh(cfg, load_retarget_config(CFG / "retarget" / ("cmu1_pfp.yaml" if name == "jumping_jacks" else "fair1_ppf.yaml")),
                      load_bvh(cfg.bvh_path).has_joint)


def test_motion_config_fields():
    cfg = load_motion_config(CFG / "motion" / "jumping.yaml")
    assert (cfg.start_frame_idx, cfg.end_frame_idx) == (150, 654)
    assert cfg.groundplane_joint == "LeftFoot" and cfg.up == "+z"
    assert cfg.forward_perp_joint_vectors == (("LeftShoulder", "RightShoulder"), ("LeftUpLeg", "RightUpLeg"))
    assert cfg.frame_range(654) == (150, 654)
    assert cfg.frame_range(400) == (150, 400)  # end past the clip is clamped, as AnimatedDrawings does
    with pytest.raises(ConfigError) as exc:
        cfg.frame_range(100)
    assert exc.value.field == "start_frame_idx"


def test_bvh_path_resolved_from_working_directory_first(tmp_path, monkeypatch):
    # AnimatedDrawings resolves filepath from the working directory: a copy there wins.
    (tmp_path / "examples" / "bvh" / "fair1").mkdir(parents=True)
    shutil.copy(AD_ROOT / "examples" / "bvh" / "fair1" / "dab.bvh", tmp_path / "examples" / "bvh" / "fair1" / "dab.bvh")
    monkeypatch.chdir(tmp_path)
    cfg = load_motion_config(CFG / "motion" / "dab.yaml")
    assert Path(cfg.bvh_path).resolve() == (tmp_path / "examples/bvh/fair1/dab.bvh").resolve()


def test_retarget_configs_read_python_tuple_tags():
    for name, n_groups in (("fair1_ppf", 3), ("cmu1_pfp", 3)):
        cfg = load_retarget_config(CFG / "retarget" / f"{name}.yaml")
        assert len(cfg.bvh_projection_bodypart_groups) == n_groups
        assert [g.method for g in cfg.bvh_projection_bodypart_groups] == ["pca", "pca", "frontal"]
        assert len(cfg.char_bodypart_groups) == 5
        assert cfg.char_starting_location == (0.0, 0.0, -0.5)
        assert cfg.char_bvh_root_offset.bvh_projection_bodypart_group_for_offset == "Lower Limbs"
        assert len(cfg.char_joint_bvh_joints_mapping) == 10
        assert cfg.char_runtime_checks == (("above", "neck", "right_shoulder", "left_shoulder"),)
    cfg = load_retarget_config(CFG / "retarget" / "fair1_ppf.yaml")
    assert cfg.mapping["right_hand"] == ("RightForeArm", "RightHand")
    assert list(cfg.mapping)[0] == "left_elbow"  # file order kept


def test_unsafe_yaml_tags_are_refused(tmp_path):
    evil = tmp_path / "evil.yaml"
    marker = tmp_path / "pwned"
    evil.write_text(f"filepath: !!python/object/apply:os.system ['touch {marker}']\n")
    with pytest.raises(ConfigError, match="not valid YAML") as exc:
        load_motion_config(evil)
    assert not marker.exists()
    assert exc.value.path == str(evil)


def test_python_tuple_tag_is_a_tuple(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text("a: !!python/tuple [x, y]\n")
    assert read_yaml(p) == {"a": ("x", "y")}


def _write(tmp_path: Path, src: Path, **changes) -> Path:
    data = read_yaml(src)
    for key, value in changes.items():
        if value is ...:
            data.pop(key)
        else:
            data[key] = value
    out = tmp_path / src.name
    out.write_text(yaml.dump(data))
    return out


@pytest.mark.parametrize("change,field", [
    ({"up": "+x"}, "up"),
    ({"up": ...}, "up"),
    ({"scale": 0}, "scale"),
    ({"scale": "big"}, "scale"),
    ({"start_frame_idx": -1}, "start_frame_idx"),
    ({"start_frame_idx": 1.5}, "start_frame_idx"),
    ({"start_frame_idx": 10, "end_frame_idx": 5}, "end_frame_idx"),
    ({"end_frame_idx": "all"}, "end_frame_idx"),
    ({"groundplane_joint": ...}, "groundplane_joint"),
    ({"forward_perp_joint_vectors": []}, "forward_perp_joint_vectors"),
    ({"forward_perp_joint_vectors": [["LeftShoulder"]]}, "forward_perp_joint_vectors[0]"),
    ({"filepath": "examples/bvh/fair1/nope.bvh"}, "filepath"),
    ({"frame_time": -0.1}, "frame_time"),
])
def test_bad_motion_config_names_file_and_field(tmp_path, change, field):
    change = {"filepath": str(AD_ROOT / "examples" / "bvh" / "fair1" / "dab.bvh"), **change}
    path = _write(tmp_path, CFG / "motion" / "dab.yaml", **change)
    with pytest.raises(ConfigError) as exc:
        load_motion_config(path)
    assert exc.value.path == str(path)
    assert exc.value.field == field
    assert str(path) in str(exc.value) and field in str(exc.value)


@pytest.mark.parametrize("change,field", [
    ({"char_starting_location": [0, 0]}, "char_starting_location"),
    ({"bvh_projection_bodypart_groups": [{"name": "a", "bvh_joint_names": ["Hips"], "method": "diagonal"}]},
     "bvh_projection_bodypart_groups[0].method"),
    ({"bvh_projection_bodypart_groups": [{"name": "a", "bvh_joint_names": ["Hips"], "method": "pca"},
                                         {"name": "a", "bvh_joint_names": ["Neck"], "method": "pca"}]},
     "bvh_projection_bodypart_groups"),
    ({"char_bodypart_groups": [{"bvh_depth_drivers": [], "char_joints": ["neck"]}]}, "char_bodypart_groups[0].bvh_depth_drivers"),
    ({"char_bvh_root_offset": {"bvh_projection_bodypart_group_for_offset": "Legs", "bvh_joints": [["A", "B"]], "char_joints": [["a", "b"]]}},
     "char_bvh_root_offset.bvh_projection_bodypart_group_for_offset"),
    ({"char_joint_bvh_joints_mapping": {"neck": ("Hips",)}}, "char_joint_bvh_joints_mapping.neck"),
    ({"char_runtime_checks": [["below", "neck", "a", "b"]]}, "char_runtime_checks[0]"),
    ({"char_joint_bvh_joints_mapping": ...}, "char_joint_bvh_joints_mapping"),
])
def test_bad_retarget_config_names_file_and_field(tmp_path, change, field):
    path = _write(tmp_path, CFG / "retarget" / "fair1_ppf.yaml", **change)
    with pytest.raises(ConfigError) as exc:
        load_retarget_config(path)
    assert exc.value.path == str(path)
    assert exc.value.field == field


def test_old_saggital_spelling_is_read(tmp_path):
    data = (CFG / "retarget" / "fair1_ppf.yaml").read_text().replace("method: frontal", "method: saggital")
    p = tmp_path / "r.yaml"
    p.write_text(data)
    assert load_retarget_config(p).group("Trunk").method == "sagittal"


def test_unknown_bvh_joints_are_reported_with_their_field(tmp_path):
    motion = load_motion_config(CFG / "motion" / "dab.yaml")
    bvh = load_bvh(motion.bvh_path)
    cmu = load_retarget_config(CFG / "retarget" / "cmu1_pfp.yaml")  # CMU joint names vs a FAIR clip
    with pytest.raises(ConfigError) as exc:
        check_against_bvh(motion, cmu, bvh.has_joint)
    assert exc.value.path == str(CFG / "retarget" / "cmu1_pfp.yaml")
    assert exc.value.field == "bvh_projection_bodypart_groups[0].bvh_joint_names"
    assert "LeftElbow" in str(exc.value) or "LeftWrist" in str(exc.value)

    bad_motion = load_motion_config(_write(tmp_path, CFG / "motion" / "dab.yaml", groundplane_joint="LeftAnkle",
                                           filepath=str(Path(motion.bvh_path).resolve())))
    with pytest.raises(ConfigError) as exc:
        check_against_bvh(bad_motion, load_retarget_config(CFG / "retarget" / "fair1_ppf.yaml"), bvh.has_joint)
    assert exc.value.field == "groundplane_joint" and "LeftAnkle" in str(exc.value)


def test_depth_driver_outside_projection_groups_is_refused(tmp_path):
    groups = read_yaml(CFG / "retarget" / "fair1_ppf.yaml")["char_bodypart_groups"]
    groups[1]["bvh_depth_drivers"] = ["LeftHandThumb1"]  # a BVH joint, but in no projection group
    path = _write(tmp_path, CFG / "retarget" / "fair1_ppf.yaml", char_bodypart_groups=groups)
    motion = load_motion_config(CFG / "motion" / "dab.yaml")
    with pytest.raises(ConfigError) as exc:
        check_against_bvh(motion, load_retarget_config(path), load_bvh(motion.bvh_path).has_joint)
    assert exc.value.field == "char_bodypart_groups[1].bvh_depth_drivers"


def test_character_joints_checked():
    cfg = load_retarget_config(CFG / "retarget" / "fair1_ppf.yaml")
    names = ["root", "hip", "torso", "neck", "right_shoulder", "right_elbow", "right_hand", "left_shoulder",
             "left_elbow", "left_hand", "right_hip", "right_knee", "right_foot", "left_hip", "left_knee"]
    parents = {n: (None if n == "root" else "root") for n in names}
    with pytest.raises(ConfigError) as exc:
        check_against_character(cfg, names, parents)  # no left_foot
    assert "left_foot" in str(exc.value)


def test_missing_and_broken_files(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_motion_config(tmp_path / "none.yaml")
    p = tmp_path / "broken.yaml"
    p.write_text("up: [+z\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_retarget_config(p)
    p.write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_motion_config(p)
