"""Local storage on its own: atomic, confined writes; low disk refusing work; the S3 URL modes."""
from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from PIL import Image

from app.deadline import Deadline
from app.errors import DeadlineExceeded, StorageFailed
from app.storage.backends import LocalStorage
from tests.support import stack


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


def test_low_disk_refuses_work_and_fails_readiness(tmp_path: Path) -> None:
    from app import create_app

    app = create_app(local_dir=str(tmp_path / "files"), runtime_dir=str(tmp_path / "run"),
                     min_free_disk_mb=1e12, torchserve_management_url="http://127.0.0.1:9",
                     ping_timeout_s=0.5)
    client = app.test_client()
    png = stack.encode(Image.new("RGB", (50, 50), "white"), "PNG")
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
