"""The characters API's pieces on their own: conditional writes of both storage backends (S3 on
moto's server, so those tests are marked e2e), the expiry sweep, If-Match matching, mask intake, the rig check, the S3 lifecycle
example. The HTTP behaviour end to end is in test_characters_e2e.py."""
from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from animator.api import RenderOptions
from app.characters.resource import Record, version_matches
from app.config import load_settings
from app.deadline import Deadline
from app.errors import BadMask, InvalidCharacter, MaskWrongSize
from app.render import steps
from app.storage.backends import Conflict, LocalStorage, S3Storage
from app.storage.sweep import sweep_local
from tests.conftest import CHAR1, REPO


@pytest.fixture(scope="module")
def moto():
    from tests.support import stack
    server = stack.MotoS3("dp-units")
    try:
        server.start()
        yield server
    finally:
        server.stop()


def _storages(tmp_path, moto):
    os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"})
    return [LocalStorage(tmp_path / "files"),
            S3Storage(moto.bucket, "p/", region="us-east-1", endpoint_url=moto.endpoint)]


@pytest.mark.e2e
def test_conditional_writes_let_one_writer_win(tmp_path, moto) -> None:
    for storage in _storages(tmp_path, moto):
        d = Deadline(30)
        key = "characters/abc/character.json"
        assert storage.get_tagged(key, d) is None
        storage.put_if(key, b'{"version": 1}', "application/json", d, None)
        with pytest.raises(Conflict):                       # create-only: it exists now
            storage.put_if(key, b'{"version": 9}', "application/json", d, None)
        data, tag = storage.get_tagged(key, d)
        assert data == b'{"version": 1}'
        storage.put_if(key, b'{"version": 2}', "application/json", d, tag)
        with pytest.raises(Conflict):                       # a second writer that read version 1
            storage.put_if(key, b'{"version": 2, "other": 1}', "application/json", d, tag)
        assert storage.get(key, d) == b'{"version": 2}', storage.name
        # folders, existence, deleting a prefix
        storage.put("characters/abc/r2-x/overlay.png", b"png", "image/png", d)
        storage.put("characters/abc/g1-y/mask.png", b"png", "image/png", d)
        assert storage.list_folders("characters/abc/", d) == ["g1-y", "r2-x"]
        assert storage.exists("characters/abc/r2-x/overlay.png", d)
        assert not storage.exists("characters/abc/r2-x/nothing.png", d)
        assert storage.delete_prefix("characters/abc/", d) == 3
        assert storage.get(key, d) is None and not storage.exists("characters/abc/g1-y/mask.png", d)
        with pytest.raises(Conflict):                       # If-Match on a deleted document
            storage.put_if(key, b"{}", "application/json", d, tag)


def test_local_storage_never_serves_lock_or_partial_files(tmp_path) -> None:
    storage = LocalStorage(tmp_path)
    storage.put_if("characters/abc/character.json", b"{}", "application/json", Deadline(5), None)
    assert (tmp_path / "characters" / "abc" / ".lock-character.json").exists()
    assert storage.path_of("characters/abc/.lock-character.json") is None
    assert storage.path_of("characters/abc/character.json") is not None


def _touch(path: Path, age_s: float, data: bytes = b"x") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    t = time.time() - age_s
    os.utime(path, (t, t))


def test_sweep_deletes_what_expired_and_keeps_the_rest(tmp_path) -> None:
    now = time.time()
    day = 86400.0
    chars = tmp_path / "characters"
    _touch(chars / "old" / "character.json", 10, json.dumps({"expires_at": now - 1}).encode())
    _touch(chars / "old" / "g1-a" / "mask.png", 10)
    _touch(chars / "live" / "character.json", 2 * day, json.dumps({"expires_at": now + 60}).encode())
    _touch(chars / "live" / "g1-a" / "mask.png", 2 * day)           # old file of a live character stays
    _touch(chars / "orphan" / "g1-a" / "mask.png", 2 * day)         # an upload that never got its document
    _touch(chars / "young-orphan" / "g1-a" / "mask.png", 5)         # ... or is still being made
    _touch(tmp_path / "req1" / "dab.gif", 2 * day)
    _touch(tmp_path / "req2" / "dab.gif", 60)
    _touch(tmp_path / "req2" / ".partial-123.gif", 2 * 3600)
    counts = sweep_local(tmp_path, ttl_s=day, now=now)
    assert counts == {"characters": 2, "files": 2}
    assert sorted(p.name for p in chars.iterdir()) == ["live", "young-orphan"]
    assert (chars / "live" / "g1-a" / "mask.png").exists()
    assert not (tmp_path / "req1").exists()                         # emptied folders go too
    assert [p.name for p in (tmp_path / "req2").iterdir()] == ["dab.gif"]


def test_if_match_forms() -> None:
    assert version_matches('"3"', 3) and version_matches("3", 3) and version_matches('W/"3"', 3)
    assert version_matches('"1", "3"', 3) and version_matches("*", 3)
    assert not version_matches('"2"', 3) and not version_matches('"33"', 3)


def _png(array: np.ndarray, mode: str | None = None) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array, mode).save(buf, format="PNG")
    return buf.getvalue()


def test_masks_are_read_as_white_on_the_character() -> None:
    grey = np.zeros((20, 30), np.uint8)
    grey[5:15, 10:20] = 200
    assert steps.read_mask(_png(grey), (30, 20)).sum() == 100
    rgba = np.zeros((20, 30, 4), np.uint8)
    rgba[..., :3] = 255                                             # white everywhere ...
    rgba[5:15, 10:20, 3] = 255                                      # ... but opaque only in the middle
    assert steps.read_mask(_png(rgba), (30, 20)).sum() == 100
    with pytest.raises(MaskWrongSize, match="30x20"):
        steps.read_mask(_png(grey), (31, 20))
    with pytest.raises(BadMask):
        steps.read_mask(b"GIF89a nope", (30, 20))
    buf = io.BytesIO()
    Image.fromarray(grey).save(buf, format="JPEG")
    with pytest.raises(BadMask, match="PNG"):
        steps.read_mask(buf.getvalue(), (30, 20))


def test_rig_check_refuses_joints_off_the_drawing() -> None:
    import animator
    char = animator.load_character(CHAR1)
    joints = [(j.name, j.loc) for j in char.skeleton]
    assert steps.check_rig(char.mask, joints) == 16
    paper = [(name, (3.0 + i, 4.0)) for i, (name, _) in enumerate(joints)]   # the crop's paper corner
    assert not char.mask[:10, :30].any()
    with pytest.raises(InvalidCharacter, match="16 of 16 skeleton joints lie off the drawing"):
        steps.check_rig(char.mask, paper)
    half = joints[:9] + paper[9:]
    assert steps.check_rig(char.mask, half) == 9


def test_a_render_process_rigs_a_character_version_once_for_all_its_motions() -> None:
    """Stored character files as the characters API sends them: the second motion of the same
    version reuses the decoded files, its rig and (same clip again) its sprite; the files are those of
    a render from scratch. A version that only moved a joint reuses the decoded files alone."""
    import animator
    from tests.conftest import AD_EXAMPLES, FAIR

    char = animator.load_character(CHAR1)
    files = (steps.encode_png(np.ascontiguousarray(char.texture[..., :3])), steps.mask_png(char.mask),
             [(j.name, list(j.loc), j.parent) for j in char.skeleton])
    dab, zombie = (str(AD_EXAMPLES / "config" / "motion" / f"{m}.yaml") for m in ("dab", "zombie"))
    options = RenderOptions(width=128, height=128, max_frames=10, threads=1)
    for cache in (steps._rigs, steps._stored_texture, steps._stored_mask):
        cache.cache_clear()
    first = steps.render_stored(*files, dab, str(FAIR), options)
    second = steps.render_stored(*files, zombie, str(FAIR), options)
    third = steps.render_stored(*files, dab, str(FAIR), options)
    assert steps._stored_texture.cache_info().hits == steps._stored_mask.cache_info().hits == 2
    assert steps._rigs().hits == {"rig": 2, "sprite": 1}
    assert max(second["timings_ms"]["setup"], third["timings_ms"]["setup"]) < first["timings_ms"]["setup"] / 5
    assert third["data"] == first["data"]
    fresh = animator.Character(steps.read_texture(files[0]), steps.read_mask(files[1]), char.skeleton)
    want = animator.render(fresh, *steps._configs(zombie, str(FAIR)), options)
    assert second["data"] == want.data
    moved = [(n, [loc[0] + 4, loc[1]] if n == "left_hand" else loc, p) for n, loc, p in files[2]]
    steps.render_stored(files[0], files[1], moved, dab, str(FAIR), options)   # a new version: rigged anew,
    assert steps._rigs().hits == {"rig": 2, "sprite": 1}                        # its files not decoded again
    assert steps._stored_texture.cache_info().hits == steps._stored_mask.cache_info().hits == 3


def test_document_coordinates_round_trip() -> None:
    rec = Record(id="a" * 32, version=3, created_at=0.0, expires_at=86400.0, image={"width": 1200, "height": 900},
                 work_scale=1000 / 1200, box=[250, 125, 675, 627], texture_size=[425, 502], detections=[],
                 skeleton=[["root", [100.0, 200.0], None]], rev="r3-b",
                 files={n: f"characters/x/g1-a/{n}.png" for n in ("image", "texture", "mask", "overlay", "tinted")})
    doc = rec.public(lambda key: f"/files/{key}")
    tex = doc["texture"]
    x = tex["offset"][0] + 100.0 * tex["scale"]
    y = tex["offset"][1] + 200.0 * tex["scale"]
    assert doc["joints"]["root"] == pytest.approx([x, y], abs=0.01)
    assert doc["joints"]["root"] == pytest.approx([420.0, 390.0], abs=0.01)
    assert doc["bbox"] == [300.0, 150.0, 810.0, 752.4] and doc["expires_at"] == "1970-01-02T00:00:00Z"
    assert set(doc["urls"]) == {"image", "texture", "mask", "overlay"}              # internal files stay internal
    assert Record.from_json(rec.to_json()) == rec


@pytest.mark.e2e
def test_s3_lifecycle_example_matches_the_defaults(moto) -> None:
    rules = json.loads((REPO / "deploy" / "examples" / "s3-lifecycle.json").read_text())
    defaults = load_settings({})
    rule = rules["Rules"][0]
    assert rule["Filter"]["Prefix"] == defaults.s3_prefix and rule["Status"] == "Enabled"
    assert rule["Expiration"]["Days"] * 24 >= defaults.expiry_hours
    client = moto.client()
    client.put_bucket_lifecycle_configuration(Bucket=moto.bucket, LifecycleConfiguration=rules)
    got = client.get_bucket_lifecycle_configuration(Bucket=moto.bucket)["Rules"]
    assert got[0]["Expiration"] == {"Days": 1}


def test_render_cache_keys_name_everything_the_file_depends_on() -> None:
    from dataclasses import replace
    from types import SimpleNamespace

    from app.characters.resource import Characters
    from app.render.pipeline import Pipeline

    settings = load_settings({})  # DOODLEPOD_RENDER_FPS 15
    chars = Characters(settings, Pipeline(settings, None, None, None), None)
    rec = Record(id="b" * 32, version=2, created_at=0.0, expires_at=1.0, image={"width": 10, "height": 10},
                 work_scale=1.0, box=[0, 0, 10, 10], texture_size=[10, 10], detections=[], skeleton=[],
                 files={}, rev="r2-abc")
    dab, zombie = SimpleNamespace(name="dab"), SimpleNamespace(name="zombie")
    clip1 = SimpleNamespace(name="upload", sha256="1" * 64)
    clip2 = SimpleNamespace(name="upload", sha256="2" * 64)
    base = chars.pipeline.render_options("gif", 256)
    keys = [chars.animation_key(rec, dab, base), chars.animation_key(rec, zombie, base),
            chars.animation_key(rec, dab, chars.pipeline.render_options("gif", 128)),
            chars.animation_key(rec, dab, chars.pipeline.render_options("webp", 256)),
            chars.animation_key(rec, dab, replace(base, fps="native")),
            chars.animation_key(rec, dab, chars.pipeline.render_options("gif", 256, max_frames=20)),
            chars.animation_key(rec, clip1, base), chars.animation_key(rec, clip2, base),
            chars.animation_key(Record(**{**rec.__dict__, "rev": "r3-def"}), dab, base)]
    assert len(set(keys)) == len(keys)
    assert keys[0] == f"characters/{'b' * 32}/r2-abc/anim/dab-256px-15fps.gif"
    # without DOODLEPOD_RENDER_FPS the key says so (the names of the files stored before RenderOptions)
    native = load_settings({}, render_fps="")
    plain = Characters(native, Pipeline(native, None, None, None), None)
    assert plain.animation_key(rec, dab, plain.pipeline.render_options("gif", 256, max_frames=20)) \
        == f"characters/{'b' * 32}/r2-abc/anim/dab-256px-defaultfps-max20.gif"


def test_patch_takes_merge_patch_json(make_app) -> None:
    """In-process (no models, no render of an animation): create with client joints, then a
    JSON merge-patch moving one joint is version 2."""
    import json as _json

    from tests.support import stack

    client = make_app().test_client()
    page, joints = stack.page_with_character("char1", (700, 800), (100, 100))
    made = client.post("/characters", data={"image": (io.BytesIO(stack.encode(page)), "d.png"),
                                             "joints": _json.dumps({k: list(v) for k, v in joints.items()})})
    assert made.status_code == 201, made.get_data(as_text=True)
    cid = made.json["id"]
    hand = [joints["left_hand"][0] + 5, joints["left_hand"][1]]
    resp = client.patch(f"/characters/{cid}", data=_json.dumps({"joints": {"left_hand": hand}}),
                        headers={"Content-Type": "application/merge-patch+json", "If-Match": '"1"'})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    assert resp.json["version"] == 2 and resp.headers["ETag"] == '"2"'
    assert resp.json["joints"]["left_hand"] == pytest.approx(hand, abs=0.05)


def test_parallel_storage_calls_reraise_the_first_error_without_a_hub_traceback(monkeypatch) -> None:
    """_together runs storage calls as greenlets; an error (a plain 504, say) comes back to the caller and
    is not also printed by gevent's hub as an unhandled greenlet traceback on the workers' stderr."""
    import gevent

    from app.characters import resource
    from app.errors import DeadlineExceeded

    monkeypatch.setattr("app.loop.under_gevent", lambda: True)
    hub = gevent.get_hub()
    printed = io.StringIO()
    monkeypatch.setattr(hub, "exception_stream", printed, raising=False)

    def late():
        gevent.sleep(0)
        raise DeadlineExceeded("request deadline passed during storage read")

    with pytest.raises(DeadlineExceeded):
        resource._together(lambda: 1, late, late)
    gevent.sleep(0.01)  # let the hub report whatever ended badly
    assert printed.getvalue() == ""
    assert resource._together(lambda: 1, lambda: 2) == [1, 2]
