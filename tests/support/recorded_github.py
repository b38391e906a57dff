"""One pull request as GitHub holds it, for the merge gate: every request checked against GitHub's OpenAPI."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.support.github_openapi import validate

SHA = "c" * 40


@dataclass
class RecordedGitHub:
    """One pull request as GitHub holds it; every request validated, every write recorded."""

    base: str = "develop"
    state: str = "open"
    statuses: list[dict[str, Any]] = field(default_factory=list)
    check_runs: list[dict[str, Any]] = field(default_factory=list)
    reviews: list[dict[str, Any]] = field(default_factory=list)
    files: list[str] = field(default_factory=lambda: ["app.py"])
    mergeable_state: str = "clean"
    merge_answer: httpx.Response | None = None
    writes: list[tuple[str, str, Any]] = field(default_factory=list)

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
            "user": {"login": "squadron[bot]", "id": 1, "type": "Bot"},
            "head": {"ref": "feat/issue-38", "sha": SHA, "repo": repo},
            "base": {"ref": self.base, "sha": "d" * 40, "repo": repo},
            "updated_at": "2026-11-23T12:00:00Z",
        }

    def handle(self, request: httpx.Request) -> httpx.Response:
        operation = validate(request)
        body = json.loads(request.content) if request.content else None
        if request.method != "GET":
            self.writes.append((request.method, operation.operation_id, body))
        answers: dict[str, Any] = {
            "pulls/get": self.pull(),
            "pulls/list-files": [{"filename": name, "status": "modified"} for name in self.files],
            "pulls/list-reviews": self.reviews,
            "repos/get-combined-status-for-ref": {"state": "pending", "sha": SHA, "statuses": self.statuses},
            "checks/list-for-ref": {"total_count": len(self.check_runs), "check_runs": self.check_runs},
            "repos/create-commit-status": {"id": 1},
        }
        if operation.operation_id == "pulls/merge":
            return self.merge_answer or httpx.Response(
                200, json={"merged": True, "sha": "e" * 40, "message": "ok"}
            )
        if operation.operation_id == "git/delete-ref":
            return httpx.Response(204)
        return httpx.Response(200, json=answers[operation.operation_id])
