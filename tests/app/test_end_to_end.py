"""The app end to end over real HTTP: gunicorn (gevent workers) + a real TorchServe + moto's S3 server.

What is real: gunicorn with gevent workers and the render process pools, the Flask app, the
animator, TorchServe (Java frontend and Python workers) on loopback, an S3 API (moto's server mode)
reached through boto3, and HTTP between all of them.

What is faked, and why: the two models TorchServe serves. Their weights cannot be downloaded on this
machine, and the real handlers are tested by the model issue, so TorchServe serves the small handlers
of tests/fixtures/torchserve_fake/fake_models.py, whose answers each test sets through a control file.
The fake detector really looks at the posted image (the box of its dark pixels), so the box and the
joints the app returns can be checked against where the test pasted the fixture drawing.
"""
from __future__ import annotations

import base64
import io
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import requests
from PIL import Image

from tests.conftest import AD_EXAMPLES
from tests.support import stack, wait
from tests.support.answers import assert_error

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900),
              pytest.mark.usefixtures("models_find_the_drawing")]

RENDER_SIZE = 200
TOKEN = "s3cret-token"


def _common_env(ts: stack.FakeTorchServe) -> dict[str, str]:
    return {"DOODLEPOD_TORCHSERVE_URL": ts.inference_url, "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": ts.management_url,
            "DOODLEPOD_RENDER_SIZE": str(RENDER_SIZE), "DOODLEPOD_RENDER_PROCESSES": "2",
            "DOODLEPOD_TORCHSERVE_RETRIES": "1", "DOODLEPOD_LOG_LEVEL": "info",
            "DOODLEPOD_MAX_UPLOAD_MB": "2", "DOODLEPOD_MAX_IMAGE_PIXELS": "6000000"}


@pytest.fixture(scope="module")
def app_s3(torchserve, s3):
    """The app storing to S3 (moto) with 2 gunicorn workers sharing only 2 render slots (the bound is per pod)."""
    env = {**_common_env(torchserve), **stack.S3_ENV, "DOODLEPOD_STORAGE": "s3", "DOODLEPOD_S3_BUCKET": s3.bucket,
           "DOODLEPOD_S3_ENDPOINT_URL": s3.endpoint, "DOODLEPOD_S3_REGION": "us-east-1",
           "DOODLEPOD_S3_PREFIX": "anim/", "DOODLEPOD_MAX_INFLIGHT": "2", "DOODLEPOD_RETRY_AFTER_S": "7",
           "DOODLEPOD_WORKERS": "2", "DOODLEPOD_RENDER_PROCESSES": "1"}
    with stack.app_server("dp-e2e-app-s3-", lambda workdir: env) as server:
        yield server


@pytest.fixture(scope="module")
def app_local(torchserve):
    """The app on its embedded default storage (local disk served at /files/), with bearer auth on."""
    def env(workdir: Path) -> dict[str, str]:
        return {**_common_env(torchserve), "DOODLEPOD_LOCAL_DIR": str(workdir / "files"),
                "DOODLEPOD_AUTH_TOKEN": TOKEN, "DOODLEPOD_MAX_INFLIGHT": "8",
                "DOODLEPOD_MOTIONS_DIR": str(_operator_motions(workdir / "motions"))}

    with stack.app_server("dp-e2e-app-local-", env) as server:
        server.files = server.workdir / "files"  # type: ignore[attr-defined]
        yield server


def _operator_motions(folder: Path) -> Path:
    """An operator's motion folder in its own layout: one clip, 'hello_again' (a copy of wave_hello)."""
    examples = AD_EXAMPLES
    (folder / "clips").mkdir(parents=True)
    (folder / "cfg").mkdir()
    (folder / "clips" / "hello_again.bvh").write_bytes((examples / "bvh" / "fair1" / "wave_hello.bvh").read_bytes())
    motion = (examples / "config" / "motion" / "wave_hello.yaml").read_text()
    (folder / "cfg" / "hello_again.yaml").write_text(motion.replace("examples/bvh/fair1/wave_hello.bvh",
                                                                    "clips/hello_again.bvh"))
    (folder / "cfg" / "retarget.yaml").write_text((examples / "config" / "retarget" / "fair1_ppf.yaml").read_text())
    (folder / "library.yaml").write_text("motions:\n  hello_again:\n    motion: cfg/hello_again.yaml\n"
                                         "    retarget: cfg/retarget.yaml\n"
                                         "    description: Waving, from the operator\n")
    return folder


@pytest.fixture(scope="module")
def page():
    """char1 pasted on a 1200x900 white page at (300, 150), and its joints in page pixels."""
    return stack.page_with_character("char1", (1200, 900), (300, 150))



AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _post_image(server, data: bytes, mime: str = "image/png", headers=None, **form) -> requests.Response:
    return requests.post(f"{server.url}/animate", files={"image": ("drawing", data, mime)}, data=form,
                         headers=headers or {}, timeout=300)



def _assert_animation(data: bytes, fmt: str = "GIF") -> Image.Image:
    im = Image.open(io.BytesIO(data))
    assert im.format == fmt
    assert im.size == (RENDER_SIZE, RENDER_SIZE)
    assert getattr(im, "n_frames", 1) > 1
    return im


def _assert_joints_close(got: dict, expected: dict, tol: float) -> None:
    assert set(got) == set(expected)
    worst = max(float(np.hypot(got[k][0] - expected[k][0], got[k][1] - expected[k][1])) for k in expected)
    assert worst <= tol, f"joints off by up to {worst:.1f} px: {got} vs {expected}"


# --- the happy paths ------------------------------------------------------------------------------

def test_animate_uploads_to_s3_and_answers_urls_box_joints_timings(app_s3, s3, torchserve, page) -> None:
    image, joints = page
    resp = _post_image(app_s3, stack.encode(image), headers={"X-Request-ID": "e2e-happy-1"})
    assert resp.status_code == 200, resp.text
    assert resp.headers["X-Request-ID"] == "e2e-happy-1"
    body = resp.json()
    assert set(body) == {"id", "animations", "character", "timings_ms"}
    assert list(body["animations"]) == ["dab", "jumping", "zombie"]
    # The box and joints come back in the uploaded image's pixels although the app worked on a
    # copy downsized to 1000 px (the page is 1200 px wide).
    l, t, r, b = stack.ink_box(image)
    assert np.allclose(body["character"]["bbox"], [l, t, r, b], atol=3.0), body["character"]["bbox"]
    _assert_joints_close(body["character"]["joints"], joints, tol=4.0)
    for stage in ("decode", "detect", "segment", "pose", "animate:dab", "upload:dab", "animate:zombie"):
        assert body["timings_ms"][stage] >= 0, stage
    calls = torchserve.calls()
    assert calls[0] == "detector 1000x750" and calls[1].startswith("pose ") and len(calls) == 2
    for motion, url in body["animations"].items():
        assert "X-Amz-Signature" in url, "presigned by default"
        got = requests.get(url, timeout=30)
        assert got.status_code == 200
        _assert_animation(got.content)
    assert [k for k in s3.keys() if k.startswith(f"anim/{body['id']}/")] == [
        f"anim/{body['id']}/{m}.gif" for m in ("dab", "jumping", "zombie")]
    log = app_s3.log_text()
    assert "[e2e-happy-1]" in log and "stage=detect ms=" in log and "stage=animate:dab ms=" in log


def test_old_client_base64_contract(app_s3, page) -> None:
    image, _ = page
    payload = {"file": base64.b64encode(stack.encode(image.convert("RGB"), "JPEG", quality=90)).decode()}
    resp = requests.post(f"{app_s3.url}/", json=payload, timeout=300)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert sorted(body) == ["dab", "jumping", "zombie"]          # flat {motion: url}, nothing else
    for url in body.values():
        _assert_animation(requests.get(url, timeout=30).content)
    assert_error(requests.post(f"{app_s3.url}/", json={"image": "x"}, timeout=30), 400, "bad_request")
    assert_error(requests.post(f"{app_s3.url}/", json={"file": "bm90IGFuIGltYWdl"}, timeout=30), 400,
                  "unreadable_image")


def test_client_joints_skip_the_models_and_serve_from_local_disk(app_local, torchserve, page) -> None:
    image, joints = page
    # If the app called a model now, the call would fail: the joints must make it skip both.
    torchserve.set_control(detector={"status": 500}, pose={"status": 500})
    as_map = {k: list(v) for k, v in joints.items()}
    resp = _post_image(app_local, stack.encode(image), headers=AUTH, motions="dab", joints=json.dumps(as_map))
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert list(body["animations"]) == ["dab"]
    _assert_joints_close(body["character"]["joints"], joints, tol=2.0)  # only rounding at work scale
    assert "detect" not in body["timings_ms"] and "pose" not in body["timings_ms"]
    assert torchserve.calls() == []
    url = body["animations"]["dab"]
    assert url.startswith(f"{app_local.url}/files/")
    got = requests.get(url, timeout=30)                                 # files are public: no token
    assert got.status_code == 200 and got.headers["Content-Type"] == "image/gif"
    _assert_animation(got.content)
    assert not list(app_local.files.rglob(".partial-*"))
    # the char_cfg skeleton list form, through the old client's JSON, in webp
    skeleton = [{"name": k, "loc": v, "parent": None} for k, v in as_map.items()]
    from animator.skeleton import SKELETON_PARENTS
    for j in skeleton:
        j["parent"] = SKELETON_PARENTS[j["name"]]
    resp = _post_image(app_local, stack.encode(image), headers=AUTH, motions="zombie", format="webp",
                       joints=json.dumps(skeleton))
    assert resp.status_code == 200, resp.text
    _assert_animation(requests.get(resp.json()["animations"]["zombie"], timeout=30).content, "WEBP")
    resp = _post_image(app_local, stack.encode(image), headers=AUTH, motions="jumping", format="mp4",
                       joints=json.dumps(as_map))
    assert resp.status_code == 200, resp.text
    video = requests.get(resp.json()["animations"]["jumping"], timeout=30)
    assert video.headers["Content-Type"] == "video/mp4" and video.content[4:8] == b"ftyp"


def test_exif_rotated_phone_photo(app_local, torchserve, page) -> None:
    image, joints = page
    # A phone stores the pixels sideways and says "rotate 90 deg clockwise" (EXIF orientation 6).
    stored = image.transpose(Image.Transpose.ROTATE_90)
    exif = Image.Exif()
    exif[0x0112] = 6
    data = stack.encode(stored, "JPEG", quality=92, exif=exif)
    resp = _post_image(app_local, data, mime="image/jpeg", headers=AUTH, motions="jumping")
    assert resp.status_code == 200, resp.text
    _assert_joints_close(resp.json()["character"]["joints"], joints, tol=5.0)
    assert torchserve.calls()[0] == "detector 1000x750"                 # the model saw it upright


# --- error codes that need the model server (the others: test_api.py, in-process) ----------------

def test_no_character_and_no_skeleton_are_422(app_s3, torchserve, page) -> None:
    blank = stack.encode(Image.new("RGB", (800, 600), "white"))
    body = assert_error(_post_image(app_s3, blank), 422, "no_character")
    assert "no drawn character" in body["message"]
    raw = requests.post(f"{app_s3.url}/animate", data=blank, headers={"Content-Type": "image/png"}, timeout=60)
    assert_error(raw, 422, "no_character")                          # a raw image body works too
    image, _ = page
    torchserve.set_control(detector={"mode": "boxes", "boxes": [{"bbox": [1, 1, 50, 50], "score": 0.05}]})
    assert_error(_post_image(app_s3, stack.encode(image)), 422, "no_character")   # below the min score
    torchserve.set_control(pose={"mode": "people", "people": []})
    assert_error(_post_image(app_s3, stack.encode(image)), 422, "no_skeleton")


def test_model_server_failures_are_503_and_502(app_s3, torchserve, page) -> None:
    image, _ = page
    torchserve.set_control(detector={"status": 503})
    body = assert_error(_post_image(app_s3, stack.encode(image)), 503, "model_server_unavailable")
    assert "busy" in body["message"]
    assert torchserve.calls().count("detector 1000x750") == 2              # one retry (TORCHSERVE_RETRIES=1)
    torchserve.set_control(detector={"status": 500})
    assert_error(_post_image(app_s3, stack.encode(image)), 502, "model_server_error")


def test_deadline_is_504_and_answered_on_time(app_s3, torchserve, page) -> None:
    image, _ = page
    torchserve.set_control(detector={"mode": "nonwhite", "sleep_s": 4})
    t0 = time.monotonic()
    resp = _post_image(app_s3, stack.encode(image), headers={"X-Deadline-Seconds": "1.5"})
    elapsed = time.monotonic() - t0
    body = assert_error(resp, 504, "deadline_exceeded")
    assert "detect" in body["message"]
    assert elapsed < 3.5, f"answered after {elapsed:.1f} s"
    # the next call queues behind the slow one on TorchServe's single worker: its answer says it drained
    torchserve.set_control()
    drained = requests.post(f"{torchserve.inference_url}/predictions/{stack.DETECTOR}",
                            files={"data": ("p.png", stack.encode(image), "image/png")}, timeout=30)
    assert drained.status_code == 200, drained.text


def test_deadline_during_rendering_is_504(app_local, page) -> None:
    image, joints = page
    motions = "dab,jumping,zombie,wave_hello,jumping_jacks"
    # The client allows a quarter of what the same work just took on this machine (five motions at
    # 200 px: about 0.4 s here, decode and segment about 0.13 s of it; a fixed deadline was met by a
    # faster machine). The joints are moved by a pixel, then by two, so that neither request's rig
    # answers from the render processes' cache of an earlier one.
    def moved(by: int) -> str:
        return json.dumps({k: [v[0] + by, v[1]] for k, v in joints.items()})

    t0 = time.monotonic()
    whole = _post_image(app_local, stack.encode(image), headers=AUTH, motions=motions, joints=moved(1))
    took = time.monotonic() - t0
    assert whole.status_code == 200, whole.text
    t0 = time.monotonic()
    resp = _post_image(app_local, stack.encode(image), headers={**AUTH, "X-Deadline-Seconds": f"{took / 4:.3f}"},
                       motions=motions, joints=moved(2))
    elapsed = time.monotonic() - t0
    body = assert_error(resp, 504, "deadline_exceeded")
    assert "animate" in body["message"] or "segment" in body["message"] or "decode" in body["message"], body
    assert elapsed < took / 4 + 2.0, f"answered after {elapsed:.1f} s (the whole work took {took:.2f} s)"


def test_overload_is_an_immediate_503_with_retry_after(app_s3, torchserve, page) -> None:
    image, _ = page
    data = stack.encode(image)
    # Two requests held in the detector (until the test lets them go: a 1.5 s sleep ended before the
    # fifth request on a loaded machine) fill the app's 2 render slots and two more its waiting room
    # (one place per slot); the fifth must be refused at once.
    torchserve.hold_file.touch()
    torchserve.set_control(detector={"mode": "nonwhite", "hold_while": str(torchserve.hold_file)},
                           pose={"mode": "people", "people": []})
    try:
        with ThreadPoolExecutor(4) as pool:
            slow = [pool.submit(_post_image, app_s3, data) for _ in range(2)]
            stack.wait_for(lambda: _gauge(app_s3, "doodlepod_renders_in_flight") == 2, 20, "two renders in flight")
            slow += [pool.submit(_post_image, app_s3, data) for _ in range(2)]
            stack.wait_for(lambda: _gauge(app_s3, "doodlepod_renders_waiting") == 2, 20, "two requests waiting")
            t0 = time.monotonic()
            resp = _post_image(app_s3, data)
            elapsed = time.monotonic() - t0
            body = assert_error(resp, 503, "overloaded")
            assert resp.headers["Retry-After"] == "7"
            assert elapsed < 0.5, f"overload answer took {elapsed:.2f} s"
            assert "2 render slots" in body["message"]
            torchserve.hold_file.unlink()
            for f in slow:
                assert_error(f.result(timeout=120), 422, "no_skeleton")
    finally:
        torchserve.hold_file.unlink(missing_ok=True)
        torchserve.set_control()
    assert _gauge(app_s3, "doodlepod_renders_in_flight") == 0


def _gauge(server, name: str) -> float:
    text = requests.get(f"{server.url}/metrics", timeout=10).text
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


# --- motions, health, metrics ---------------------------------------------------------------------

def test_operator_motions_are_listed_and_rendered(app_local, page) -> None:
    listed = requests.get(f"{app_local.url}/motions", headers=AUTH, timeout=10).json()["motions"]
    mine = [m for m in listed if m["name"] == "hello_again"]
    assert mine and mine[0]["source"].endswith("motions") and {"dab", "zombie"} <= {m["name"] for m in listed}
    image, joints = page
    resp = _post_image(app_local, stack.encode(image), headers=AUTH, motions="hello_again",
                       joints=json.dumps({k: list(v) for k, v in joints.items()}))
    assert resp.status_code == 200, resp.text
    _assert_animation(requests.get(resp.json()["animations"]["hello_again"], timeout=30).content)


def test_ping_ready_reports_components(app_s3) -> None:
    resp = requests.get(f"{app_s3.url}/ping", timeout=10)
    assert resp.status_code == 200, resp.text
    comps = resp.json()["components"]
    assert set(comps) == {"detector", "pose_estimator", "storage", "disk", "runtime_disk", "jobs"}
    assert all(c["ok"] for name, c in comps.items() if name != "jobs")
    # no DOODLEPOD_REDIS_URL here: async jobs are off, which never makes the pod unready
    assert comps["jobs"]["ok"] is False and comps["jobs"]["required"] is False and resp.json()["status"] == "ok"
    assert comps["storage"]["backend"] == "s3" and comps["detector"]["workers"] == {"READY": 1}
    assert requests.get(f"{app_s3.url}/healthz", timeout=10).json() == {"status": "alive"}


def test_ping_stays_fast_while_renders_run(app_local, page) -> None:
    image, joints = page
    data = stack.encode(image)
    form = {"joints": json.dumps({k: list(v) for k, v in joints.items()})}
    latencies: list[float] = []

    def render():
        return pool.submit(_post_image, app_local, data, "image/png", AUTH, **form)

    with ThreadPoolExecutor(4) as pool:
        live = [render() for _ in range(4)]
        finished = []

        def two_running() -> bool:
            """Two renders seen in flight at once; finished ones are replaced meanwhile (a fast machine
            ended all four between two looks, and the gauge was never seen above 1)."""
            nonlocal live, finished
            finished += [f for f in live if f.done()]
            live = [f for f in live if not f.done()]
            live += [render() for _ in range(4 - len(live))]
            return _gauge(app_local, "doodlepod_renders_in_flight") >= 2

        wait.until(two_running, 30, "two renders in flight at once", every=0.01)
        busy_until = time.monotonic() + 2.0  # a finished render is replaced until then: 4 keep running
        while live:
            t0 = time.monotonic()
            resp = requests.get(f"{app_local.url}/ping", timeout=10)
            latencies.append(time.monotonic() - t0)
            assert resp.status_code == 200, resp.text
            finished += [f for f in live if f.done()]
            live = [f for f in live if not f.done()]
            live += [render() for _ in range(4 - len(live))] if time.monotonic() < busy_until else []
            time.sleep(0.05)
        assert all(f.result().status_code == 200 for f in finished)
    assert len(latencies) >= 10 and len(finished) >= 4
    # The render processes use both CPUs; the gevent loop must still answer health checks promptly.
    # The bar is the p99 the issues set (one stray scheduling hiccup on a busy 2-core machine is not
    # a stalled loop; a blocked loop delays every call after it and fails this at once).
    p99 = sorted(latencies)[int(0.99 * (len(latencies) - 1))]
    assert p99 < 0.25, f"/ping p99 {p99 * 1e3:.0f} ms (max {max(latencies) * 1e3:.0f} ms) over {len(latencies)} calls"


def test_metrics_count_requests_errors_and_stages(app_s3) -> None:
    _post_image(app_s3, stack.encode(Image.new("RGB", (300, 300), "white")))   # a 422 no_character
    text = requests.get(f"{app_s3.url}/metrics", timeout=10).text
    assert 'doodlepod_errors_total{code="no_character",status="422"}' in text
    assert 'doodlepod_stage_seconds_count{stage="detect"}' in text
    assert 'doodlepod_stage_seconds_count{stage="decode"}' in text
    assert 'doodlepod_requests_total{endpoint="/animate",method="POST",status="422"}' in text
    assert "doodlepod_renders_in_flight" in text
