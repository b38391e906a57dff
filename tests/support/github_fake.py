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
from collections.abc import Callable
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


def _pull(number: int, request: dict[str, Any] | None = None) -> dict[str, Any]:
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
            "repo": {"full_name": "octo/app"},
        },
        "base": {"ref": request.get("base", "main"), "sha": "d" * 40},
        "labels": [],
        "html_url": f"https://github.com/octo/repo/pull/{number}",
        "created_at": "2026-11-23T12:00:00Z",
        "updated_at": "2026-11-23T12:00:00Z",
    }


FILES = {
    ".squadron/config.yaml": "version: 1\nmax_issue_depth: 4\n",
    ".squadron/agents/README.txt": "not configuration",
}


#: Over this size the contents API answers ``"encoding": "none"`` without the content.
CONTENTS_LIMIT = 1024 * 1024


def _blob_sha(text: str) -> str:
    data = text.encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def _base64(text: str) -> str:
    """Base64 as GitHub sends it: wrapped every 60 characters."""
    flat = base64.b64encode(text.encode()).decode()
    return "".join(flat[i : i + 60] + "\n" for i in range(0, len(flat), 60))


def _contents(request: httpx.Request, match: re.Match[str]) -> httpx.Response:
    path = unquote(match.group("path"))
    if path in FILES:
        text = FILES[path]
        large = len(text.encode()) > CONTENTS_LIMIT
        return _json(
            200,
            {
                "type": "file",
                "name": path.rsplit("/", 1)[-1],
                "path": path,
                "sha": _blob_sha(text),
                "size": len(text.encode()),
                "encoding": "none" if large else "base64",
                "content": "" if large else _base64(text),
            },
        )
    entries = [
        {"type": "file", "name": name.removeprefix(path + "/"), "path": name}
        for name in FILES
        if name.startswith(path + "/") and "/" not in name.removeprefix(path + "/")
    ]
    if entries:
        return _json(200, [*entries, {"type": "dir", "name": "sub", "path": f"{path}/sub"}])
    return _json(404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})


def _blob(request: httpx.Request, match: re.Match[str]) -> httpx.Response:
    for text in FILES.values():
        if _blob_sha(text) == match.group("sha"):
            size = len(text.encode())
            return _json(
                200, {"sha": match.group("sha"), "size": size, "encoding": "base64", "content": _base64(text)}
            )
    return _json(404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})


def _in_an_hour() -> str:
    """A token's expiry as GitHub gives it: an hour from now (a fixed date would expire one day
    and make every caller refresh its token on every call, quietly)."""
    return (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


ROUTES: list[tuple[str, str, Responder]] = [
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
        r"/repos/[^/]+/[^/]+/branches/(?P<b>[^/]+)",
        lambda r, m: _json(200, {"name": m.group("b"), "commit": {"sha": "a" * 40}}),
    ),
    ("GET", r"/repos/[^/]+/[^/]+/contents/(?P<path>.+)", _contents),
    ("GET", r"/repos/[^/]+/[^/]+/git/blobs/(?P<sha>[0-9a-f]{40})", _blob),
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
    ("GET", r"/repos/[^/]+/[^/]+/pulls/(?P<n>\d+)", lambda r, m: _json(200, _pull(int(m.group("n"))))),
    ("POST", r"/repos/[^/]+/[^/]+/pulls", lambda r, m: _json(201, _pull(101, json.loads(r.content)))),
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
    """An httpx transport answering like api.github.com; ``script`` overrides the next answers."""

    requests: list[httpx.Request] = field(default_factory=list)
    script: list[httpx.Response] = field(default_factory=list)
    #: When its installation tokens expire (``YYYY-MM-DDTHH:MM:SSZ``); None: an hour from now.
    token_expiry: str | None = None

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.script:
            return self.script.pop(0)
        path = request.url.raw_path.decode().split("?")[0]  # %2F stays encoded, as GitHub sees it
        for method, pattern, respond in ROUTES:
            match = re.fullmatch(pattern, path)
            if method == request.method and match:
                answer = respond(request, match)
                if self.token_expiry is not None and path.endswith("/access_tokens"):
                    answer = _json(201, {**json.loads(answer.content), "expires_at": self.token_expiry})
                return answer
        return _json(404, {"message": f"no fake route for {request.method} {path}"})
