"""Carrying out a change set's all-or-nothing merge — pure (docs/change-sets.md).

:mod:`squadron.domain.change_sets` holds the set's states and transitions; this module decides
what the shell does next for a set as stored (:func:`next_step`), what GitHub's answer to a
member's pull request means for the set (:func:`pull_outcome`, :func:`refusal_reason`), where
each revert pull request lives (:func:`revert_branch`: GitHub's own name for it) and what the
escalation on the origin issue says (:func:`escalation_text`, under :func:`escalation_key`).

The driver is the stored set: every call of the shell reads it and takes the one step it names,
stores that step on the version read, and reads again, until the step is to wait (for a person,
a gate, or GitHub). A router that dies between two steps leaves a set a later call (a member's
``pull_request`` ``closed`` webhook, the next sweep) steps on from where it stopped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from squadron.domain.change_sets import ChangeSet, SetState, merge_order

#: ``change-set/cs-0123456789ab``: a member's branch names its set, and so does the branch of its
#: revert (``revert-<number>-change-set/cs-0123456789ab``).
_MEMBER_BRANCH = re.compile(r"^(?:revert-[1-9][0-9]{0,9}-)?change-set/(?P<id>cs-[0-9a-f]{12})$")
#: The queue record (``{"kind": "squadron.change_sets_sweep"}`` on events.fifo) that has the router
#: step every set merging, failed or reverting (shell/change_set_merging.py), in its own group.
SWEEP_KIND = "squadron.change_sets_sweep"
SWEEP_GROUP = "change-sets"
#: The words GitHub answers a REST merge of a pull request whose base moved under it with.
HEAD_MOVED = "the head moved"


@dataclass(frozen=True)
class Merge:
    """Merge this member's pull request (pinned to ``head_sha`` when its gate's judgement named it)."""

    repository: str
    pr_number: int
    head_sha: str | None


@dataclass(frozen=True)
class OpenReverts:
    """The set failed: open a revert pull request for each of these merged members, in this
    order (newest merge first), then tell a person."""

    repositories: tuple[str, ...]


@dataclass(frozen=True)
class AwaitReverts:
    """Revert pull requests are open; each goes through its repository's own gate. These have
    not merged yet (repository -> revert pull request)."""

    waiting: Mapping[str, int]


@dataclass(frozen=True)
class Escalate:
    """Tell a person on the origin issue (nothing had merged, or every revert merged)."""


@dataclass(frozen=True)
class Nothing:
    """No step: the set is not merging yet, or it is over."""

    why: str


Step = Merge | OpenReverts | AwaitReverts | Escalate | Nothing


def next_step(change_set: ChangeSet) -> Step:
    """The one step the stored set asks for next."""
    state = change_set.state
    if state is SetState.MERGING:
        merged = {m.repository for m in change_set.members if m.merged}
        name = next((n for n in merge_order(change_set) if n not in merged), None)
        if name is None:  # record_merged makes the set merged with its last member
            return Nothing("every member merged")
        member = change_set.member(name)
        if member.pr_number is None:  # begin_merging refuses a set with a member without one
            return Nothing(f"{name} has no pull request")
        return Merge(member.repository, member.pr_number, member.head_sha)
    if state is SetState.FAILED:
        reverts = reverts_needed(change_set)
        return OpenReverts(reverts) if reverts else Escalate()
    if state is SetState.REVERTING:
        return AwaitReverts(
            {
                m.repository: m.revert_pr
                for m in change_set.members
                if m.revert_pr is not None and not m.reverted
            }
        )
    if state is SetState.REVERTED:
        return Escalate()
    return Nothing(f"the set is {state}")


def reverts_needed(change_set: ChangeSet) -> tuple[str, ...]:
    """The merged members, newest merge first: each gets a revert pull request."""
    return tuple(n for n in reversed(merge_order(change_set)) if change_set.member(n).merged)


def set_of_branch(ref: str) -> str | None:
    """The set a member's head branch (``change-set/<id>``) or its revert's names, or None."""
    found = _MEMBER_BRANCH.match(ref.removeprefix("refs/heads/"))
    return found["id"] if found else None


def is_member_branch(ref: str) -> bool:
    """Whether ``ref`` is a member's branch (``change-set/<id>``; a revert's is not): its pull
    request merges with its set, in the set's order, never on its own gate's say alone."""
    return ref.removeprefix("refs/heads/").startswith("change-set/")


def revert_branch(pr_number: int, head_ref: str) -> str:
    """The branch GitHub's ``revertPullRequest`` puts the revert of pull request ``pr_number``
    (from branch ``head_ref``) on, as the web's Revert button does: ``revert-<number>-<ref>``."""
    return f"revert-{pr_number}-{head_ref}"


Outcome = Literal["merged", "open", "closed"]


@dataclass(frozen=True)
class PullOutcome:
    """What a member's pull request, as GitHub shows it now, means for the set."""

    outcome: Outcome
    #: merged: its merge commit. closed or a head that moved: why it cannot merge.
    sha: str | None = None
    reason: str = ""


def pull_outcome(pr: Mapping[str, Any], judged_head: str | None) -> PullOutcome:
    """``merged`` (by anyone: a merge cannot be undone but by a revert), ``closed`` without merging
    (the set cannot merge it), or ``open`` — with the reason when its head is no longer the head
    its gate judged (``judged_head``: then it is not merged either)."""
    if pr.get("merged"):
        return PullOutcome("merged", sha=str(pr.get("merge_commit_sha") or "") or None)
    if pr.get("state") == "closed":
        return PullOutcome("closed", reason=f"pull request #{pr.get('number')} was closed without merging")
    head = str((pr.get("head") or {}).get("sha") or "")
    if judged_head is not None and head != judged_head:
        return PullOutcome(
            "open", reason=f"{HEAD_MOVED}: its gate judged {judged_head[:12]}, its head is now {head[:12]}"
        )
    return PullOutcome("open")


def refusal_reason(status: int, message: str) -> str:
    """Why GitHub refused a member's merge, in words for the escalation (409: the head moved
    since it was judged; 405: branch protection or a conflict; 422: GitHub's own words)."""
    said = message.strip().rstrip(".") or "no message"
    if status == 409:
        return f"{HEAD_MOVED} ({said})"
    if status == 405:
        return f"GitHub would not merge it: a conflict or branch protection ({said})"
    return f"GitHub refused the merge ({status}: {said})"


def escalation_key(set_id: str) -> str:
    """The key of the one escalation comment (and needs-human issue) of a set."""
    return f"change-set-escalation-{set_id}"


def reverts_closed_key(set_id: str) -> str:
    """The key of the one comment that says a revert pull request of the set was closed unmerged."""
    return f"change-set-reverts-closed-{set_id}"


def reverts_closed_text(
    change_set: ChangeSet, closed: Mapping[str, int], *, mentions: tuple[str, ...] = ()
) -> str:
    """The comment on the origin issue when revert pull requests (``closed``: repository ->
    number) were closed without merging: what stays merged, and that a person decides."""
    listed = ", ".join(f"{name}#{number}" for name, number in closed.items())
    merged = ", ".join(
        f"{name}#{change_set.member(name).pr_number}" for name in closed if change_set.member(name).merged
    )
    return "\n\n".join(
        [
            f"Change set {change_set.id}: the revert pull request {listed} was closed without merging, "
            f"so {merged or 'what it would undo'} stays merged while the rest of the set did not merge.",
            "Squadron reverts nothing more for this set and stops following it: the set is escalated. "
            "A person is needed to decide what happens to this change next."
            + (" " + " ".join(mentions) if mentions else ""),
        ]
    )


def revert_key(set_id: str, repository: str) -> str:
    """The key of a member's revert pull request."""
    return f"change-set-revert-{set_id}-{repository.lower()}"


def revert_body(change_set: ChangeSet, repository: str, pr_number: int) -> str:
    return (
        f"Reverts #{pr_number}: change set {change_set.id} (from {change_set.origin_repository}"
        f"#{change_set.issue}) stopped ({change_set.failure or 'a later merge failed'}), so what it "
        f"merged in {repository} is undone. This pull request goes through this repository's own "
        "merge gate and reviews like any other; the set never merges it itself."
    )


def escalation_text(
    change_set: ChangeSet, reverts: Mapping[str, int], *, mentions: tuple[str, ...] = ()
) -> str:
    """The comment on the origin issue: which member failed and why, what merged, the revert pull
    requests (newest first), what never merged, and who is asked to look."""
    order = merge_order(change_set)
    merged = [n for n in order if change_set.member(n).merged]
    stopped = [n for n in order if not change_set.member(n).merged]
    lines = [
        f"Change set {change_set.id} stopped: {change_set.failure or 'a merge failed'}. "
        "No later repository of the set merges.",
    ]
    if merged:
        listed = ", ".join(f"{n}#{change_set.member(n).pr_number}" for n in merged)
        lines.append(f"Merged before it: {listed}.")
        opened = ", ".join(f"{n}#{reverts[n]}" for n in reversed(merged) if n in reverts)
        lines.append(
            f"Revert pull requests, newest merge first: {opened}. Each goes through its repository's "
            "own merge gate and reviews; the set is closed once every one of them merged."
        )
    else:
        lines.append("Nothing had merged: no repository is left half-changed.")
    if stopped:
        lines.append("Not merged: " + ", ".join(stopped) + ".")
    lines.append(
        "A person is needed to decide what happens to this change next."
        + (" " + " ".join(mentions) if mentions else "")
    )
    return "\n\n".join(lines)
