"""What a committed decision reports: its domain events, derived from what it read and what it
decided — pure.

:func:`derive` is the router's (:mod:`squadron.domain.routing.decide`); the catalogue of events
and their envelope are :mod:`squadron.domain.domain_events`'.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from squadron.domain.agents import AgentRecord, AgentStatus, RoleKind
from squadron.domain.breakers import Limit
from squadron.domain.commands import RecoverAgent, TaskEnded
from squadron.domain.domain_events import (
    SUMMARY_LENGTH,
    AgentCancelled,
    AgentCompleted,
    AgentEscalated,
    AgentSlept,
    AgentStarted,
    AgentWoke,
    BlockerRegistered,
    BlockerResolved,
    BreakerTripped,
    BreakerWarned,
    DomainEvent,
    EventData,
    IssueReopened,
    PullRequestClosed,
    PullRequestMerged,
    PullRequestOpened,
    Repository,
    RetrospectiveCompleted,
    RetroWindow,
    ReviewSubmitted,
    UsageRecorded,
    event_id,
    make_event,
)
from squadron.domain.effects import (
    AddBlocker,
    Effect,
    LinkPullRequest,
    RecordReview,
    RemoveBlocker,
    agent_writes,
)
from squadron.domain.event_fields import PullRequestFields
from squadron.domain.events import EventEnvelope


def review_summary(body: str) -> str | None:
    """What a review says in one line: its body's first line that holds text, without control or
    format characters (bidirectional overrides, zero-width characters), each run of whitespace
    (tabs too) made one space, cut to :data:`SUMMARY_LENGTH` characters (the last one an ellipsis when cut)."""
    for line in body.splitlines():
        kept = "".join(
            " " if c.isspace() else c
            for c in line
            if c.isspace() or unicodedata.category(c) not in ("Cc", "Cf")
        )
        text = " ".join(kept.split())
        if text:
            return text if len(text) <= SUMMARY_LENGTH else text[: SUMMARY_LENGTH - 1] + "…"
    return None


def _agent_of_pull_request(before: Iterable[AgentRecord], pull: PullRequestFields) -> AgentRecord | None:
    """The dev agent whose pull request ``pull`` is: the one that recorded it as its PR, else the
    one whose branch is its head (the first by id when several match)."""
    devs = sorted((a for a in before if a.kind is RoleKind.DEV), key=lambda a: a.agent_id)
    by_pr = [a for a in devs if a.pr_number == pull.number]
    by_branch = [a for a in devs if a.branch is not None and a.branch == pull.head_ref]
    found = by_pr or by_branch
    return found[0] if found else None


def _dev_agent_of(before: Iterable[AgentRecord], issue: int) -> AgentRecord | None:
    """The issue's latest dev agent among those read (by last change, then id)."""
    devs = [a for a in before if a.kind is RoleKind.DEV and a.issue_number == issue]
    return max(devs, key=lambda a: (a.updated_at, a.agent_id)) if devs else None


def _agent_change(agent: AgentRecord, before: AgentStatus | None) -> EventData | None:
    """The event of an agent's status change, or None (a change no consumer is told about)."""
    common: dict[str, Any] = {
        "role": agent.role,
        "generation": agent.generation,
        "previous_status": None if before is None else before.value,
        "kind": agent.kind.value,
    }
    match agent.status:
        case AgentStatus.CREATED | AgentStatus.ACTIVE if before in (
            AgentStatus.SLEEPING,
            AgentStatus.ESCALATED,
        ):
            return AgentWoke(**common, reason=agent.wake_reason or "")
        case AgentStatus.CREATED if before in (None, AgentStatus.COMPLETED, AgentStatus.CANCELLED):
            return AgentStarted(**common, branch=agent.branch)
        case AgentStatus.SLEEPING:
            return AgentSlept(**common, blocked_by=tuple(sorted(agent.blocked_by)))
        case AgentStatus.ESCALATED:
            return AgentEscalated(**common, reason=agent.escalation_reason or "")
        case AgentStatus.COMPLETED:
            return AgentCompleted(**common, pr_number=agent.pr_number)
        case AgentStatus.CANCELLED:
            return AgentCancelled(**common)
        case _:
            return None  # CREATED -> ACTIVE is the task beginning (the gateway's), not news


def derive(
    event: EventEnvelope,
    *,
    decision: str,
    before: Iterable[AgentRecord],
    blockers: Mapping[int, frozenset[int]],
    linked_issues: Mapping[int, int | None],
    effects: Sequence[Effect],
    at: datetime,
    retrospectives: Mapping[int, RetroWindow] | None = None,
) -> tuple[DomainEvent, ...]:
    """The domain events of one decision, in order.

    ``before``: the agents the decision read; ``blockers``: each read issue's blockers;
    ``linked_issues``: each read PR's linked issue; ``retrospectives``: the retrospective held
    in each issue the decision completes a retrospective agent of (its period, what it set in
    motion). An event reports a change the decision makes, so re-registering a known blocker,
    or a write that leaves a status as it was, reports nothing.
    """
    repository = Repository(id=event.repository.id, full_name=event.repository.full_name)
    found: list[tuple[EventData, int | None, str | None]] = []
    before = tuple(before)
    status: dict[str, AgentStatus] = {a.agent_id: a.status for a in before}
    effect_list = list(effects)
    for write in agent_writes(effect_list):
        record = write.record
        old = status.get(record.agent_id)
        if old is not record.status:
            data = _agent_change(record, old)
            if data is not None:
                found.append((data, record.issue_number, record.agent_id))
            held = (retrospectives or {}).get(record.issue_number or 0)
            if record.status is AgentStatus.COMPLETED and held is not None:
                completed = RetrospectiveCompleted(
                    window_start=held.window_start,
                    window_end=held.window_end,
                    proposals=held.proposals,
                    pull_request=held.pull_request,
                )
                found.append((completed, record.issue_number, record.agent_id))
        status[record.agent_id] = record.status
    known = {n: set(b) for n, b in blockers.items()}
    for effect in effect_list:
        agent = None
        if isinstance(effect, AddBlocker | RemoveBlocker | LinkPullRequest) and effect.agent is not None:
            agent = effect.agent.record.agent_id
        match effect:
            case AddBlocker(issue=issue, blocker=blocker) if blocker not in known.setdefault(issue, set()):
                known[issue].add(blocker)
                found.append((BlockerRegistered(blocker=blocker), issue, agent))
            case RemoveBlocker(issue=issue, blocker=blocker) if blocker in known.get(issue, set()):
                known[issue].discard(blocker)
                found.append((BlockerResolved(blocker=blocker), issue, agent))
            case LinkPullRequest(pr_number=pr, issue_number=issue, agent=linked) if linked is not None:
                pull = event.pull_request
                opened = PullRequestOpened(
                    pr_number=pr,
                    branch=linked.record.branch or (pull.head_ref if pull is not None else None),
                    author=pull.author if pull is not None and pull.number == pr else None,
                )
                found.append((opened, issue, agent))
            case RecordReview(pr_number=pr):
                submitted = event.review
                body = submitted.body if submitted is not None and submitted.id == effect.review_id else ""
                review = ReviewSubmitted(
                    pr_number=pr,
                    reviewer=effect.reviewer,
                    state=effect.state,
                    review_id=effect.review_id,
                    commit_id=effect.commit_id,
                    summary=review_summary(body),
                )
                found.append((review, linked_issues.get(pr), None))
            case _:
                pass
    found += _from_event(event, before, linked_issues, effect_list)
    return tuple(
        make_event(
            data,
            event_id=event_id(decision, index),
            at=at,
            repository=repository,
            correlation_id=event.delivery_id,
            installation=event.installation_id,
            issue=issue,
            agent=agent,
        )
        for index, (data, issue, agent) in enumerate(found)
    )


def _written(effects: Sequence[Effect], agent_id: str) -> AgentRecord | None:
    last = None
    for write in agent_writes(effects):
        if write.record.agent_id == agent_id:
            last = write.record
    return last


def _from_event(
    event: EventEnvelope,
    before: Sequence[AgentRecord],
    linked_issues: Mapping[int, int | None],
    effects: Sequence[Effect],
) -> list[tuple[EventData, int | None, str | None]]:
    """Events the delivery itself reports: a merge or an agent's pull request closed, an issue
    reopened, a task's end (usage, breakers), a sleep breaker.

    A merged pull request is reported whoever opened it, naming the dev agent whose PR it is
    (if any); a pull request closed unmerged only when it is a dev agent's. An issue reopened is
    reported naming its dev agent if one worked on it.
    """
    out: list[tuple[EventData, int | None, str | None]] = []
    pull = event.pull_request
    if event.event == "pull_request" and event.action == "closed" and pull is not None:
        owner = _agent_of_pull_request(before, pull)
        linked = linked_issues.get(pull.number)
        if linked is None and owner is not None:
            linked = owner.issue_number
        if pull.merged:
            merged = PullRequestMerged(
                pr_number=pull.number,
                merge_commit_sha=pull.merge_commit_sha,
                head_ref=pull.head_ref,
                merged_by=event.sender.login,
            )
            out.append((merged, linked, owner.agent_id if owner is not None else None))
        elif owner is not None:
            closed = PullRequestClosed(
                pr_number=pull.number, head_ref=pull.head_ref, closed_by=event.sender.login
            )
            out.append((closed, linked, owner.agent_id))
    issue = event.issue
    if (
        event.event == "issues"
        and event.action == "reopened"
        and issue is not None
        and not issue.is_pull_request
    ):
        worked = _dev_agent_of(before, issue.number)
        reopened = IssueReopened(reopened_by=event.sender.login)
        out.append((reopened, issue.number, worked.agent_id if worked is not None else None))
    command = event.command
    if isinstance(command, TaskEnded):
        record = _written(effects, command.agent_id)
        if record is None:
            return out  # the router refused the report (a superseded task): nothing was recorded
        usage = command.usage
        out.append(
            (
                UsageRecorded(
                    outcome=command.outcome,
                    tool_calls=usage.tool_calls,
                    turns=usage.turns,
                    iterations=usage.iterations,
                    active_seconds=usage.active_seconds,
                    tokens=usage.tokens,
                ),
                record.issue_number,
                record.agent_id,
            )
        )
        for limit in usage.warned:
            out.append((BreakerWarned(limit=limit), record.issue_number, record.agent_id))
        if usage.tripped is not None:
            tripped = BreakerTripped(limit=usage.tripped, reason=command.reason[:1000])
            out.append((tripped, record.issue_number, record.agent_id))
    elif isinstance(command, RecoverAgent) and command.action == "escalate":
        record = _written(effects, command.agent_id)
        if record is not None and record.status is AgentStatus.ESCALATED:
            tripped = BreakerTripped(limit=Limit.SLEEP_DURATION, reason=command.reason[:1000])
            out.append((tripped, record.issue_number, record.agent_id))
    return out
