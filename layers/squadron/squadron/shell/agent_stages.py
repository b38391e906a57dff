"""A pipeline's agent stages, carried out by the router (docs/pipelines.md, "What the router
carries out"; the decisions are :mod:`squadron.domain.pipelines.agent_stage`'s).

:meth:`AgentStages.begin` — an agent stage's task arrived (under its entry's claim, held by
:class:`~squadron.shell.pipelines.PipelineTasks`): its wait is kept with the agent first (the task
token, :class:`~squadron.registry_ports.StageWaits`), then the agent's start or wake is committed
as a decision keyed by the entry and carried out by the router's outbox (the launch exactly once,
:mod:`squadron.shell.launching`). The token is not answered now. An attempt that stopped anywhere
is finished by the next delivery of the task: its own wait is found, and the decision resumed (or
committed, when it never was). An agent that works another stage's task still running fails this
stage with the reason; one whose earlier stage's task is over (entered again, timed out, its run
ended: :func:`~squadron.domain.pipelines.agent_stage.over`) is taken for this one.

:meth:`AgentStages.after_routing` — after the router routed an agent's :class:`TaskEnded` (or the
reconciler's :class:`RecoverAgent`): when the task's end is the stage's, the answer is kept on the
wait before it is sent, and marked sent after; a redelivered end sends a kept answer not yet
marked sent, and nothing once it was. An answer to a task that is over is "gone", and harmless. An agent that a person's event finished
(its issue closed or unassigned, its pull request closed) cancels its stage's run with why, as
that event is routed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from squadron.adapters.step_functions import Answer, RunView
from squadron.domain.agents import TERMINAL, AgentStatus, agent_id_for
from squadron.domain.commands import RecoverAgent, TaskEnded
from squadron.domain.domain_events import DomainEvent
from squadron.domain.effects import Decision
from squadron.domain.events import EventEnvelope
from squadron.domain.pipeline_events import Answered, answered
from squadron.domain.pipeline_wire import STAGE_FAILED, PipelineTask, StageAnswer, StageFailed, StageSucceeded
from squadron.domain.pipelines.agent_stage import (
    StageWait,
    Wake,
    counts,
    dump_answer,
    ending_answer,
    forgotten_answer,
    load_answer,
    over,
    put_to_work,
    subject,
)
from squadron.domain.pipelines.ended_by_others import ENDS_AGENTS, ended_by_others_answer
from squadron.domain.pipelines.work import Where
from squadron.domain.routing import RoutingPolicy, agent_envelope_problem
from squadron.errors import SquadronError
from squadron.registry_ports import StageWaits, commit_or_resume

if TYPE_CHECKING:
    from squadron.ports import Registry
    from squadron.shell.outbox import OutboxExecutor

logger = logging.getLogger(__name__)


class TokenAnswers(Protocol):
    """:class:`squadron.adapters.step_functions.Pipelines`: answer a token, or read a run."""

    def answer(self, token: str, answer: StageSucceeded | StageFailed) -> Answer: ...

    def describe(self, execution_arn: str) -> RunView | None: ...


class StageBusyError(SquadronError):
    """The agent's earlier stage is being answered now: the task is delivered again later."""


@dataclass(frozen=True)
class Waiting:
    """The stage waits for ``agent_id`` (``how``: started, woken, restarted, told, or resumed)."""

    agent_id: str
    how: str


def _now() -> datetime:
    return datetime.now(UTC)


class AgentStages:
    """Agent stages of one deployment's pipelines: ``registry`` (the router's), ``waits`` (where
    each token is kept), ``answers`` (Step Functions), ``policy`` (a repository's routing policy
    as its default branch's configuration has it now)."""

    def __init__(
        self,
        *,
        registry: Registry,
        waits: StageWaits,
        answers: TokenAnswers,
        policy: Callable[[PipelineTask, Where], RoutingPolicy],
        clock: Callable[[], datetime] = _now,
        events: Callable[[DomainEvent], bool] | None = None,
    ) -> None:
        self.registry = registry
        #: Stores the stage's ``pipeline.stage_changed.v1`` once its answer is delivered (the
        #: registry's ``record_event``); None: no event (docs/pipelines.md, "Events").
        self.events = events
        self.waits = waits
        self.answers = answers
        self.policy = policy
        self.clock = clock

    # --- a stage's task arrives ---------------------------------------------------------------

    def begin(
        self, task: PipelineTask, where: Where, wake: Wake, outbox: OutboxExecutor, envelope: EventEnvelope
    ) -> Waiting | StageFailed:
        """Put the stage's agent to work and keep its wait; a failure when it cannot be."""
        now = self.clock()
        decision_key = f"pipeline-{task.entry}"
        number = subject(task, wake)
        held = (
            self.waits.stage_wait(agent_id_for(task.repository_id, wake.role, number))
            if number is not None
            else None
        )
        if held is not None and held.entry == task.entry:
            committed = self.registry.decision(decision_key)
            if committed is not None:  # an earlier attempt committed it: carry out what is left
                self._carry_out(outbox, envelope, committed, resumed=True)
                return Waiting(held.agent_id, "resumed")
        view = self.registry.issue_view(task.repository_id, number) if number else None
        work = put_to_work(
            task,
            wake,
            view=view,
            policy=self.policy(task, where),
            repo_full_name=where.repo_full_name,
            installation_id=where.installation_id,
            now=now,
            held=held,
        )
        if isinstance(work, StageFailed):
            return work
        failed = self._hold(task, work.wait, held)
        if failed is not None:
            return failed
        decision = Decision(
            decision_key,
            now,
            work.outside,
            installation_id=where.installation_id,
            repo_full_name=where.repo_full_name,
            repo_id=task.repository_id,
        )
        decision, _ = commit_or_resume(self.registry, work.writes, decision)
        self._carry_out(outbox, envelope, decision, resumed=False)
        logger.info("pipeline %s stage %s: %s %s", task.pipeline, task.stage, work.how, work.wait.agent_id)
        return Waiting(work.wait.agent_id, work.how)

    def _hold(self, task: PipelineTask, wait: StageWait, held: StageWait | None) -> StageFailed | None:
        """Keep ``wait`` with its agent (taking over this entry's own from an earlier attempt, or a
        wait whose task is over); the failure when another stage's task still waits for it."""
        replacing = held.entry if held is not None and held.entry == task.entry else None
        kept = self.waits.hold_stage_wait(wait, replacing=replacing)
        if kept.entry == wait.entry:
            return None
        if kept.answered:
            raise StageBusyError(f"{kept.agent_id}'s answer to stage {kept.stage!r} is being sent now")
        why = over(kept, task, self.clock(), self._running(kept.execution_arn))
        if why is not None:
            logger.info("%s: stage %s is over (%s); taken for %s", kept.agent_id, kept.stage, why, task.stage)
            kept = self.waits.hold_stage_wait(wait, replacing=kept.entry)
            if kept.entry == wait.entry:
                return None
        return StageFailed.of(
            STAGE_FAILED,
            f"agent stage {task.stage!r} of pipeline {task.pipeline!r}: agent {kept.agent_id} is working "
            f"on stage {kept.stage!r} of pipeline {kept.pipeline!r} ({kept.execution_arn}) now",
        )

    def _running(self, execution_arn: str) -> bool:
        run = self.answers.describe(execution_arn)
        return run is not None and run.status == "RUNNING"

    def _carry_out(
        self, outbox: OutboxExecutor, envelope: EventEnvelope, decision: Decision, *, resumed: bool
    ) -> None:
        outbox.carry_out(
            envelope, decision.key, decision.outside, decision.decided_at, resumed=resumed, finish=True
        )
        if outbox.busy:
            done = self.registry.decision(decision.key)
            if done is None or not done.done:
                raise StageBusyError(f"decision {decision.key} is carried out by another executor now")

    # --- an agent's task ended ------------------------------------------------------------------

    def after_routing(self, envelope: EventEnvelope, ended: Iterable[str] = ()) -> dict[str, Any] | None:
        """Answer the stage an agent's routed end (or rescue) settles, or the stages of agents the
        routing of a webhook finished (``ended``, from its effects); what was done, or None."""
        if envelope.origin == "github":
            return self._ended_by_others(envelope, ended)
        command = envelope.command
        if isinstance(command, TaskEnded):
            # Only the agent's own task speaks of its end (the gateway stamps who it is): a task
            # that names another agent settles nothing, whatever the router made of it.
            if envelope.origin != "agent" or envelope.source_agent != command.agent_id:
                return None
            if agent_envelope_problem(envelope) is not None:
                return None
            return self._ended(command)
        if isinstance(command, RecoverAgent) and envelope.origin in ("squadron", "reconciler"):
            return self._rescued(command.agent_id)
        return None

    def _ended(self, command: TaskEnded) -> dict[str, Any] | None:
        wait = self.waits.stage_wait(command.agent_id)
        if wait is None or wait.sent:
            return None
        if wait.answer is not None:
            return self._send(wait, load_answer(wait.answer))
        if not counts(wait, command.launch_token):
            return None
        agent = self.registry.get_agent(command.agent_id)
        answer = ending_answer(
            wait,
            outcome=command.outcome,
            reason=command.reason,
            outputs=command.outputs,
            agent=agent,
            launch_token=command.launch_token,
        )
        if answer is None:
            answer = forgotten_answer(wait, agent)
        return self._settle(wait, answer)

    def _ended_by_others(self, envelope: EventEnvelope, ended: Iterable[str]) -> dict[str, Any] | None:
        """Agents a person's event finished (their issue closed or unassigned, their pull request
        closed) cancel their stages' runs at once with why, rather than leave them to the stages'
        timeouts. The
        agents are those the routing finished now (``ended``) and, for an event that ends agents,
        every agent of its issue or pull request found finished: a delivery again after an
        attempt that stopped between the routing and the answer finds the same."""
        ids = set(ended)
        number = envelope.subject_number
        if number is not None and (envelope.event, envelope.action) in ENDS_AGENTS:
            ids |= {a.agent_id for a in self.registry.issue_view(envelope.repository.id, number).agents}
        settled = []
        for agent_id in sorted(ids):
            wait = self.waits.stage_wait(agent_id)
            if wait is None or wait.sent:
                continue
            if wait.answer is not None:
                settled.append(self._send(wait, load_answer(wait.answer)))
                continue
            done = self._settle(wait, ended_by_others_answer(wait, self.registry.get_agent(agent_id)))
            if done is not None:
                settled.append(done)
        return {"ended": settled} if settled else None

    def _rescued(self, agent_id: str) -> dict[str, Any] | None:
        """The reconciler's rescue escalated or ended the agent: its stage fails with why."""
        wait = self.waits.stage_wait(agent_id)
        if wait is None or wait.sent:
            return None
        if wait.answer is not None:
            return self._send(wait, load_answer(wait.answer))
        agent = self.registry.get_agent(agent_id)
        answer: StageAnswer | None
        if (
            agent is not None
            and agent.generation == wait.generation
            and agent.status is AgentStatus.ESCALATED
        ):
            answer = ending_answer(wait, outcome="escalated", reason="", outputs={}, agent=agent)
        else:
            answer = forgotten_answer(wait, agent) if agent is None or agent.status in TERMINAL else None
        return self._settle(wait, answer)

    def _settle(self, wait: StageWait, answer: StageAnswer | None) -> dict[str, Any] | None:
        if answer is None:
            return None
        stored = self.waits.answer_stage_wait(wait.agent_id, wait.entry, dump_answer(answer))
        if stored is None or stored.answer is None:
            return None  # another stage's wait now
        return self._send(stored, load_answer(stored.answer))

    def _send(self, wait: StageWait, answer: StageAnswer) -> dict[str, Any]:
        sent = self.answers.answer(wait.token, answer)
        if sent.delivered:
            self._report(wait, answer)
        self.waits.mark_stage_wait_sent(wait.agent_id, wait.entry)
        outcome = "passed" if isinstance(answer, StageSucceeded) else answer.error
        if sent.gone is not None:
            logger.info(
                "pipeline %s stage %s: its task is over (%s); %s's answer changes nothing",
                wait.pipeline,
                wait.stage,
                sent.gone,
                wait.agent_id,
            )
        return {
            "stage": wait.stage,
            "agent": wait.agent_id,
            "answered": sent.delivered,
            "gone": sent.gone,
            "outcome": outcome,
        }

    def _report(self, wait: StageWait, answer: StageAnswer) -> None:
        """The stage's transition event, once its answer is delivered: keyed by the entry, it is
        stored once however often the answer is (a redelivered end, a kept answer sent again). An
        answer to a task that is over moves no run and reports nothing (unlike the router's own
        answers, it may come long after: a stage timed out while the agent worked). A wait kept
        without its repository's name (before waits kept it) has none."""
        if self.events is None or wait.repo_full_name is None:
            return
        self.events(
            answered(
                Answered(
                    entry=wait.entry,
                    pipeline=wait.pipeline,
                    execution_arn=wait.execution_arn,
                    stage=wait.stage,
                    stage_type="agent",
                    step="stage",
                    entered_at=wait.entered_at or wait.created_at,
                    retry_count=wait.retry_count,
                    repository_id=wait.repository_id,
                    issue=wait.issue_number,
                ),
                answer,
                repository=wait.repo_full_name,
                installation=wait.installation_id,
                at=self.clock(),
            )
        )
