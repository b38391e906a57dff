"""Domain events: what a committed decision did, as versioned facts on the event bus — pure.

One catalogue (:data:`CATALOGUE`) names every event: its EventBridge ``detail-type``
(``<topic>.<what>.v1``) and the pydantic model of its ``data``. Every event shares one
envelope (:class:`DomainEvent`): a deterministic id, the time of the decision, the stage
(stamped by the publisher, which alone knows its bus), the installation, the repository,
the issue, the agent, and the correlation id — the delivery whose decision it reports.

The router derives a decision's events (:func:`~squadron.domain.event_derivation.derive`) from what the decision read
(the snapshot's agents and issue views) and what it decided (its effects), and commits them
with the decision in the same transaction (:mod:`squadron.adapters.dynamo_registry`): an
event exists only if its decision was committed, and a retry of the delivery resumes the
committed decision instead of deciding (and deriving) again. The merge gate's verdict is
known only when the gate judges, so its event is committed then, keyed by the effect
(:func:`gate_event_id`). The JSON Schema of every event is checked in under
``schemas/events/`` and registered in the stack's schema registry. The committed events stay
in the registry as their repository's history (:mod:`squadron.domain.history`), which
retrospectives compute their figures from (:mod:`squadron.domain.retrospective`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from squadron.domain.breakers import Limit
from squadron.domain.usage import ModelTokens

#: The ``source`` of every event on the bus.
SOURCE = "squadron"
#: Events a decision can commit with its record (one TransactWriteItems holds 100 items).
MAX_EVENTS_WITH_RECORD = 99


class EventData(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _AgentData(EventData):
    role: str = Field(max_length=64)
    generation: int = Field(ge=1)
    #: The status before (None: the agent was created by this decision).
    previous_status: str | None = None
    #: What the role does: ``pm``, ``dev`` (works an issue, opens its pull request) or ``review``
    #: (None in events committed before the kind was reported).
    kind: Literal["pm", "dev", "review"] | None = None


class AgentStarted(_AgentData):
    branch: str | None = None


class AgentSlept(_AgentData):
    blocked_by: tuple[int, ...] = ()


class AgentWoke(_AgentData):
    reason: str = ""


class AgentEscalated(_AgentData):
    reason: str = ""


class AgentCompleted(_AgentData):
    pr_number: int | None = None


class AgentCancelled(_AgentData):
    pass


class BlockerRegistered(EventData):
    #: ``issue`` is blocked by ``blocker``.
    blocker: int = Field(ge=1)


class BlockerResolved(EventData):
    blocker: int = Field(ge=1)


class PullRequestOpened(EventData):
    pr_number: int = Field(ge=1)
    branch: str | None = None
    author: str | None = None


#: The longest review summary an event carries.
SUMMARY_LENGTH = 140


class ReviewSubmitted(EventData):
    pr_number: int = Field(ge=1)
    reviewer: str
    state: str
    review_id: int = Field(ge=1)
    commit_id: str | None = None
    #: The review body's first line that holds text, control and format characters removed, at
    #: most 140 characters (None: the review has no text). Text a reviewer wrote: quote it, never
    #: render it as markup (see :func:`review_summary`).
    summary: str | None = Field(default=None, max_length=SUMMARY_LENGTH)


class PullRequestClosed(EventData):
    """An agent's pull request was closed without being merged."""

    pr_number: int = Field(ge=1)
    head_ref: str | None = None
    closed_by: str | None = None


class IssueReopened(EventData):
    """An issue was reopened (the envelope's ``agent``: its dev agent, if one worked on it)."""

    reopened_by: str | None = None


Verdict = Literal["ready", "waiting", "blocked"]


class MergeGateVerdictChanged(EventData):
    pr_number: int = Field(ge=1)
    verdict: Verdict
    #: The verdict the gate gave this PR before (None: its first judgement).
    previous: Verdict | None = None
    description: str = Field(default="", max_length=140)


class PullRequestMerged(EventData):
    pr_number: int = Field(ge=1)
    merge_commit_sha: str | None = None
    head_ref: str | None = None
    merged_by: str | None = None


class BreakerWarned(EventData):
    limit: Limit


class BreakerTripped(EventData):
    limit: Limit
    reason: str = ""


class UsageRecorded(EventData):
    outcome: Literal["idle", "sleeping", "escalated", "failed"]
    tool_calls: int = Field(ge=0)
    turns: int = Field(ge=0)
    iterations: int = Field(ge=0)
    active_seconds: int = Field(ge=0)
    #: The tokens each model read and wrote in this task (price them with your own table, or read
    #: the cost `squadron status` shows).
    tokens: tuple[ModelTokens, ...] = ()


@dataclass(frozen=True)
class RetroWindow:
    """What :func:`derive` reports of a retrospective its agent completed."""

    window_start: datetime
    window_end: datetime
    #: What it set in motion: action items and its pull request.
    proposals: int
    pull_request: int | None = None


class RetrospectiveCompleted(EventData):
    """A repository's retrospective was held: its agent completed (the window it looked back on,
    the action items and pull request it proposed)."""

    window_start: datetime
    window_end: datetime
    proposals: int = Field(ge=0)
    pull_request: int | None = None


class PipelineRunStarted(EventData):
    """A pipeline's run started (docs/pipelines.md, "When a run starts"): the envelope's issue is
    its issue or pull request, its correlation id the delivery that started it."""

    pipeline: str = Field(min_length=1, max_length=128)
    #: The run's execution ARN (its console link: :func:`squadron.domain.pipeline_runs.console_url`).
    execution_arn: str = Field(min_length=1, max_length=2048)
    #: The published version it runs on (a run keeps it to its end).
    version_arn: str | None = Field(default=None, max_length=2048)


class PipelineStageChanged(EventData):
    """The router answered one entry of a run's stage (or of a step around it): the run moves on
    from it (docs/pipelines.md, "What the router carries out"). One event per entry: a loop back,
    or an ``on_error`` retry, enters the stage again and is another transition."""

    pipeline: str = Field(min_length=1, max_length=128)
    execution_arn: str = Field(min_length=1, max_length=2048)
    #: The state answered (the stage's id, or the step's state the compiler named after it).
    stage: str = Field(min_length=1, max_length=80)
    stage_type: Literal["agent", "human", "gate", "action", "webhook"]
    step: Literal[
        "stage", "condition", "poll", "notify", "remind", "escalate", "stop", "on_complete", "on_error"
    ]
    entered_at: datetime
    retry_count: int = Field(ge=0)
    #: ``succeeded`` (and ``passed``, a gate's or a poll's verdict), ``skipped`` (its condition was
    #: false) or ``failed`` with the error the run's ``Catch`` routes (``Squadron.*``).
    outcome: Literal["succeeded", "skipped", "failed"]
    passed: bool | None = None
    error: str | None = Field(default=None, max_length=256)


class ChangeSetDependency(EventData):
    #: ``repository`` needs ``needs``: ``needs`` merges first.
    repository: str
    needs: str


class ChangeSetPullRequest(EventData):
    repository: str
    pr_number: int = Field(ge=1)


class _ChangeSetData(EventData):
    """What every change set event carries (docs/change-sets.md): the set and its state now."""

    change_set: str = Field(pattern=r"^cs-[0-9a-f]{12}$")
    state: str
    version: int = Field(ge=1)


class ChangeSetCreated(_ChangeSetData):
    repositories: tuple[str, ...]
    dependencies: tuple[ChangeSetDependency, ...] = ()
    proposed_by: str


class ChangeSetApproved(_ChangeSetData):
    #: The repositories a writer of each approved now.
    repositories: tuple[str, ...]
    by: str
    #: Still waiting for a writer's approval (empty: the set is approved).
    waiting: tuple[str, ...] = ()


class ChangeSetReady(_ChangeSetData):
    pull_requests: tuple[ChangeSetPullRequest, ...]


class ChangeSetMerging(_ChangeSetData):
    #: The merge order (dependencies first).
    order: tuple[str, ...]


class ChangeSetMerged(_ChangeSetData):
    order: tuple[str, ...]


class ChangeSetReverted(_ChangeSetData):
    #: The revert pull requests that merged, in the order they were opened.
    reverts: tuple[ChangeSetPullRequest, ...]


class ChangeSetEscalated(_ChangeSetData):
    failure: str
    #: The repositories whose merges were reverted (empty: nothing had merged).
    reverted: tuple[str, ...] = ()


#: detail-type -> the model of its ``data``: the one catalogue.
CATALOGUE: Mapping[str, type[EventData]] = {
    "agent.started.v1": AgentStarted,
    "agent.slept.v1": AgentSlept,
    "agent.woke.v1": AgentWoke,
    "agent.escalated.v1": AgentEscalated,
    "agent.completed.v1": AgentCompleted,
    "agent.cancelled.v1": AgentCancelled,
    "blocker.registered.v1": BlockerRegistered,
    "blocker.resolved.v1": BlockerResolved,
    "pr.opened.v1": PullRequestOpened,
    "review.submitted.v1": ReviewSubmitted,
    "merge_gate.verdict_changed.v1": MergeGateVerdictChanged,
    "pr.merged.v1": PullRequestMerged,
    "pr.closed.v1": PullRequestClosed,
    "issue.reopened.v1": IssueReopened,
    "breaker.warned.v1": BreakerWarned,
    "breaker.tripped.v1": BreakerTripped,
    "usage.recorded.v1": UsageRecorded,
    "retrospective.completed.v1": RetrospectiveCompleted,
    "pipeline.run_started.v1": PipelineRunStarted,
    "pipeline.stage_changed.v1": PipelineStageChanged,
    "change_set.created.v1": ChangeSetCreated,
    "change_set.approved.v1": ChangeSetApproved,
    "change_set.ready.v1": ChangeSetReady,
    "change_set.merging.v1": ChangeSetMerging,
    "change_set.merged.v1": ChangeSetMerged,
    "change_set.reverted.v1": ChangeSetReverted,
    "change_set.escalated.v1": ChangeSetEscalated,
}
_TYPE_OF: Mapping[type[EventData], str] = {model: name for name, model in CATALOGUE.items()}


class Repository(EventData):
    id: int = Field(ge=1)
    full_name: str = Field(min_length=3, max_length=256)


class DomainEvent(BaseModel):
    """The envelope every event carries (its ``detail`` on the bus, with ``data``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[0-9a-f]{32}$")
    detail_type: str = Field(exclude=True)
    time: datetime
    #: The deployment's stage; empty until the publisher stamps it.
    stage: str = Field(default="", max_length=64)
    installation: int | None = None
    repository: Repository
    issue: int | None = None
    agent: str | None = None
    #: The delivery whose committed decision this reports.
    correlation_id: str = Field(min_length=1, max_length=200)
    data: dict[str, Any]

    def detail(self) -> dict[str, Any]:
        """The event's ``detail`` as it goes on the bus."""
        return self.model_dump(mode="json")

    def stored(self) -> str:
        """What the commit stores: the detail and its type (:meth:`from_stored` reads it back)."""
        return json.dumps({**self.detail(), "detail_type": self.detail_type}, separators=(",", ":"))

    @classmethod
    def from_stored(cls, text: str | bytes) -> DomainEvent:
        return cls.model_validate_json(text)

    def published(self, stage: str) -> DomainEvent:
        return self.model_copy(update={"stage": stage})


def event_id(decision: str, index: int) -> str:
    """The ``index``-th event of ``decision``: the same on every attempt (consumers dedupe by it)."""
    return hashlib.sha256(f"event\x00{decision}\x00{index}".encode()).hexdigest()[:32]


def gate_event_id(effect_key: str, verdict: str) -> str:
    """The merge gate's verdict event of one outside effect (its :func:`~squadron.domain.effects.effect_key`)."""
    return hashlib.sha256(f"gate\x00{effect_key}\x00{verdict}".encode()).hexdigest()[:32]


def make_event(
    data: EventData,
    *,
    event_id: str,
    at: datetime,
    repository: Repository,
    correlation_id: str,
    installation: int | None = None,
    issue: int | None = None,
    agent: str | None = None,
) -> DomainEvent:
    return DomainEvent(
        id=event_id,
        detail_type=_TYPE_OF[type(data)],
        time=at,
        installation=installation,
        repository=repository,
        issue=issue,
        agent=agent,
        correlation_id=correlation_id,
        data=data.model_dump(mode="json"),
    )


def json_schema(detail_type: str) -> dict[str, Any]:
    """The JSON Schema of ``detail_type``'s ``detail`` (envelope and data), as checked in."""
    data = CATALOGUE[detail_type]
    template = "#/definitions/{model}"
    envelope = DomainEvent.model_json_schema(mode="serialization", ref_template=template)
    envelope["properties"].pop("detail_type", None)
    envelope["required"] = [name for name in envelope["required"] if name != "detail_type"]
    envelope["properties"]["data"] = {"$ref": template.format(model=data.__name__)}
    definitions = envelope.pop("$defs", {})
    data_schema = data.model_json_schema(mode="serialization", ref_template=template)
    definitions.update(data_schema.pop("$defs", {}))
    definitions[data.__name__] = data_schema
    return {
        # EventBridge's schema registry reads JSON Schema draft 4 (``definitions``, no ``$defs``).
        "$schema": "http://json-schema.org/draft-04/schema#",
        "title": detail_type,
        "description": f"Squadron domain event {detail_type}: the EventBridge event's detail.",
        **{k: v for k, v in envelope.items() if k not in ("title", "description")},
        "definitions": definitions,
    }
