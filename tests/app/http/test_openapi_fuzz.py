"""schemathesis against the live app, driven by the app's own OpenAPI document (GET /openapi.json).

What is real: gunicorn with gevent workers and the render pool, the Flask app on local storage, a
Redis-compatible server (Valkey, for async jobs, idempotency keys and rate limits), TorchServe
serving the fake models of tests/fixtures/torchserve_fake (the real ones need weights this machine
lacks), and HTTP on loopback. schemathesis runs every operation in all its phases (the document's
examples, boundary coverage, random fuzzing, stateful sequences through Location headers), positive
and negative data, bounded in examples per operation and in total time.

The run fails on: a 5xx other than capacity 503s (overloaded, queue_full) and a 504 the client's own
short X-Deadline-Seconds asked for (tests/app/http/openapi_fuzz_hooks.py); a status, content type, header
or body the document does not describe for that operation; a 405 without Allow; a resource still
found after DELETE; an answer slower than the request deadline plus a margin (no hang); a request
the client gave up on (schemathesis' own timeout). Afterwards no worker may have restarted and the
log may hold no traceback.

Seeded test data (the ids schemathesis cannot make up): characters, their files, a queued job, scenes. They
are offered for the path parameters with a probability, so random ids (404) are tried too.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from tests.support import stack
from tests.support.jobstack import RedisServer

pytestmark = [pytest.mark.e2e, pytest.mark.redis, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[3]
#: The server's request deadline; answers slower than it plus MARGIN_S fail the run (a hang).
DEADLINE_S = 15
MARGIN_S = 10
#: Examples per operation and phase, and the whole run's time budget (seconds): a few minutes at most
#: on a 2-CPU machine, TorchServe and the app included.
MAX_EXAMPLES = 25
MAX_TIME_S = 90
SEED = 20261125
#: Everything schemathesis checks, less: not_a_server_error (replaced by the hook's stricter-but-fair
#: check), positive_data_acceptance (a well-formed request may still name an unknown motion or a
#: character that does not exist: the document describes shapes, not the library),
#: negative_data_rejection (an X-Request-ID outside its pattern is replaced, not refused, by design),
#: ignored_auth and object_level_authorization (this run has no token; tests/app covers auth).
CHECKS = ",".join([
    "no_unexpected_server_error", "status_code_conformance", "content_type_conformance",
    "response_headers_conformance", "response_schema_conformance", "missing_required_header",
    "unsupported_method", "allow_header_conformance", "use_after_free", "ensure_resource_availability",
])


@pytest.fixture(scope="module")
def redis_server():
    server = RedisServer(appendonly=False)
    try:
        yield server.start()
    finally:
        server.remove()


@pytest.fixture(scope="module")
def app(torchserve, redis_server):
    def env(workdir: Path) -> dict[str, str]:
        return {"DOODLEPOD_TORCHSERVE_URL": torchserve.inference_url,
                "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": torchserve.management_url,
                "DOODLEPOD_LOCAL_DIR": str(workdir / "files"), "DOODLEPOD_REDIS_URL": redis_server.url,
                "DOODLEPOD_WEBHOOK_SECRET": "fuzz-secret", "DOODLEPOD_REQUEST_DEADLINE_S": str(DEADLINE_S),
                "DOODLEPOD_RENDER_SIZE": "64", "DOODLEPOD_RENDER_MAX_FRAMES": "4", "DOODLEPOD_RENDER_PROCESSES": "1",
                "DOODLEPOD_MAX_UPLOAD_MB": "2", "DOODLEPOD_TORCHSERVE_RETRIES": "0", "DOODLEPOD_LOG_LEVEL": "info",
                # a bucket that lets most of the run through to the code behind it (some 429s still come)
                "DOODLEPOD_RATE_LIMIT_PER_MIN": "3000", "DOODLEPOD_RATE_LIMIT_BURST": "100"}

    with stack.app_server("dp-openapi-fuzz-", env) as server:
        yield server


def seed(url: str) -> dict[str, list[str]]:
    """Characters (with joints: no model call), their files, a queued job and scenes of those
    characters, by dictionary name: ``characters`` / ``scenes`` for the operations that read or change
    one, ``doomed`` / ``doomed_scenes`` for DELETE (so the others keep theirs all run long), ``key`` and
    ``job_id``."""
    page, joints = stack.page_with_character("char1", page_size=(700, 600), offset=(100, 20))
    png = stack.encode(page)
    form = {"joints": json.dumps({k: [round(x, 1), round(y, 1)] for k, (x, y) in joints.items()})}
    made, files = [], []
    for _ in range(5):
        resp = requests.post(f"{url}/characters", files={"image": ("page.png", png, "image/png")}, data=form,
                             timeout=60)
        assert resp.status_code == 201, resp.text
        doc = resp.json()
        made.append(doc["id"])
        files += [u.split("/files/", 1)[1] for u in doc["urls"].values()]
    job = requests.post(f"{url}/animate", files={"image": ("page.png", png, "image/png")}, data=form,
                        headers={"Prefer": "respond-async"}, timeout=60)
    assert job.status_code == 202, job.text
    scenes = []
    for k in range(3):   # scenes of the seeded characters (no model call)
        resp = requests.post(f"{url}/scenes", json={"characters": made[:2], "background": "none" if k else "page"},
                             timeout=60)
        assert resp.status_code == 201, resp.text
        scenes.append(resp.json()["id"])
    return {"characters": made[:3], "doomed": made[3:], "key": files[:4], "job_id": [job.json()["id"]],
            "scenes": scenes[:2], "doomed_scenes": scenes[2:]}


#: Path parameter -> (operation ids, dictionary of seeded values offered for it).
SEEDED = {
    "cid": [(("getCharacter", "editCharacter", "animateCharacter"), "characters"), (("deleteCharacter",), "doomed")],
    "key": [(("getFile",), "key")],
    "job_id": [(("getJob",), "job_id")],
    "sid": [(("getScene", "editScene", "animateScene"), "scenes"), (("deleteScene",), "doomed_scenes")],
}


def write_config(folder: Path, ids: dict[str, list[str]]) -> Path:
    """schemathesis.toml offering the seeded ids for the path parameters (60% of the time)."""
    lines = []
    for name, values in ids.items():
        lines += [f"[dictionaries.{name}]", f"values = {json.dumps(values)}", ""]
    for parameter, uses in SEEDED.items():
        for operations, dictionary in uses:
            for operation in operations:
                lines += ["[[operations]]", f'include-operation-id = "{operation}"',
                          f'parameters = {{ "path.{parameter}" = {{ dictionary = "{dictionary}", probability = 0.6 }} }}',
                          ""]
    path = folder / "schemathesis.toml"
    path.write_text("\n".join(lines))
    return path


def run_schemathesis(url: str, config: Path, report_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "tests.app.http.openapi_fuzz_hooks",
           "DOODLEPOD_FUZZ_DEADLINE_S": str(DEADLINE_S),
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    args = [sys.executable, "-m", "schemathesis.cli", "--no-color", "--config-file", str(config), "run",
            f"{url}/openapi.json", "--url", url, "--checks", CHECKS, "--max-examples", str(MAX_EXAMPLES),
            "--max-time", str(MAX_TIME_S), "--seed", str(SEED), "--workers", "1",
            "--max-response-time", str(DEADLINE_S + MARGIN_S), "--request-timeout", str(DEADLINE_S + 2 * MARGIN_S),
            "--suppress-health-check", "all", "--report", "junit", "--report-dir", str(report_dir)]
    return subprocess.run(args, cwd=report_dir.parent, env=env, capture_output=True, text=True, timeout=MAX_TIME_S + 240)


def test_every_operation_answers_as_documented_under_fuzzing(app, tmp_path):
    ids = seed(app.url)
    booted = app.log_text().count("Booting worker")
    result = run_schemathesis(app.url, write_config(tmp_path, ids), tmp_path / "report")
    output = result.stdout + result.stderr
    print(output[-20000:])
    log = app.log_text()
    tracebacks = [log[max(0, i - 300):i + 3000] for i in _find_all(log, "Traceback")][:3]
    assert result.returncode == 0, "schemathesis found failures (above); the app's tracebacks:\n" + "\n".join(tracebacks)
    assert "Tested: 0" not in output and "Selected: 0" not in output
    assert log.count("Booting worker") == booted, "a gunicorn worker restarted during the run"
    assert not tracebacks, "the app logged a traceback:\n" + "\n".join(tracebacks)
    assert requests.get(f"{app.url}/healthz", timeout=5).status_code == 200


def _find_all(text: str, word: str) -> list[int]:
    return [m.start() for m in re.finditer(re.escape(word), text)]
