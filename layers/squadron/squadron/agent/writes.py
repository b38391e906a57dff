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

from squadron.domain.permissions import Caller

Json = dict[str, Any]


class WriteDoor(Protocol):
    def github(self, write: dict[str, Any]) -> Any: ...


class GatewayWrites:
    def __init__(self, door: WriteDoor, caller: Caller) -> None:
        self.door = door
        self.caller = caller

    def __repr__(self) -> str:
        return f"GatewayWrites({self.caller.name})"

    def comment(self, number: int, body: str) -> Json:
        result: Json = self.door.github({"action": "comment", "number": number, "body": body})
        return result

    def create_issue(self, title: str, body: str, *, labels: Iterable[str] = ()) -> Json:
        result: Json = self.door.github(
            {"action": "create_issue", "title": title, "body": body, "labels": list(labels)}
        )
        return result

    def create_pull(self, *, title: str, head: str, base: str, body: str, draft: bool = False) -> Json:
        result: Json = self.door.github(
            {
                "action": "create_pull",
                "title": title,
                "head": head,
                "base": base,
                "body": body,
                "draft": draft,
            }
        )
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
        result: Json = self.door.github(
            {
                "action": "create_review",
                "number": number,
                "event": event,
                **({"verdict": verdict} if verdict is not None and verdict != event else {}),
                "body": body,
                "commit_id": commit_id,
            }
        )
        return result

    def create_status(
        self,
        sha: str,
        *,
        state: Literal["error", "failure", "pending", "success"],
        context: str,
        description: str,
    ) -> Json:
        result: Json = self.door.github(
            {
                "action": "create_status",
                "sha": sha,
                "state": state,
                "context": context,
                "description": description,
            }
        )
        return result

    def add_labels(self, number: int, labels: Iterable[str]) -> list[Json]:
        result: list[Json] = self.door.github(
            {"action": "add_labels", "number": number, "labels": list(labels)}
        )
        return result

    def add_assignees(self, number: int, logins: Iterable[str]) -> Json:
        result: Json = self.door.github(
            {"action": "add_assignees", "number": number, "assignees": list(logins)}
        )
        return result
