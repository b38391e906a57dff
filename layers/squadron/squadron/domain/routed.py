"""Which webhooks the router handles, and which the App caused itself — pure, and light.

Kept apart from :mod:`squadron.domain.events` (the pydantic envelope models) so the ingress can
drop an event it will never route without building those models (issue 21: dropped events are
answered before anything heavy loads).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The (event, actions) pairs the router handles. ``None`` means "every action"
#: (the event has no action field). Anything else is dropped at the ingress with a
#: reason, so it never costs a queue message. The router's routing table must
#: cover exactly these.
ROUTED_EVENTS: Mapping[str, frozenset[str] | None] = {
    "issues": frozenset(
        {
            "opened",
            "edited",
            "reopened",
            "closed",
            "deleted",
            "transferred",
            "labeled",
            "assigned",
            "unassigned",
        }
    ),
    "issue_comment": frozenset({"created", "edited"}),
    "pull_request": frozenset(
        {
            "opened",
            "reopened",
            "edited",
            "synchronize",
            "closed",
            "ready_for_review",
            "converted_to_draft",
            # for pipelines: a trigger, a handler, a human stage waiting for a label
            "labeled",
        }
    ),
    "pull_request_review": frozenset({"submitted", "dismissed"}),
    "pull_request_review_comment": frozenset({"created"}),
    "check_run": frozenset({"completed"}),
    "check_suite": frozenset({"completed"}),
    "status": None,
    # A milestone closing holds the repository's retrospective of it (issue 20).
    "milestone": frozenset({"closed"}),
    # GitHub's merge queue: Squadron's statuses on a group, a failed group, a queued merge done.
    "merge_group": frozenset({"checks_requested", "destroyed"}),
}

#: Events whose subject object records the App that created it in
#: ``performed_via_github_app``. Only for these actions does that field say the
#: App performed *this* event; on other actions it describes who created the
#: object long ago (a human labelling an App-created issue is not the App).
_CREATED_BY_APP_SUBJECT: Mapping[tuple[str, str], str] = {
    ("issues", "opened"): "issue",
    ("issue_comment", "created"): "comment",
    ("issue_comment", "edited"): "comment",
}


def routing_interest(event: str, action: str | None) -> str | None:
    """Why the router would never handle this (event, action), or ``None`` if it would."""
    if event not in ROUTED_EVENTS:
        return f"event '{event}' is not routed"
    actions = ROUTED_EVENTS[event]
    if actions is not None and action not in actions:
        return f"action '{action}' of event '{event}' is not routed"
    return None


def performed_by_app(
    event: str, action: str | None, payload: Mapping[str, Any], *, app_id: int, app_slug: str
) -> bool:
    """Whether the App itself caused this event (so routing it could loop).

    A merge group's webhooks are the merge queue's doing even when GitHub names the App (which
    queued the pull request) as their sender; only a group destroyed because it was taken out
    of the queue (``dequeued``) may be the App's own act."""
    if event == "merge_group" and not (action == "destroyed" and payload.get("reason") == "dequeued"):
        return False
    sender = payload.get("sender")
    if isinstance(sender, Mapping) and sender.get("login") == f"{app_slug}[bot]":
        return True
    subject_key = _CREATED_BY_APP_SUBJECT.get((event, action or ""))
    if subject_key is None:
        return False
    subject = payload.get(subject_key)
    if not isinstance(subject, Mapping):
        return False
    via = subject.get("performed_via_github_app")
    return isinstance(via, Mapping) and via.get("id") == app_id
