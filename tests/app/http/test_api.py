"""The HTTP API in-process: Flask's test client on the real ``create_app``, no sockets, no gunicorn.

Everything here needs no model server: auth, the motion list, and every way a request can be
refused before (or instead of) a model call. TorchServe points at a closed port, so the one test
that reaches it sees the real "model server down" answer. Decoding and rendering run in the app's
real render process pool. The same answers over real HTTP are in test_app_e2e.py.
"""
from __future__ import annotations

import base64
import importlib
import io
import json
import pkgutil
import re

import numpy as np
import pytest
import yaml
from PIL import Image

import app
from app import errors
from tests.conftest import CHAR1, REPO
from tests.support.answers import assert_error

TOKEN = "in-process-token"


def _encode(image: Image.Image, fmt: str = "PNG") -> bytes:
    buf = io.BytesIO()
    image.save(buf, format=fmt)
    return buf.getvalue()


def _post(client, data: bytes, mime: str = "image/png", headers=None, **form):
    return client.post("/animate", data={"image": (io.BytesIO(data), "drawing", mime), **form},
                       headers=headers or {})



@pytest.fixture(scope="module")
def page() -> tuple[bytes, dict[str, list[float]]]:
    """char1's texture on a 700x600 white page at (40, 30), as PNG, and its joints in page pixels."""
    texture = Image.open(CHAR1 / "texture.png").convert("RGB")
    sheet = Image.new("RGB", (700, 600), "white")
    sheet.paste(texture, (40, 30))
    skeleton = yaml.safe_load((CHAR1 / "char_cfg.yaml").read_text())["skeleton"]
    return _encode(sheet), {j["name"]: [j["loc"][0] + 40, j["loc"][1] + 30] for j in skeleton}


# --- auth -------------------------------------------------------------------------------------------

def test_bearer_token_guards_every_api_endpoint_and_nothing_else(make_app) -> None:
    app = make_app(auth_token=TOKEN, ping_timeout_s=0.2)
    client = app.test_client()
    guarded = []
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static":
            continue
        path = rule.rule.replace("<path:key>", "some/file.gif")
        method = sorted(rule.methods - {"HEAD", "OPTIONS"})[0]
        resp = client.open(path, method=method)
        if rule.endpoint.startswith("api."):
            guarded.append(rule.rule)
            assert_error(resp, 401, "unauthorized")
            assert resp.headers["WWW-Authenticate"].startswith("Bearer")
        else:                                               # probes, metrics and files need no token
            assert resp.status_code != 401, rule.rule
    assert {"/animate", "/", "/motions"} <= set(guarded)
    assert_error(client.get("/motions", headers={"Authorization": "Bearer wrong"}), 401, "unauthorized")
    assert_error(client.get("/motions", headers={"Authorization": TOKEN}), 401, "unauthorized")
    assert client.get("/motions", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_no_token_configured_means_no_auth(client) -> None:
    assert client.get("/motions").status_code == 200


# --- what the API offers ------------------------------------------------------------------------------

def test_motions_lists_the_library(client) -> None:
    body = client.get("/motions").json
    assert body["default"] == ["dab", "jumping", "zombie"]
    names = [m["name"] for m in body["motions"]]
    assert {"dab", "jumping", "zombie", "wave_hello", "jumping_jacks"} <= set(names)
    assert all(m["source"] == "builtin" and m["description"] for m in body["motions"])


def test_motions_are_listed_by_category_in_a_stable_order(client) -> None:
    body = client.get("/motions").json
    cats = body["categories"]
    assert [c["name"] for c in cats] == ["dance", "funny", "jumping", "walking"]
    listed = [name for c in cats for name in c["motions"]]
    assert listed == [m["name"] for m in body["motions"]] and len(set(listed)) == len(listed) == 36
    by_name = {m["name"]: m for m in body["motions"]}
    for c in cats:
        assert all(by_name[n]["category"] == c["name"] for n in c["motions"])
    for m in body["motions"]:
        assert m["title"] and m["origin"] and m["licence"] and m["seconds"] > 0 and isinstance(m["travels"], bool)
        assert m["loop_gap_pct"] < 1.0 and m["preview"].endswith(f"/motions/{m['name']}/preview.gif")
    assert by_name["walk"]["cmu_trial"] == "07_01" and by_name["walk"]["retarget_config"] == "auto"
    assert client.get("/motions").json == body


def test_a_motion_preview_is_made_once_then_served_from_the_storage(make_app) -> None:
    app = make_app()
    client = app.test_client()
    previews = app.extensions["doodlepod"].previews
    made = []
    render = previews.pipeline.render
    previews.pipeline.render = lambda *a, **k: made.append(a[1][0].name) or render(*a, **k)
    try:
        first = client.get("/motions/walk/preview.gif")
        assert first.status_code == 302, first.get_data(as_text=True)
        url = first.headers["Location"]
        assert "/files/motions/previews/walk-" in url and url.endswith(".gif")
        gif = client.get(url[url.index("/files/"):])
        assert gif.status_code == 200
        with Image.open(io.BytesIO(gif.data)) as im:
            assert im.format == "GIF" and im.size == (128, 128) and im.n_frames > 10
        again = client.get("/motions/walk/preview.gif")
        assert again.headers["Location"] == url and made == ["walk"]
        # another worker on the same storage finds it there and renders nothing
        other = make_app(local_dir=app.extensions["doodlepod"].settings.local_dir)
        other.extensions["doodlepod"].previews.pipeline.render = lambda *a, **k: made.append("again")
        assert other.test_client().get("/motions/walk/preview.gif").headers["Location"] == url
        assert made == ["walk"]
    finally:
        previews.pipeline.render = render
    assert_error(client.get("/motions/no_such_motion/preview.gif"), 404, "not_found")
    assert_error(client.get("/motions/..%2F..%2Fetc/preview.gif"), 404, "not_found")


def test_request_id_is_echoed_or_made(client) -> None:
    assert client.get("/healthz", headers={"X-Request-ID": "abc-1"}).headers["X-Request-ID"] == "abc-1"
    made = client.get("/healthz", headers={"X-Request-ID": "bad id with spaces"}).headers["X-Request-ID"]
    assert made and " " not in made


# --- every way a request is refused ------------------------------------------------------------------

def test_bad_requests_are_400(client, page) -> None:
    data, _ = page
    body = assert_error(_post(client, data, motions="dab,moonwalk"), 400, "unknown_motion")
    assert "moonwalk" in body["message"]
    assert_error(_post(client, data, format="avi"), 400, "bad_request")
    assert_error(_post(client, data, joints="{not json"), 400, "bad_request")
    # joints that make no skeleton are the animator's CharacterError: invalid_character, as everywhere
    body = assert_error(_post(client, data, joints=json.dumps({"root": [1, 2]})), 422, "invalid_character")
    assert "missing" in body["message"]
    assert_error(_post(client, data, bbox="[1, 2, 3]"), 400, "bad_request")
    assert_error(_post(client, data, headers={"X-Deadline-Seconds": "soon"}), 400, "bad_request")
    assert_error(_post(client, data, headers={"X-Deadline-Seconds": "0"}), 400, "bad_request")
    assert_error(client.post("/animate", data={"x": "1"}), 400, "bad_request")
    assert_error(client.post("/", json={"image": "x"}), 400, "bad_request")
    assert_error(client.post("/", json={"file": "!!! not base64 !!!"}), 400, "bad_request")
    assert_error(client.get("/nope"), 404, "not_found")
    assert_error(client.get("/animate"), 405, "method_not_allowed")
    assert_error(client.get("/files/x.gif"), 404, "not_found")


def test_unreadable_images_are_400(client) -> None:
    assert_error(_post(client, b""), 400, "unreadable_image")
    assert_error(_post(client, b"\x89PNG\r\n\x1a\n this is not really a png"), 400, "unreadable_image")
    png = _encode(Image.fromarray(np.random.default_rng(1).integers(0, 255, (300, 300, 3), np.uint8)))
    assert_error(_post(client, png[: len(png) // 3]), 400, "unreadable_image")
    assert_error(client.post("/", json={"file": base64.b64encode(b"not an image").decode()}), 400, "unreadable_image")


def test_too_large_is_413(make_app) -> None:
    client = make_app(max_upload_mb=1.0, max_image_pixels=6_000_000).test_client()
    body = assert_error(_post(client, b"\xff\xd8" + bytes(2 * 2**20)), 413, "too_large")
    assert "MiB" in body["message"]
    bomb = _encode(Image.new("L", (3000, 2500), 255))           # a small file, 7.5 MP > 6 MP
    assert len(bomb) < 2**20
    body = assert_error(_post(client, bomb), 413, "too_large")
    assert "7.5 MP" in body["message"]


def test_unsupported_types_are_415(client) -> None:
    assert_error(_post(client, _encode(Image.new("RGB", (64, 64), "white"), "GIF"), "image/gif"), 415, "unsupported_type")
    assert_error(_post(client, b"hello, I am a text file", "text/plain"), 415, "unsupported_type")
    assert_error(_post(client, b"%PDF-1.4\n" + bytes(100), "application/pdf"), 415, "unsupported_type")
    avif = b"\x00\x00\x00\x1cftypavif\x00\x00\x00\x00avifmif1miaf" + bytes(200)
    assert_error(_post(client, avif, "image/avif"), 415, "unsupported_type")


def test_heic_photo_from_a_phone_is_accepted_upright(client, page) -> None:
    """iPhones upload HEIC, stored sideways with "rotate 90 deg clockwise" (EXIF orientation 6)."""
    data, joints = page
    upright = Image.open(io.BytesIO(data))
    exif = Image.Exif()
    exif[0x0112] = 6
    buf = io.BytesIO()
    upright.transpose(Image.Transpose.ROTATE_90).save(buf, format="HEIF", exif=exif.tobytes(), quality=90)
    resp = _post(client, buf.getvalue(), "image/heic", motions="dab", joints=json.dumps(joints))
    assert resp.status_code == 200, resp.get_data(as_text=True)
    got = resp.json["character"]
    assert max(abs(got["joints"][k][i] - joints[k][i]) for k in joints for i in (0, 1)) <= 2.0
    l, t, r, b = got["bbox"]
    assert r > l and b > t and r <= upright.width and b <= upright.height      # upright page coordinates


def test_model_server_down_is_503_with_retry_after(client, page) -> None:
    data, _ = page
    body = assert_error(_post(client, data), 503, "model_server_unavailable")
    assert "TorchServe" in body["message"]
    assert int(_post(client, data).headers["Retry-After"]) >= 1


def test_client_joints_off_the_drawing_are_422_not_500(client, page) -> None:
    data, joints = page
    texture = Image.open(CHAR1 / "texture.png").convert("RGB")
    wide = Image.new("RGB", (2 * texture.width + 100, texture.height + 60), "white")
    wide.paste(texture, (40, 30))
    # inside the crop (the box is the whole page) but on the blank paper right of the drawing
    off = {name: [x + texture.width + 20, y] for name, (x, y) in joints.items()}
    body = assert_error(_post(client, _encode(wide), motions="dab", joints=json.dumps(off),
                        bbox=json.dumps([0, 0, wide.width, wide.height])), 422, "invalid_character")
    assert "skeleton joint" in body["message"]
    # far outside the drawing and the page
    far = {name: [x + 400, y + 300] for name, (x, y) in joints.items()}
    assert_error(_post(client, data, motions="dab", joints=json.dumps(far)), 422, "invalid_character")


# --- the error families ------------------------------------------------------------------------------

def _all_subclasses(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_all_subclasses(sub)]
    return found


def test_every_api_error_belongs_to_one_family_with_a_matching_status() -> None:
    for module in pkgutil.walk_packages(app.__path__, "app."):  # every error class, whatever ran before
        if not module.name.startswith("app.gunicorn_"):  # gunicorn's config and worker act on import
            importlib.import_module(module.name)
    families = {errors.ClientError: range(400, 500), errors.UpstreamError: {502}, errors.Unavailable: {503},
                errors.DeadlineExceeded: {504}, errors.RenderFailed: {500}}
    for cls in _all_subclasses(errors.ApiError):
        owners = [f for f in families if issubclass(cls, f)]
        assert len(owners) == 1, f"{cls.__name__} is in {owners}"
        assert cls.status in families[owners[0]], cls.__name__
        # a client error a later attempt may get past unchanged is a lost race or a key in use (409) or a
        # rate limit or share used up (429), both answered with Retry-After
        assert cls.retryable == (issubclass(cls, (errors.Unavailable, errors.UpstreamError))
                                 or (issubclass(cls, errors.ClientError) and cls.status in (409, 429))), cls.__name__
    codes = [c.code for c in _all_subclasses(errors.ApiError) if c not in families]
    assert len(codes) == len(set(codes)), "each error code names one class"


def _generated_block(page: str, name: str) -> str:
    text = (REPO / "docs" / page).read_text()
    found = re.search(rf"<!-- {name}:start[^>]*-->\n(.*?)\n<!-- {name}:end -->", text, re.S)
    assert found, f"docs/{page} has no {name} block"
    return found.group(1).strip()


def test_the_error_table_in_the_docs_is_the_error_classes() -> None:
    """docs/api.md's error table (status, code, retryable, when) is what app/http/codes.py prints."""
    from app.http import codes

    assert _generated_block("api.md", "error-table") == codes.errors_table().strip(), (
        "docs/api.md's error table is stale: paste the output of `python -m app.http.codes --errors`")
    listed = {c.code: c for c in codes.codes()}
    assert listed["edit_conflict"].retryable and listed["rate_limited"].retryable
    assert not listed["render_failed"].retryable and not listed["deadline_exceeded"].retryable


def test_the_shares_table_in_the_docs_is_the_shares() -> None:
    """docs/operations.md's table of a client's shares is app/shares.py's SHARES, as app/http/codes.py prints it;
    every share's error is a code of the API and every setting a setting of the app."""
    from app import config, shares
    from app.http import codes

    assert _generated_block("operations.md", "shares-table") == codes.shares_table().strip(), (
        "docs/operations.md's shares table is stale: paste the output of `python -m app.http.codes --shares`")
    settings = {s.name for s in config.SETTINGS}
    listed = {c.code for c in codes.codes()}
    for share in shares.SHARES:
        assert not share.setting or share.setting in settings, share
        assert isinstance(share.answer, str) or share.answer.code in listed, share
    used = {cls.code for cls in _all_subclasses(shares.ShareUsed)}
    assert used <= {s.answer.code for s in shares.SHARES if not isinstance(s.answer, str)}, "a share not in SHARES"


def test_from_animator_maps_every_animator_error() -> None:
    import animator.errors as ae

    for cls in [ae.AnimatorError, *_all_subclasses(ae.AnimatorError)]:
        if issubclass(cls, ae.ConfigError):
            exc = cls(None, "field", "what went wrong")
        elif issubclass(cls, ae.VideoError):
            exc = cls(None, "what went wrong")
        else:
            exc = cls("what went wrong")
        mapped = errors.from_animator(exc, "while testing")
        named = ", field" if issubclass(cls, ae.ConfigError) else ""   # the field the animator names
        assert mapped.message == f"while testing{named}: what went wrong"
        if issubclass(cls, ae.RenderError):
            assert mapped.status == 500, cls.__name__          # the renderer failed on input it accepted
        elif issubclass(cls, ae.VideoTimeout):
            assert mapped.status == 503 and mapped.retryable   # a busy machine, not the client's file
        else:
            assert isinstance(mapped, errors.ClientError) and mapped.status == 422, cls.__name__
    assert errors.from_animator(ae.NoPersonError("nobody")).code == "no_person"
    assert errors.from_animator(ae.VideoError(None, "unreadable")).code == "invalid_video"
    with pytest.raises(TypeError):
        errors.from_animator(ValueError("not the animator's"))


def test_retry_after_is_written_and_read_in_one_place() -> None:
    """app/errors.py writes every Retry-After (whole seconds, rounded up, at least 1) and reads every one
    (delay-seconds only); no other module of the app spells the header's value out itself."""
    assert errors.retry_after_header(0.2) == {"Retry-After": "1"}
    assert errors.retry_after_header(2.1) == {"Retry-After": "3"}
    assert errors.retry_after_header(7) == {"Retry-After": "7"}
    assert errors.retry_after_s({"Retry-After": " 12 "}) == 12.0
    assert errors.retry_after_s({"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"}) is None
    assert errors.retry_after_s({}) is None
    assert errors.Overloaded("busy", 2.5).headers == {"Retry-After": "3"}
    by_hand = re.compile(r"""["']Retry-After["']\s*(\]\s*=|:\s*str\(|,\s*["']["']\))|\.get\(\s*["']Retry-After""")
    for path in (REPO / "app").rglob("*.py"):
        if path != REPO / "app" / "errors.py":
            assert not by_hand.search(path.read_text()), f"{path.relative_to(REPO)} writes or reads Retry-After by hand"
