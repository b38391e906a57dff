"""A pipeline's task on events.fifo: what the router does with a waiting stage's message
(docs/pipelines.md, "How a pipeline runs").

A compiled pipeline's stage puts a :class:`~squadron.domain.pipeline_wire.PipelineTask` on
events.fifo and waits for its token; :class:`~squadron.shell.dispatch.Dispatcher` hands such a
record here instead of reading it as an event envelope. :meth:`PipelineTasks.handle`:

* refuses a task whose execution is not one of its repository's own state machines
  (:func:`~squadron.domain.pipeline_wire.origin_problem`): a message that names one repository's
  run from another's, or from outside the deployment, is not answered, so no token of another
  run is touched;
* answers every other task. This release carries out no stage work yet (agents, gates, humans,
  actions, webhooks and the steps around them): each task is failed with
  :data:`~squadron.domain.pipeline_wire.STAGE_REJECTED` and a cause that says so, and the run
  takes its failure path and ends failed with that reason, rather than the message going to the
  dead-letter queue or the run waiting out its timeout.

An answer to a task that is over (answered already, timed out, its run stopped) is "gone": the
same message delivered twice answers once and is harmless the second time.
"""

from __future__ import annotations

from typing import Any, Protocol

from squadron.adapters.step_functions import Answer
from squadron.domain.pipeline_wire import (
    STAGE_REJECTED,
    PipelineTask,
    StageFailed,
    StageSucceeded,
    origin_problem,
)


class TaskAnswers(Protocol):
    """What answers a task token (:class:`squadron.adapters.step_functions.Pipelines`)."""

    def answer(self, token: str, answer: StageSucceeded | StageFailed) -> Answer: ...


def not_carried_out(task: PipelineTask) -> StageFailed:
    """The answer to a task this release does not carry out: the reason, for the run's history."""
    return StageFailed.of(
        STAGE_REJECTED,
        f"this deployment does not carry out pipeline tasks yet: {task.step} of {task.stage_type} "
        f"stage {task.stage!r} of pipeline {task.pipeline!r} (see docs/pipelines.md)",
    )


class PipelineTasks:
    """The router's side of the pipelines of one deployment (state machines ``<prefix>-*``)."""

    def __init__(self, answers: TaskAnswers, *, prefix: str) -> None:
        self.answers = answers
        self.prefix = prefix

    def handle(self, task: PipelineTask) -> dict[str, Any]:
        """Refuse or answer ``task``; a summary of what was done (the dispatcher's answer)."""
        summary: dict[str, Any] = {
            "pipeline_task": task.stage,
            "pipeline": task.pipeline,
            "execution": task.execution_arn,
            "step": task.step,
        }
        problem = origin_problem(task, self.prefix)
        if problem is not None:
            return {**summary, "refused": problem, "answered": False, "gone": None}
        sent = self.answers.answer(task.task_token, not_carried_out(task))
        return {**summary, "refused": None, "answered": sent.delivered, "gone": sent.gone}
