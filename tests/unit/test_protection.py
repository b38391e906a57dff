"""Branch protection from the approval flows, and `squadron branch-protection` against a checked GitHub."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from squadron import cli
from squadron.adapters.github.http import GitHubHttp
from squadron.config import load_directory
from squadron.domain.protection import protected_branches, protection_for
from tests.support.github_openapi import validate

ROOT = Path(__file__).resolve().parents[2]
FLOWS = load_directory(ROOT / ".squadron").approval_flows
APP = 123456


def test_main_requires_its_agent_checks_pinned_to_the_app_ci_and_a_human() -> None:
    plan = protection_for(FLOWS, "main", app_id=APP)
    assert plan.body["required_status_checks"] == {
        "strict": True,
        "contexts": [],
        "checks": [
            {"context": "squadron/pr-review", "app_id": APP},
            {"context": "squadron/merge", "app_id": APP},
            {"context": "ci"},
            {"context": "cdk-synth"},
        ],
    }
    assert plan.body["required_pull_request_reviews"] == {
        "dismiss_stale_reviews": True,
        "required_approving_review_count": 1,
    }
    assert plan.summary == (
        "main: checks squadron/pr-review, squadron/merge, ci, cdk-synth; 1 approving review(s)"
    )


def test_a_branch_without_rules_gets_the_default_flow() -> None:
    plan = protection_for(FLOWS, "develop", app_id=APP)
    contexts = [c["context"] for c in plan.body["required_status_checks"]["checks"]]
    assert contexts == ["squadron/pr-review", "squadron/merge", "ci"]
    assert plan.body["required_pull_request_reviews"] is None  # no human group, no require_human


@pytest.mark.parametrize(
    ("patterns", "existing", "expected"),
    [
        ([], ["main", "dev"], ["main"]),
        (["main"], ["main"], ["main"]),
        (
            ["release/*"],
            ["main", "release/1.0", "release/2.0", "feat/x"],
            ["main", "release/1.0", "release/2.0"],
        ),
        (["hotfix"], [], ["main", "hotfix"]),
    ],
)
def test_which_branches_are_protected(patterns: list[str], existing: list[str], expected: list[str]) -> None:
    flows = FLOWS.model_copy(
        update={"branch_rules": [FLOWS.branch_rules[0].model_copy(update={"pattern": p}) for p in patterns]}
    )
    assert protected_branches(flows, "main", existing) == expected


class CheckedGitHub:
    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.puts: list[tuple[str, dict[str, Any]]] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        operation = validate(request)  # GitHub's OpenAPI description: method, path, query and body
        if operation.operation_id == "repos/get":
            return httpx.Response(200, json={"id": 1, "full_name": "octo/repo", "default_branch": "main"})
        if operation.operation_id == "repos/list-branches":
            return httpx.Response(200, json=[{"name": "main"}, {"name": "feat/issue-38"}])
        if self.refuse:
            return httpx.Response(403, json={"message": "Resource not accessible by integration"})
        self.puts.append((request.url.path, json.loads(request.content)))
        return httpx.Response(200, json={})


def run(monkeypatch: pytest.MonkeyPatch, github: CheckedGitHub, *argv: str) -> tuple[int, str]:
    monkeypatch.setattr(
        cli, "_protection_http", lambda url: GitHubHttp(transport=httpx.MockTransport(github.handle))
    )
    out = io.StringIO()
    status = cli.main(
        ["branch-protection", *argv, "--repo", "octo/repo", "--path", str(ROOT / ".squadron")], out=out
    )
    return status, out.getvalue()


def test_plan_changes_nothing_and_apply_protects_each_branch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_admin")
    monkeypatch.setenv("GITHUB_APP_ID", str(APP))
    github = CheckedGitHub()
    status, said = run(monkeypatch, github, "plan", "--app-id", str(APP))
    assert status == 0 and github.puts == []
    assert said.endswith("plan only: nothing was changed (run apply)\n")
    status, said = run(monkeypatch, github, "apply", "--app-id", str(APP))
    assert status == 0 and said.endswith("applied\n")
    assert [path for path, _ in github.puts] == ["/repos/octo/repo/branches/main/protection"]


@pytest.mark.parametrize(
    ("env", "argv", "status", "message"),
    [
        ({}, ("--app-id", "1"), 3, "GITHUB_TOKEN is not set"),  # GitHub cannot be reached (EXIT_UNAVAILABLE)
        ({"GITHUB_TOKEN": "t"}, ("--app-id", "0"), 1, "the App id is needed"),
    ],
)
def test_missing_credentials_are_named(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], argv: tuple[str, ...], status: int, message: str
) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code, said = run(monkeypatch, CheckedGitHub(), "apply", *argv)
    assert code == status and message in said


def test_a_refusal_by_github_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_app_token")
    status, said = run(monkeypatch, CheckedGitHub(refuse=True), "apply", "--app-id", str(APP))
    assert status == 3  # GitHub did not carry it out (EXIT_UNAVAILABLE); 2 is a usage error
    assert "GitHub refused: " in said and "Resource not accessible by integration" in said
