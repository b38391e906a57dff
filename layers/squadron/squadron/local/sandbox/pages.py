"""The sandbox as a person sees it: HTML pages of its repositories, issues and pull requests.

Served under ``/ui/`` (no REST path starts so): ``/ui/`` lists the repositories,
``/ui/<owner>/<repo>`` one repository (its issues, pull requests and dashboard),
``/ui/<owner>/<repo>/issues/<n>`` an issue with its comments and the pull requests that close it,
``/ui/<owner>/<repo>/pull/<n>`` a pull request with its diff, reviews, comments, statuses and
check runs. Links to ``https://github.com/<owner>/<repo>/issues/<n>`` (or ``/pull/<n>``) in
Markdown lead to these pages.

Every text shown here may be a stranger's or an agent's: Markdown is rendered by markdown-it
with raw HTML off (it comes out as text) and its link checks (no ``javascript:`` links); every
other text is escaped. The pages carry a content security policy that runs no inline script and
loads nothing from elsewhere. Only a dashboard issue's (the App opened it, with the dashboard's
label) ``mermaid`` blocks are drawn, by the mermaid package from ``node_modules`` served here
(the machine may have no internet); anyone else's stay code.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

from markdown_it import MarkdownIt
from markdown_it.token import Token

from squadron.domain.app_acts import is_dashboard
from squadron.local.sandbox.base import Json, Repo, SandboxBase

PREFIX = "/ui"
#: No inline script, nothing from elsewhere; mermaid draws its SVG with inline styles.
POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "font-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_CLOSING = re.compile(r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s+#(\d+)\b", re.IGNORECASE)
_GITHUB_LINK = re.compile(r"^https://github\.com/([\w.-]+)/([\w.-]+)/(issues|pull)/(\d+)(#[\w-]*)?$")
_ISSUE = re.compile(r"^([\w.-]+)/([\w.-]+)/(issues|pull)/(\d+)$")
#: A path of GitHub's web side: a repository, one of its issues or pull requests.
_WEB_PATH = re.compile(r"^/([\w.-]+)/([\w.-]+)(?:/(issues|pull)/(\d+))?/?$")

_SCRIPT = """\
// Draws the dashboard's mermaid blocks (the only ones the page marks), then says how it went.
mermaid.initialize({startOnLoad: false, securityLevel: "strict"});
mermaid.run({querySelector: "pre.mermaid"}).then(
  () => { document.body.dataset.mermaid = "drawn"; },
  (error) => { document.body.dataset.mermaid = "failed: " + error; },
);
"""
_STYLE = """\
body { font: 15px/1.5 system-ui, sans-serif; margin: 0 auto; max-width: 64rem; padding: 1rem 2rem; color: #1f2328; }
header { border-bottom: 1px solid #d0d7de; margin-bottom: 1rem; padding-bottom: .5rem; }
a { color: #0969da; } .muted { color: #59636e; } .state { border-radius: 1em; padding: .1em .7em; color: #fff; }
.open { background: #1a7f37; } .closed { background: #8250df; } .merged { background: #8250df; }
.box { border: 1px solid #d0d7de; border-radius: 6px; margin: 1rem 0; }
.box > h3 { background: #f6f8fa; margin: 0; padding: .4rem .8rem; font-size: 14px; border-bottom: 1px solid #d0d7de; }
.box > .body { padding: .2rem .8rem; overflow-x: auto; }
pre { background: #f6f8fa; padding: .6rem; overflow-x: auto; } pre.mermaid { background: none; }
pre.diff { padding: 0; margin: 0; } pre.diff span { display: block; padding: 0 .6rem; }
.add { background: #dafbe1; } .del { background: #ffebe9; } .hunk { background: #ddf4ff; color: #59636e; }
.label { background: #eaeef2; border-radius: 1em; padding: 0 .6em; font-size: 12px; }
table { border-collapse: collapse; } td, th { border: 1px solid #d0d7de; padding: .2rem .6rem; text-align: left; }
"""


@dataclass(frozen=True)
class Response:
    status: int
    content_type: str
    body: bytes
    location: str = ""


def page_path(owner: str, name: str, kind: str = "", number: int | None = None) -> str:
    """The page of a repository, or of one of its issues (``issues``) or pull requests (``pull``)."""
    path = f"{PREFIX}/{quote(owner, safe='')}/{quote(name, safe='')}"
    return f"{path}/{kind}/{number}" if kind else path


def _link_rules(md: MarkdownIt) -> None:
    """Links to a GitHub issue or pull request lead to its page here; every link is nofollow."""

    def link_open(renderer: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        token = tokens[idx]
        found = _GITHUB_LINK.match(str(token.attrGet("href") or ""))
        if found:
            owner, name, kind, number, anchor = found.groups()
            token.attrSet("href", page_path(owner, name, kind, int(number)) + (anchor or ""))
        token.attrSet("rel", "nofollow noopener noreferrer")
        return str(renderer.renderToken(tokens, idx, options, env))

    md.add_render_rule("link_open", link_open)


def _markdown(*, draw_mermaid: bool) -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])
    _link_rules(md)
    if draw_mermaid:
        fence = md.renderer.rules["fence"]  # type: ignore[attr-defined]  # bound to the renderer

        def mermaid_fence(renderer: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
            token = tokens[idx]
            if token.info.strip().split(" ")[0] == "mermaid":
                return f'<pre class="mermaid">{escape(token.content)}</pre>\n'
            return str(fence(tokens, idx, options, env))

        md.add_render_rule("fence", mermaid_fence)
    return md


_PLAIN = _markdown(draw_mermaid=False)
_DRAWN = _markdown(draw_mermaid=True)


def _state(item: Json) -> str:
    state = (
        "merged" if item.get("merged") or (item.get("pull_request") or {}).get("merged_at") else item["state"]
    )
    return f'<span class="state {escape(state)}">{escape(state)}</span>'


def _who(user: Json | None) -> str:
    return f"<b>{escape(str((user or {}).get('login', 'ghost')))}</b>"


def _labels(item: Json) -> str:
    return " ".join(f'<span class="label">{escape(str(label["name"]))}</span>' for label in item["labels"])


def _box(title: str, body: str) -> str:
    return f'<div class="box"><h3>{title}</h3><div class="body">{body}</div></div>'


def _document(title: str, body: str, *, crumbs: str = "", mermaid: bool = False) -> bytes:
    scripts = (
        f'<script src="{PREFIX}/_assets/mermaid.min.js"></script>'
        f'<script src="{PREFIX}/_assets/pages.js"></script>'
        if mermaid
        else ""
    )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{escape(title)}</title>"
        f'<link rel="stylesheet" href="{PREFIX}/_assets/pages.css"></head>'
        f'<body><header><a href="{PREFIX}/">GitHub sandbox</a>{crumbs}</header>'
        f"<main>{body}</main>{scripts}</body></html>"
    ).encode()


class PageOps(SandboxBase):
    """The HTML pages; :meth:`page` answers one GET under :data:`PREFIX`."""

    #: Where mermaid's ``dist`` files are read from (the repository's ``node_modules``); None:
    #: graphs stay as their text.
    node_modules: Path | None = None

    def web_page(self, path: str) -> str | None:
        """The page here of a path on GitHub's web side (``/<owner>/<repo>``, ``.../issues/<n>``,
        ``.../pull/<n>`` of a repository of the sandbox), or None. The links Squadron builds from
        the GitHub it runs with (the dashboard's, memory's) lead here in the local stack, where
        GitHub's web address is the sandbox's own."""
        found = _WEB_PATH.match(path)
        if found is None:
            return None
        owner, name, kind, number = found.groups()
        with self._lock:
            if f"{owner}/{name}" not in self.repos:  # a REST path (/app/installations, ...)
                return None
        return page_path(owner, name, kind or "", int(number) if number else None)

    def page(self, path: str) -> Response:
        rest = path.removeprefix(PREFIX).strip("/")
        if rest.startswith("_assets/"):
            return self._asset(rest.removeprefix("_assets/"))
        with self._lock:
            if not rest:
                return self._html(200, _document("GitHub sandbox", self._index()))
            parts = rest.split("/")
            repo = self.repos.get("/".join(parts[:2])) if len(parts) >= 2 else None
            if repo is None:
                return self._not_found(path)
            if len(parts) == 2:
                return self._html(200, self._repository_page(repo))
            found = _ISSUE.match(rest)
            if found is None:
                return self._not_found(path)
            kind, number = found.group(3), int(found.group(4))
            if number in repo.pulls and kind == "issues":  # as on GitHub: an issue number of a PR
                return Response(302, "text/plain", b"", page_path(repo.owner, repo.name, "pull", number))
            if kind == "pull" and number in repo.pulls:
                return self._html(200, self._pull_page(repo, number))
            if kind == "issues" and number in repo.issues:
                return self._html(200, self._issue_page(repo, number))
            return self._not_found(path)

    # --- pages ---------------------------------------------------------------------------------

    def _index(self) -> str:
        rows = "".join(
            f'<li><a href="{page_path(r.owner, r.name)}">{escape(r.full_name)}</a> '
            f'<span class="muted">{sum(n not in r.pulls for n in r.issues)} issues, '
            f"{len(r.pulls)} pull requests</span>{self._dashboard_link(r)}</li>"
            for r in self.repos.values()
        )
        return f"<h1>Repositories</h1><ul>{rows}</ul>"

    def _dashboards(self, repo: Repo) -> list[Json]:
        return [
            issue
            for issue in repo.issues.values()
            if is_dashboard(
                [label["name"] for label in issue["labels"]], issue["user"]["login"], self.bot_login
            )
        ]

    def _dashboard_link(self, repo: Repo) -> str:
        return "".join(
            f' · <a class="dashboard" href="{page_path(repo.owner, repo.name, "issues", d["number"])}">dashboard</a>'
            for d in self._dashboards(repo)
        )

    def _crumbs(self, repo: Repo) -> str:
        return f' / <a href="{page_path(repo.owner, repo.name)}">{escape(repo.full_name)}</a>'

    def _row(self, repo: Repo, item: Json, kind: str) -> str:
        href = page_path(repo.owner, repo.name, kind, item["number"])
        return (
            f'<li>{_state(item)} <a href="{href}">#{item["number"]} {escape(str(item["title"]))}</a> '
            f'<span class="muted">by {_who(item["user"])}</span> {_labels(item)}</li>'
        )

    def _repository_page(self, repo: Repo) -> bytes:
        newest = sorted(repo.issues.values(), key=lambda i: -int(i["number"]))
        issues = "".join(self._row(repo, i, "issues") for i in newest if i["number"] not in repo.pulls)
        pulls = "".join(
            self._row(repo, repo.pulls[i["number"]], "pull") for i in newest if i["number"] in repo.pulls
        )
        branches = "".join(
            f"<li><code>{escape(name)}</code> <span class=muted>{escape(sha[:7])}</span></li>"
            for name, sha in sorted(repo.store.branches().items())
        )
        body = (
            f"<h1>{escape(repo.full_name)}</h1>"
            f"<p>{self._dashboard_link(repo).removeprefix(' · ')}</p>"
            f"<h2>Issues</h2><ul class=issues>{issues or '<li class=muted>none</li>'}</ul>"
            f"<h2>Pull requests</h2><ul class=pulls>{pulls or '<li class=muted>none</li>'}</ul>"
            f"<h2>Branches</h2><ul>{branches}</ul>"
        )
        return _document(repo.full_name, body, crumbs=self._crumbs(repo))

    def _heading(self, item: Json, kind: str) -> str:
        return (
            f"<h1>{escape(str(item['title']))} <span class=muted>#{item['number']}</span></h1>"
            f"<p>{_state(item)} {_who(item['user'])} opened this {kind} at {escape(str(item['created_at']))} "
            f"{_labels(item)}</p>"
        )

    def _comments(self, repo: Repo, number: int) -> str:
        return "".join(
            _box(
                f"{_who(c['user'])} commented at {escape(str(c['created_at']))}",
                _PLAIN.render(str(c["body"] or "")),
            )
            for c in repo.comments.get(number, [])
        )

    def _issue_page(self, repo: Repo, number: int) -> bytes:
        issue = repo.issues[number]
        drawn = issue in self._dashboards(repo) and self.node_modules is not None
        markdown = _DRAWN if drawn else _PLAIN
        closing = [
            pr
            for pr in repo.pulls.values()
            if number in {int(n) for n in _CLOSING.findall(str(pr.get("body") or ""))}
        ]
        linked = "".join(self._row(repo, pr, "pull") for pr in closing)
        assignees = ", ".join(_who(a) for a in issue["assignees"]) or "nobody"
        body = (
            self._heading(issue, "issue")
            + f"<p class=muted>Assigned to {assignees}</p>"
            + _box(f"{_who(issue['user'])} wrote", markdown.render(str(issue["body"] or "")))
            + (f"<h2>Pull requests that close it</h2><ul class=linked>{linked}</ul>" if linked else "")
            + self._comments(repo, number)
        )
        return _document(
            f"{issue['title']} · Issue #{number}", body, crumbs=self._crumbs(repo), mermaid=drawn
        )

    def _pull_page(self, repo: Repo, number: int) -> bytes:
        pr = repo.pulls[number]
        closes = "".join(
            self._row(repo, repo.issues[n], "issues")
            for n in dict.fromkeys(int(n) for n in _CLOSING.findall(str(pr.get("body") or "")))
            if n in repo.issues and n not in repo.pulls
        )
        head, base = pr["head"], pr["base"]
        body = (
            self._heading(pr, "pull request")
            + f"<p>wants to merge <code>{escape(str(head['ref']))}</code> ({escape(str(head['sha'])[:7])}) "
            f"into <code>{escape(str(base['ref']))}</code></p>"
            + _box(f"{_who(pr['user'])} wrote", _PLAIN.render(str(pr["body"] or "")))
            + (f"<h2>Closes</h2><ul class=linked>{closes}</ul>" if closes else "")
            + self._checks(repo, str(head["sha"]))
            + "".join(
                _box(
                    f"{_who(r['user'])} reviewed: <b>{escape(str(r['state']))}</b>",
                    _PLAIN.render(str(r["body"] or "")),
                )
                for r in repo.reviews.get(number, [])
            )
            + self._comments(repo, number)
            + "<h2>Files changed</h2>"
            + self._diff(repo, pr)
        )
        return _document(f"{pr['title']} · Pull request #{number}", body, crumbs=self._crumbs(repo))

    def _checks(self, repo: Repo, sha: str) -> str:
        latest: dict[str, Json] = {}
        for status in repo.statuses.get(sha, []):  # newest first
            latest.setdefault(str(status["context"]), status)
        rows = [
            f"<tr><td>{escape(context)}</td><td>{escape(str(s['state']))}</td>"
            f"<td>{escape(str(s.get('description') or ''))}</td></tr>"
            for context, s in latest.items()
        ] + [
            f"<tr><td>{escape(str(r['name']))}</td><td>{escape(str(r.get('conclusion') or r['status']))}</td>"
            "<td>check run</td></tr>"
            for r in repo.check_runs.get(sha, [])
        ]
        if not rows:
            return _box("Checks", "<p class=muted>no status or check run on the head commit</p>")
        return _box("Checks", f"<table class=checks>{''.join(rows)}</table>")

    def _diff(self, repo: Repo, pr: Json) -> str:
        files = repo.store.changed_files(str(pr["base"]["sha"]), str(pr["head"]["sha"]))
        out = []
        for changed in files:
            lines = "".join(
                f'<span class="{_line_class(line)}">{escape(line) or " "}</span>'
                for line in changed.patch.splitlines()
            )
            out.append(
                _box(
                    f"<code>{escape(changed.filename)}</code> {escape(changed.status)} "
                    f'<span class="muted">+{changed.additions} -{changed.deletions}</span>',
                    f'<pre class="diff">{lines}</pre>',
                )
            )
        return "".join(out) or "<p class=muted>no change</p>"

    # --- answers -------------------------------------------------------------------------------

    def _html(self, status: int, body: bytes) -> Response:
        return Response(status, "text/html; charset=utf-8", body)

    def _not_found(self, path: str) -> Response:
        return self._html(404, _document("Not found", f"<h1>Not found</h1><p>{escape(path)}</p>"))

    def _asset(self, name: str) -> Response:
        assets: dict[str, tuple[str, Callable[[], bytes | None]]] = {
            "pages.css": ("text/css; charset=utf-8", _STYLE.encode),
            "pages.js": ("text/javascript; charset=utf-8", _SCRIPT.encode),
            "mermaid.min.js": ("text/javascript; charset=utf-8", self._mermaid),
        }
        kind, read = assets.get(name, ("", lambda: None))
        data = read()
        if data is None:
            return self._not_found(f"{PREFIX}/_assets/{name}")
        return Response(200, kind, data)

    def _mermaid(self) -> bytes | None:
        if self.node_modules is None:
            return None
        path = self.node_modules / "mermaid" / "dist" / "mermaid.min.js"
        return path.read_bytes() if path.is_file() else None


def _line_class(line: str) -> str:
    if line.startswith("@@"):
        return "hunk"
    return {"+": "add", "-": "del"}.get(line[:1], "ctx")
