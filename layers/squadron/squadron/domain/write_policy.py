"""What an agent's GitHub write may say and touch, beyond its role's actions — pure.

:mod:`squadron.domain.permissions` says which actions a role takes at all; this module says
which subjects and arguments a write may carry, from facts the gateway reads before it writes
(the repository's configuration, its default branch, the pull request's head, the blocker issue
as GitHub has it). Each rule answers None (allowed) or the refusal's reason, which the agent
reads as it is:

* labels come from the repository's taxonomy (``labels`` in ``.squadron/config.yaml``), and only
  a role that labels sets them, on an issue it opens too (:func:`labels_refusal`);
* a pull request's base is the default branch or a branch an approval flow's ``branch_rules``
  name (:func:`base_refusal`): never another agent's branch or one no flow guards;
* an approval (or a comment-review's approving verdict) binds to the pull request's current head
  (:func:`bound_commit`): what the reviewer read is what it approves;
* a blocker is an open issue that exists (:func:`blocker_refusal`): an agent never sleeps on a
  number nothing will ever close.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from squadron.domain.permissions import ALLOWED, Action, CallerKind
from squadron.domain.repo_config.models import ApprovalFlowsFile
from squadron.domain.retrospective import ACTION_LABEL
from squadron.domain.retrospective import ROLE as RETRO_ROLE

#: Labels a role puts on the issues it opens whatever its kind: the framework's own (a
#: retrospective's action items are labelled so people find them).
OWN_LABELS: Mapping[str, frozenset[str]] = {RETRO_ROLE: frozenset({ACTION_LABEL})}


def labels_refusal(
    kind: CallerKind,
    labels: Iterable[str],
    taxonomy: Collection[str],
    *,
    role: str = "",
    opening: bool = False,
) -> str | None:
    """Why ``role`` (of ``kind``) may not set ``labels`` on an issue (``opening``: on one it
    opens), or None."""
    asked = list(dict.fromkeys(labels))
    if opening:
        asked = [label for label in asked if label not in OWN_LABELS.get(role, frozenset())]
    if not asked:
        return None
    if Action.LABEL not in ALLOWED[kind]:
        return f"the {kind} role sets no labels (not when opening an issue either): leave labels to the PM"
    unknown = [label for label in asked if label not in taxonomy]
    if unknown:
        known = ", ".join(sorted(taxonomy)) or "none"
        return (
            f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not in the repository's label "
            f"taxonomy (.squadron/config.yaml labels: {known})"
        )
    return None


def allowed_bases(default_branch: str, flows: ApprovalFlowsFile) -> str:
    """The bases a pull request may target, as the agent is told them."""
    patterns = [rule.pattern for rule in flows.branch_rules]
    return ", ".join([default_branch, *patterns])


def base_refusal(base: str, head: str, *, default_branch: str, flows: ApprovalFlowsFile) -> str | None:
    """Why a pull request from ``head`` may not target ``base``, or None: the base is the
    repository's default branch or a branch an approval flow's branch rule names."""
    if base == head:
        return f"a pull request's base ({base}) cannot be its own head"
    if base == default_branch or any(rule.matches(base) for rule in flows.branch_rules):
        return None
    return (
        f"base {base} is not a branch the repository's approval flows govern "
        f"(allowed: {allowed_bases(default_branch, flows)})"
    )


def approves(event: str, verdict: str | None) -> bool:
    """Whether a review says APPROVE (itself, or a comment-review's verdict)."""
    return event == "APPROVE" or verdict == "APPROVE"


def bound_commit(
    number: int, event: str, verdict: str | None, commit_id: str | None, head_sha: str
) -> tuple[str | None, str | None]:
    """The commit a review on pull request ``number`` (head ``head_sha`` now) is posted on, and
    the refusal's reason (None: allowed). An approval binds to the current head: one given for
    another commit is refused, one without a commit gets the head."""
    if not approves(event, verdict):
        return commit_id, None
    if not head_sha:
        return None, f"PR #{number} has no head to approve"
    if commit_id is not None and commit_id != head_sha:
        return None, (
            f"PR #{number}'s head is now {head_sha[:12]}, not {commit_id[:12]}: read the pull request "
            "again and review what it is now"
        )
    return head_sha, None


def blocker_refusal(number: int, issue: Mapping[str, Any] | None) -> str | None:
    """Why #``number`` (GitHub's issue, None when there is none) cannot be a blocker, or None."""
    if issue is None:
        return f"#{number} does not exist in this repository: a blocker is an open issue"
    if "pull_request" in issue:
        return f"#{number} is a pull request: a blocker is an open issue"
    if issue.get("state") != "open":
        return f"#{number} is {issue.get('state') or 'not open'}: a blocker is an open issue"
    return None


def subject_refusal(
    kind: CallerKind, who: str, action: str, number: int, *, issue: int | None, pr: int | None
) -> str | None:
    """Why ``who`` (of ``kind``, working on ``issue`` and its pull request ``pr``) may not
    ``action`` (a write request's action) on #``number``, or None: a PM comments anywhere, any
    other agent on its own issue or pull request only; a reviewer reviews its own pull request."""
    if action == "comment" and kind is not CallerKind.PM and number not in {issue, pr} - {None}:
        return f"{who} comments on its own issue or pull request only"
    if action == "create_review" and number != pr:
        return f"{who} reviews its own pull request only"
    return None


def assignees_refusal(assignees: Iterable[str], bot_login: str) -> str | None:
    """Why an agent may not assign ``assignees``, or None: issues are assigned to the App only
    (which starts their agents); people assign people themselves."""
    if list(assignees) != [bot_login]:
        return f"issues are assigned to the App ({bot_login}) only"
    return None
