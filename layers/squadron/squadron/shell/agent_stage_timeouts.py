"""An agent stage that timed out for good stops its agent, and so does a parallel stage that
ended early for the agents of its other branches (docs/pipelines.md, "What the router carries
out").

When an agent stage's ``timeout`` fires and no extension is left, the compiled run enters the
stage's ``<id>.stop`` task (:mod:`squadron.domain.pipelines.compile`) before its ``on_timeout``
or its failure. The router answers it here:

* the agent's wait of that stage (its task token) is closed with a timed-out answer and marked
  sent first, so the agent's end, whenever it comes, settles nothing and moves no run (its token
  is dead anyway: Step Functions answers "gone");
* the agent, while it is the generation the stage put to work and not finished, is cancelled
  (:func:`squadron.domain.lifecycle.transitions.finish`): its record written and its task
  stopped (ECS ``StopTask``, or the local launcher's), as one decision keyed by the stop task's
  entry, carried out by the router's outbox (a redelivery resumes it, never repeats it).

An agent that moved on — to another stage, another run, or a later generation — is left as it
is: the stage it works on now is not this one.

A parallel stage that ended early (join any's first branch, a branch that failed or timed out)
enters a ``<branch>.ended`` stop task per agent branch on its way out
(:func:`squadron.domain.pipelines.own_states.stop_other_branches`). It is answered the same way,
except that a branch already over on its own — its agent's answer kept on the wait, or its own
timeout's stop — is left as it is: the first branch of a join any is not stopped for winning.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from squadron.domain.agents import TERMINAL, AgentStatus, agent_id_for
from squadron.domain.effects import Decision, split_decision
from squadron.domain.events import EventEnvelope
from squadron.domain.lifecycle.transitions import finish
from squadron.domain.pipeline_wire import STAGE_FAILED, PipelineTask, StageFailed, StageSucceeded
from squadron.domain.pipelines.agent_stage import dump_answer, subject, wake_of
from squadron.domain.pipelines.templates import PipelineTemplateError
from squadron.domain.pipelines.work import Where
from squadron.registry_ports import commit_or_resume

if TYPE_CHECKING:
    from squadron.shell.agent_stages import AgentStages
    from squadron.shell.outbox import OutboxExecutor

logger = logging.getLogger(__name__)


def _left(why: str) -> StageSucceeded:
    return StageSucceeded(output={"stopped": None, "why": why})


def stop_timed_out(
    stages: AgentStages, task: PipelineTask, where: Where, outbox: OutboxExecutor, envelope: EventEnvelope
) -> StageSucceeded:
    """Stop the agent of the timed-out stage ``task`` names (see the module); the task's answer."""
    stage_id = task.stage.split(".", 1)[0]
    try:
        wake = wake_of(task)
    except (ValidationError, PipelineTemplateError) as exc:
        return _left(f"its agent is not known: {exc}")
    number = subject(task, wake)
    if number is None:
        return _left("the run has no issue or pull request")
    agent_id = agent_id_for(task.repository_id, wake.role, number)
    wait = stages.waits.stage_wait(agent_id)
    if wait is None or wait.execution_arn != task.execution_arn or wait.stage != stage_id:
        return _left(f"{agent_id} works on no wait of this stage")
    timed_out = task.stage.endswith(".stop")
    why = "timed out" if task.stage.endswith(".expired") else "ended"
    reason = (
        f"pipeline {task.pipeline!r} stage {stage_id!r} timed out"
        if timed_out
        else f"pipeline {task.pipeline!r} branch {stage_id!r} stopped: its parallel stage {why}"
    )
    stopped = dump_answer(StageFailed.of(STAGE_FAILED, f"{reason} ({agent_id} stopped)"))
    kept = wait.answer
    if not wait.sent:
        stored = stages.waits.answer_stage_wait(agent_id, wait.entry, stopped)
        kept = stored.answer if stored is not None else None
        if timed_out or kept == stopped:
            stages.waits.mark_stage_wait_sent(agent_id, wait.entry)
    if not timed_out and kept != stopped:
        # the branch is over on its own: its agent's answer (kept first), or its timeout's stop
        return _left(f"{agent_id} ended its branch")
    key = f"pipeline-stop-{task.entry}"
    committed = stages.registry.decision(key)
    if committed is None:
        agent = stages.registry.get_agent(agent_id)
        if agent is None or agent.status in TERMINAL or agent.generation != wait.generation:
            return _left(f"{agent_id} is not the stage's agent any more")
        step = finish(agent, now=stages.clock(), reason=reason, status=AgentStatus.CANCELLED)
        split = split_decision(step.effects)
        decision, resumed = commit_or_resume(
            stages.registry,
            split.writes,
            Decision(
                key,
                stages.clock(),
                split.outside,
                installation_id=where.installation_id,
                repo_full_name=where.repo_full_name,
                repo_id=task.repository_id,
            ),
        )
    else:
        decision, resumed = committed, True
    outbox.carry_out(
        envelope,
        decision.key,
        decision.outside,
        decision.decided_at,
        resumed=resumed,
        finish=True,
    )
    logger.info("pipeline %s stage %s timed out: %s stopped", task.pipeline, stage_id, agent_id)
    output: dict[str, Any] = {"stopped": agent_id}
    return StageSucceeded(output=output)
