"""GitHub's merge queue — pure decisions (the merge gate's shell acts on them).

When a branch's rules require a merge queue, GitHub refuses a REST merge (405 "Changes must be
made through the merge queue"); a pull request is queued with GraphQL's ``enqueuePullRequest``,
pinned to the head that was judged, and GitHub merges it once the required checks pass on its
merge group (``merge_group`` webhooks). What the gate does about a pull request and its queue
entry is :func:`queue_step`; the App only ever takes out of the queue an entry it put there
itself (:func:`squadron.domain.app_acts.enqueued_by_app`), never a person's. See docs/exactly-once.md for how a queueing
whose answer was lost is found again rather than sent twice.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from squadron.domain.app_acts import enqueued_by_app

#: The words of GitHub's 405 to a REST merge into a branch that requires a merge queue.
QUEUE_REFUSAL = "merge queue"
#: ``refs/heads/gh-readonly-queue/<base>/pr-<number>-<head sha>``: a merge group's branch.
_GROUP_REF = re.compile(
    r"^(?:refs/heads/)?gh-readonly-queue/(?P<base>.+)/pr-(?P<number>[1-9][0-9]{0,9})-(?P<sha>[0-9a-f]{40})$"
)

QueueStep = Literal["enqueue", "queued", "dequeue", "leave", "nothing"]


def requires_queue(rules: Iterable[Mapping[str, Any]]) -> bool:
    """Whether the rules GitHub lists for a branch (``GET .../rules/branches/{branch}``) require a merge queue."""
    return any(rule.get("type") == "merge_queue" for rule in rules)


def is_queue_refusal(status: int, message: str) -> bool:
    """Whether GitHub's answer to a REST merge says the branch takes merges through its queue only."""
    return status == 405 and QUEUE_REFUSAL in message.casefold()


def entry_head(entry: Mapping[str, Any]) -> str:
    return str((entry.get("headCommit") or {}).get("oid") or "")


def queue_step(*, merge: bool, entry: Mapping[str, Any] | None, head_sha: str, bot_login: str) -> QueueStep:
    """What the gate does on a branch that requires a merge queue, given its verdict and the entry.

    | verdict   | entry                         | step                                       |
    |-----------|-------------------------------|--------------------------------------------|
    | merge     | none                          | enqueue (pinned to the judged head)        |
    | merge     | at the judged head            | queued (nothing sent: it is there)         |
    | merge     | the App's, at another head    | dequeue (then enqueue the judged head)     |
    | merge     | a person's, at another head   | leave (theirs to take out)                 |
    | not merge | the App's                     | dequeue (the gate broke while queued)      |
    | not merge | a person's                    | leave (a person queued it: never ours)     |
    | not merge | none                          | nothing                                    |
    """
    if entry is None:
        return "enqueue" if merge else "nothing"
    ours = enqueued_by_app(entry, bot_login)
    if merge and entry_head(entry) == head_sha:
        return "queued"
    return "dequeue" if ours else "leave"


def group_of(head_ref: str) -> tuple[str, int, str] | None:
    """(base, pull request number, its head sha) a merge group's branch names, or None."""
    found = _GROUP_REF.match(head_ref)
    if found is None:
        return None
    return found["base"], int(found["number"]), found["sha"]


def group_statuses(
    head_statuses: Iterable[Mapping[str, Any]], *, verdict_state: str, verdict: str
) -> list[tuple[str, str, str]]:
    """The App's statuses a merge group's head needs: (context, state, description).

    Branch protection requires Squadron's contexts (``squadron/<role>``, ``squadron/merge``) on
    the group's head too; they are the pull request's own, judged on its head, with
    ``squadron/merge`` the gate's fresh verdict."""
    from squadron.domain.approval import MERGE_CONTEXT  # noqa: PLC0415 (events -> here -> approval -> events)

    out = {
        str(s.get("context")): (str(s.get("state")), str(s.get("description") or ""))
        for s in head_statuses
        if str(s.get("context") or "").startswith("squadron/") and s.get("context") != MERGE_CONTEXT
    }
    out[MERGE_CONTEXT] = (verdict_state, verdict)
    return [(context, state, text) for context, (state, text) in sorted(out.items())]
