"""Keeping a repository's "configuration is invalid" issue in step with its default branch.

:class:`ConfigNotices` reads the repository's notices (one request: the label narrows the
list), asks :func:`~squadron.domain.config_notice.plan_notice` what to change, and changes
it as the framework. Called by the router's policy cache when a repository's
configuration turns invalid, changes its problems, or turns valid again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from squadron.domain.config_notice import (
    NOTICE_LABEL,
    CloseNotice,
    NoticeAction,
    OpenNotice,
    UpdateNotice,
    notice_issue,
    plan_notice,
)
from squadron.domain.repo_config.errors import Problem

logger = logging.getLogger(__name__)

Json = dict[str, Any]


class NoticeClient(Protocol):
    """The framework's GitHub client for one repository (``GitHubClient`` satisfies it)."""

    def list_issues(
        self, *, labels: Iterable[str] = (), state: str = "open", limit: int = 100
    ) -> list[Json]: ...
    def create_issue(
        self, title: str, body: str, *, labels: Iterable[str] = (), assignees: Iterable[str] = ()
    ) -> Json: ...
    def update_issue(self, number: int, *, title: str | None = None, body: str | None = None) -> Json: ...
    def reopen_issue(self, number: int) -> Json: ...
    def close_issue(self, number: int, reason: Any = ...) -> Json: ...
    def comment(self, number: int, body: str) -> Json: ...


class ConfigNotices:
    def __init__(self, client_for: Callable[[str], NoticeClient]) -> None:
        self.client_for = client_for

    def sync(
        self, repo: str, problems: Sequence[Problem] | None, *, branch: str, sha: str
    ) -> list[NoticeAction]:
        """Make ``repo``'s notice say ``problems`` (None: the configuration is valid); what was done."""
        client = self.client_for(repo)
        done = self._apply(client, self._plan(client, problems, branch, sha))
        if any(isinstance(action, OpenNotice) for action in done):
            # Another router may have opened one at the same moment: keep the oldest.
            done += self._apply(
                client,
                [a for a in self._plan(client, problems, branch, sha) if isinstance(a, CloseNotice)],
            )
        for action in done:
            logger.info("configuration notice of %s: %s", repo, type(action).__name__)
        return done

    @staticmethod
    def _plan(
        client: NoticeClient, problems: Sequence[Problem] | None, branch: str, sha: str
    ) -> list[NoticeAction]:
        found = client.list_issues(labels=[NOTICE_LABEL], state="all")
        issues = [issue for issue in map(notice_issue, found) if issue is not None]
        return plan_notice(issues, problems, branch=branch, sha=sha)

    @staticmethod
    def _apply(client: NoticeClient, actions: list[NoticeAction]) -> list[NoticeAction]:
        for action in actions:
            match action:
                case OpenNotice(title=title, body=body, labels=labels):
                    client.create_issue(title, body, labels=labels)
                case UpdateNotice(number=number, body=body, reopen=reopen):
                    client.update_issue(number, body=body)
                    if reopen:
                        client.reopen_issue(number)
                case CloseNotice(number=number, comment=comment, body=body):
                    client.comment(number, comment)
                    if body is not None:
                        client.update_issue(number, body=body)
                    client.close_issue(number, "completed")
        return actions
