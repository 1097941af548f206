"""What one client can make the pod store, over real HTTP: gunicorn with gevent workers and a render
process pool on loopback, local storage, no Redis (the in-process rate limiter). Every request sends
its own joints, so no model is called (TorchServe points at a closed port).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import requests

from tests.support import hold, stack, wait
from tests.support.answers import assert_error

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


def _env(workdir: Path, **extra: str) -> dict[str, str]:
    return {"DOODLEPOD_TORCHSERVE_URL": "http://127.0.0.1:9", "DOODLEPOD_TORCHSERVE_MANAGEMENT_URL": "http://127.0.0.1:9",
            "DOODLEPOD_TORCHSERVE_RETRIES": "0", "DOODLEPOD_LOCAL_DIR": str(workdir / "files"),
            "DOODLEPOD_RENDER_PROCESSES": "1", "DOODLEPOD_RENDER_SIZE": "96", "DOODLEPOD_RENDER_MAX_FRAMES": "6",
            **extra}


@pytest.fixture(scope="module")
def page():
    image, joints = stack.page_with_character("char1", (800, 700), (150, 50))
    return stack.encode(image), {k: list(v) for k, v in joints.items()}


def _create(server, page, headers=None) -> requests.Response:
    data, joints = page
    return requests.post(f"{server.url}/characters", files={"image": ("d.png", data, "image/png")},
                         data={"joints": json.dumps(joints)}, headers=headers or {}, timeout=120)


def _remember(answers: list[requests.Response], resp: requests.Response, status: int) -> list[requests.Response]:
    """Keep ``resp``; [resp] when it has ``status`` (a list: a 4xx/5xx Response is false itself)."""
    answers.append(resp)
    return [resp] if resp.status_code == status else []


def _codes(answers: list[requests.Response]) -> list[tuple[int, str]]:
    return [(r.status_code, r.text[:120]) for r in answers]


@pytest.fixture(scope="module")
def limited():
    """A bucket of 3 requests refilled at 1 per minute, X-Forwarded-For trusted from loopback only."""
    with stack.app_server("dp-stored-", lambda w: _env(w, DOODLEPOD_RATE_LIMIT_PER_MIN="1",
                                                        DOODLEPOD_RATE_LIMIT_BURST="3",
                                                        DOODLEPOD_TRUSTED_PROXIES="127.0.0.1/32")) as server:
        yield server


def test_a_character_flood_is_rate_limited_without_redis(limited, page):
    fwd = {"X-Forwarded-For": "203.0.113.7"}   # one client behind the trusted proxy (loopback)
    answers = [_create(limited, page, fwd) for _ in range(4)]
    assert [r.status_code for r in answers[:3]] == [201, 201, 201], [r.text[:200] for r in answers]
    body = assert_error(answers[3], 429, "rate_limited")
    assert "3 requests" in body["message"] and int(answers[3].headers["Retry-After"]) >= 1
    assert answers[3].headers["RateLimit-Remaining"] == "0"
    # every POST that stores work draws on the same bucket: renders and edits too
    cid = answers[0].json()["id"]
    assert_error(requests.post(f"{limited.url}/characters/{cid}/animations", data={"motions": "dab"},
                                headers=fwd, timeout=60), 429, "rate_limited")
    assert_error(requests.patch(f"{limited.url}/characters/{cid}", json={"bbox": [0, 0, 100, 100]},
                                 headers=fwd, timeout=60), 429, "rate_limited")
    # another client behind the same proxy has its own bucket; the log names the forwarded client
    assert _create(limited, page, {"X-Forwarded-For": "198.51.100.1, 203.0.113.8"}).status_code == 201
    assert "client=203.0.113.8" in limited.log_text() and "client=203.0.113.7" in limited.log_text()


def test_forwarded_addresses_from_an_untrusted_peer_are_ignored(page):
    with stack.app_server("dp-untrusted-", lambda w: _env(w, DOODLEPOD_RATE_LIMIT_PER_MIN="1",
                                                           DOODLEPOD_RATE_LIMIT_BURST="2")) as server:
        answers = [_create(server, page, {"X-Forwarded-For": f"203.0.113.{i}"}) for i in range(3)]
        assert [r.status_code for r in answers] == [201, 201, 429], [r.text[:200] for r in answers]
        assert "client=127.0.0.1" in server.log_text() and "client=203.0.113" not in server.log_text()


def test_the_storage_budget_turns_work_away_before_the_volume_fills(page):
    # the pod's budget alone: this one client's share (a tenth of the budget by default) set out of the way
    with stack.app_server("dp-budget-", lambda w: _env(w, DOODLEPOD_STORAGE_BUDGET_MB="3",
                                                        DOODLEPOD_CLIENT_STORAGE_MB="100")) as server:
        first = _create(server, page)
        assert first.status_code == 201, first.text
        files = Path(server.env["DOODLEPOD_LOCAL_DIR"])
        (files / "filler").write_bytes(os.urandom(3 * 2**20))   # what other requests stored meanwhile
        # The app recounts the folder every 2 s (app/storage/budget.py): until it has, creates may pass.
        answers: list[requests.Response] = []
        [refused] = wait.until(lambda: _remember(answers, _create(server, page), 503), 60,
                             lambda: f"a create refused once the filler is counted: {_codes(answers)}", every=0.5)
        assert all(r.status_code == 201 for r in answers[:-1]), _codes(answers)
        body = assert_error(refused, 503, "storage_full")
        assert "3 MiB" in body["message"] and int(refused.headers["Retry-After"]) >= 60
        cid = first.json()["id"]
        assert_error(requests.post(f"{server.url}/characters/{cid}/animations", data={"motions": "dab"},
                                    timeout=60), 503, "storage_full")
        data, joints = page
        assert_error(requests.post(f"{server.url}/animate", files={"image": ("d.png", data, "image/png")},
                                    data={"joints": json.dumps(joints), "motions": "dab"}, timeout=60),
                      503, "storage_full")
        (files / "filler").unlink()
        # the creates accepted before the recount stored about 0.9 MiB each: a fast machine fits three or
        # four into the 2 s between counts, which with the first fill the 3 MiB budget on their own
        for r in answers:
            if r.status_code == 201:
                gone = requests.delete(f"{server.url}/characters/{r.json()['id']}", timeout=60)
                assert gone.status_code in (200, 204), gone.text
        answers.clear()
        wait.until(lambda: _remember(answers, _create(server, page), 201), 60,
                   lambda: f"a create accepted once the filler is gone: {_codes(answers)}", every=0.5)
        assert all(r.status_code == 503 and r.json()["error"] == "storage_full" for r in answers[:-1]), _codes(answers)


@pytest.fixture(scope="module")
def plain():
    with stack.app_server("dp-files-", lambda w: _env(w)) as server:
        yield server


def test_file_urls_do_not_reveal_the_character_and_its_document_is_not_served(plain, page):
    created = _create(plain, page)
    assert created.status_code == 201, created.text
    doc = created.json()
    cid = doc["id"]
    render = requests.post(f"{plain.url}/characters/{cid}/animations", data={"motions": "dab"}, timeout=120)
    assert render.status_code == 200, render.text
    urls = [*doc["urls"].values(), *render.json()["animations"].values()]
    for url in urls:
        assert cid not in url, url
        assert requests.get(url if url.startswith("http") else plain.url + url, timeout=10).status_code == 200
    files_folder = urls[0].split("/files/", 1)[1].rsplit("/", 1)[0]
    for key in (f"characters/{cid}/character.json", f"{files_folder}/character.json", f"characters/{cid}/"):
        resp = requests.get(f"{plain.url}/files/{key}", timeout=10)
        assert_error(resp, 404, "not_found")
    # the folder of a shared link is no handle on the character
    link_key = files_folder.rsplit("/", 1)[-1]
    assert_error(requests.get(f"{plain.url}/characters/{link_key}", timeout=10), 404, "not_found")
    assert_error(requests.delete(f"{plain.url}/characters/{link_key}", timeout=10), 404, "not_found")
    assert requests.get(f"{plain.url}/characters/{cid}", timeout=10).status_code == 200


def test_a_delete_during_a_render_stops_it_and_leaves_nothing(page):
    import threading

    env = lambda w: _env(w, DOODLEPOD_RENDER_SIZE="400", DOODLEPOD_RENDER_MAX_FRAMES="0")  # noqa: E731
    with stack.app_server("dp-delete-", env) as server:
        created = _create(server, page)
        assert created.status_code == 201, created.text
        cid = created.json()["id"]
        files_root = Path(server.env["DOODLEPOD_LOCAL_DIR"])
        folder = files_root / created.json()["urls"]["image"].split("/files/", 1)[1].rsplit("/", 1)[0]
        assert folder.is_dir() and cid not in str(folder)
        answer: dict[str, requests.Response] = {}

        def render() -> None:
            answer["resp"] = requests.post(f"{server.url}/characters/{cid}/animations",
                                           data={"motions": "dab,zombie,jumping", "size": "512"}, timeout=300)

        thread = threading.Thread(target=render)
        # The render processes run in short bursts until the first motion is stored, then stay stopped
        # while the DELETE comes: the others are still rendering then on any machine (waiting for the log
        # line, a fast machine could end all three, rendered side by side, before the DELETE)
        with hold.stepping(hold.processes(lambda: hold.app_render_processes(server.proc.pid))) as until:
            thread.start()
            until(lambda: "stage=animate" in server.log_text() or not thread.is_alive(), 60)
            assert thread.is_alive(), answer["resp"].text[:300]   # still rendering when the DELETE comes
            assert requests.delete(f"{server.url}/characters/{cid}", timeout=30).status_code == 204
        thread.join(300)
        assert_error(answer["resp"], 404, "not_found")
        assert "deleted while this render ran" in answer["resp"].json()["message"]
        def left() -> list[Path]:
            return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []

        wait.until(lambda: not left(), 10, lambda: f"the character's files gone: {left()}")
        assert not (files_root / "characters" / cid).exists()
