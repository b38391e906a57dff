"""The config loader's RepositoryFiles over GitHub's contents API, answer by answer."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from squadron.adapters.github.client import GitHubClient
from squadron.adapters.github.errors import ForbiddenError, GitHubError
from squadron.adapters.github.for_router import RepositoryFilesOverGitHub
from squadron.adapters.github.http import GitHubHttp
from squadron.config.loader import ABSENT, Entry, Listing
from squadron.domain.permissions import Caller
from squadron.errors import FileTooLargeError
from tests.support.github_fake import FakeGitHub

TEXT = "name: dév\n" + "- a long line of configuration\n" * 20
SHA = "b" * 40


def _wrapped(text: str) -> str:
    flat = base64.b64encode(text.encode()).decode()
    return "\n".join(flat[i : i + 60] for i in range(0, len(flat), 60)) + "\n"


def ok(body: Any) -> httpx.Response:
    return httpx.Response(200, json=body)


NOT_FOUND = httpx.Response(404, json={"message": "Not Found", "documentation_url": "https://docs"})


def _entry(kind: str, name: str, size: int = 10) -> dict[str, Any]:
    return {"type": kind, "name": name, "path": f".squadron/{name}", "size": size}


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
            TEXT.encode(),
            [CONTENTS],
        ),
        ([ok({"type": "file", "encoding": "base64", "content": "", "sha": SHA})], b"", [CONTENTS]),
        ([NOT_FOUND], None, [CONTENTS]),
        ([ok([_entry("file", "a.yaml")])], None, [CONTENTS]),
        ([ok({"type": "submodule", "name": "config.yaml", "sha": SHA})], None, [CONTENTS]),
        (
            [
                ok({"type": "file", "encoding": "none", "content": "", "sha": SHA, "size": 2_000_000}),
                ok({"sha": SHA, "encoding": "base64", "content": _wrapped(TEXT)}),
            ],
            TEXT.encode(),
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
def test_read_bytes(answers: list[httpx.Response], expected: bytes | None, sent: list[str]) -> None:
    fake = FakeGitHub(script=list(answers))
    assert _files(fake).read_bytes("octo/app", ".squadron/config.yaml", "main", limit=4_000_000) == expected
    assert _sent(fake) == sent


def test_a_file_listed_over_the_limit_is_not_downloaded() -> None:
    """The attacker's 90 MB config.yaml costs one request, not a 90 MB download."""
    fake = FakeGitHub(
        script=[ok({"type": "file", "encoding": "none", "content": "", "sha": SHA, "size": 90_000_000})]
    )
    with pytest.raises(FileTooLargeError) as caught:
        _files(fake).read_bytes("octo/app", ".squadron/config.yaml", "main", limit=131_072)
    assert (caught.value.size, caught.value.limit) == (90_000_000, 131_072)
    assert _sent(fake) == [CONTENTS]


def test_content_larger_than_announced_is_refused_too() -> None:
    fake = FakeGitHub(
        script=[ok({"type": "file", "encoding": "base64", "content": _wrapped(TEXT), "sha": SHA, "size": 3})]
    )
    with pytest.raises(FileTooLargeError):
        _files(fake).read_bytes("octo/app", ".squadron/config.yaml", "main", limit=10)


def test_undecodable_base64_is_a_github_error() -> None:
    fake = FakeGitHub(script=[ok({"type": "file", "encoding": "base64", "content": "abc", "sha": SHA})])
    with pytest.raises(GitHubError, match="not valid base64"):
        _files(fake).read_bytes("octo/app", ".squadron/config.yaml", "main", limit=100)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (
            ok(
                [
                    _entry("file", "b.yaml", 12),
                    _entry("dir", "agents", 0),
                    _entry("file", "a.md", 7),
                    _entry("symlink", "c.yaml", 20),
                    _entry("submodule", "d.yaml", 0),
                ]
            ),
            Listing(
                "dir",
                (
                    Entry("b.yaml", "file", 12),
                    Entry("agents", "dir", 0),
                    Entry("a.md", "file", 7),
                    Entry("c.yaml", "symlink", 20),
                    Entry("d.yaml", "other", 0),
                ),
            ),
        ),
        (ok([]), Listing("dir")),
        (NOT_FOUND, ABSENT),
        (ok({"type": "file", "name": ".squadron", "content": ""}), Listing("file")),
        (ok({"type": "symlink", "name": ".squadron", "target": "../elsewhere"}), Listing("symlink")),
        (ok({"type": "submodule", "name": ".squadron"}), Listing("other")),
    ],
    ids=["every entry with its kind", "empty", "404 is absent", "a file", "a symbolic link", "a submodule"],
)
def test_list_dir(answer: httpx.Response, expected: Listing) -> None:
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
        _files(fake).read_bytes("octo/app", ".squadron/config.yaml", "main", limit=100)
