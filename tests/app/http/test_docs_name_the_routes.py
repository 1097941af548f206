"""Issue 41 S17: the docs name every route that is open without the token and every route the rate limit
covers, as the app has them (its URL map, asked over in-process HTTP), not as someone remembered them.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
ID = "0" * 32


def _doc_path(rule: str) -> str:
    """``/scenes/<sid>/animations`` -> ``/scenes/{id}/animations``; ``/motions/<name>/preview.gif`` keeps
    its name; a trailing ``<path:...>`` part is dropped (``/files/<path:key>`` -> ``/files``)."""
    rule = re.sub(r"/<path:[^>]+>$", "", rule).rstrip("/") or "/"
    return re.sub(r"<(?:\w+:)?(\w+)>", lambda m: "{name}" if m.group(1) == "name" else "{id}", rule)


def _paragraph(page: str, starts: str) -> str:
    text = (REPO / "docs" / page).read_text()
    at = text.index(starts)
    return text[at:text.find("\n\n", at)]


@pytest.fixture(scope="module")
def guarded(make_app):
    return make_app(auth_token="s3cret", rate_limit_burst=1, rate_limit_per_min=0.01)


def test_every_open_route_is_named_where_the_token_is_documented(guarded):
    client = guarded.test_client()
    open_paths = set()
    for rule in guarded.url_map.iter_rules():
        if rule.endpoint == "static" or "GET" not in rule.methods:
            continue
        path = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: "dab" if m.group(1) == "name" else "x", rule.rule)
        status = client.get(path).status_code
        assert (status == 401) == rule.endpoint.startswith("api."), (rule.rule, status)   # what is open is open
        if status != 401 and _doc_path(rule.rule) != "/":
            open_paths.add(_doc_path(rule.rule))
    assert {"/studio-scenes", "/studio/credits", "/files", "/healthz"} <= open_paths
    # a page's own files (/studio/credits/files/...) go with the page
    open_paths = {p for p in open_paths if not any(p.startswith(q + "/") for q in open_paths)}
    setting = next(line for line in (REPO / "docs" / "configuration.md").read_text().splitlines()
                   if line.startswith("| `DOODLEPOD_AUTH_TOKEN`"))
    for where, text in (("docs/api.md", _paragraph("api.md", "With `DOODLEPOD_AUTH_TOKEN` set, every endpoint")),
                        ("docs/operations.md", _paragraph("operations.md", "**Open routes.**")),
                        ("DOODLEPOD_AUTH_TOKEN's description", setting)):
        missing = sorted(p for p in open_paths if p not in text)
        assert not missing, f"{where} does not name these open routes: {missing}"


def test_every_route_the_rate_limit_covers_is_named_in_the_docs(guarded):
    client = guarded.test_client()
    auth = {"Authorization": "Bearer s3cret"}
    limited = set()
    for n, rule in enumerate(sorted(guarded.url_map.iter_rules(), key=lambda r: r.rule)):
        for method in sorted(rule.methods & {"POST", "PATCH", "DELETE"}):
            path = re.sub(r"<(?:\w+:)?(\w+)>", ID, rule.rule)
            # each route from its own address: a bucket of one token, the second request finds it empty
            env = {"REMOTE_ADDR": f"192.0.2.{n + 1}"}
            statuses = [client.open(path, method=method, headers=auth, environ_base=env).status_code,
                        client.open(path, method=method, headers=auth, environ_base=env)]
            if statuses[1].status_code == 429 and statuses[1].get_json()["error"] == "rate_limited":
                limited.add(f"{method} {_doc_path(rule.rule)}")
    assert {"POST /animate", "POST /scenes", "POST /motions", "PATCH /scenes/{id}"} <= limited, limited
    for where, text in (("docs/api.md", _paragraph("api.md", "Every request that stores work")),
                        ("docs/operations.md", _paragraph("operations.md", "**Stored work.**"))):
        missing = sorted(r for r in limited if f"`{r}`" not in text)
        assert not missing, f"{where} does not name these rate-limited routes: {missing}"
