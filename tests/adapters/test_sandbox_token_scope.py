"""The sandbox holds an installation token to the repositories it was narrowed to, as GitHub does.

Three repositories under one installation. A token minted by the App's own adapter
(:meth:`GitHubApp.installation_token`, ``repositories`` in ``POST
/app/installations/{id}/access_tokens``) for ``octo/a`` plays the attacker against ``octo/b``
(private: Not Found to it, read or write) and ``octo/c`` (public: readable as anyone may, never
written); an unnarrowed token reaches all three. Asserted on what each request got and on what
changed in the other repositories (nothing)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from squadron.adapters.github.client import GitHubAppClient
from squadron.adapters.github.errors import GitHubError
from squadron.domain.permissions import Caller
from squadron.local.sandbox import GitHubSandbox
from tests.support.sandbox_app import app_of

INSTALLATION = 77
REPOS = ("octo/a", "octo/b", "octo/c")


@pytest.fixture
def github(tmp_path: Path) -> Iterator[GitHubSandbox]:
    sandbox = GitHubSandbox(tmp_path, installation_id=INSTALLATION, webhook_secret="s")
    for name in REPOS:
        sandbox.add_repository(name, {"README.md": f"# {name}\n"}, permissions={"octo-human": "admin"})
    sandbox.repos["octo/b"].private = True
    sandbox.start()
    human = {"authorization": "token human:octo-human"}
    for name in REPOS:  # an issue in each, the attacker's target
        answer = httpx.post(f"{sandbox.base_url}/repos/{name}/issues", json={"title": "t"}, headers=human)
        assert answer.status_code == 201
    yield sandbox
    sandbox.stop()


#: (what, method, path under /repos/<repo>, body): reads and writes an agent of another repository
#: would want.
REQUESTS = [
    ("read the repository", "GET", "", None),
    ("read an issue", "GET", "/issues/1", None),
    ("list comments", "GET", "/issues/1/comments", None),
    ("read a file", "GET", "/contents/README.md", None),
    ("comment", "POST", "/issues/1/comments", {"body": "from a"}),
    ("edit an issue", "PATCH", "/issues/1", {"title": "taken"}),
    ("open a pull request", "POST", "/pulls", {"title": "x", "head": "main", "base": "main"}),
    ("write a file", "PUT", "/contents/evil.txt", {"message": "m", "content": "ZXZpbA=="}),
]


def _state(sandbox: GitHubSandbox, name: str) -> tuple[object, ...]:
    repo = sandbox.repos[name]
    return (repo.issues[1]["title"], len(repo.comments.get(1, [])), len(repo.pulls), repo.store.branches())


@pytest.mark.parametrize("request_", REQUESTS, ids=[r[0] for r in REQUESTS])
@pytest.mark.parametrize(
    ("target", "reads", "writes"),
    [("octo/b", 404, 404), ("octo/c", 200, 403)],
    ids=["private", "public"],
)
def test_a_token_narrowed_to_one_repository_gets_nothing_of_another(
    github: GitHubSandbox,
    request_: tuple[str, str, str, dict[str, str] | None],
    target: str,
    reads: int,
    writes: int,
) -> None:
    _, method, path, body = request_
    token = app_of(github).installation_token(INSTALLATION, repositories=("octo/a",)).token
    before = _state(github, target)
    answer = httpx.request(
        method,
        f"{github.base_url}/repos/{target}{path}",
        json=body,
        headers={"authorization": f"token {token}"},
    )
    assert answer.status_code == (reads if method == "GET" else writes), answer.text
    if answer.status_code == 404:
        assert answer.json()["message"] == "Not Found" and "# octo" not in answer.text
    assert _state(github, target) == before  # nothing in it changed


def test_the_narrowed_token_acts_on_its_own_repository_and_an_unnarrowed_one_on_all(
    github: GitHubSandbox,
) -> None:
    app = app_of(github)
    own = app.installation_token(INSTALLATION, repositories=("octo/a",)).token
    every = app.installation_token(INSTALLATION).token
    for token, name, status in [(own, "octo/a", 201), (every, "octo/b", 201), (every, "octo/c", 201)]:
        answer = httpx.post(
            f"{github.base_url}/repos/{name}/issues/1/comments",
            json={"body": "hello"},
            headers={"authorization": f"token {token}"},
        )
        assert answer.status_code == status, (name, answer.text)


def test_the_installation_lists_what_a_token_reaches_a_page_at_a_time(github: GitHubSandbox) -> None:
    app = app_of(github)
    for n in range(4):
        github.add_repository(f"octo/more-{n}", {"README.md": "hi\n"})
    github.add_repository("octo/elsewhere", {"README.md": "hi\n"}).installed = False
    client = GitHubAppClient(http=app.http, jwt=app.jwt, app_id=github.app_id, caller=Caller.framework())
    every = app.installation_token(INSTALLATION).token
    listed = [r["full_name"] for r in client.list_installation_repositories(every)]
    assert listed == [*REPOS, *(f"octo/more-{n}" for n in range(4))]  # not the uninstalled one
    first = httpx.get(
        f"{github.base_url}/installation/repositories?per_page=3",
        headers={"authorization": f"token {every}"},
    )
    assert first.json()["total_count"] == 7 and len(first.json()["repositories"]) == 3
    assert 'rel="next"' in first.headers["link"] and "page=2" in first.headers["link"]
    narrowed = app.installation_token(INSTALLATION, repositories=("octo/a",)).token
    assert [r["full_name"] for r in client.list_installation_repositories(narrowed)] == ["octo/a"]


@pytest.mark.parametrize(
    "body",
    [{"repositories": ["elsewhere"]}, {"repositories": ["nowhere"]}, {"repository_ids": [999]}],
    ids=["not installed", "unknown name", "unknown id"],
)
def test_a_token_is_not_narrowed_to_a_repository_outside_the_installation(
    github: GitHubSandbox, body: dict[str, list[object]]
) -> None:
    github.add_repository("octo/elsewhere", {"README.md": "hi\n"}).installed = False
    app = app_of(github)
    answer = httpx.post(
        f"{github.base_url}/app/installations/{INSTALLATION}/access_tokens",
        json=body,
        headers={"authorization": f"Bearer {app.jwt()}", "accept": "application/vnd.github+json"},
    )
    assert answer.status_code == 422 and "not accessible to the parent installation" in answer.text
    assert "token" not in answer.json()
    with pytest.raises(GitHubError):
        app.installation_token(INSTALLATION, repositories=("octo/elsewhere",))


def test_a_token_narrowed_by_id_reaches_that_repository_only(github: GitHubSandbox) -> None:
    app = app_of(github)
    answer = httpx.post(
        f"{github.base_url}/app/installations/{INSTALLATION}/access_tokens",
        json={"repository_ids": [github.repos["octo/c"].id]},
        headers={"authorization": f"Bearer {app.jwt()}"},
    )
    assert answer.status_code == 201 and answer.json()["repository_selection"] == "selected"
    token = answer.json()["token"]
    for name, status in [("octo/c", 201), ("octo/a", 403), ("octo/b", 404)]:
        got = httpx.post(
            f"{github.base_url}/repos/{name}/issues/1/comments",
            json={"body": "hello"},
            headers={"authorization": f"token {token}"},
        )
        assert got.status_code == status, (name, got.text)


def test_a_tokens_narrowing_survives_a_restart(github: GitHubSandbox, tmp_path: Path) -> None:
    token = app_of(github).installation_token(INSTALLATION, repositories=("octo/a",)).token
    github.save(tmp_path / "saved.json")
    again = GitHubSandbox(github.root, installation_id=INSTALLATION, webhook_secret="s")
    again.load(tmp_path / "saved.json")
    assert again.repos["octo/b"].private and not again.reaches(token, "octo/b")
    assert again.reaches(token, "octo/a")
