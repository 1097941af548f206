"""Characters as a resource, end to end over real HTTP with the real parts.

Real: gunicorn with gevent workers (two instances, i.e. two "pods", sharing one S3 bucket, and one
on local disk), the render process pools, TorchServe (Java frontend and Python workers) on
loopback, moto's S3 server reached through boto3.
Faked, and why: the two models TorchServe serves (no weights can be downloaded here; the real
handlers are tested by the model tests): tests/fixtures/torchserve_fake answers what each test sets.
"""
from __future__ import annotations

import io
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import requests
from PIL import Image

from tests.conftest import AD_EXAMPLES
from tests.support import stack
from tests.support.answers import assert_error

pytestmark = [pytest.mark.timeout(900), pytest.mark.e2e,
              pytest.mark.usefixtures("models_find_the_drawing")]

OFFSET = (300, 150)


def _env(ts) -> dict[str, str]:
    return {"DOODLEPOD_TORCHSERVE_URL": ts.inference_url, "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": ts.management_url,
            "DOODLEPOD_RENDER_PROCESSES": "1", "DOODLEPOD_TORCHSERVE_RETRIES": "1", "DOODLEPOD_RENDER_SIZE": "128",
            "DOODLEPOD_MAX_INFLIGHT": "8"}


@pytest.fixture(scope="module")
def pods(torchserve, s3):
    """Two app instances (separate gunicorn masters and runtime folders) sharing one S3 bucket."""
    servers, dirs = [], []
    try:
        for name in ("a", "b"):
            workdir = stack.make_workdir(f"dp-char-{name}-")
            dirs.append(workdir)
            servers.append(stack.Gunicorn(workdir, {
                **_env(torchserve), **stack.S3_ENV, "DOODLEPOD_STORAGE": "s3", "DOODLEPOD_S3_BUCKET": s3.bucket,
                "DOODLEPOD_S3_ENDPOINT_URL": s3.endpoint, "DOODLEPOD_S3_REGION": "us-east-1",
                "DOODLEPOD_S3_PREFIX": "dp/"}).start())
        yield servers
    finally:
        for server in servers:
            server.stop()
        for d in dirs:
            stack.remove(d)


@pytest.fixture(scope="module")
def local_pods(torchserve):
    """Two app instances sharing one local storage folder (as two pods sharing a volume would)."""
    root = stack.make_workdir("dp-char-shared-")
    servers = []
    try:
        for name in ("a", "b"):
            servers.append(stack.Gunicorn(root / name, {**_env(torchserve),
                                                        "DOODLEPOD_LOCAL_DIR": str(root / "files")}).start())
        yield servers
    finally:
        for server in servers:
            server.stop()
        stack.remove(root)


@pytest.fixture(scope="module")
def expiring(torchserve):
    """The app on local disk with characters and animations expiring after 8 s, swept every 0.5 s."""
    def env(workdir: Path) -> dict[str, str]:
        return {**_env(torchserve), "DOODLEPOD_LOCAL_DIR": str(workdir / "files"),
                "DOODLEPOD_EXPIRY_HOURS": str(8 / 3600), "DOODLEPOD_SWEEP_INTERVAL_S": "0.5"}

    with stack.app_server("dp-char-exp-", env) as server:
        server.files = server.workdir / "files"  # type: ignore[attr-defined]
        yield server


@pytest.fixture(scope="module")
def page():
    return stack.page_with_character("char1", (1200, 900), OFFSET)



def _create(server, data: bytes, **form) -> requests.Response:
    return requests.post(f"{server.url}/characters", files={"image": ("drawing.png", data, "image/png")},
                         data=form, timeout=120)



def _png(url: str) -> Image.Image:
    got = requests.get(url, timeout=30)
    assert got.status_code == 200, url
    im = Image.open(io.BytesIO(got.content))
    assert im.format == "PNG"
    im.load()
    return im


def _close(got: dict, expected: dict, tol: float) -> None:
    worst = max(float(np.hypot(got[k][0] - expected[k][0], got[k][1] - expected[k][1])) for k in expected)
    assert set(got) == set(expected) and worst <= tol, f"joints off by {worst:.1f} px"


def _counter(server, name: str, labels: str) -> float:
    text = requests.get(f"{server.url}/metrics", timeout=10).text
    for line in text.splitlines():
        if line.startswith(f"{name}{{{labels}}} "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


#: A box around the drawing (pasted at (300, 150)) taking in white paper to its left and above.
WIDE_BOX = [100, 20, 820, 760]


def _blank_joints(names, x0: float = 150, y0: float = 60) -> dict[str, list[float]]:
    """Joints on the white paper (left of and above the drawing), inside the image."""
    return {n: [x0 + 2 * i, y0 + i] for i, n in enumerate(names)}


# --- the whole correction flow, two pods serving alternate steps ---------------------------------

def test_correction_flow_across_two_instances(pods, s3, torchserve, page) -> None:
    a, b = pods
    image, joints = page
    resp = _create(a, stack.encode(image))
    assert resp.status_code == 201, resp.text
    doc = resp.json()
    cid = doc["id"]
    assert resp.headers["Location"] == f"/characters/{cid}" and resp.headers["ETag"] == '"1"'
    assert set(doc) >= {"id", "version", "image", "texture", "detections", "bbox", "joints", "skeleton", "urls"}
    assert doc["version"] == 1 and doc["image"] == {"width": 1200, "height": 900}
    ink = stack.ink_box(image)
    assert np.allclose(doc["bbox"], ink, atol=3) and np.allclose(doc["detections"][0]["bbox"], ink, atol=3)
    assert doc["detections"][0]["score"] == pytest.approx(0.98)
    _close(doc["joints"], joints, 4.0)
    assert {j["name"]: j["loc"] for j in doc["skeleton"]} == doc["joints"]
    assert {j["name"]: j["parent"] for j in doc["skeleton"]}["left_hand"] == "left_elbow"
    assert [c.split()[0] for c in torchserve.calls()] == ["detector", "pose"]

    # The texture grid: its size and its scale/offset to image pixels, and the files in it.
    tex = doc["texture"]
    texture, mask, overlay = (_png(doc["urls"][k]) for k in ("texture", "mask", "overlay"))
    assert texture.size == mask.size == overlay.size == (tex["width"], tex["height"])
    assert tex["offset"] == pytest.approx(doc["bbox"][:2], abs=0.01)
    assert tex["offset"][0] + tex["width"] * tex["scale"] == pytest.approx(doc["bbox"][2], abs=0.5)
    m = np.asarray(mask.convert("L"))
    assert set(np.unique(m)) == {0, 255} and 0.2 < (m == 255).mean() < 0.95
    # white on the character: the joints (moved into the texture grid) sit on white
    hand = doc["joints"]["left_elbow"]
    u, v = ((hand[0] - tex["offset"][0]) / tex["scale"], (hand[1] - tex["offset"][1]) / tex["scale"])
    assert m[int(v), int(u)] == 255
    assert _png(doc["urls"]["image"]).size == (1000, 750)             # the work copy the app saw

    # Another instance serves the next step: state lives only in the storage.
    got = requests.get(f"{b.url}/characters/{cid}", timeout=30)
    assert got.status_code == 200 and got.headers["ETag"] == '"1"'
    assert {k: v for k, v in got.json().items() if k != "urls"} == {k: v for k, v in doc.items() if k != "urls"}
    assert requests.get(f"{b.url}/characters/{cid}", headers={"If-None-Match": '"1"'}, timeout=30).status_code == 304

    # Move a joint on B, with If-Match: only the rig runs again (no model call), version 2.
    torchserve.calls_log.unlink()
    hand = [doc["joints"]["left_hand"][0] + 12, doc["joints"]["left_hand"][1] - 6]
    resp = requests.patch(f"{b.url}/characters/{cid}", json={"joints": {"left_hand": hand}},
                          headers={"If-Match": '"1"'}, timeout=60)
    assert resp.status_code == 200, resp.text
    v2 = resp.json()
    assert v2["version"] == 2 and resp.headers["ETag"] == '"2"'
    assert v2["joints"]["left_hand"] == pytest.approx(hand, abs=0.05)
    assert all(v2["joints"][k] == pytest.approx(doc["joints"][k], abs=0.05) for k in doc["joints"] if k != "left_hand")
    assert v2["bbox"] == doc["bbox"] and torchserve.calls() == []
    assert "rig;dur=" in resp.headers["Server-Timing"]
    # A stale If-Match on A changes nothing.
    stale = requests.patch(f"{a.url}/characters/{cid}", json={"joints": doc["joints"]}, headers={"If-Match": '"1"'},
                           timeout=60)
    assert_error(stale, 412, "version_mismatch")
    assert requests.get(f"{a.url}/characters/{cid}", timeout=30).json()["version"] == 2

    # Render on A; ask again on B: the stored file, no rendering, counted as a cache hit.
    hits_before = _counter(b, "doodlepod_animation_cache_total", 'result="hit"')
    resp = requests.post(f"{a.url}/characters/{cid}/animations", data={"motions": "dab", "size": "96"}, timeout=120)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["version"] == 2 and body["cached"] == [] and body["size"] == 96 and list(body["animations"]) == ["dab"]
    gif = Image.open(io.BytesIO(requests.get(body["animations"]["dab"], timeout=30).content))
    assert gif.format == "GIF" and gif.size == (96, 96) and gif.n_frames > 1
    again = requests.post(f"{b.url}/characters/{cid}/animations", json={"motions": ["dab"], "size": 96}, timeout=30)
    assert again.status_code == 200 and again.json()["cached"] == ["dab"]
    assert again.json()["animations"]["dab"].split("?")[0] == body["animations"]["dab"].split("?")[0]
    assert "animate" not in again.headers.get("Server-Timing", "")
    assert _counter(b, "doodlepod_animation_cache_total", 'result="hit"') == hits_before + 1

    # Paint the mask on A: erase the figure's left arm from the mask. Only the rig runs; the mask
    # stored is the one sent; the render cache of version 2 does not serve version 3.
    m2 = m.copy()
    lh = v2["joints"]["left_hand"]
    cx = int((lh[0] - tex["offset"][0]) / tex["scale"])
    m2[:, cx - 5:] = 0
    painted = stack.encode(Image.fromarray(m2))
    resp = requests.patch(f"{a.url}/characters/{cid}", files={"mask": ("mask.png", painted, "image/png")},
                          headers={"If-Match": '"2"'}, timeout=60)
    assert resp.status_code == 200, resp.text
    v3 = resp.json()
    assert v3["version"] == 3 and torchserve.calls() == []
    assert np.array_equal(np.asarray(_png(v3["urls"]["mask"]).convert("L")), m2)
    assert v3["urls"]["texture"].split("?")[0] == v2["urls"]["texture"].split("?")[0]   # unchanged texture kept
    fresh = requests.post(f"{b.url}/characters/{cid}/animations", json={"motions": ["dab"], "size": 96}, timeout=120)
    assert fresh.status_code == 200 and fresh.json()["cached"] == [] and fresh.json()["version"] == 3

    # A new box on B: re-segment and re-pose (the detector is not asked again).
    l, t, r, btm = doc["bbox"]
    box = [l - 40, t - 30, r + 40, btm + 10]
    w, h = box[2] - box[0], box[3] - box[1]
    torchserve.set_control(pose={"mode": "fractions", "fractions": [
        [(joints[j][0] - box[0]) / w, (joints[j][1] - box[1]) / h] for j in stack.COCO_FROM_AD]})
    resp = requests.patch(f"{b.url}/characters/{cid}", json={"bbox": box}, timeout=60)
    assert resp.status_code == 200, resp.text
    v4 = resp.json()
    assert v4["version"] == 4 and [c.split()[0] for c in torchserve.calls()] == ["pose"]
    assert v4["bbox"] == pytest.approx([l - 40, t - 30, r + 40, btm + 10], abs=1.5)
    assert v4["texture"]["width"] > tex["width"] and _png(v4["urls"]["mask"]).size == (
        v4["texture"]["width"], v4["texture"]["height"])
    _close(v4["joints"], joints, 5.0)

    # Old versions' files are pruned (the previous version's are kept for renders racing the edit).
    folders = {k.split("/")[2] for k in s3.keys() if k.startswith(f"dp/characters/{cid}/")}
    assert {f for f in folders if f[0] in "gr" and int(f[1:].split("-")[0]) < 3} <= {
        k.split("/")[-2] for k in (v3["urls"]["texture"].split("?")[0],)}
    # Delete on A; B no longer knows it, and nothing is left in the bucket.
    assert requests.delete(f"{a.url}/characters/{cid}", timeout=30).status_code == 204
    assert_error(requests.get(f"{b.url}/characters/{cid}", timeout=30), 404, "not_found")
    assert not [k for k in s3.keys() if k.startswith(f"dp/characters/{cid}/")]


@pytest.mark.parametrize("storage", ["s3", "local"])
def test_concurrent_edits_are_serialised(storage, request, page) -> None:
    """Edits racing on two instances (S3's conditional writes; a lock file on a shared folder): with
    If-Match exactly one wins; without, none is lost."""
    a, b = request.getfixturevalue("pods" if storage == "s3" else "local_pods")
    image, joints = page
    cid = _create(a, stack.encode(image), joints=json.dumps({k: list(v) for k, v in joints.items()})).json()["id"]

    def move(i: int, if_match: str | None):
        server = (a, b)[i % 2]
        new = {k: [v[0] + (1 + i if k == "left_hand" else 0), v[1]] for k, v in joints.items()}
        headers = {"If-Match": if_match} if if_match else {}
        return requests.patch(f"{server.url}/characters/{cid}", json={"joints": new}, headers=headers, timeout=120)

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda i: move(i, '"1"'), range(4)))
    assert sorted(r.status_code for r in answers) == [200, 412, 412, 412], [r.text for r in answers]
    with ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda i: move(i, None), range(3)))
    assert [r.status_code for r in answers] == [200] * 3, [r.text for r in answers]
    assert sorted(r.json()["version"] for r in answers) == [3, 4, 5]
    final = requests.get(f"{b.url}/characters/{cid}", timeout=30).json()
    assert final["version"] == 5
    # whichever edit won last, the document is one whole version: its overlay exists
    assert _png(final["urls"]["overlay"]).size == (final["texture"]["width"], final["texture"]["height"])


# --- every error --------------------------------------------------------------------------------

def test_errors_have_stable_codes(pods, page) -> None:
    a, b = pods
    image, joints = page
    data = stack.encode(image)
    as_map = {k: list(v) for k, v in joints.items()}
    for method, path in (("get", ""), ("patch", ""), ("delete", ""), ("post", "/animations")):
        for cid in ("0" * 32, "not-an-id"):
            kwargs = {"json": {"joints": as_map}} if method == "patch" else {}
            assert_error(getattr(requests, method)(f"{a.url}/characters/{cid}{path}", timeout=30, **kwargs), 404, "not_found")

    # joints outside the image, or on blank paper (inside the box, off the drawing): 422, never 500
    outside = dict(as_map, left_foot=[1250, 400])
    assert_error(_create(a, data, joints=json.dumps(outside)), 422, "joints_outside_image")
    blank = _blank_joints(as_map)
    body = assert_error(_create(a, data, joints=json.dumps(blank), bbox=json.dumps(WIDE_BOX)), 422,
                  "invalid_character")
    assert "off the drawing" in body["message"]
    assert_error(_create(a, data, bbox=json.dumps([5000, 10, 5100, 80])), 422, "bbox_outside_image")

    cid = _create(a, data, joints=json.dumps(as_map)).json()["id"]
    url = f"{b.url}/characters/{cid}"
    doc = requests.get(url, timeout=30).json()
    assert_error(requests.patch(url, json={"joints": outside}, timeout=30), 422, "joints_outside_image")
    # the crop made from the joints' extent starts 73 px left of the drawing: paper there
    assert_error(requests.patch(url, json={"joints": _blank_joints(as_map, 232, 170)}, timeout=30), 422,
           "invalid_character")
    assert_error(requests.patch(url, json={"bbox": [-500, -500, -10, -10]}, timeout=30), 422, "bbox_outside_image")
    # masks: not an image, the wrong size, empty
    assert_error(requests.patch(url, files={"mask": ("m.png", b"not a png", "image/png")}, timeout=30), 400, "bad_mask")
    small = stack.encode(Image.new("L", (doc["texture"]["width"] - 1, doc["texture"]["height"]), 255))
    body = assert_error(requests.patch(url, files={"mask": ("m.png", small, "image/png")}, timeout=30), 422,
                  "mask_wrong_size")
    assert f"{doc['texture']['width']}x{doc['texture']['height']}" in body["message"]
    empty = stack.encode(Image.new("L", (doc["texture"]["width"], doc["texture"]["height"]), 0))
    assert_error(requests.patch(url, files={"mask": ("m.png", empty, "image/png")}, timeout=30), 422, "invalid_character")
    # malformed requests
    assert_error(requests.patch(url, json={}, timeout=30), 400, "bad_request")
    assert_error(requests.patch(url, json={"joints": as_map, "colour": "red"}, timeout=30), 400, "bad_request")
    assert_error(requests.patch(url, data="joints", headers={"Content-Type": "text/plain"}, timeout=30), 400, "bad_request")
    assert_error(requests.patch(url, json={"joints": {"tail": [1, 2]}}, timeout=30), 400, "bad_request")
    assert_error(requests.patch(url, json={"joints": {"root": "here"}}, timeout=30), 400, "bad_request")
    assert_error(requests.patch(url, json={"joints": [{"name": "root", "loc": [1, 2], "parent": None}]}, timeout=30), 422,
           "invalid_character")                                             # a whole skeleton must be whole
    assert_error(requests.post(f"{url}/animations", json={"size": 4096}, timeout=30), 400, "bad_request")
    assert_error(requests.post(f"{url}/animations", json={"size": 32}, timeout=30), 400, "bad_request")
    assert_error(requests.post(f"{url}/animations", json={"size": 101, "format": "mp4"}, timeout=30), 400, "bad_request")
    assert_error(requests.post(f"{url}/animations", json={"motions": ["moonwalk"]}, timeout=30), 400, "unknown_motion")
    assert_error(requests.post(f"{url}/animations", json={"format": "avi"}, timeout=30), 400, "bad_request")
    assert_error(requests.post(f"{url}/animations", json={"motions": ["dab"]}, headers={"If-Match": '"7"'}, timeout=30),
           412, "version_mismatch")
    assert_error(requests.post(f"{a.url}/characters", data=b"hello", headers={"Content-Type": "text/plain"}, timeout=30),
           400, "bad_request")
    assert_error(_create(a, b"\x89PNG\r\n\x1a\n broken"), 400, "unreadable_image")
    # after all that, the character is unchanged
    assert requests.get(url, timeout=30).json()["version"] == 1
    # the raw image body works as for /animate (the models find the drawing)
    raw = requests.post(f"{a.url}/characters", data=data, headers={"Content-Type": "image/png"}, timeout=120)
    assert raw.status_code == 201, raw.text
    assert raw.json()["detections"] and raw.json()["version"] == 1


def test_animate_with_joints_on_blank_paper_is_422_not_500(pods, page) -> None:
    """The issue's report: /animate with joints placed off the drawing answered 500 internal_error."""
    a, _ = pods
    image, joints = page
    resp = requests.post(f"{a.url}/animate", files={"image": ("d.png", stack.encode(image), "image/png")},
                         data={"motions": "dab", "joints": json.dumps(_blank_joints(joints)),
                               "bbox": json.dumps(WIDE_BOX)}, timeout=120)
    assert_error(resp, 422, "invalid_character")


# --- expiry ------------------------------------------------------------------------------------

def test_animations_expire_from_local_storage(expiring, page) -> None:
    """/animate's files on local disk expire like the characters' (they once stayed for ever)."""
    image, joints = page
    made = requests.post(f"{expiring.url}/animate", files={"image": ("d.png", stack.encode(image), "image/png")},
                         data={"joints": json.dumps({k: list(v) for k, v in joints.items()}), "motions": "dab"},
                         timeout=120)
    assert made.status_code == 200, made.text
    url = made.json()["animations"]["dab"]
    assert requests.get(url, timeout=30).status_code == 200
    files = expiring.files
    assert list(files.rglob("*.gif"))
    stack.wait_for(lambda: not list(files.rglob("*.gif")), 60, "the expiry sweep")
    assert requests.get(url, timeout=30).status_code == 404
    assert not [p for p in files.iterdir() if p.name != "characters"]     # emptied folders go too


def test_characters_expire_from_local_storage(expiring, page) -> None:
    image, joints = page
    created = _create(expiring, stack.encode(image), joints=json.dumps({k: list(v) for k, v in joints.items()}))
    assert created.status_code == 201, created.text
    doc = created.json()
    folder = expiring.files / "characters" / doc["id"]
    assert (folder / "character.json").exists()
    assert doc["expires_at"] > doc["created_at"]
    files_folder = expiring.files / doc["urls"]["image"].split("/files/", 1)[1].rsplit("/", 1)[0]
    assert doc["id"] not in str(files_folder) and (files_folder / "image.png").exists()
    stack.wait_for(lambda: not folder.exists(), 60, "the expiry sweep")
    assert_error(requests.get(f"{expiring.url}/characters/{doc['id']}", timeout=30), 404, "not_found")
    stack.wait_for(lambda: not files_folder.exists(), 10, "the character's files to go with it")
    # counted once the sweep has finished (the folder goes before the count)
    stack.wait_for(lambda: _counter(expiring, "doodlepod_expired_total", 'kind="character"') >= 1, 10,
                   "the expiry counter")


def test_a_clients_own_clip_is_rendered_and_cached_by_its_content(pods, page) -> None:
    a, b = pods
    image, joints = page
    cid = _create(a, stack.encode(image), joints=json.dumps({k: list(v) for k, v in joints.items()})).json()["id"]
    clip = (AD_EXAMPLES / "bvh" / "fair1" / "jumping.bvh").read_bytes()

    def post(server, data: bytes):
        return requests.post(f"{server.url}/characters/{cid}/animations", files={"bvh": ("mine.bvh", data)},
                             data={"size": "64"}, timeout=120)

    first = post(a, clip)
    assert first.status_code == 200, first.text
    assert list(first.json()["animations"]) == ["upload"] and first.json()["cached"] == []
    again = post(b, clip)
    assert again.json()["cached"] == ["upload"]
    # another clip under the same name is not served from the cache
    other = post(b, (AD_EXAMPLES / "bvh" / "fair1" / "wave_hello.bvh").read_bytes())
    assert other.status_code == 200 and other.json()["cached"] == []
    assert_error(post(a, b"HIERARCHY\nnonsense"), 422, "invalid_motion")
