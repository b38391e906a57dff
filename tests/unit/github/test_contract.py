"""Every request the GitHub client can make, validated against GitHub's OpenAPI description.

The client runs against a recording transport; each recorded request is
matched to its REST operation (method and path template) and its path and
query parameters and JSON body are validated against the operation's schemas.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import httpx
import jsonschema
import pytest

from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.client import GitHubAppClient, GitHubClient
from squadron.adapters.github.http import GitHubHttp
from squadron.domain.permissions import Caller, MergeConsent
from tests.support.github_fake import FakeGitHub, app_private_key
from tests.support.github_openapi import operation_for, validate

SHA = "0123456789abcdef0123456789abcdef01234567"
Call = Callable[[GitHubClient], object]
AppCall = Callable[[GitHubAppClient], object]

CLIENT_CALLS: dict[str, Call] = {
    "get_issue": lambda c: c.get_issue(38),
    "create_issue": lambda c: c.create_issue(
        "Blocker", "Needs an API", labels=["bug"], assignees=["octocat"]
    ),
    "update_issue": lambda c: c.update_issue(38, title="New title", body="New body"),
    "close_issue": lambda c: c.close_issue(38, "not_planned"),
    "reopen_issue": lambda c: c.reopen_issue(38),
    "add_labels": lambda c: c.add_labels(38, ["bug", "blocked"]),
    "remove_label": lambda c: c.remove_label(38, "needs human"),
    "add_assignees": lambda c: c.add_assignees(38, ["squadron[bot]"]),
    "remove_assignees": lambda c: c.remove_assignees(38, ["squadron[bot]"]),
    "list_comments": lambda c: c.list_comments(38),
    "comment": lambda c: c.comment(38, "On it"),
    "get_pull": lambda c: c.get_pull(101),
    "create_pull": lambda c: c.create_pull(title="Fix", head="feat/issue-38", base="main", body="Fixes #38"),
    "list_pull_files": lambda c: c.list_pull_files(101),
    "list_reviews": lambda c: c.list_reviews(101),
    "create_review": lambda c: c.create_review(101, "REQUEST_CHANGES", "Add a test", commit_id=SHA),
    "merge_pull": lambda c: c.merge_pull(101, consent=MergeConsent(101, True, "approved"), sha=SHA),
    "update_pull_branch": lambda c: c.update_pull_branch(101, head="feat/issue-38", expected_head_sha=SHA),
    "create_status": lambda c: c.create_status(
        SHA, state="success", context="squadron/pr-review", description="ok", target_url="https://x.example"
    ),
    "create_check_run": lambda c: c.create_check_run(
        name="squadron", head_sha=SHA, status="completed", conclusion="success", summary="All good"
    ),
    "update_check_run": lambda c: c.update_check_run(
        4, status="completed", conclusion="failure", summary="No"
    ),
    "list_check_runs": lambda c: c.list_check_runs("feat/issue-38"),
    "get_repository": lambda c: c.get_repository(),
    "get_branch": lambda c: c.get_branch("feat/issue-38"),
    "read_file": lambda c: c.read_file(".squadron/config.yaml", "main"),
    "list_directory": lambda c: c.list_directory(".squadron", "main"),
    "collaborator_permission": lambda c: c.collaborator_permission("octocat"),
}
APP_CALLS: dict[str, AppCall] = {
    "list_deliveries": lambda a: a.list_deliveries(),
    "redeliver": lambda a: a.redeliver(12345),
    "list_installation_repositories": lambda a: a.list_installation_repositories("ghs_1"),
}


def _public(cls: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(cls, inspect.isfunction) if not name.startswith("_")}


def test_every_operation_has_a_contract_case() -> None:
    assert set(CLIENT_CALLS) == _public(GitHubClient)
    assert set(APP_CALLS) == _public(GitHubAppClient)


def _clients(fake: FakeGitHub) -> tuple[GitHubClient, GitHubAppClient, GitHubApp]:
    http = GitHubHttp(transport=fake.transport(), sleep=lambda s: None)
    private, _ = app_private_key()
    app = GitHubApp(app_id=42, http=http, private_key=lambda: private)
    client = GitHubClient(
        http=http, token=lambda: "ghs_1", installation_id=1, repo="octo/app", caller=Caller.framework()
    )
    return client, GitHubAppClient(http=http, jwt=app.jwt, app_id=42, caller=Caller.framework()), app


@pytest.mark.parametrize("name", sorted(CLIENT_CALLS))
def test_client_requests_match_the_openapi_description(name: str) -> None:
    fake = FakeGitHub()
    client, _, _ = _clients(fake)
    CLIENT_CALLS[name](client)
    assert fake.requests, f"{name} sent nothing"
    for request in fake.requests:
        validate(request)


@pytest.mark.parametrize("name", sorted(APP_CALLS))
def test_app_requests_match_the_openapi_description(name: str) -> None:
    fake = FakeGitHub()
    _, app_client, _ = _clients(fake)
    APP_CALLS[name](app_client)
    for request in fake.requests:
        validate(request)


def test_installation_token_request_matches() -> None:
    fake = FakeGitHub()
    _, _, app = _clients(fake)
    app.installation_token(7, repositories=("octo/app",), permissions={"issues": "write", "contents": "read"})
    (request,) = fake.requests
    assert validate(request).operation_id == "apps/create-installation-access-token"


@pytest.mark.parametrize(
    ("method", "path", "body", "problem"),
    [
        ("GET", "/repos/o/r/issuez/1", None, "is not an operation"),
        ("POST", "/repos/o/r/issues/1/comments", {"text": "x"}, "'body' is a required property"),
        ("PATCH", "/repos/o/r/issues/1", {"state": "done"}, "is not one of"),
        ("POST", "/repos/o/r/pulls/1/reviews", {"text": "x"}, "Additional properties are not allowed"),
        ("GET", "/repos/o/r/issues/abc", None, "is not an integer"),
        ("GET", "/repos/o/r/pulls/1/files?colour=red", None, "unknown query parameter colour"),
    ],
    ids=[
        "unknown path",
        "missing body field",
        "bad enum",
        "misspelt field",
        "non-integer number",
        "unknown query",
    ],
)
def test_the_validator_rejects_what_github_would(method: str, path: str, body: Any, problem: str) -> None:
    request = httpx.Request(method, "https://api.github.com" + path, json=body)
    with pytest.raises((AssertionError, jsonschema.ValidationError), match=problem):
        validate(request)


def test_literal_routes_win_over_parameters() -> None:
    operation, _ = operation_for("GET", "/repos/o/r/issues/comments")
    assert operation.operation_id == "issues/list-comments-for-repo"
