"""The domain events of pipeline runs (pure): a run started, a stage answered.

A run's transitions happen outside a routed decision: Step Functions moves the run, the router
answers a stage's task (:mod:`squadron.shell.pipelines`), the router's outbox starts a run
(:mod:`squadron.shell.pipeline_runs`). Each event is therefore keyed by what it reports, so that
any number of attempts store (and so publish) it once (the registry stores an event id once):

* ``pipeline.stage_changed.v1``: one per entry of a stage (or of a step around it): the task's
  :attr:`~squadron.domain.pipeline_wire.PipelineTask.entry` (execution, state, time entered,
  retry count). The same message delivered again, or handled by two routers at once, is the same
  entry; a loop back or an ``on_error`` retry is a new entry, and a new transition.
* ``pipeline.run_started.v1``: one per execution (its ARN: a run's name is deterministic from
  the delivery, the pipeline and the issue, so a retried start is the same execution).

See docs/pipelines.md, "Events".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from squadron.domain.domain_events import (
    DomainEvent,
    PipelineRunStarted,
    PipelineStageChanged,
    Repository,
    event_id,
    make_event,
)
from squadron.domain.pipeline_wire import PipelineTask, StageAnswer, StageSucceeded, StageType, Step


def stage_decision(task: PipelineTask) -> str:
    """The key the router's records of one entry of a stage share (its decision, its event)."""
    return f"pipeline-{task.entry}"


def stage_changed(
    task: PipelineTask,
    answer: StageAnswer,
    *,
    repository: str,
    installation: int | None,
    at: datetime,
) -> DomainEvent:
    """The event of the router's ``answer`` to ``task``: the run moves on from that entry."""
    return answered(
        Answered(
            entry=task.entry,
            pipeline=task.pipeline,
            execution_arn=task.execution_arn,
            stage=task.stage,
            stage_type=task.stage_type,
            step=task.step,
            entered_at=task.entered_at,
            retry_count=task.retry_count,
            repository_id=task.repository_id,
            issue=task.issue_number,
        ),
        answer,
        repository=repository,
        installation=installation,
        at=at,
    )


@dataclass(frozen=True)
class Answered:
    """The entry of a stage an answer is about, as the router's task had it (or as a wait kept it
    for an answer sent later: an agent stage's, a human stage's)."""

    entry: str
    pipeline: str
    execution_arn: str
    stage: str
    stage_type: StageType
    step: Step
    entered_at: datetime
    retry_count: int
    repository_id: int
    issue: int | None


def answered(
    of: Answered, answer: StageAnswer, *, repository: str, installation: int | None, at: datetime
) -> DomainEvent:
    """The event of ``answer`` to the entry ``of``: keyed by the entry, so the router's answer and
    an answer sent later (when an agent's task ends, when people approve) are the same one event,
    however often either is sent."""
    common: dict[str, Any] = {
        "pipeline": of.pipeline,
        "execution_arn": of.execution_arn,
        "stage": of.stage,
        "stage_type": of.stage_type,
        "step": of.step,
        "entered_at": of.entered_at,
        "retry_count": of.retry_count,
    }
    if isinstance(answer, StageSucceeded):
        passed = answer.output.get("passed")
        data = PipelineStageChanged(
            **common,
            outcome="skipped" if answer.output.get("skipped") is True else "succeeded",
            passed=passed if isinstance(passed, bool) else None,
        )
    else:
        data = PipelineStageChanged(**common, outcome="failed", error=answer.error)
    decision = f"pipeline-{of.entry}"
    return make_event(
        data,
        event_id=event_id(f"{decision}/stage_changed", 0),
        at=at,
        repository=Repository(id=of.repository_id, full_name=repository),
        correlation_id=decision,
        installation=installation,
        issue=of.issue,
    )


def run_started(
    *,
    pipeline: str,
    execution_arn: str,
    version_arn: str | None,
    repository: Repository,
    installation: int | None,
    issue: int | None,
    correlation_id: str,
    at: datetime,
) -> DomainEvent:
    """The event of a run started (once per execution, whatever retried the start)."""
    return make_event(
        PipelineRunStarted(pipeline=pipeline, execution_arn=execution_arn, version_arn=version_arn),
        event_id=event_id(f"pipeline-run/{execution_arn}", 0),
        at=at,
        repository=repository,
        correlation_id=correlation_id[:200],
        installation=installation,
        issue=issue,
    )
