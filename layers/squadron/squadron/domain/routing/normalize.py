"""Events seen the same way whatever their shape: comment-like events, closing references, event times."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from squadron.domain.commands import AGENT_ACTIONS
from squadron.domain.event_fields import Actor, IssueFields
from squadron.domain.events import EventEnvelope

_CLOSING_RE = re.compile(
    r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s+(?:(?P<repo>[\w.-]+/[\w.-]+))?#(?P<number>\d+)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class CommentEvent:
    """Every comment-like event in one shape (Prow's "generic comment")."""

    number: int
    on_pull_request: bool
    author: Actor
    author_association: str | None
    body: str
    url: str | None
    kind: Literal["issue_comment", "review_comment", "review"]
    review_state: str | None = None


def normalize_comment(event: EventEnvelope) -> CommentEvent | None:
    if event.comment is not None:
        if event.issue is not None:
            number, on_pr = event.issue.number, event.issue.is_pull_request
        elif event.pull_request is not None:
            number, on_pr = event.pull_request.number, True
        else:
            return None
        return CommentEvent(
            number,
            on_pr,
            event.comment.author,
            event.comment.author_association,
            event.comment.body,
            event.comment.html_url,
            event.comment.kind,
        )
    if event.review is not None and event.pull_request is not None:
        return CommentEvent(
            event.pull_request.number,
            True,
            event.review.author,
            event.review.author_association,
            event.review.body,
            None,
            "review",
            event.review.state,
        )
    return None


def closing_references(body: str, repo_full_name: str) -> list[int]:
    """Issue numbers a pull request body closes with GitHub's keywords, in order, same repository only."""
    numbers: list[int] = []
    for match in _CLOSING_RE.finditer(body or ""):
        repo = match.group("repo")
        if repo is not None and repo.lower() != repo_full_name.lower():
            continue
        number = int(match.group("number"))
        if number not in numbers:
            numbers.append(number)
    return numbers


def event_time(event: EventEnvelope) -> datetime:
    return event.occurred_at or event.received_at


def issue_fields(event: EventEnvelope) -> IssueFields:
    assert event.issue is not None, f"{event.event}.{event.action} without an issue"
    return event.issue


def as_webhook(event: EventEnvelope, bot_login: str) -> EventEnvelope:
    """An agent's action (the gateway's command) as the webhook GitHub would have sent for it.

    The router's handlers of issues, pull requests, reviews and statuses serve both: the App
    (``bot_login``, as configured) is the sender and the assignee of an assignment; the origin
    and the verified source agent stay, so the authority rule knows it for the App's own act.
    Every other envelope is returned as it is.
    """
    command = event.command
    if not isinstance(command, AGENT_ACTIONS):
        return event
    name, action = command.webhook
    app = Actor(login=bot_login, id=0, type="Bot")  # the id of the App's bot user is never read
    fields = command.model_dump(exclude={"type", "pr_number"})
    return event.model_copy(
        update={
            "event": name,
            "action": action,
            "command": None,
            "sender": app,
            "assignee": app if name == "issues" and action == "assigned" else None,
            **{key: getattr(command, key) for key in fields},
        }
    )
