"""The command line: --help, a real run, --dump-joints, and one-line errors with stable exit codes."""
import json
import os

import numpy as np
import pytest
from PIL import Image

from tests.conftest import AD_ROOT
from tests.support.animator_cli import CHAR, CMU, DAB, FAIR, JJ, run


def test_help_explains_options_defaults_coordinates_and_exit_codes():
    r = run("--help")
    assert r.returncode == 0
    for word in ("--motion", "--retarget", "--format", "--size", "--fps", "native", "--max-frames",
                 "--dump-joints", "500x500", "default 25", "y down", "exit codes", "top-left"):
        assert word in r.stdout, word


def test_renders_a_gif(tmp_path):
    out = tmp_path / "dab.gif"
    r = run(CHAR, "--motion", DAB, "--retarget", FAIR, "-o", out, "--size", "128x112", "--max-frames", "10", "-v")
    assert r.returncode == 0, r.stderr
    im = Image.open(out)
    assert im.format == "GIF" and im.size == (128, 112) and im.n_frames == 10
    assert "timings" in r.stderr or "ms" in r.stderr  # -v logs progress and timings


def test_size_with_one_number_is_a_square(tmp_path):
    r = run(CHAR, "-m", DAB, "-r", FAIR, "-o", tmp_path / "sq.gif", "--size", "96", "--max-frames", "2")
    assert r.returncode == 0, r.stderr
    assert Image.open(tmp_path / "sq.gif").size == (96, 96)


def test_format_from_extension_and_flag(tmp_path):
    r = run(CHAR, "-m", DAB, "-r", FAIR, "-o", tmp_path / "a.webp", "--size", "64x64", "--max-frames", "3")
    assert r.returncode == 0, r.stderr
    assert Image.open(tmp_path / "a.webp").format == "WEBP"
    r = run(CHAR, "-m", DAB, "-r", FAIR, "-o", tmp_path / "a.bin", "--format", "gif", "--size", "64x64", "--max-frames", "3")
    assert r.returncode == 0, r.stderr
    assert Image.open(tmp_path / "a.bin").format == "GIF"


def test_dump_joints_native_frames_match_the_bvh(tmp_path):
    import animator

    dump = tmp_path / "joints.json"
    r = run(CHAR, "-m", JJ, "-r", CMU, "-o", tmp_path / "jj.gif", "--size", "64x64", "--fps", "native",
            "--dump-joints", dump)
    assert r.returncode == 0, r.stderr
    d = json.loads(dump.read_text())
    ch = animator.load_character(AD_ROOT / CHAR)
    assert d["joints"] == [j.name for j in ch.skeleton]
    frames = np.array(d["frames"])
    assert frames.shape == (125, 16, 2)
    cwd = os.getcwd()
    os.chdir(AD_ROOT)
    try:
        m = animator.retarget(ch, animator.load_motion_config(JJ), animator.load_retarget_config(CMU))
    finally:
        os.chdir(cwd)
    np.testing.assert_allclose(frames, m.positions, atol=1e-3)  # frame i = BVH frame start + i
    # first frame: the root is where the drawing has it (drawing pixels, y down)
    np.testing.assert_allclose(frames[0][0], ch.skeleton[0].loc, atol=1e-3)


def _one_line_error(r, code):
    assert r.returncode == code, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


def test_missing_character_is_exit_1(tmp_path):
    msg = _one_line_error(run("examples/characters/nobody", "-m", DAB, "-r", FAIR, "-o", tmp_path / "x.gif"), 1)
    assert "nobody" in msg and "char_cfg.yaml" in msg
    assert not (tmp_path / "x.gif").exists()


def test_bad_config_field_is_exit_1(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text((AD_ROOT / DAB).read_text().replace("scale: 0.025", "scale: fast"))
    msg = _one_line_error(run(CHAR, "-m", bad, "-r", FAIR, "-o", tmp_path / "x.gif"), 1)
    assert "bad.yaml" in msg and "scale" in msg


def test_bad_bvh_is_exit_1(tmp_path):
    bvh = tmp_path / "broken.bvh"
    bvh.write_text("HIERARCHY\nROOT Hips\n{\n")
    cfg = tmp_path / "m.yaml"
    cfg.write_text((AD_ROOT / DAB).read_text().replace("examples/bvh/fair1/dab.bvh", str(bvh)))
    msg = _one_line_error(run(CHAR, "-m", cfg, "-r", FAIR, "-o", tmp_path / "x.gif"), 1)
    assert "broken.bvh" in msg


@pytest.mark.parametrize("args", [["--size", "big"], ["--size", "64x64x64"], ["--size", "8"], ["--fps", "-3"], ["--max-frames", "0"], ["--format", "avi"]])
def test_bad_command_line_is_exit_2(tmp_path, args):
    r = run(CHAR, "-m", DAB, "-r", FAIR, "-o", tmp_path / "x.gif", *args)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr


def test_bad_colours_is_exit_1(tmp_path):
    msg = _one_line_error(run(CHAR, "-m", DAB, "-r", FAIR, "-o", tmp_path / "x.gif", "--colours", "999"), 1)
    assert "colours" in msg


def test_bad_merge_is_exit_1(tmp_path):
    msg = _one_line_error(run(CHAR, "-m", DAB, "-r", FAIR, "-o", tmp_path / "x.gif", "--merge", "-2"), 1)
    assert "merge" in msg


def test_merge_0_keeps_every_shade(tmp_path):
    """--merge 0 keeps the quantiser's 16 shades; the default merges char1's paper greys into one."""
    from PIL import Image

    sizes = {}
    for merge in ("0", None):
        out = tmp_path / f"m{merge}.gif"
        extra = ["--merge", merge] if merge else []
        assert run(CHAR, "-m", DAB, "-r", FAIR, "-o", out, "--size", "120x120", "--max-frames", "3", *extra).returncode == 0
        im = Image.open(out)
        colours = set()
        for k in range(im.n_frames):
            im.seek(k)
            colours |= {c for _, c in im.convert("RGBA").getcolors(1 << 16) if c[3] == 255}
        sizes[merge] = len(colours)
    assert sizes["0"] == 16 and sizes[None] < 8, sizes


def test_unwritable_output_is_exit_3(tmp_path):
    target = tmp_path / "missing-dir" / "x.gif"
    msg = _one_line_error(run(CHAR, "-m", DAB, "-r", FAIR, "-o", target, "--size", "64x64", "--max-frames", "2"), 3)
    assert str(target) in msg
    assert not target.parent.exists()


def test_background_and_tolerance_flags(tmp_path):
    out = tmp_path / "w.gif"
    r = run(CHAR, "-m", DAB, "-r", FAIR, "-o", out, "--size", "96x96", "--max-frames", "5", "--background", "#ffffff",
            "--tolerance", "8")
    assert r.returncode == 0, r.stderr
    im = Image.open(out)
    assert (np.asarray(im.convert("RGBA"))[..., 3] == 255).all()
    assert run(CHAR, "-m", DAB, "-r", FAIR, "-o", out, "--background", "pink").returncode == 2


def test_dump_joints_with_a_start_frame(tmp_path):
    dump = tmp_path / "j.json"
    r = run(CHAR, "-m", "examples/config/motion/jumping.yaml", "-r", FAIR, "-o", tmp_path / "j.gif", "--size", "48x48",
            "--fps", "native", "--dump-joints", dump)
    assert r.returncode == 0, r.stderr
    d = json.loads(dump.read_text())
    assert len(d["frames"]) == 654 - 150
    assert d["source_frames"][0] == 150 and d["source_frames"][-1] == 653


def test_without_retarget_the_config_is_derived_and_poses_like_the_hand_written_one(tmp_path):
    r = run(CHAR, "-m", JJ, "-o", tmp_path / "a.gif", "--fps", "native", "--dump-joints", tmp_path / "a.json", "-v")
    assert r.returncode == 0, r.stderr
    assert "CMU (AnimatedDrawings' cmu1) joint names" in r.stderr  # the family it recognised
    r = run(CHAR, "-m", JJ, "-r", CMU, "-o", tmp_path / "b.gif", "--fps", "native", "--dump-joints", tmp_path / "b.json")
    assert r.returncode == 0, r.stderr
    a = np.array(json.loads((tmp_path / "a.json").read_text())["frames"])
    b = np.array(json.loads((tmp_path / "b.json").read_text())["frames"])
    assert a.shape == b.shape and np.abs(a - b).max() < 0.01 * 602  # within 1% of char1's larger side


def test_motion_may_be_a_bvh_file(tmp_path):
    r = run(CHAR, "-m", "examples/bvh/fair1/dab.bvh", "-o", tmp_path / "dab.gif", "--max-frames", "10")
    assert r.returncode == 0, r.stderr
    with Image.open(tmp_path / "dab.gif") as im:
        assert im.n_frames == 10


def test_print_retarget_writes_animated_drawings_yaml_that_reads_back(tmp_path):
    r = run("--motion", DAB, "--print-retarget")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("# retarget config derived from") and "FAIR1/Rokoko/Mixamo joint names" in r.stdout
    assert "\nchar_starting_location:" in r.stdout and "!!python/tuple" in r.stdout
    (tmp_path / "derived.yaml").write_text(r.stdout)
    r = run(CHAR, "-m", DAB, "-r", tmp_path / "derived.yaml", "-o", tmp_path / "x.gif", "--max-frames", "3")
    assert r.returncode == 0, r.stderr
    r = run("--print-retarget")
    assert r.returncode == 2 and "--motion" in r.stderr


def test_an_unrecognised_skeleton_without_retarget_is_exit_1_listing_what_is_missing(tmp_path):
    text = (AD_ROOT / "examples/bvh/fair1/dab.bvh").read_text().replace("ForeArm", "Wing")
    (tmp_path / "bird.bvh").write_text(text)
    r = run(CHAR, "-m", tmp_path / "bird.bvh", "-o", tmp_path / "x.gif")
    assert r.returncode == 1
    assert "bird.bvh" in r.stderr and "no left forearm" in r.stderr and "no right forearm" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_char_cfg_file_with_motion_is_a_character_not_a_scene(tmp_path):
    r = run(f"{CHAR}/char_cfg.yaml", "-m", DAB, "-r", FAIR, "-o", tmp_path / "c.gif", "--max-frames", "3")
    assert r.returncode == 0, r.stderr
    with Image.open(tmp_path / "c.gif") as im:
        assert im.n_frames == 3


def test_processes_write_the_same_file_as_one(tmp_path):
    outs = []
    for n in (1, 2):
        out = tmp_path / f"dab-{n}.gif"
        r = run(CHAR, "--motion", DAB, "--retarget", FAIR, "-o", out, "--size", "96", "--fps", "native", "-j", n)
        assert r.returncode == 0, r.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] and Image.open(tmp_path / "dab-2.gif").n_frames == 339
