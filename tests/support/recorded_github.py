"""One pull request as GitHub holds it, for the merge gate: every request checked against GitHub's OpenAPI."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx

from squadron.adapters.github.client import GitHubClient
from squadron.adapters.github.http import GitHubHttp
from squadron.config.parse import SquadronConfig
from squadron.domain.events import EventEnvelope
from squadron.domain.permissions import Caller
from squadron.shell.merge_gate import MergeGate
from tests.support.events import BOT, T0
from tests.support.github_openapi import validate

SHA = "c" * 40


@dataclass
class RecordedGitHub:
    """One pull request as GitHub holds it; every request validated, every write recorded."""

    base: str = "develop"
    state: str = "open"
    author: str = BOT
    statuses: list[dict[str, Any]] = field(default_factory=list)
    check_runs: list[dict[str, Any]] = field(default_factory=list)
    reviews: list[dict[str, Any]] = field(default_factory=list)
    files: list[str] = field(default_factory=lambda: ["app.py"])
    mergeable_state: str = "clean"
    merge_answer: httpx.Response | None = None
    #: Each user's repository role; anyone else is a reader (as on a public repository).
    roles: dict[str, str] = field(default_factory=dict)
    #: What GitHub says the PR changes (``changed_files``); None: not said.
    changed_files: int | None = None
    writes: list[tuple[str, str, Any]] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    #: The logins whose permission was asked, in order.
    asked: list[str] = field(default_factory=list)

    def pull(self) -> dict[str, Any]:
        repo = {"id": 1, "full_name": "octo/repo", "default_branch": "main"}
        return {
            "number": 101,
            "title": "Export API",
            "body": "Closes #38",
            "state": self.state,
            "merged": False,
            "draft": False,
            "mergeable_state": self.mergeable_state,
            "user": {
                "login": self.author,
                "id": 1,
                "type": "Bot" if self.author.endswith("[bot]") else "User",
            },
            "head": {"ref": "feat/issue-38", "sha": SHA, "repo": repo},
            "base": {"ref": self.base, "sha": "d" * 40, "repo": repo},
            "updated_at": "2026-11-23T12:00:00Z",
        } | ({} if self.changed_files is None else {"changed_files": self.changed_files})

    def handle(self, request: httpx.Request) -> httpx.Response:
        operation = validate(request)
        body = json.loads(request.content) if request.content else None
        if request.method != "GET":
            self.writes.append((request.method, operation.operation_id, body))
        else:
            self.reads.append(operation.operation_id)
        answers: dict[str, Any] = {
            "pulls/get": self.pull(),
            "pulls/list-files": [{"filename": name, "status": "modified"} for name in self.files],
            "pulls/list-reviews": self.reviews,
            "repos/get-combined-status-for-ref": {"state": "pending", "sha": SHA, "statuses": self.statuses},
            "checks/list-for-ref": {"total_count": len(self.check_runs), "check_runs": self.check_runs},
            "repos/create-commit-status": {"id": 1},
            "repos/get-branch-rules": [],
        }
        if operation.operation_id == "pulls/merge":
            return self.merge_answer or httpx.Response(
                200, json={"merged": True, "sha": "e" * 40, "message": "ok"}
            )
        if operation.operation_id == "git/delete-ref":
            return httpx.Response(204)
        if operation.operation_id == "repos/get-collaborator-permission-level":
            login = request.url.path.split("/")[-2]
            self.asked.append(login)
            role = self.roles.get(login, "read")
            legacy = {"maintain": "write", "triage": "read"}.get(role, role)
            return httpx.Response(
                200, json={"permission": legacy, "role_name": role, "user": {"login": login}}
            )
        return httpx.Response(200, json=answers[operation.operation_id])


def gate_over(
    github: RecordedGitHub,
    config: SquadronConfig,
    *,
    announce: Callable[[EventEnvelope], object] | None = None,
    clock: Callable[[], datetime] = lambda: T0,
    bot_login: str = BOT,
) -> MergeGate:
    """A merge gate whose GitHub is ``github`` and whose repository configuration is ``config``."""
    http = GitHubHttp(transport=httpx.MockTransport(github.handle), sleep=lambda s: None)

    def client(installation_id: int | None, repo: str) -> GitHubClient:
        return GitHubClient(
            http=http, token=lambda: "ghs", installation_id=77, repo=repo, caller=Caller.framework()
        )

    return MergeGate(
        client=client, config_for=lambda repo: config, bot_login=bot_login, announce=announce, clock=clock
    )
