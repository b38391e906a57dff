"""Every request the GitHub client can make, validated against GitHub's OpenAPI description.

The client runs against a recording transport; each recorded request is
matched to its REST operation (method and path template) and its path and
query parameters and JSON body are validated against the operation's schemas.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import jsonschema
import jwt
import pytest

from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.client import GitHubAppClient, GitHubClient
from squadron.adapters.github.http import GitHubHttp
from tests.support import github_fake, github_openapi
from tests.support.github_calls import (
    APP_CALLS,
    CLIENT_CALLS,
    FRAMEWORK,
    AppCall,
    ClientCall,
    public_operations,
)
from tests.support.github_fake import FakeGitHub, app_private_key
from tests.support.github_openapi import operation_for, validate, validate_graphql


def test_every_operation_has_a_contract_case() -> None:
    assert {case.operation for case in CLIENT_CALLS} == public_operations(GitHubClient)
    assert {case.operation for case in APP_CALLS} == public_operations(GitHubAppClient)


def _clients(fake: FakeGitHub) -> tuple[GitHubClient, GitHubAppClient, GitHubApp]:
    http = GitHubHttp(transport=fake.transport(), sleep=lambda s: None)
    private, _ = app_private_key()
    app = GitHubApp(app_id=42, http=http, private_key=lambda: private)
    client = GitHubClient(
        http=http, token=lambda: "ghs_1", installation_id=1, repo="octo/app", caller=FRAMEWORK
    )
    return client, GitHubAppClient(http=http, jwt=app.jwt, app_id=42, caller=FRAMEWORK), app


def _spy(client: object, operation: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Note when ``operation`` is called on ``client``: each case must call the one it is for."""
    called: list[str] = []
    method = getattr(client, operation)

    def spy(*args: Any, **kwargs: Any) -> Any:
        called.append(operation)
        return method(*args, **kwargs)

    monkeypatch.setattr(client, operation, spy)
    return called


@pytest.mark.parametrize("case", CLIENT_CALLS, ids=[case.id for case in CLIENT_CALLS])
def test_client_requests_match_the_openapi_description(
    case: ClientCall, monkeypatch: pytest.MonkeyPatch
) -> None:
    for path, text in case.files.items():
        monkeypatch.setitem(github_fake.FILES, path, text)
    fake = FakeGitHub()
    client, _, _ = _clients(fake)
    called = _spy(client, case.operation, monkeypatch)
    case.call(client)
    assert called, f"the case for {case.operation} does not call it"
    assert fake.requests, f"{case.id} sent nothing"
    for request in fake.requests:
        if request.url.path == "/graphql":  # the merge queue's: GraphQL only
            validate_graphql(request)
        else:
            validate(request)
        assert request.headers["authorization"] == "Bearer ghs_1"  # the installation token


@pytest.mark.parametrize("case", APP_CALLS, ids=[case.id for case in APP_CALLS])
def test_app_requests_match_the_openapi_description(case: AppCall, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeGitHub()
    _, app_client, _ = _clients(fake)
    called = _spy(app_client, case.operation, monkeypatch)
    case.call(app_client)
    assert called, f"the case for {case.operation} does not call it"
    assert fake.requests, f"{case.id} sent nothing"
    for request in fake.requests:
        validate(request)


#: Which credential each App operation authenticates with.
APP_CREDENTIALS = {
    "get_app": "app jwt",
    "list_deliveries": "app jwt",
    "redeliver": "app jwt",
    "list_installation_repositories": "installation token",
}


@pytest.mark.parametrize("case", APP_CALLS, ids=[case.id for case in APP_CALLS])
def test_app_endpoints_use_the_right_credential(case: AppCall) -> None:
    fake = FakeGitHub()
    _, app_client, _ = _clients(fake)
    case.call(app_client)
    _, public = app_private_key()
    (request,) = fake.requests
    bearer = request.headers["authorization"].removeprefix("Bearer ")
    if APP_CREDENTIALS[case.operation] == "installation token":
        assert bearer == "ghs_1"
    else:
        assert jwt.decode(bearer, public, algorithms=["RS256"])["iss"] == "42"


def test_installation_token_request_matches() -> None:
    fake = FakeGitHub()
    _, _, app = _clients(fake)
    app.installation_token(7, repositories=("octo/app",), permissions={"issues": "write", "contents": "read"})
    (request,) = fake.requests
    assert validate(request).operation_id == "apps/create-installation-access-token"


def test_a_missing_description_fails_loudly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SQUADRON_GITHUB_OPENAPI", str(tmp_path / "api.github.com.json"))
    with pytest.raises(RuntimeError, match="run `make test`"):
        github_openapi.spec.__wrapped__()


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
