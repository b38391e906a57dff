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

from datetime import datetime

from squadron.domain.domain_events import (
    DomainEvent,
    PipelineRunStarted,
    PipelineStageChanged,
    Repository,
    event_id,
    make_event,
)
from squadron.domain.pipeline_wire import PipelineTask, StageAnswer, StageSucceeded


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
    if isinstance(answer, StageSucceeded):
        passed = answer.output.get("passed")
        data = PipelineStageChanged(
            pipeline=task.pipeline,
            execution_arn=task.execution_arn,
            stage=task.stage,
            stage_type=task.stage_type,
            step=task.step,
            entered_at=task.entered_at,
            retry_count=task.retry_count,
            outcome="skipped" if answer.output.get("skipped") is True else "succeeded",
            passed=passed if isinstance(passed, bool) else None,
        )
    else:
        data = PipelineStageChanged(
            pipeline=task.pipeline,
            execution_arn=task.execution_arn,
            stage=task.stage,
            stage_type=task.stage_type,
            step=task.step,
            entered_at=task.entered_at,
            retry_count=task.retry_count,
            outcome="failed",
            error=answer.error,
        )
    decision = stage_decision(task)
    return make_event(
        data,
        event_id=event_id(f"{decision}/stage_changed", 0),
        at=at,
        repository=Repository(id=task.repository_id, full_name=repository),
        correlation_id=decision,
        installation=installation,
        issue=task.issue_number,
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
