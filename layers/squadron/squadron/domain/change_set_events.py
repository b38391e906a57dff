"""A change set's lifecycle events — pure (docs/change-sets.md).

:mod:`squadron.domain.change_sets` decides a set's steps; this module says what a step stored
reports (:func:`events_of`): created, approved, ready, merging, merged, reverted, escalated, each
on the origin repository and issue, under an id the same on every attempt of the step
(:func:`change_set_event_id`: the step's write is conditional, so is its event's).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from squadron.domain.change_sets import ChangeSet, SetState, merge_order
from squadron.domain.domain_events import (
    ChangeSetApproved,
    ChangeSetCreated,
    ChangeSetDependency,
    ChangeSetEscalated,
    ChangeSetMerged,
    ChangeSetMerging,
    ChangeSetPullRequest,
    ChangeSetReady,
    ChangeSetReverted,
    DomainEvent,
    EventData,
    Repository,
    make_event,
)


def change_set_event_id(set_id: str, version: int, detail: str) -> str:
    """The event of the set's ``version``: the same on every attempt (its write is conditional)."""
    return hashlib.sha256(f"change-set-event\x00{set_id}\x00{version}\x00{detail}".encode()).hexdigest()[:32]


def events_of(
    before: ChangeSet | None,
    after: ChangeSet,
    *,
    correlation_id: str,
    approved: Sequence[str] = (),
    by: str | None = None,
) -> list[DomainEvent]:
    """The lifecycle events of the step ``before`` -> ``after`` (``before`` None: it was created;
    ``approved`` and ``by``: the repositories a writer approved in this step), on the origin
    repository and issue."""
    common = {"change_set": after.id, "state": str(after.state), "version": after.version}
    found: list[EventData] = []
    if before is None:
        found.append(
            ChangeSetCreated(
                **common,
                repositories=tuple(m.repository for m in after.members),
                dependencies=tuple(ChangeSetDependency(repository=a, needs=b) for a, b in after.dependencies),
                proposed_by=after.proposed_by,
            )
        )
    if approved and by is not None:
        found.append(
            ChangeSetApproved(
                **common, repositories=tuple(approved), by=by, waiting=after.waiting_for_approval()
            )
        )
    moved = before is not None and before.state is not after.state
    if moved and after.state is SetState.READY:
        found.append(
            ChangeSetReady(
                **common,
                pull_requests=tuple(
                    ChangeSetPullRequest(repository=m.repository, pr_number=m.pr_number)
                    for m in after.members
                    if m.pr_number is not None
                ),
            )
        )
    if moved and after.state is SetState.MERGING:
        found.append(ChangeSetMerging(**common, order=merge_order(after)))
    if moved and after.state is SetState.MERGED:
        found.append(ChangeSetMerged(**common, order=merge_order(after)))
    if moved and after.state is SetState.REVERTED:
        found.append(
            ChangeSetReverted(
                **common,
                reverts=tuple(
                    ChangeSetPullRequest(repository=m.repository, pr_number=m.revert_pr)
                    for name in reversed(merge_order(after))
                    if (m := after.member(name)).revert_pr is not None
                ),
            )
        )
    if moved and after.state is SetState.ESCALATED:
        found.append(
            ChangeSetEscalated(
                **common,
                failure=after.failure or "",
                reverted=tuple(m.repository for m in after.members if m.reverted),
            )
        )
    origin = Repository(id=after.origin_repo_id, full_name=after.origin_repository)
    return [
        make_event(
            data,
            event_id=change_set_event_id(after.id, after.version, type(data).__name__),
            at=after.updated_at,
            repository=origin,
            correlation_id=correlation_id,
            installation=after.installation_id,
            issue=after.issue,
        )
        for data in found
    ]
