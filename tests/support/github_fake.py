"""A recording stand-in for api.github.com (an httpx transport), plus an App key for tests.

It answers the requests the client makes with minimal, realistic bodies and
records every request, so contract tests validate what the client really sent
against GitHub's OpenAPI description.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa


@functools.cache
def app_private_key() -> tuple[str, str]:
    """(private PEM, public PEM) of a throwaway RSA key."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public


Responder = Callable[[httpx.Request, re.Match[str]], httpx.Response]


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, json=body, headers=headers or {})


def _issue(number: int, **changes: Any) -> dict[str, Any]:
    issue = {
        "number": number,
        "title": f"Issue {number}",
        "state": "open",
        "labels": [],
        "assignees": [],
        "body": "",
        "html_url": f"https://github.com/octo/repo/issues/{number}",
        "updated_at": "2026-11-23T12:00:00Z",
    }
    return {**issue, **changes}


def _review(request: httpx.Request) -> dict[str, Any]:
    body = json.loads(request.content)
    state = {"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED"}.get(
        body.get("event"), "COMMENTED"
    )
    return {
        "id": 2,
        "user": _user("squadron[bot]"),
        "body": body.get("body", ""),
        "state": state,
        "commit_id": body.get("commit_id", "c" * 40),
        "submitted_at": "2026-11-23T12:30:00Z",
    }


def _user(login: str) -> dict[str, Any]:
    return {"login": login, "id": 1000 + len(login), "type": "Bot" if login.endswith("[bot]") else "User"}


def _created_issue(request: httpx.Request, match: re.Match[str]) -> httpx.Response:
    body = json.loads(request.content)
    return _json(
        201,
        _issue(
            99,
            title=body["title"],
            body=body.get("body", ""),
            labels=[{"name": name} for name in body.get("labels", [])],
            assignees=[_user(login) for login in body.get("assignees", [])],
        ),
    )


def _assigned(request: httpx.Request, match: re.Match[str]) -> httpx.Response:
    logins = json.loads(request.content).get("assignees", [])
    return _json(201, _issue(int(match.group("n")), assignees=[_user(login) for login in logins]))


def _pull(number: int, request: dict[str, Any] | None = None, repo: str = "octo/repo") -> dict[str, Any]:
    """A pull request as GitHub answers it: the App's own, from a branch of ``repo`` (not a fork)."""
    request = request or {}
    return {
        "number": number,
        "title": request.get("title", f"PR {number}"),
        "body": request.get("body", ""),
        "state": "open",
        "draft": request.get("draft", False),
        "merged": False,
        "user": {"login": "squadron[bot]", "id": 1, "type": "Bot"},
        "head": {
            "ref": request.get("head", "feat/issue-38"),
            "sha": "c" * 40,
            "repo": {"full_name": repo},
        },
        "base": {"ref": request.get("base", "main"), "sha": "d" * 40},
        "labels": [],
        "html_url": f"https://github.com/{repo}/pull/{number}",
        "created_at": "2026-11-23T12:00:00Z",
        "updated_at": "2026-11-23T12:00:00Z",
    }


FILES: dict[str, str] = {
    ".squadron/config.yaml": "version: 1\nmax_issue_depth: 4\n",
    ".squadron/agents/README.txt": "not configuration",
}


@dataclass(frozen=True)
class Link:
    """A symbolic link in the fake repository (the contents API lists it as ``symlink``)."""

    target: str


Content = str | bytes | Link

#: Over this size the contents API answers ``"encoding": "none"`` without the content.
CONTENTS_LIMIT = 1024 * 1024


def _bytes(content: str | bytes) -> bytes:
    return content.encode() if isinstance(content, str) else content


def _blob_sha(content: str | bytes) -> str:
    data = _bytes(content)
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def _base64(content: str | bytes) -> str:
    """Base64 as GitHub sends it: wrapped every 60 characters."""
    flat = base64.b64encode(_bytes(content)).decode()
    return "".join(flat[i : i + 60] + "\n" for i in range(0, len(flat), 60))


def etag_of(content: bytes) -> str:
    """A weak ETag of a body, as GitHub sends on GETs (``W/"<hash>"``)."""
    return f'W/"{hashlib.sha256(content).hexdigest()}"'


def conditional(request: httpx.Request, answer: httpx.Response) -> httpx.Response:
    """GitHub's conditional GET: a 200 carries a weak ETag; ``If-None-Match`` naming it gets a
    304 Not Modified with the ETag and no body."""
    if request.method != "GET" or answer.status_code != 200:
        return answer
    etag = etag_of(answer.content)
    if etag in [tag.strip() for tag in request.headers.get("if-none-match", "").split(",")]:
        return httpx.Response(304, headers={"ETag": etag})
    answer.headers["ETag"] = etag
    return answer


def _not_found() -> httpx.Response:
    return _json(404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})


def _file_object(path: str, content: Content) -> dict[str, Any]:
    name = path.rsplit("/", 1)[-1]
    if isinstance(content, Link):
        return {
            "type": "symlink",
            "name": name,
            "path": path,
            "target": content.target,
            "size": len(content.target),
        }
    size = len(_bytes(content))
    large = size > CONTENTS_LIMIT
    return {
        "type": "file",
        "name": name,
        "path": path,
        "sha": _blob_sha(content),
        "size": size,
        "encoding": "none" if large else "base64",
        "content": "" if large else _base64(content),
    }


def _contents(files: Mapping[str, Content], path: str) -> httpx.Response:
    if path in files:
        content = files[path]
        if (
            isinstance(content, Link)
            and content.target in files
            and not isinstance(files[content.target], Link)
        ):
            # GitHub answers a link to a regular file with that file (why links are refused by listing).
            return _json(200, _file_object(path, files[content.target]))
        return _json(200, _file_object(path, content))
    prefix = path + "/"
    entries: dict[str, dict[str, Any]] = {}
    for name, content in files.items():
        if not name.startswith(prefix):
            continue
        first, _, rest = name.removeprefix(prefix).partition("/")
        entry = (
            {"type": "dir", "name": first, "path": prefix + first, "size": 0}
            if rest
            else _file_object(prefix + first, content)
        )
        entry.pop("content", None)
        entry.pop("encoding", None)
        entries[first] = entry
    if entries:
        return _json(200, [entries[name] for name in sorted(entries)])
    return _not_found()


def _blob(files: Mapping[str, Content], sha: str) -> httpx.Response:
    for content in files.values():
        if not isinstance(content, Link) and _blob_sha(content) == sha:
            size = len(_bytes(content))
            return _json(200, {"sha": sha, "size": size, "encoding": "base64", "content": _base64(content)})
    return _not_found()


def _in_an_hour() -> str:
    """A token's expiry as GitHub gives it: an hour from now (a fixed date would expire one day
    and make every caller refresh its token on every call, quietly)."""
    return (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _graphql(request: httpx.Request) -> httpx.Response:
    """GitHub's GraphQL for the merge queue: an entry at the head, queued by the App."""
    query = str(json.loads(request.content).get("query") or "")
    entry = {
        "id": "MQE_1",
        "state": "QUEUED",
        "position": 1,
        "enqueuedAt": "2026-11-23T12:00:00Z",
        "enqueuer": {"__typename": "Bot", "login": "squadron"},
        "headCommit": {"oid": "c" * 40},
    }
    if "revertPullRequest" in query:  # the revert's pull request, opened from GitHub's branch
        opened = {"id": "PR_2", "number": 102, "headRefName": "revert-101-feat/issue-38", "state": "OPEN"}
        return _json(
            200, {"data": {"revertPullRequest": {"revertPullRequest": {**opened, "url": "https://x"}}}}
        )
    for mutation in ("enqueuePullRequest", "dequeuePullRequest"):
        if mutation in query:
            return _json(200, {"data": {mutation: {"mergeQueueEntry": entry}}})
    pull = {"id": "PR_1", "headRefOid": "c" * 40, "mergeQueueEntry": entry}
    return _json(200, {"data": {"repository": {"pullRequest": pull}}})


ROUTES: list[tuple[str, str, Responder]] = [
    ("POST", r"/graphql", lambda r, m: _graphql(r)),
    ("GET", r"/repos/[^/]+/[^/]+/rules/branches/.+", lambda r, m: _json(200, [])),
    (
        "POST",
        r"/app/installations/(?P<id>\d+)/access_tokens",
        lambda r, m: _json(
            201, {"token": f"ghs_{m.group('id')}", "expires_at": _in_an_hour(), "permissions": {}}
        ),
    ),
    ("GET", r"/app$", lambda r, m: _json(200, {"id": 42, "slug": "squadron", "name": "Squadron"})),
    ("GET", r"/app/hook/deliveries", lambda r, m: _json(200, [{"id": 1, "guid": "g-1", "status_code": 502}])),
    ("POST", r"/app/hook/deliveries/\d+/attempts", lambda r, m: _json(202, {})),
    (
        "GET",
        r"/installation/repositories",
        lambda r, m: _json(200, {"total_count": 1, "repositories": [{"id": 1, "full_name": "octo/app"}]}),
    ),
    (
        "GET",
        r"/repos/[^/]+/[^/]+",
        lambda r, m: _json(200, {"id": 1, "full_name": "octo/app", "default_branch": "main"}),
    ),
    (
        "GET",
        r"/repos/[^/]+/[^/]+/collaborators/(?P<login>[^/]+)/permission",
        lambda r, m: _json(
            200, {"permission": "write", "role_name": "maintain", "user": {"login": m.group("login")}}
        ),
    ),
    ("GET", r"/repos/[^/]+/[^/]+/issues/(?P<n>\d+)", lambda r, m: _json(200, _issue(int(m.group("n"))))),
    ("PATCH", r"/repos/[^/]+/[^/]+/issues/(?P<n>\d+)", lambda r, m: _json(200, _issue(int(m.group("n"))))),
    ("POST", r"/repos/[^/]+/[^/]+/issues", _created_issue),
    ("GET", r"/repos/[^/]+/[^/]+/issues", lambda r, m: _json(200, [_issue(38)])),
    (
        "POST",
        r"/repos/[^/]+/[^/]+/issues/\d+/labels",
        lambda r, m: _json(200, [{"name": name} for name in json.loads(r.content)["labels"]]),
    ),
    ("DELETE", r"/repos/[^/]+/[^/]+/issues/\d+/labels/[^/]+", lambda r, m: _json(200, [])),
    (
        "POST",
        r"/repos/[^/]+/[^/]+/issues/(?P<n>\d+)/assignees",
        _assigned,
    ),
    (
        "DELETE",
        r"/repos/[^/]+/[^/]+/issues/(?P<n>\d+)/assignees",
        lambda r, m: _json(200, _issue(int(m.group("n")))),
    ),
    ("GET", r"/repos/[^/]+/[^/]+/issues/\d+/comments", lambda r, m: _json(200, [{"id": 1, "body": "hi"}])),
    (
        "POST",
        r"/repos/[^/]+/[^/]+/issues/\d+/comments",
        lambda r, m: _json(201, {"id": 7, "body": json.loads(r.content)["body"]}),
    ),
    (
        "GET",
        r"/repos/(?P<repo>[^/]+/[^/]+)/pulls/(?P<n>\d+)",
        lambda r, m: _json(200, _pull(int(m.group("n")), repo=m.group("repo"))),
    ),
    (
        "POST",
        r"/repos/(?P<repo>[^/]+/[^/]+)/pulls",
        lambda r, m: _json(201, _pull(101, json.loads(r.content), repo=m.group("repo"))),
    ),
    (
        "GET",
        r"/repos/(?P<repo>[^/]+/[^/]+)/pulls",
        lambda r, m: _json(200, [_pull(101, repo=m.group("repo"))]),
    ),
    (
        "GET",
        r"/repos/[^/]+/[^/]+/pulls/\d+/files",
        lambda r, m: _json(
            200,
            [
                {
                    "filename": "app.py",
                    "status": "modified",
                    "additions": 1,
                    "deletions": 1,
                    "patch": "@@ -1 +1 @@\n-print('v1')\n+print('v2')",
                }
            ],
        ),
    ),
    (
        "GET",
        r"/repos/[^/]+/[^/]+/pulls/\d+/reviews",
        lambda r, m: _json(200, [{"id": 1, "state": "APPROVED"}]),
    ),
    ("POST", r"/repos/[^/]+/[^/]+/pulls/\d+/reviews", lambda r, m: _json(200, _review(r))),
    (
        "PUT",
        r"/repos/[^/]+/[^/]+/pulls/\d+/merge",
        lambda r, m: _json(200, {"merged": True, "sha": "b" * 40}),
    ),
    ("PUT", r"/repos/[^/]+/[^/]+/pulls/\d+/update-branch", lambda r, m: _json(202, {"message": "Updating"})),
    ("POST", r"/repos/[^/]+/[^/]+/statuses/[0-9a-f]+", lambda r, m: _json(201, {"id": 3})),
    ("POST", r"/repos/[^/]+/[^/]+/check-runs", lambda r, m: _json(201, {"id": 4})),
    ("PATCH", r"/repos/[^/]+/[^/]+/check-runs/\d+", lambda r, m: _json(200, {"id": 4})),
    (
        "GET",
        r"/repos/[^/]+/[^/]+/commits/(?P<ref>[^/]+)/status",
        lambda r, m: _json(
            200,
            {
                "state": "success",
                "sha": m.group("ref"),
                "total_count": 1,
                "statuses": [{"context": "ci", "state": "success", "description": "passed"}],
            },
        ),
    ),
    ("DELETE", r"/repos/[^/]+/[^/]+/git/refs/heads%2F.+", lambda r, m: httpx.Response(204)),
    ("PUT", r"/repos/[^/]+/[^/]+/branches/[^/]+/protection", lambda r, m: _json(200, json.loads(r.content))),
    (
        "GET",
        r"/repos/[^/]+/[^/]+/branches",
        lambda r, m: _json(200, [{"name": "main"}, {"name": "release/1.0"}, {"name": "feat/issue-38"}]),
    ),
    (
        "GET",
        r"/repos/[^/]+/[^/]+/commits/[^/]+/check-runs",
        lambda r, m: _json(200, {"total_count": 1, "check_runs": [{"id": 4}]}),
    ),
]


@dataclass
class FakeGitHub:
    """An httpx transport answering like api.github.com; ``script`` overrides the next answers.

    ``files`` is the default branch's tree at ``head`` (None: the module's :data:`FILES`).
    With ``issues`` (a dict, even empty) the issue endpoints keep state: created issues get
    the next number, edits and closes stick, and the list endpoint filters by state and label.
    """

    requests: list[httpx.Request] = field(default_factory=list)
    script: list[httpx.Response] = field(default_factory=list)
    #: When its installation tokens expire (``YYYY-MM-DDTHH:MM:SSZ``); None: an hour from now.
    token_expiry: str | None = None
    files: dict[str, Content] | None = None
    head: str = "a" * 40
    #: Per repository (``owner/name``): its tree and head, over ``files`` and ``head``.
    trees: dict[str, tuple[dict[str, Content], str]] = field(default_factory=dict)
    #: Per repository: its issues by number (stateful issue endpoints), or None.
    issues: dict[str, dict[int, dict[str, Any]]] | None = None
    #: Answers that replace the fake's for "METHOD /path" (while they are here).
    faults: dict[str, httpx.Response] = field(default_factory=dict)
    #: Labels added to each (repository, issue) outside the stateful issues.
    labels_added: dict[tuple[str, int], list[str]] = field(default_factory=dict)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def commit(self, files: Mapping[str, Content], sha: str, *, repo: str | None = None) -> None:
        """The default branch (of ``repo``, or of every repository) moves to ``sha``, whose tree is ``files``."""
        if repo is None:
            self.files, self.head = dict(files), sha
        else:
            self.trees[repo] = (dict(files), sha)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.script:
            return self.script.pop(0)
        return conditional(request, self._answer(request))

    def _answer(self, request: httpx.Request) -> httpx.Response:
        path = request.url.raw_path.decode().split("?")[0]  # %2F stays encoded, as GitHub sees it
        fault = self.faults.get(f"{request.method} {path}")
        if fault is not None:
            return fault
        answer = self._stateful(request, path)
        if answer is not None:
            return answer
        answer = self._labels_kept(request, path)
        if answer is not None:
            return answer
        for method, pattern, respond in ROUTES:
            match = re.fullmatch(pattern, path)
            if method == request.method and match:
                answer = respond(request, match)
                if self.token_expiry is not None and path.endswith("/access_tokens"):
                    answer = _json(201, {**json.loads(answer.content), "expires_at": self.token_expiry})
                return answer
        return _json(404, {"message": f"no fake route for {request.method} {path}"})

    def _labels_kept(self, request: httpx.Request, path: str) -> httpx.Response | None:
        """Labels added to an issue stay on it: GitHub's answer to an assignment shows them."""
        m = re.fullmatch(r"/repos/(?P<repo>[^/]+/[^/]+)/issues/(?P<n>\d+)/(?P<what>labels|assignees)", path)
        if m is None or request.method != "POST":
            return None
        key = (unquote(m.group("repo")), int(m.group("n")))
        kept = self.labels_added.setdefault(key, [])
        if m.group("what") == "labels":
            kept += [name for name in json.loads(request.content)["labels"] if name not in kept]
            return None  # answered as before
        logins = json.loads(request.content).get("assignees", [])
        labels = [{"name": name} for name in kept]
        return _json(201, _issue(key[1], assignees=[_user(login) for login in logins], labels=labels))

    def _stateful(self, request: httpx.Request, path: str) -> httpx.Response | None:
        found = re.match(r"/repos/(?P<repo>[^/]+/[^/]+)", path)
        repo = unquote(found.group("repo")) if found else ""
        files: Mapping[str, Content] = FILES if self.files is None else self.files
        files, head = self.trees.get(repo, (files, self.head))
        method = request.method
        if method == "GET" and (m := re.fullmatch(r"/repos/[^/]+/[^/]+/branches/(?P<b>[^/]+)", path)):
            return _json(200, {"name": unquote(m.group("b")), "commit": {"sha": head}})
        if method == "GET" and (m := re.fullmatch(r"/repos/[^/]+/[^/]+/contents/(?P<path>.+)", path)):
            return _contents(files, unquote(m.group("path")))
        if method == "GET" and (
            m := re.fullmatch(r"/repos/[^/]+/[^/]+/git/blobs/(?P<sha>[0-9a-f]{40})", path)
        ):
            return _blob(files, m.group("sha"))
        if self.issues is None:
            return None
        return self._issue_route(request, path, self.issues.setdefault(repo, {}))

    @staticmethod
    def _issue_route(
        request: httpx.Request, path: str, issues: dict[int, dict[str, Any]]
    ) -> httpx.Response | None:
        method = request.method
        if re.fullmatch(r"/repos/[^/]+/[^/]+/issues", path):
            if method == "POST":
                body = json.loads(request.content)
                number = max(issues, default=0) + 1
                issues[number] = _issue(
                    number,
                    title=body["title"],
                    body=body.get("body", ""),
                    labels=[{"name": name} for name in body.get("labels", [])],
                )
                return _json(201, issues[number])
            if method == "GET":
                state = request.url.params.get("state", "open")
                wanted = {label for label in request.url.params.get("labels", "").split(",") if label}
                found = [
                    issue
                    for _, issue in sorted(issues.items(), reverse=True)  # newest first
                    if state in ("all", issue["state"])
                    and wanted <= {label["name"] for label in issue["labels"]}
                ]
                return _json(200, found)
        m = re.fullmatch(r"/repos/[^/]+/[^/]+/issues/(?P<n>\d+)", path)
        if m and int(m.group("n")) in issues:
            issue = issues[int(m.group("n"))]
            if method == "PATCH":
                issue.update(json.loads(request.content))
            return _json(200, issue) if method in ("GET", "PATCH") else None
        m = re.fullmatch(r"/repos/[^/]+/[^/]+/issues/(?P<n>\d+)/comments", path)
        if m and method == "POST" and int(m.group("n")) in issues:
            comments = issues[int(m.group("n"))].setdefault("comments_made", [])
            comments.append(json.loads(request.content)["body"])
            return _json(201, {"id": len(comments), "body": comments[-1]})
        return None
