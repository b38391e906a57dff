"""Which pipelines an event starts — pure (docs/pipelines.md, "When a run starts").

A pipeline with a ``trigger`` starts a run when an event is its ``event`` (``issues.labeled``:
the webhook's event and action) and meets each of its ``conditions``; a condition matches only
what it names (``label``: the label the event just added; ``base_branch``: the pull request's
base branch), so an event without that field meets none.

The trust rule (docs/security.md): only what a writer vouched for starts a run. The event is a
webhook from GitHub (never a command, an agent's report or the reconciler's replay), and either
its sender is a person with write access (their permission read from GitHub, as for every human
input: :mod:`squadron.domain.authority`), or the issue it is about is vouched for
(:mod:`squadron.domain.vouching`, this decision's vouch included), or, for a pull request, the
issue it is linked to is. A stranger's issue, labelled by the PM it was triaged by, starts nothing.

The run's name is :func:`~squadron.domain.pipeline_wire.execution_name` of the delivery, the
pipeline and the issue: a redelivered or retried event names the same run, which Step Functions
starts once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from squadron.domain.effects import Discard, Effect, StartPipelineRun, VouchIssue
from squadron.domain.events import EventEnvelope
from squadron.domain.pipeline_wire import execution_name
from squadron.domain.pipelines.triggers import event_name, subject, triggered
from squadron.domain.routing.orchestration import pm_assignment
from squadron.domain.routing.policy import RoutingPolicy
from squadron.domain.routing.snapshot import Snapshot
from squadron.domain.vouching import is_writer, voucher


def vouched(
    event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy, effects: Sequence[Effect]
) -> str | None:
    """Who vouched for what ``event`` starts (the trust rule above), or None: nobody did."""
    if is_writer(event.sender.login, snap.permissions, policy.bot_login):
        return event.sender.login
    number = subject(event)
    if number is None:
        return None
    for effect in effects:
        if isinstance(effect, VouchIssue) and effect.number == number:
            return effect.by
    view = snap.view(number)
    by = voucher(view.vouched_by, policy.triage)
    if by is None and view.linked_issue is not None:
        by = voucher(snap.view(view.linked_issue).vouched_by, policy.triage)
    return by


def trigger_data(event: EventEnvelope, number: int | None) -> dict[str, Any]:
    """What a run gets as ``trigger``: the event's facts, never its texts (a title or body is the
    author's words, of any trust level; a stage reads them from GitHub with their trust)."""
    data: dict[str, Any] = {
        "event": event_name(event),
        "delivery": event.delivery_id,
        "repository": event.repository.full_name,
        "sender": event.sender.login,
        "number": number,
    }
    if event.occurred_at is not None:
        # When it happened (GitHub's whole seconds): a stage's fresh agent starts its generation
        # there, as the fixed routing's agent starts at its assignment (agent_stage.generation_start).
        data["occurred_at"] = event.occurred_at.isoformat()
    if event.issue is not None:
        data["issue_number"] = event.issue.number
        data["labels"] = list(event.issue.labels)
    if event.pull_request is not None:
        data["pr_number"] = event.pull_request.number
        data["base_branch"] = event.pull_request.base_ref
        data["head_branch"] = event.pull_request.head_ref
        data["head_sha"] = event.pull_request.head_sha
    if event.label is not None:
        data["label"] = event.label
    return data


def pipeline_starts(
    event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy, effects: Sequence[Effect]
) -> list[Effect]:
    """A :class:`StartPipelineRun` per pipeline ``event`` triggers, when a writer vouched for it;
    else a :class:`Discard` per pipeline saying why not (nothing when no pipeline matches)."""
    names = triggered(policy.pipelines, event)
    if not names:
        return []
    if (event.origin != "github" or event.command is not None) and not pm_assignment(event, policy):
        return [Discard(f"pipeline {name!r}: started by GitHub's webhooks only") for name in names]
    number = subject(event)
    by = vouched(event, snap, policy, effects)
    if by is None:
        where = f"#{number}" if number is not None else "the repository"
        return [
            Discard(f"pipeline {name!r}: no one with write access vouched for {where}; no run starts")
            for name in names
        ]
    data = trigger_data(event, number)
    return [
        StartPipelineRun(
            repo_id=event.repository.id,
            repo_full_name=event.repository.full_name,
            installation_id=event.installation_id,
            issue_number=number,
            pipeline=name,
            name=execution_name(event.delivery_id, name, str(number) if number is not None else "repo"),
            data=data,
        )
        for name in names
    ]
