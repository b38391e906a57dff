"""The config loader's RepositoryFiles over GitHub's contents API, answer by answer."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from squadron.adapters.github.client import GitHubClient
from squadron.adapters.github.errors import ForbiddenError
from squadron.adapters.github.for_router import RepositoryFilesOverGitHub
from squadron.adapters.github.http import GitHubHttp
from squadron.domain.permissions import Caller
from tests.support.github_fake import FakeGitHub

TEXT = "name: dév\n" + "- a long line of configuration\n" * 20
SHA = "b" * 40


def _wrapped(text: str) -> str:
    flat = base64.b64encode(text.encode()).decode()
    return "\n".join(flat[i : i + 60] for i in range(0, len(flat), 60)) + "\n"


def ok(body: Any) -> httpx.Response:
    return httpx.Response(200, json=body)


NOT_FOUND = httpx.Response(404, json={"message": "Not Found", "documentation_url": "https://docs"})


def _entry(kind: str, name: str) -> dict[str, str]:
    return {"type": kind, "name": name, "path": f".squadron/{name}"}


def _files(fake: FakeGitHub) -> RepositoryFilesOverGitHub:
    http = GitHubHttp(transport=fake.transport(), sleep=lambda s: None)
    client = GitHubClient(
        http=http, token=lambda: "ghs_1", installation_id=1, repo="octo/app", caller=Caller.framework()
    )
    return RepositoryFilesOverGitHub(lambda repo: client)


def _sent(fake: FakeGitHub) -> list[str]:
    return [f"{r.method} {r.url.raw_path.decode()}" for r in fake.requests]


CONTENTS = "GET /repos/octo/app/contents/.squadron/config.yaml?ref=main"


@pytest.mark.parametrize(
    ("answers", "expected", "sent"),
    [
        (
            [ok({"type": "file", "encoding": "base64", "content": _wrapped(TEXT), "sha": SHA})],
            TEXT,
            [CONTENTS],
        ),
        ([ok({"type": "file", "encoding": "base64", "content": "", "sha": SHA})], "", [CONTENTS]),
        ([NOT_FOUND], None, [CONTENTS]),
        ([ok([_entry("file", "a.yaml")])], None, [CONTENTS]),
        ([ok({"type": "submodule", "name": "config.yaml", "sha": SHA})], None, [CONTENTS]),
        (
            [
                ok({"type": "file", "encoding": "none", "content": "", "sha": SHA, "size": 2_000_000}),
                ok({"sha": SHA, "encoding": "base64", "content": _wrapped(TEXT)}),
            ],
            TEXT,
            [CONTENTS, f"GET /repos/octo/app/git/blobs/{SHA}"],
        ),
    ],
    ids=[
        "wrapped base64 utf-8",
        "empty file",
        "404 is no file",
        "a directory is no file",
        "a submodule is no file",
        "over 1 MB read as a blob",
    ],
)
def test_read_text(answers: list[httpx.Response], expected: str | None, sent: list[str]) -> None:
    fake = FakeGitHub(script=list(answers))
    assert _files(fake).read_text("octo/app", ".squadron/config.yaml", "main") == expected
    assert _sent(fake) == sent


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (
            ok(
                [
                    _entry("file", "b.yaml"),
                    _entry("dir", "agents"),
                    _entry("file", "a.md"),
                    _entry("symlink", "c.yaml"),
                ]
            ),
            ["a.md", "b.yaml"],
        ),
        (ok([]), []),
        (NOT_FOUND, []),
        (ok({"type": "file", "name": ".squadron", "content": ""}), []),
    ],
    ids=["files only, sorted", "empty", "404 is empty", "a file is no directory"],
)
def test_list_dir(answer: httpx.Response, expected: list[str]) -> None:
    fake = FakeGitHub(script=[answer])
    assert _files(fake).list_dir("octo/app", ".squadron", "main") == expected
    assert _sent(fake) == ["GET /repos/octo/app/contents/.squadron?ref=main"]


@pytest.mark.parametrize(
    ("branch", "branch_path"),
    [("main", "main"), ("release/2.x", "release%2F2.x")],
    ids=["plain", "with a slash"],
)
def test_default_branch_head(branch: str, branch_path: str) -> None:
    fake = FakeGitHub(script=[ok({"default_branch": branch}), ok({"name": branch, "commit": {"sha": SHA}})])
    assert _files(fake).default_branch_head("octo/app") == (branch, SHA)
    assert _sent(fake) == ["GET /repos/octo/app", f"GET /repos/octo/app/branches/{branch_path}"]


def test_other_errors_are_not_mistaken_for_a_missing_file() -> None:
    fake = FakeGitHub(
        script=[httpx.Response(403, json={"message": "Resource not accessible by integration"})]
    )
    with pytest.raises(ForbiddenError, match="Resource not accessible"):
        _files(fake).read_text("octo/app", ".squadron/config.yaml", "main")
