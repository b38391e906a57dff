"""What an agent writes on GitHub, carried out by the agent gateway (outside the task).

The task's own token reads only. Each write the framework tools make is a request through the
door: the gateway builds the caller from the agent's record, checks the role table and the
subject (its own issue or pull request), and writes with a token narrowed to the role. The
methods mirror :class:`squadron.adapters.github.client.GitHubClient`'s, so the tools read the
same either way; ``caller`` is the agent's, for the tools' own checks before they ask.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, Protocol

from squadron.domain.gateway_wire import (
    GitHubWriteRequest,
    WriteAssignees,
    WriteComment,
    WriteIssue,
    WriteLabels,
    WritePull,
    WriteReview,
    WriteStatus,
    refused_if_invalid,
)
from squadron.domain.permissions import Caller

Json = dict[str, Any]


class WriteDoor(Protocol):
    def github(self, write: GitHubWriteRequest) -> Any: ...


class GatewayWrites:
    def __init__(self, door: WriteDoor, caller: Caller) -> None:
        self.door = door
        self.caller = caller

    def __repr__(self) -> str:
        return f"GatewayWrites({self.caller.name})"

    def comment(self, number: int, body: str) -> Json:
        with refused_if_invalid():
            write = WriteComment(number=number, body=body)
        result: Json = self.door.github(write)
        return result

    def create_issue(self, title: str, body: str, *, labels: Iterable[str] = ()) -> Json:
        with refused_if_invalid():
            write = WriteIssue(title=title, body=body, labels=list(labels))
        result: Json = self.door.github(write)
        return result

    def create_pull(self, *, title: str, head: str, base: str, body: str, draft: bool = False) -> Json:
        with refused_if_invalid():
            write = WritePull(title=title, head=head, base=base, body=body, draft=draft)
        result: Json = self.door.github(write)
        return result

    def create_review(
        self,
        number: int,
        event: Literal["APPROVE", "REQUEST_CHANGES", "COMMENT"],
        body: str,
        *,
        commit_id: str | None = None,
        verdict: Literal["APPROVE", "REQUEST_CHANGES", "COMMENT"] | None = None,
    ) -> Json:
        with refused_if_invalid():
            write = WriteReview(
                number=number,
                event=event,
                verdict=verdict if verdict is not None and verdict != event else None,
                body=body,
                commit_id=commit_id,
            )
        result: Json = self.door.github(write)
        return result

    def create_status(
        self,
        sha: str,
        *,
        state: Literal["error", "failure", "pending", "success"],
        context: str,
        description: str,
    ) -> Json:
        with refused_if_invalid():
            write = WriteStatus(sha=sha, state=state, context=context, description=description)
        result: Json = self.door.github(write)
        return result

    def add_labels(self, number: int, labels: Iterable[str]) -> list[Json]:
        with refused_if_invalid():
            write = WriteLabels(number=number, labels=list(labels))
        result: list[Json] = self.door.github(write)
        return result

    def add_assignees(self, number: int, logins: Iterable[str]) -> Json:
        with refused_if_invalid():
            write = WriteAssignees(number=number, assignees=list(logins))
        result: Json = self.door.github(write)
        return result
