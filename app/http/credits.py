"""GET /studio/credits: the motions' credits (docs/motions.md) as a page a person can read.

The studio's "Motion credits" linked the Markdown itself, served as plain text: raw pipes and
asterisks, and links (``../motions/LICENSE``) that led nowhere. This renders the subset of Markdown
that file uses (headings, paragraphs, quotes, lists, tables, ``code``, **bold**, links) to HTML,
every piece of text escaped; a link to a licence file of the motion library is served beside the
page (``/studio/credits/files/<path>``, text), an absolute http(s) link stays, and a link to
another document of the repository becomes its plain text (the app does not serve the docs).
"""
from __future__ import annotations

import html
import re
from pathlib import Path

from flask import Response, abort, send_from_directory

DOCS = Path(__file__).resolve().parents[2] / "docs"
CREDITS = DOCS / "motions.md"
MOTIONS = Path(__file__).resolve().parents[2] / "motions"
#: The motion library's files a credits link may open (licences and their notes).
SERVED = {"LICENSE", "cmu/LICENSE-NOTES.md", "cmu/INDEX.md", "cmu/README.md"}

_INLINE = re.compile(r"`([^`]+)`|\*\*([^*]+)\*\*|\[([^\]]+)\]\(([^)\s]+)\)|<(https?://[^>\s]+)>")


def _link(text: str, target: str) -> str:
    if target.startswith(("http://", "https://")):
        return f'<a href="{html.escape(target)}" rel="noopener">{text}</a>'
    if target.startswith("../motions/") and target.removeprefix("../motions/") in SERVED:
        return f'<a href="credits/files/{html.escape(target.removeprefix("../motions/"))}">{text}</a>'
    return text  # another document of the repository: not served here


def inline(text: str) -> str:
    """One line's Markdown spans as HTML, every piece of text escaped."""
    out, at = [], 0
    for m in _INLINE.finditer(text):
        out.append(html.escape(text[at:m.start()]))
        code, bold, label, target, url = m.groups()
        if code is not None:
            out.append(f"<code>{html.escape(code)}</code>")
        elif bold is not None:
            out.append(f"<strong>{inline(bold)}</strong>")
        elif label is not None:
            out.append(_link(inline(label), target))
        else:
            out.append(_link(html.escape(url), url))
        at = m.end()
    out.append(html.escape(text[at:]))
    return "".join(out)


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def render(markdown: str) -> str:
    """The Markdown of docs/motions.md as HTML (block by block)."""
    blocks: list[str] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        heading = re.match(r"^(#{1,4})\s+(.*)$", line)
        if heading:
            level = len(heading.group(1))
            blocks.append(f"<h{level}>{inline(heading.group(2))}</h{level}>")
            i += 1
            continue
        group: list[str] = []
        kind = "table" if line.startswith("|") else "quote" if line.startswith(">") else \
            "list" if re.match(r"^[-*] ", line) else "p"
        while i < len(lines) and lines[i].strip() and not re.match(r"^#{1,4}\s", lines[i]):
            if kind == "table" and not lines[i].startswith("|"):
                break
            group.append(lines[i])
            i += 1
        if kind == "table":
            head, rows = _cells(group[0]), [_cells(r) for r in group[2:]]
            blocks.append("<table><thead><tr>" + "".join(f"<th>{inline(c)}</th>" for c in head) + "</tr></thead><tbody>"
                          + "".join("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in r) + "</tr>" for r in rows)
                          + "</tbody></table>")
        elif kind == "quote":
            blocks.append("<blockquote><p>" + " ".join(inline(g.lstrip("> ")) for g in group) + "</p></blockquote>")
        elif kind == "list":
            items: list[str] = []
            for g in group:
                if re.match(r"^[-*] ", g):
                    items.append(g[2:])
                else:
                    items[-1] += " " + g.strip()
            blocks.append("<ul>" + "".join(f"<li>{inline(t)}</li>" for t in items) + "</ul>")
        else:
            blocks.append("<p>" + " ".join(inline(g.strip()) for g in group) + "</p>")
    return "\n".join(blocks)


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>doodlepod: motion credits</title><link rel="stylesheet" href="credits.css"></head>
<body><main>
{body}
</main></body></html>
"""


def page() -> Response:
    from flask import request

    response = Response(PAGE.format(body=render(CREDITS.read_text(encoding="utf-8"))), mimetype="text/html")
    response.headers["Cache-Control"] = "no-cache"
    response.add_etag()
    return response.make_conditional(request)


def file(name: str) -> Response:
    """A licence file of the motion library the credits link (plain text), or 404."""
    if name not in SERVED:
        abort(404)
    response = send_from_directory(MOTIONS, name, mimetype="text/plain", max_age=0)
    response.headers["Cache-Control"] = "no-cache"
    return response
