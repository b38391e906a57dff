"""The sandbox holds an installation token to the permissions it was minted with, and its GraphQL
to the token's repositories, as GitHub does.

Tokens minted by the App's own adapter (:meth:`GitHubApp.installation_token` with
``permissions``) play the attacker: a ``contents: read`` token writing a file, an ``issues``
token opening a pull request, a token narrowed to ``octo/a`` queueing ``octo/b``'s (private) or
``octo/c``'s (public) pull request through GraphQL. Asserted on each answer (GitHub's status,
message and shape) and on what changed (nothing)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from squadron.adapters.github.errors import GitHubError
from squadron.local.sandbox import GitHubSandbox
from tests.support.sandbox_app import app_of

INSTALLATION = 77
REPOS = ("octo/a", "octo/b", "octo/c")
ENQUEUE = (
    "mutation($input: EnqueuePullRequestInput!) { enqueuePullRequest(input: $input) "
    "{ mergeQueueEntry { id state } } }"
)
ENTRY = (
    "query($owner: String!, $name: String!, $number: Int!) { repository(owner: $owner, name: $name) "
    "{ pullRequest(number: $number) { id mergeQueueEntry { id state } } } }"
)


@pytest.fixture
def github(tmp_path: Path) -> Iterator[GitHubSandbox]:
    sandbox = GitHubSandbox(tmp_path, installation_id=INSTALLATION, webhook_secret="s")
    for name in REPOS:
        repo = sandbox.add_repository(name, {"README.md": f"# {name}\n"}, permissions={"octo-human": "admin"})
        store = repo.store
        blob = store.git("hash-object", "-w", "--stdin", stdin="change\n")
        tree = store._tree({"README.md": store.git("rev-parse", "main:README.md"), "new.txt": blob})
        commit = store.git("commit-tree", tree, "-p", "main", "-m", "change")
        store.git("update-ref", "refs/heads/feat", commit)
        sandbox.require_merge_queue(name, "main")
    sandbox.repos["octo/b"].private = True
    sandbox.start()
    human = {"authorization": "token human:octo-human"}
    for name in REPOS:
        answer = httpx.post(
            f"{sandbox.base_url}/repos/{name}/issues", json={"title": "t", "body": "b"}, headers=human
        )
        assert answer.status_code == 201
        answer = httpx.post(
            f"{sandbox.base_url}/repos/{name}/pulls",
            json={"title": "p", "head": "feat", "base": "main"},
            headers=human,
        )
        assert answer.status_code == 201, answer.text
    yield sandbox
    sandbox.stop()


def _state(sandbox: GitHubSandbox, name: str) -> tuple[object, ...]:
    repo = sandbox.repos[name]
    return (
        repo.issues[1]["title"],
        len(repo.comments.get(1, [])),
        sorted(repo.pulls),
        repo.store.branches(),
        list(repo.queue),
    )


#: (what, permissions minted, method, path under /repos/octo/a, body, expected status)
CASES: list[tuple[str, dict[str, str], str, str, dict[str, Any] | None, int]] = [
    ("contents:read reads a file", {"contents": "read"}, "GET", "/contents/README.md", None, 200),
    (
        "contents:read writes no file",
        {"contents": "read"},
        "PUT",
        "/contents/evil.txt",
        {"message": "m", "content": "ZXZpbA=="},
        403,
    ),
    ("contents:read comments not", {"contents": "read"}, "POST", "/issues/1/comments", {"body": "x"}, 403),
    ("contents:read reads a public repository's issue", {"contents": "read"}, "GET", "/issues/1", None, 200),
    ("issues:read reads an issue", {"issues": "read"}, "GET", "/issues/1", None, 200),
    ("issues:read comments not", {"issues": "read"}, "POST", "/issues/1/comments", {"body": "x"}, 403),
    ("issues:read edits not", {"issues": "read"}, "PATCH", "/issues/1", {"title": "taken"}, 403),
    ("issues:write comments", {"issues": "write"}, "POST", "/issues/1/comments", {"body": "x"}, 201),
    (
        "issues:write opens no pull request",
        {"issues": "write"},
        "POST",
        "/pulls",
        {"title": "x", "head": "feat", "base": "main"},
        403,
    ),
    ("issues:write merges not", {"issues": "write"}, "PUT", "/pulls/2/merge", {}, 403),
    ("pull_requests:write merges not", {"pull_requests": "write"}, "PUT", "/pulls/2/merge", {}, 403),
    (
        "contents:write updates no pull request",
        {"contents": "write"},
        "PUT",
        "/pulls/2/update-branch",
        {},
        403,
    ),
    (
        "statuses:read posts no status",
        {"statuses": "read"},
        "POST",
        "/statuses/main",
        {"state": "success"},
        403,
    ),
    (
        "checks:read creates no check run",
        {"checks": "read"},
        "POST",
        "/check-runs",
        {"name": "x", "head_sha": "main"},
        403,
    ),
    ("any token reads the repository (metadata)", {"issues": "read"}, "GET", "", None, 200),
]


@pytest.mark.parametrize(
    ("permissions", "method", "path", "body", "status"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_token_does_only_what_its_permissions_allow(  # noqa: PLR0917 (the table's columns)
    github: GitHubSandbox,
    permissions: dict[str, str],
    method: str,
    path: str,
    body: dict[str, Any] | None,
    status: int,
) -> None:
    token = app_of(github).installation_token(INSTALLATION, repositories=("octo/a",), permissions=permissions)
    before = _state(github, "octo/a")
    answer = httpx.request(
        method,
        f"{github.base_url}/repos/octo/a{path}",
        json=body,
        headers={"authorization": f"token {token.token}"},
    )
    assert answer.status_code == status, answer.text
    if status == 403:
        assert answer.json()["message"] == "Resource not accessible by integration"
        assert set(answer.json()) == {"message", "documentation_url"}
        assert _state(github, "octo/a") == before  # nothing done


@pytest.mark.parametrize(
    "permissions",
    [{"checks": "write"}, {"workflows": "write"}, {"issues": "write", "administration": "write"}],
    ids=["more than granted", "never granted", "one of two never granted"],
)
def test_a_token_gets_no_permission_the_installation_was_not_granted(
    github: GitHubSandbox, permissions: dict[str, str]
) -> None:
    app = app_of(github)
    answer = httpx.post(
        f"{github.base_url}/app/installations/{INSTALLATION}/access_tokens",
        json={"permissions": permissions},
        headers={"authorization": f"Bearer {app.jwt()}"},
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["message"] == "The permissions requested are not granted to this installation."
    assert "token" not in answer.json()
    with pytest.raises(GitHubError):
        app.installation_token(INSTALLATION, permissions=permissions)


def test_a_token_minted_without_permissions_holds_the_installations(github: GitHubSandbox) -> None:
    answer = httpx.post(
        f"{github.base_url}/app/installations/{INSTALLATION}/access_tokens",
        json={"permissions": {"issues": "read"}},
        headers={"authorization": f"Bearer {app_of(github).jwt()}"},
    )
    assert answer.json()["permissions"] == {"metadata": "read", "issues": "read"}
    every = app_of(github).installation_token(INSTALLATION).token
    assert github.token_permissions[every]["contents"] == "write"


#: (what, the token's own repository private, target, method, path, expected status): the
#: permissions guard private resources; a public repository's issues, comments, pull requests and
#: files are read as anyone may (GitHub: "can be used without authentication or the aforementioned
#: permissions if only public resources are requested"), never written.
PUBLIC: list[tuple[str, bool, str, str, str, int]] = [
    ("its own public issue", False, "octo/a", "GET", "/issues/1", 200),
    ("its own public comments", False, "octo/a", "GET", "/issues/1/comments", 200),
    ("its own public pull request", False, "octo/a", "GET", "/pulls/2", 200),
    ("its own private issue", True, "octo/a", "GET", "/issues/1", 403),
    ("its own private comments", True, "octo/a", "GET", "/issues/1/comments", 403),
    ("its own private pull request", True, "octo/a", "GET", "/pulls/2", 403),
    ("a public issue elsewhere", False, "octo/c", "GET", "/issues/1", 200),
    ("a public pull request's files elsewhere", False, "octo/c", "GET", "/pulls/2/files", 200),
    ("a private issue elsewhere", False, "octo/b", "GET", "/issues/1", 404),
    ("no comment on its own public issue", False, "octo/a", "POST", "/issues/1/comments", 403),
    ("no comment on a public issue elsewhere", False, "octo/c", "POST", "/issues/1/comments", 403),
    ("no edit of a public issue elsewhere", False, "octo/c", "PATCH", "/issues/1", 403),
]


@pytest.mark.parametrize(
    ("private", "target", "method", "path", "status"), [c[1:] for c in PUBLIC], ids=[c[0] for c in PUBLIC]
)
def test_a_token_without_the_permission_reads_public_resources_only(  # noqa: PLR0917 (the table's columns)
    github: GitHubSandbox, private: bool, target: str, method: str, path: str, status: int
) -> None:
    github.repos["octo/a"].private = private
    token = app_of(github).installation_token(
        INSTALLATION, repositories=("octo/a",), permissions={"contents": "read"}
    )
    before = _state(github, target)
    body = None if method == "GET" else {"title": "taken"} if method == "PATCH" else {"body": "taken"}
    answer = httpx.request(
        method,
        f"{github.base_url}/repos/{target}{path}",
        json=body,
        headers={"authorization": f"token {token.token}"},
    )
    assert answer.status_code == status, answer.text
    if status != 200:
        assert "taken" not in answer.text and "title" not in answer.text
    assert _state(github, target) == before


def _graphql(github: GitHubSandbox, token: str, query: str, variables: dict[str, Any]) -> Any:
    answer = httpx.post(
        f"{github.base_url}/graphql",
        json={"query": query, "variables": variables},
        headers={"authorization": f"bearer {token}"},
    )
    assert answer.status_code == 200  # GitHub's GraphQL answers its errors in the body
    return answer.json()


#: (what, target repository, permissions, expected error type or None)
GRAPHQL = [
    (
        "private repository elsewhere",
        "octo/b",
        {"merge_queues": "write", "pull_requests": "read"},
        "NOT_FOUND",
    ),
    (
        "public repository elsewhere",
        "octo/c",
        {"merge_queues": "write", "pull_requests": "read"},
        "FORBIDDEN",
    ),
    ("own repository without merge_queues", "octo/a", {"pull_requests": "write"}, "FORBIDDEN"),
    (
        "own repository with merge_queues:read",
        "octo/a",
        {"merge_queues": "read", "pull_requests": "read"},
        "FORBIDDEN",
    ),
    ("own repository", "octo/a", {"merge_queues": "write", "pull_requests": "read"}, None),
]


@pytest.mark.parametrize(
    ("target", "permissions", "error"), [g[1:] for g in GRAPHQL], ids=[g[0] for g in GRAPHQL]
)
def test_graphql_queues_only_what_the_token_reaches_and_may(
    github: GitHubSandbox, target: str, permissions: dict[str, str], error: str | None
) -> None:
    token = (
        app_of(github)
        .installation_token(INSTALLATION, repositories=("octo/a",), permissions=permissions)
        .token
    )
    node = github.repos[target].pulls[2]["node_id"]
    before = _state(github, target)
    got = _graphql(github, token, ENQUEUE, {"input": {"pullRequestId": node}})
    if error is None:
        assert "errors" not in got and got["data"]["enqueuePullRequest"]["mergeQueueEntry"]["id"], got
        return
    assert got["data"] == {"enqueuePullRequest": None}
    assert [e["type"] for e in got["errors"]] == [error]
    if error == "NOT_FOUND":
        assert got["errors"][0]["message"] == f"Could not resolve to a node with the global id of '{node}'"
    else:
        assert got["errors"][0]["message"] == "Resource not accessible by integration"
    assert _state(github, target) == before


@pytest.mark.parametrize(
    ("target", "error"),
    [("octo/b", "NOT_FOUND"), ("octo/c", None), ("octo/a", None)],
    ids=["private", "public", "own"],
)
def test_graphql_reads_no_pull_request_of_a_private_repository_elsewhere(
    github: GitHubSandbox, target: str, error: str | None
) -> None:
    token = app_of(github).installation_token(INSTALLATION, repositories=("octo/a",)).token
    owner, name = target.split("/")
    got = _graphql(github, token, ENTRY, {"owner": owner, "name": name, "number": 2})
    node = github.repos[target].pulls[2]["node_id"]
    if error is None:
        assert got["data"]["repository"]["pullRequest"]["id"] == node
        return
    assert got["data"] == {"repository": None} and node not in json.dumps(got)
    assert got["errors"][0]["message"] == f"Could not resolve to a Repository with the name '{target}'."
