"""``python -m animator --format``: every export format from the command line, the format from the
output's extension, and the cases that must stop with a one-line error."""
from __future__ import annotations

import io
import json
import zipfile

import pytest
from PIL import Image

from tests.support.animator_cli import CHAR, DAB, FAIR, run

SMALL = ("--size", "96x80", "--max-frames", "4")


@pytest.mark.parametrize("name,fmt,check", [
    ("a.png", None, lambda b: Image.open(io.BytesIO(b)).n_frames == 4),                 # .png: APNG
    ("a.apng", None, lambda b: Image.open(io.BytesIO(b)).n_frames == 4),
    ("a.webm", None, lambda b: b[:4] == b"\x1aE\xdf\xa3"),                              # EBML header
    ("a.zip", "frames", lambda b: "frames.json" in zipfile.ZipFile(io.BytesIO(b)).namelist()),
    ("a.zip", "sheet", lambda b: "sheet.json" in zipfile.ZipFile(io.BytesIO(b)).namelist()),
    ("a.json", None, lambda b: len(json.loads(b)["frames"]) == 4),                      # .json: joints
    ("a.glb", None, lambda b: b[:4] == b"glTF"),
])
def test_each_export_format_from_the_command_line(tmp_path, name, fmt, check):
    out = tmp_path / name
    r = run(CHAR, "-m", DAB, "-r", FAIR, "-o", out, *SMALL, *(["--format", fmt] if fmt else []))
    assert r.returncode == 0, r.stderr
    assert check(out.read_bytes())


def test_a_zip_output_without_format_is_a_usage_error(tmp_path):
    r = run(CHAR, "-m", DAB, "-r", FAIR, "-o", tmp_path / "a.zip", *SMALL)
    assert r.returncode == 2 and "--format" in r.stderr and "frames or sheet" in r.stderr
    assert not (tmp_path / "a.zip").exists()


def test_a_scene_cannot_be_exported_as_one_rig(tmp_path):
    from tests.support.scenes import scene_file

    scene_file(tmp_path)
    r = run("scene.yaml", "--max-frames", "2", "-o", "scene.glb", cwd=tmp_path, timeout=300)
    assert r.returncode == 1 and "--dump-joints" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run("scene.yaml", "--max-frames", "2", "-o", "scene.png", cwd=tmp_path, timeout=300)   # frame formats do work
    assert r.returncode == 0, r.stderr
    assert Image.open(tmp_path / "scene.png").n_frames == 2


def test_help_lists_every_format():
    r = run("--help")
    for fmt in ("apng", "webm", "frames", "sheet", "joints", "glb"):
        assert fmt in r.stdout, fmt
