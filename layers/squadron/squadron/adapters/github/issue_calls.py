"""The issue calls of the role-enforcing GitHub client (:class:`~squadron.adapters.github.client.GitHubClient`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal
from urllib.parse import quote

from squadron.adapters.github.client_core import ClientCore, Json, github_time
from squadron.adapters.github.errors import NotFoundError
from squadron.domain.permissions import Action, check, tagged


class IssueCalls(ClientCore):
    """Issues, their labels, assignees and comments."""

    def get_issue(self, number: int) -> Json:
        check(self.caller, Action.READ)
        result: Json = self._send("GET", f"/issues/{number}")
        return result

    def create_issue(
        self, title: str, body: str, *, labels: Iterable[str] = (), assignees: Iterable[str] = ()
    ) -> Json:
        check(self.caller, Action.CREATE_ISSUE)
        payload: Json = {"title": title, "body": tagged(self.caller, body)}
        if labels:
            payload["labels"] = list(labels)
        if assignees:
            payload["assignees"] = list(assignees)
        result: Json = self._send("POST", "/issues", json=payload)
        return result

    def list_issues(
        self,
        *,
        labels: Iterable[str] = (),
        state: str = "open",
        limit: int = 100,
        since: datetime | None = None,
    ) -> list[Json]:
        """The newest issues (and pull requests) with every one of ``labels``, up to ``limit``.

        ``since``: only those updated at or after it.
        """
        check(self.caller, Action.READ)
        params: dict[str, Any] = {"state": state, "per_page": min(limit, 100)}
        if labels:
            params["labels"] = ",".join(labels)
        if since is not None:
            params["since"] = github_time(since)
        result = self._send("GET", "/issues", params=params)
        return [item for item in result if isinstance(item, dict)][:limit] if isinstance(result, list) else []

    def update_issue(self, number: int, *, title: str | None = None, body: str | None = None) -> Json:
        check(self.caller, Action.UPDATE_ISSUE)
        payload: Json = {}
        if title is not None:
            payload["title"] = title
        if body is not None:
            payload["body"] = tagged(self.caller, body)
        # Sets the fields: sent twice, the issue reads the same.
        result: Json = self._send("PATCH", f"/issues/{number}", json=payload, idempotent=True)
        return result

    def close_issue(self, number: int, reason: Literal["completed", "not_planned"] = "completed") -> Json:
        check(self.caller, Action.CLOSE_ISSUE)
        # Closing a closed issue changes nothing (no second "closed" event).
        result: Json = self._send(
            "PATCH", f"/issues/{number}", json={"state": "closed", "state_reason": reason}, idempotent=True
        )
        return result

    def reopen_issue(self, number: int) -> Json:
        check(self.caller, Action.REOPEN_ISSUE)
        result: Json = self._send("PATCH", f"/issues/{number}", json={"state": "open"}, idempotent=True)
        return result

    def add_labels(self, number: int, labels: Iterable[str]) -> list[Json]:
        check(self.caller, Action.LABEL)
        # Adds to the set: a label the issue has already is kept as it is (no second event).
        result: list[Json] = self._send(
            "POST", f"/issues/{number}/labels", json={"labels": list(labels)}, idempotent=True
        )
        return result

    def remove_label(self, number: int, label: str) -> None:
        check(self.caller, Action.LABEL)
        try:
            # Sent twice, the second finds it gone (404, below).
            self._send("DELETE", f"/issues/{number}/labels/{quote(label, safe='')}", idempotent=True)
        except NotFoundError:
            return  # not there: removed already

    def add_assignees(self, number: int, logins: Iterable[str]) -> Json:
        check(self.caller, Action.ASSIGN)
        # Adds to the set: an assignee already there stays (no second event).
        result: Json = self._send(
            "POST", f"/issues/{number}/assignees", json={"assignees": list(logins)}, idempotent=True
        )
        return result

    def remove_assignees(self, number: int, logins: Iterable[str]) -> Json:
        check(self.caller, Action.ASSIGN)
        result: Json = self._send(
            "DELETE", f"/issues/{number}/assignees", json={"assignees": list(logins)}, idempotent=True
        )
        return result

    def list_comments(self, number: int, *, since: datetime | None = None) -> list[Json]:
        """The comments on ``number`` (``since``: only those updated at or after it)."""
        check(self.caller, Action.READ)
        params = {"since": github_time(since)} if since is not None else None
        return self._list(f"/issues/{number}/comments", params=params)

    def comment(self, number: int, body: str) -> Json:
        check(self.caller, Action.COMMENT)
        result: Json = self._send(
            "POST", f"/issues/{number}/comments", json={"body": tagged(self.caller, body)}
        )
        return result
