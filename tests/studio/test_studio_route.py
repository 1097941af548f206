"""GET /studio and its files, in-process on the real app factory (no browser: see test_studio_page.py)."""
from __future__ import annotations

import re

import pytest

from tests.conftest import REPO

STATIC = REPO / "app" / "static" / "studio"
#: The page's static hooks (box, joint-<name>, motion-<name>, animation-<name> are made by its scripts
#: from the API's answers: test_studio_page.py uses them).
TESTIDS = ("upload", "mask-brush", "mask-eraser", "save", "render", "error")


@pytest.fixture(scope="module")
def locked(make_app):
    """The app with a bearer token: the page itself must stay reachable without it."""
    return make_app(auth_token="page-test-token").test_client()


def _page_files(html: str) -> list[str]:
    """Every file the page loads: its href/src and the modules' imports, transitively."""
    todo = [m for m in re.findall(r'(?:href|src)="(studio/[^"]+)"', html)]
    seen: list[str] = []
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.append(path)
        if path.endswith(".js"):
            folder = path.rsplit("/", 1)[0]
            source = (STATIC / path[len("studio/"):]).read_text()
            todo += [f"{folder}/{rel}" for rel in re.findall(r'^import .* from "\./([^"]+)";', source, re.MULTILINE)]
    return sorted(seen)


def test_page_is_public_and_locked_down(locked):
    r = locked.get("/studio")
    assert r.status_code == 200
    assert r.mimetype == "text/html"
    body = r.get_data(as_text=True)
    for testid in TESTIDS:
        assert f'data-testid="{testid}"' in body, testid
    assert 'accept="image/*"' in body and 'capture="environment"' in body
    csp = r.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert r.headers["Cache-Control"] == "no-cache" and r.headers.get("ETag")
    # the API behind it still wants the token
    assert locked.get("/motions").status_code == 401


def test_every_file_the_page_loads_is_served(locked):
    files = _page_files(locked.get("/studio").get_data(as_text=True))
    assert {"studio/studio.css", "studio/js/main.js", "studio/js/api.js", "studio/js/editor.js"} <= set(files)
    kinds = {"js": "text/javascript", "css": "text/css", "svg": "image/svg+xml", "credits": "text/html"}
    for path in files:
        r = locked.get(f"/{path}")
        assert r.status_code == 200, path
        name = path.rsplit("/", 1)[1]
        assert r.mimetype == kinds[name.rsplit(".", 1)[1] if "." in name else name], (path, r.mimetype)
        assert r.headers["X-Content-Type-Options"] == "nosniff"


def test_the_page_links_the_motion_credits(locked):
    """The picker's credits link: docs/motions.md as a page (issue 33 item 6: it was raw Markdown with
    dead links), with CMU's acknowledgement; every link on it opens."""
    from html.parser import HTMLParser

    assert "studio/credits" in _page_files(locked.get("/studio").get_data(as_text=True))
    r = locked.get("/studio/credits")
    assert r.status_code == 200 and r.mimetype == "text/html"
    assert "default-src 'self'" in r.headers["Content-Security-Policy"]
    text = r.get_data(as_text=True)
    assert "obtained from mocap.cs.cmu.edu" in text and "NSF EIA-0196217" in text
    assert "](" not in text and "|---" not in text and "**" not in text  # no raw Markdown

    class Links(HTMLParser):
        def __init__(self):
            super().__init__()
            self.hrefs, self.rows, self.stylesheets = [], 0, []

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "a":
                self.hrefs.append(a["href"])
            elif tag == "tr":
                self.rows += 1
            elif tag == "link":
                self.stylesheets.append(a["href"])

    links = Links()
    links.feed(text)
    assert links.rows >= 36 + 4  # every motion, and each table's heading row
    local = [h for h in links.hrefs if not h.startswith(("http://", "https://"))]
    assert local, links.hrefs
    for href in local + links.stylesheets:
        got = locked.get(f"/studio/{href}")
        assert got.status_code == 200, href
    assert locked.get("/studio/credits/files/../../app/config.py").status_code == 404


def test_nothing_comes_from_elsewhere():
    """No CDN, no build step: no file of the page names another host."""
    for path in STATIC.rglob("*"):
        if path.is_file():
            text = path.read_text()
            urls = set(re.findall(r"https?://[^\s\"')]+", text)) - {"http://www.w3.org/2000/svg"}
            assert not urls, (path.name, urls)


def test_browser_root_redirects_to_studio_and_api_root_is_unchanged(locked):
    r = locked.get("/", headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
    assert r.status_code == 302 and r.headers["Location"].endswith("/studio")
    r = locked.get("/studio/")
    assert r.status_code == 301 and r.headers["Location"].endswith("/studio")
    # curl and the mobile client do not ask for HTML: no redirect, the old 405
    r = locked.get("/", headers={"Accept": "*/*"})
    assert r.status_code == 405 and r.get_json()["error"] == "method_not_allowed"
    assert "POST" in r.headers["Allow"]
    # POST / is still the old client's endpoint behind the token
    assert locked.post("/", json={"file": ""}).status_code == 401


@pytest.mark.parametrize("path", ["/studio/../__init__.py", "/studio/%2e%2e/config.py",
                                  "/studio/js/../../../http/studio.py", "/studio/nope.js"])
def test_no_file_outside_the_page(locked, path):
    r = locked.get(path)
    assert r.status_code == 404
    assert r.get_json()["error"] == "not_found"
