"""What GitHub says now about a run's issue or pull request, for a gate's judgement
(:mod:`squadron.domain.pipelines.judge`): read with the App's client in the framework's role
(its permission table allows the framework to read), never written."""

from __future__ import annotations

from typing import Any, Protocol

from squadron.domain.pipelines.judge import CheckResult, Facts, Review
from squadron.domain.pipelines.work import Where


class RepositoryClient(Protocol):
    """The reads of :class:`squadron.adapters.github.client.GitHubClient` a judgement makes."""

    def get_issue(self, number: int) -> dict[str, Any]: ...

    def get_pull(self, number: int) -> dict[str, Any]: ...

    def list_pull_files(self, number: int) -> list[dict[str, Any]]: ...

    def list_reviews(self, number: int) -> list[dict[str, Any]]: ...

    def list_check_runs(self, ref: str) -> list[dict[str, Any]]: ...

    def get_combined_status(self, ref: str) -> dict[str, Any]: ...


class ClientFor(Protocol):
    """:meth:`squadron.adapters.github.for_router.AppGitHub.client`."""

    def client(self, installation_id: int | None, repo_full_name: str) -> Any: ...


class GitHubFacts:
    """:class:`Facts` of an issue or pull request, read through the App (one client per read)."""

    def __init__(self, github: ClientFor) -> None:
        self.github = github

    def facts(self, where: Where, number: int, others: tuple[int, ...] = ()) -> Facts:
        client: RepositoryClient = self.github.client(where.installation_id, where.repo_full_name)
        read = {other: self._one(client, other) for other in others}
        own = self._one(client, number)
        return Facts(**{**own.__dict__, "others": read})

    @staticmethod
    def _one(client: RepositoryClient, number: int) -> Facts:
        issue = client.get_issue(number)
        labels = frozenset(str(label.get("name", "")) for label in issue.get("labels") or [])
        if "pull_request" not in issue:
            return Facts(number=number, labels=labels, state=str(issue.get("state") or "open"))
        pull = client.get_pull(number)
        head = str((pull.get("head") or {}).get("sha") or "")
        files = tuple(str(item.get("filename", "")) for item in client.list_pull_files(number))
        reviews = tuple(
            Review(
                login=str((item.get("user") or {}).get("login", "")),
                state=str(item.get("state", "")),
                bot=(item.get("user") or {}).get("type") == "Bot",
                submitted_at=str(item.get("submitted_at") or ""),
            )
            for item in client.list_reviews(number)
        )
        checks: list[CheckResult] = []
        if head:
            for run in client.list_check_runs(head):
                done = run.get("status") == "completed"
                checks.append(CheckResult(str(run.get("name", "")), run.get("conclusion") if done else None))
            for status in client.get_combined_status(head).get("statuses") or []:
                checks.append(
                    CheckResult(str(status.get("context", "")), str(status.get("state", "pending")))
                )
        return Facts(
            number=number,
            labels=labels,
            is_pull=True,
            files=files,
            reviews=reviews,
            checks=tuple(checks),
            mergeable_state=str(pull.get("mergeable_state") or "unknown"),
            state="merged" if pull.get("merged") else str(pull.get("state") or "open"),
            head_sha=head,
        )
