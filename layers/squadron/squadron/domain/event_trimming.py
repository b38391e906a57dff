"""Trimming: a webhook payload (or an object as GitHub's REST API answers it) cut to an envelope.

:func:`build_envelope` keeps of a routed event's payload exactly the fields routing needs, typed
and bounded (:mod:`squadron.domain.event_fields`); :func:`issue_fields` and its siblings trim
one object the same way. Pure: no I/O, no clocks (the caller passes ``received_at``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from squadron.domain.event_fields import (
    MAX_BODY_BYTES,
    MAX_LIST_ITEMS,
    MAX_TITLE_BYTES,
    IssueFields,
    PullRequestFields,
    ReviewFields,
    StatusFields,
    truncate_utf8,
)
from squadron.domain.events import EnvelopeError, EventEnvelope
from squadron.domain.merge_queue import group_of


def _obj(payload: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = payload.get(key)
    return value if isinstance(value, Mapping) else None


def _login(user: Mapping[str, Any] | None) -> str | None:
    if user is None:
        return None
    login = user.get("login")
    return login if isinstance(login, str) else None


def _actor(user: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if user is None:
        return None
    return {"login": user.get("login"), "id": user.get("id"), "type": user.get("type") or "User"}


def _names(items: Any, key: str) -> list[str]:
    if not isinstance(items, list):
        return []
    names = [item.get(key) for item in items if isinstance(item, Mapping)]
    return [name for name in names if isinstance(name, str)][:MAX_LIST_ITEMS]


def _text(value: Any, limit: int = MAX_BODY_BYTES) -> tuple[str, bool]:
    return truncate_utf8(value if isinstance(value, str) else None, limit)


def _trim_issue(issue: Mapping[str, Any]) -> dict[str, Any]:
    body, cut = _text(issue.get("body"))
    title, _ = _text(issue.get("title"), MAX_TITLE_BYTES)
    return {
        "number": issue.get("number"),
        "title": title,
        "body": body,
        "body_truncated": cut,
        "state": issue.get("state"),
        "state_reason": issue.get("state_reason"),
        "labels": _names(issue.get("labels"), "name"),
        "assignees": _names(issue.get("assignees"), "login"),
        "author": _login(_obj(issue, "user")),
        "author_association": issue.get("author_association"),
        "is_pull_request": isinstance(issue.get("pull_request"), Mapping),
        "html_url": issue.get("html_url"),
    }


def _trim_comment(comment: Mapping[str, Any], kind: str) -> dict[str, Any]:
    body, cut = _text(comment.get("body"))
    return {
        "id": comment.get("id"),
        "kind": kind,
        "body": body,
        "body_truncated": cut,
        "author": _actor(_obj(comment, "user")),
        "author_association": comment.get("author_association"),
        "html_url": comment.get("html_url"),
        "path": comment.get("path"),
        "in_reply_to_id": comment.get("in_reply_to_id"),
    }


def _trim_pull_request(pr: Mapping[str, Any]) -> dict[str, Any]:
    body, cut = _text(pr.get("body"))
    title, _ = _text(pr.get("title"), MAX_TITLE_BYTES)
    head = _obj(pr, "head") or {}
    base = _obj(pr, "base") or {}
    head_repo = _obj(head, "repo")
    return {
        "number": pr.get("number"),
        "title": title,
        "body": body,
        "body_truncated": cut,
        "state": pr.get("state"),
        "draft": bool(pr.get("draft")),
        "merged": bool(pr.get("merged")),
        "merge_commit_sha": pr.get("merge_commit_sha"),
        "head_ref": head.get("ref"),
        "head_sha": head.get("sha"),
        "head_repo_full_name": head_repo.get("full_name") if head_repo else None,
        "base_ref": base.get("ref"),
        "author": _login(_obj(pr, "user")),
        "author_association": pr.get("author_association"),
        "labels": _names(pr.get("labels"), "name"),
        "html_url": pr.get("html_url"),
    }


def _trim_review(review: Mapping[str, Any]) -> dict[str, Any]:
    body, cut = _text(review.get("body"))
    return {
        "id": review.get("id"),
        "state": review.get("state"),
        "body": body,
        "body_truncated": cut,
        "author": _actor(_obj(review, "user")),
        "author_association": review.get("author_association"),
        "commit_id": review.get("commit_id"),
        "submitted_at": review.get("submitted_at"),
    }


def _pr_numbers(items: Any) -> list[int]:
    if not isinstance(items, list):
        return []
    numbers = [item.get("number") for item in items if isinstance(item, Mapping)]
    return sorted({n for n in numbers if isinstance(n, int)})[:MAX_LIST_ITEMS]


def _trim_check(check: Mapping[str, Any], kind: str) -> dict[str, Any]:
    suite = _obj(check, "check_suite") if kind == "check_run" else check
    app = _obj(check, "app") or (_obj(suite, "app") if suite else None)
    return {
        "id": check.get("id"),
        "kind": kind,
        "name": check.get("name"),
        "status": check.get("status"),
        "conclusion": check.get("conclusion"),
        "head_sha": check.get("head_sha"),
        "head_branch": suite.get("head_branch") if suite else None,
        "app_slug": app.get("slug") if app else None,
        "pull_request_numbers": _pr_numbers(check.get("pull_requests")),
    }


def _trim_status(payload: Mapping[str, Any]) -> dict[str, Any]:
    description, _ = _text(payload.get("description"), MAX_TITLE_BYTES)
    return {
        "sha": payload.get("sha"),
        "state": payload.get("state"),
        "context": payload.get("context"),
        "description": description or None,
        "target_url": payload.get("target_url"),
        "branches": _names(payload.get("branches"), "name"),
    }


def _trim_merge_group(group: Mapping[str, Any], reason: Any) -> dict[str, Any]:
    head_ref = group.get("head_ref")
    named = group_of(head_ref) if isinstance(head_ref, str) else None
    return {
        "head_sha": group.get("head_sha"),
        "head_ref": head_ref,
        "base_ref": group.get("base_ref"),
        "base_sha": group.get("base_sha"),
        "reason": reason if isinstance(reason, str) else None,
        "pr_number": named[1] if named else None,
        "pr_head_sha": named[2] if named else None,
    }


#: Where each event keeps the time of the change it reports.
_OCCURRED_AT: Mapping[str, tuple[str, ...]] = {
    "issues": ("issue", "updated_at"),
    "issue_comment": ("comment", "updated_at"),
    "pull_request": ("pull_request", "updated_at"),
    "pull_request_review": ("review", "submitted_at"),
    "pull_request_review_comment": ("comment", "updated_at"),
    "check_run": ("check_run", "completed_at"),
    "check_suite": ("check_suite", "updated_at"),
    "status": ("updated_at",),
    "milestone": ("milestone", "updated_at"),
}


def _occurred_at(event: str, payload: Mapping[str, Any]) -> Any:
    value: Any = payload
    for key in _OCCURRED_AT.get(event, ()):
        value = value.get(key) if isinstance(value, Mapping) else None
    return value if isinstance(value, str) and value else None


def issue_fields(issue: Mapping[str, Any]) -> IssueFields:
    """An issue as GitHub answers it, trimmed as a webhook's would be."""
    return IssueFields.model_validate(_trim_issue(issue))


def pull_request_fields(pr: Mapping[str, Any]) -> PullRequestFields:
    return PullRequestFields.model_validate(_trim_pull_request(pr))


def review_fields(review: Mapping[str, Any]) -> ReviewFields:
    return ReviewFields.model_validate(_trim_review(review))


def status_fields(status: Mapping[str, Any]) -> StatusFields:
    return StatusFields.model_validate(_trim_status(status))


def build_envelope(
    *, event: str, delivery_id: str, payload: Mapping[str, Any], received_at: datetime
) -> EventEnvelope:
    """Trim a routed event's payload into an envelope.

    Raises :class:`EnvelopeError` naming the first missing or malformed field.
    """
    repository = _obj(payload, "repository")
    if repository is None:
        raise EnvelopeError(event, "the payload has no 'repository' object")
    sender = _obj(payload, "sender")
    if sender is None:
        raise EnvelopeError(event, "the payload has no 'sender' object")
    action = payload.get("action")
    installation = _obj(payload, "installation")
    fields: dict[str, Any] = {
        "delivery_id": delivery_id,
        "event": event,
        "action": action if isinstance(action, str) else None,
        "received_at": received_at,
        "occurred_at": _occurred_at(event, payload),
        "installation_id": installation.get("id") if installation else None,
        "repository": {
            "id": repository.get("id"),
            "full_name": repository.get("full_name"),
            "default_branch": repository.get("default_branch"),
            "private": bool(repository.get("private")),
        },
        "sender": _actor(sender),
    }
    if (issue := _obj(payload, "issue")) is not None:
        fields["issue"] = _trim_issue(issue)
    if (pr := _obj(payload, "pull_request")) is not None:
        fields["pull_request"] = _trim_pull_request(pr)
    if (comment := _obj(payload, "comment")) is not None:
        kind = "review_comment" if event == "pull_request_review_comment" else "issue_comment"
        fields["comment"] = _trim_comment(comment, kind)
    if (review := _obj(payload, "review")) is not None:
        fields["review"] = _trim_review(review)
    if event in ("check_run", "check_suite") and (check := _obj(payload, event)) is not None:
        fields["check"] = _trim_check(check, event)
    if event == "status":
        fields["status"] = _trim_status(payload)
    if event == "merge_group" and (group := _obj(payload, "merge_group")) is not None:
        fields["merge_group"] = _trim_merge_group(group, payload.get("reason"))
    if (label := _obj(payload, "label")) is not None and isinstance(label.get("name"), str):
        fields["label"] = label["name"]
    if (assignee := _obj(payload, "assignee")) is not None:
        fields["assignee"] = _actor(assignee)
    if event == "milestone" and (milestone := _obj(payload, "milestone")) is not None:
        title, _ = _text(milestone.get("title"), MAX_TITLE_BYTES)
        fields["milestone"] = {
            "number": milestone.get("number"),
            "title": title,
            "created_at": milestone.get("created_at"),
            "closed_at": milestone.get("closed_at"),
            "html_url": milestone.get("html_url"),
        }
    try:
        return EventEnvelope.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise EnvelopeError(event, f"{where}: {first['msg']}") from exc
