"""The app's pieces on their own: settings table, motion library, storage, render slots, image intake.

The HTTP behaviour end to end (gunicorn + TorchServe + S3) is in test_app_e2e.py.
"""
from __future__ import annotations

import io
import multiprocessing
import os
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app import config, coordinates
from app.config import SETTINGS, SettingsError, load_settings, unknown_variables
from app.deadline import Deadline
from app.errors import DeadlineExceeded, StorageFailed, TooLarge, UnreadableImage, UnsupportedType
from app.motions.library import BUILTIN_DIR, LibraryError, load_library, load_motions
from app.render import steps
from app.render.admission import InflightSlots
from app.storage.backends import LocalStorage
from tests.conftest import REPO
from tests.support import wait

# --- settings ---------------------------------------------------------------------------------

def test_every_setting_is_documented_and_parses_its_default() -> None:
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names))
    for s in SETTINGS:
        assert re.fullmatch(r"DOODLEPOD_[A-Z0-9_]+", s.name)
        assert len(s.description) > 15, s.name
    settings = load_settings({})
    assert settings.port == 8000 and settings.storage == "local"
    assert settings.default_motions == ("dab", "jumping", "zombie")
    table = config.markdown_table()
    assert all(f"`{n}`" in table for n in names)


def test_settings_parse_and_reject_bad_values() -> None:
    s = load_settings({"DOODLEPOD_PORT": "9000", "DOODLEPOD_ACCESS_LOG": "off",
                       "DOODLEPOD_DEFAULT_MOTIONS": "dab, zombie", "DOODLEPOD_STORAGE": "S3"})
    assert (s.port, s.access_log, s.default_motions, s.storage) == (9000, False, ("dab", "zombie"), "s3")
    with pytest.raises(SettingsError, match="DOODLEPOD_PORT"):
        load_settings({"DOODLEPOD_PORT": "eighty"})
    with pytest.raises(SettingsError, match="DOODLEPOD_STORAGE"):
        load_settings({"DOODLEPOD_STORAGE": "ftp"})
    with pytest.raises(SettingsError, match="DOODLEPOD_RENDER_FPS"):
        load_settings({"DOODLEPOD_RENDER_FPS": "-3"})
    assert load_settings({"DOODLEPOD_RENDER_FPS": "Native"}).render_fps == "native"
    with pytest.raises(SettingsError, match="DOODLEPOD_REQUEST_DEADLINE_S"):
        load_settings({"DOODLEPOD_REQUEST_DEADLINE_S": "0"})
    assert unknown_variables({"DOODLEPOD_PROT": "1", "DOODLEPOD_PORT": "1", "DOODLEPOD_VENV": "x",
                              "DOODLEPOD_RUN_DIR": "x"}) == ["DOODLEPOD_PROT"]


def test_no_module_reads_the_environment_for_a_setting_except_config() -> None:
    for path in (REPO / "app").rglob("*.py"):
        if path.name in ("config.py",):
            continue
        text = path.read_text()
        for m in re.finditer(r"environ(?:\.get)?\(?\[?[\"'](DOODLEPOD_[A-Z_]+)", text):
            # gunicorn_conf and create_app *write* DOODLEPOD_RUNTIME_DIR for the workers; nothing reads around the table
            assert m.group(1) == "DOODLEPOD_RUNTIME_DIR", f"{path.name} reads {m.group(1)} outside app/config.py"


# --- motion library ---------------------------------------------------------------------------

def test_builtin_library_has_the_old_clients_motions_and_license() -> None:
    motions = load_motions()
    assert {"dab", "jumping", "zombie"} <= set(motions)
    assert (BUILTIN_DIR / "LICENSE").read_text().strip().startswith("MIT License")
    for m in motions.values():
        assert m.motion_cfg.is_file() and (m.retarget_cfg is None or m.retarget_cfg.is_file())
        assert m.retarget_cfg is not None or m.motion_cfg.suffix == ".bvh"  # 'auto' derives from a clip


def test_operator_library_merges_over_builtins(tmp_path: Path) -> None:
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "m.yaml").write_text("filepath: x.bvh\n")
    (tmp_path / "cfg" / "r.yaml").write_text("{}\n")
    (tmp_path / "library.yaml").write_text(
        "motions:\n  dab: {motion: cfg/m.yaml, retarget: cfg/r.yaml, description: my dab}\n"
        "  hop: {motion: cfg/m.yaml, retarget: cfg/r.yaml}\n")
    motions = load_motions(tmp_path)
    assert motions["dab"].description == "my dab" and motions["dab"].source == str(tmp_path)
    assert motions["hop"].motion_cfg == (tmp_path / "cfg" / "m.yaml").resolve()
    assert motions["zombie"].source == "builtin"


@pytest.mark.parametrize("text, fragment", [
    ("motions: [a]", "mapping under 'motions'"),
    ("motions:\n  x: {motion: nope.yaml, retarget: nope.yaml}", "not found"),
    ("motions:\n  '../x': {motion: a, retarget: b}", "motion name"),
    ("motions:\n  x: {motion: a}", "needs 'motion' and 'retarget'"),
    ("motions: [", "not valid YAML"),
])
def test_bad_library_is_named(tmp_path: Path, text: str, fragment: str) -> None:
    (tmp_path / "library.yaml").write_text(text)
    with pytest.raises(LibraryError, match=re.escape(fragment)):
        load_library(tmp_path, "ops")
    with pytest.raises(LibraryError, match="not found"):
        load_library(tmp_path / "missing", "ops")


# --- local storage ----------------------------------------------------------------------------

def test_local_storage_is_atomic_and_confined(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = LocalStorage(tmp_path / "files", public_url="https://doodles.example.com/")
    store.put("abc/dab.gif", b"GIF89a-complete", "image/gif", Deadline(5))
    assert store.path_of("abc/dab.gif").read_bytes() == b"GIF89a-complete"
    assert store.url("abc/dab.gif", "http://ignored") == "https://doodles.example.com/files/abc/dab.gif"
    # a write that fails half way leaves neither a partial target nor a temp file behind
    real_fdopen = os.fdopen

    class Exploding(io.BufferedWriter):
        def write(self, data):  # type: ignore[override]
            super().write(data[:3])
            raise OSError(28, "No space left on device")

    def failing_fdopen(fd, mode="r", *a, **k):
        return Exploding(real_fdopen(fd, "wb", buffering=0)) if mode == "wb" else real_fdopen(fd, mode, *a, **k)

    monkeypatch.setattr(os, "fdopen", failing_fdopen)
    with pytest.raises(StorageFailed, match="No space left"):
        store.put("abc/zombie.gif", b"GIF89a-complete", "image/gif", Deadline(5))
    monkeypatch.undo()
    assert sorted(p.name for p in (tmp_path / "files" / "abc").iterdir()) == ["dab.gif"]
    for bad in ("../etc/passwd", "/abs", "a//b", "abc/.partial-x.gif", "abc/missing.gif"):
        assert store.path_of(bad) is None
    with pytest.raises(DeadlineExceeded):
        d = Deadline(0.001)
        d.expires_at -= 1
        store.put("abc/late.gif", b"x", "image/gif", d)


# --- render slots -----------------------------------------------------------------------------

def _hold_slot(folder: str, count: int, ready, done) -> None:
    slots = InflightSlots(folder, count)
    slot = slots.try_acquire()
    ready.put(slot is not None)
    done.get(timeout=30)
    os._exit(0)  # die holding the slot, without releasing it


def test_inflight_slots_are_shared_across_processes_and_never_wait(tmp_path: Path) -> None:
    slots = InflightSlots(tmp_path, 2)
    first = slots.try_acquire()
    assert first is not None
    ctx = multiprocessing.get_context("spawn")
    ready, done = ctx.Queue(), ctx.Queue()
    other = ctx.Process(target=_hold_slot, args=(str(tmp_path), 2, ready, done))
    other.start()
    try:
        assert ready.get(timeout=60) is True          # the other process got the second slot
        assert slots.try_acquire() is None            # both taken: refused at once
        first.release()
        again = slots.try_acquire()
        assert again is not None
        again.release()
    finally:
        done.put(True)
        other.join(30)
    assert other.exitcode == 0
    # the process died holding its slot: the kernel dropped its lock, so both slots are free again
    a, b = slots.try_acquire(), slots.try_acquire()
    assert a is not None and b is not None


# --- image intake (runs in the render processes) ------------------------------------------------

def _encode(img: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


def test_prepare_image_honours_exif_orientation_and_downsizes() -> None:
    # Stored 400x200 (landscape) with a black square top-left; EXIF 6 = rotate 90 deg clockwise to show.
    stored = Image.new("RGB", (400, 200), "white")
    stored.paste((0, 0, 0), (0, 0, 40, 40))
    exif = Image.Exif()
    exif[0x0112] = 6
    data = _encode(stored, "JPEG", exif=exif, quality=95)
    prepared = steps.prepare_image(data, max_pixels=10**7, max_side=100)
    assert prepared.image_size == (200, 400)               # shown portrait
    assert prepared.rgb.shape == (100, 50, 3)              # downsized to a 100 px longest side
    assert prepared.scale == pytest.approx(0.25)
    assert prepared.rgb[2, -3].max() < 80                  # the square is now top-right
    assert prepared.rgb[2, 2].min() > 200
    assert Image.open(io.BytesIO(prepared.png)).size == (50, 100)


def test_prepare_image_reads_heic_with_its_orientation() -> None:
    # What an iPhone uploads: HEIC (HEVC in HEIF), stored landscape, shown portrait. pillow-heif
    # writes the EXIF orientation as the HEIF rotation that libheif applies when decoding.
    stored = Image.new("RGB", (400, 200), "white")
    stored.paste((0, 0, 0), (0, 0, 40, 40))
    exif = Image.Exif()
    exif[0x0112] = 6
    data = _encode(stored, "HEIF", exif=exif.tobytes(), quality=90)
    assert data[4:12] == b"ftypheic"
    prepared = steps.prepare_image(data, max_pixels=10**7, max_side=100)
    assert prepared.format == "HEIF"
    assert prepared.image_size == (200, 400)               # shown portrait
    assert prepared.rgb.shape == (100, 50, 3)
    assert prepared.rgb[2, -3].max() < 80                  # the square is now top-right
    assert prepared.rgb[2, 2].min() > 200
    with pytest.raises(TooLarge, match="0.1 MP"):          # the pixel limit holds, from the header
        steps.prepare_image(data, max_pixels=50_000, max_side=100)
    with pytest.raises(UnreadableImage):                   # a truncated HEIC is a clear 400
        steps.prepare_image(data[: len(data) // 2], max_pixels=10**7, max_side=100)


def test_prepare_image_flattens_transparency_onto_white() -> None:
    rgba = Image.new("RGBA", (40, 40), (0, 0, 0, 0))   # at least app.images.MIN_SIDE
    rgba.paste((10, 10, 10, 255), (5, 5, 10, 10))
    prepared = steps.prepare_image(_encode(rgba, "PNG"), 10**6, 1000)
    assert prepared.rgb[0, 0].tolist() == [255, 255, 255] and prepared.rgb[6, 6].tolist() == [10, 10, 10]


def test_prepare_image_rejections() -> None:
    big = _encode(Image.new("L", (3000, 2000), 255), "PNG")
    with pytest.raises(TooLarge, match="6.0 MP"):
        steps.prepare_image(big, max_pixels=5_000_000, max_side=1000)
    with pytest.raises(UnsupportedType, match="GIF"):
        steps.prepare_image(_encode(Image.new("RGB", (8, 8)), "GIF"), 10**6, 1000)
    with pytest.raises(UnsupportedType, match="BMP"):
        steps.prepare_image(_encode(Image.new("RGB", (8, 8)), "BMP"), 10**6, 1000)
    with pytest.raises(UnsupportedType, match="AVIF"):
        steps.prepare_image(b"\x00\x00\x00\x18ftypavif\x00\x00\x00\x00" + b"\x00" * 64, 10**6, 1000)
    with pytest.raises(UnreadableImage):
        steps.prepare_image(b"", 10**6, 1000)
    with pytest.raises(UnreadableImage):
        steps.prepare_image(b"definitely not an image", 10**6, 1000)
    png = _encode(Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), np.uint8)), "PNG")
    with pytest.raises(UnreadableImage, match="corrupt or truncated"):
        steps.prepare_image(png[: len(png) // 2], 10**6, 1000)


def test_clamp_box() -> None:
    assert coordinates.clamp_box([-5, -5, 50.4, 60.6], 40, 100) == (0, 0, 40, 61)
    assert coordinates.clamp_box([10, 10, 12, 12], 100, 100) is None
    assert coordinates.clamp_box(["a", 0, 1, 1], 100, 100) is None
    assert coordinates.clamp_box([float("nan"), 0, 50, 50], 100, 100) is None


# --- container ----------------------------------------------------------------------------------

def test_dockerfile_app_is_hadolint_clean_non_root_and_execs_gunicorn() -> None:
    import shutil
    import subprocess
    import sys

    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    text = (REPO / "Dockerfile.app").read_text()
    result = subprocess.run([hadolint, str(REPO / "Dockerfile.app")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^USER 10001", text, re.M)
    assert 'ENTRYPOINT ["gunicorn", "-c", "app/gunicorn_conf.py", "app:create_app()"]' in text
    assert "-r requirements/app.txt" in text
    for line in (REPO / "requirements" / "app.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-r"):
            assert "==" in line, f"unpinned requirement {line!r}"


# --- the app in-process (Flask test client; the HTTP stack end to end is in test_app_e2e.py) --------

def test_low_disk_refuses_work_and_fails_readiness(tmp_path: Path) -> None:
    from app import create_app

    app = create_app(local_dir=str(tmp_path / "files"), runtime_dir=str(tmp_path / "run"),
                     min_free_disk_mb=1e12, torchserve_management_url="http://127.0.0.1:9",
                     ping_timeout_s=0.5)
    client = app.test_client()
    png = _encode(Image.new("RGB", (50, 50), "white"), "PNG")
    resp = client.post("/animate", data={"image": (io.BytesIO(png), "a.png", "image/png")})
    assert resp.status_code == 503 and resp.json["error"] == "low_disk_space", resp.json
    assert "MiB free" in resp.json["message"]
    resp = client.get("/ping")
    assert resp.status_code == 503
    comps = resp.json["components"]
    assert comps["disk"]["ok"] is False and comps["storage"]["ok"] is True
    assert comps["detector"]["ok"] is False
    assert client.get("/healthz").status_code == 200
    assert resp.headers["X-Request-ID"]


def test_s3_url_modes(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.storage.backends import S3Storage

    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(k, v)
    public = S3Storage("bkt", "anim/", region="eu-west-1", url_mode="public")
    assert public.url("id1/dab.gif", "") == "https://bkt.s3.amazonaws.com/anim/id1/dab.gif"
    cdn = S3Storage("bkt", "anim/", url_mode="public", public_base_url="https://cdn.example.com/")
    assert cdn.url("id1/dab.gif", "") == "https://cdn.example.com/anim/id1/dab.gif"
    minio = S3Storage("bkt", "", endpoint_url="http://minio:9000", url_mode="public")
    assert minio.url("id1/dab.gif", "") == "http://minio:9000/bkt/id1/dab.gif"
    signed = S3Storage("bkt", "anim/", region="eu-west-1", expiry_s=600)
    url = signed.url("id1/dab.gif", "")
    assert "/anim/id1/dab.gif?" in url and "X-Amz-Expires=600" in url and "X-Amz-Signature=" in url
    with pytest.raises(ValueError, match="DOODLEPOD_S3_BUCKET"):
        S3Storage("")


# --- render pool ------------------------------------------------------------------------------------

def test_render_pool_recovers_from_a_dead_process_and_cleans_spill_files(tmp_path: Path) -> None:
    import time as _time

    from app.render.pool import RenderFailed, RenderPool

    pool = RenderPool(1, tmp_path / "spill")
    try:
        assert pool.run(steps.warm, 0.0, deadline=Deadline(120), stage="warm") > 0
        with pytest.raises(RenderFailed, match="died during crash"):
            pool.run(os._exit, 3, deadline=Deadline(120), stage="crash")      # e.g. the OOM killer
        pid = pool.run(steps.warm, 0.0, deadline=Deadline(120), stage="after")  # a fresh pool serves again
        assert pid > 0
        with pytest.raises(DeadlineExceeded, match="during slow"):
            pool.run(_time.sleep, 1.5, deadline=Deadline(0.3), stage="slow")
        # once the slow job finishes (1.5 s), its spill files go with it
        wait.until(lambda: not list((tmp_path / "spill").iterdir()), 10, "spill files must not outlive their job")
    finally:
        pool.shutdown()


@pytest.mark.parametrize("cpus,inflight,motions,want", [
    (2, 1, 3, 1),    # the default on 2 CPUs: a 3-motion request fills both with its motions
    (2, 1, 1, 2),    # a one-motion request gets the CPU its motions leave idle
    (4, 2, 1, 2),    # two one-motion requests at once share 4 CPUs
    (4, 2, 3, 1),
    (16, 1, 1, 4),   # at most MAX_PROCESSES_PER_RENDER
    (1, 1, 1, 1),
])
def test_processes_per_render_shares_the_cpus_among_admitted_motions(cpus, inflight, motions, want):
    from app.render.pipeline import MAX_PROCESSES_PER_RENDER, processes_per_render

    assert MAX_PROCESSES_PER_RENDER == 4
    assert processes_per_render(cpus, inflight, motions) == want
