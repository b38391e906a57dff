"""A pipeline's task on events.fifo: what the router does with a waiting stage's message
(docs/pipelines.md, "How a pipeline runs" and "What the router carries out").

A compiled pipeline's stage puts a :class:`~squadron.domain.pipeline_wire.PipelineTask` on
events.fifo and waits for its token; :class:`~squadron.shell.dispatch.Dispatcher` hands such a
record here instead of reading it as an event envelope. :meth:`PipelineTasks.handle`:

* refuses a task whose execution is not one of its repository's own state machines
  (:func:`~squadron.domain.pipeline_wire.origin_problem`): a message that names one repository's
  run from another's, or from outside the deployment, is not answered, so no token of another
  run is touched;
* carries out the work that needs no waiting (:mod:`squadron.domain.pipelines.work` says what it
  is): a gate, a stage's condition and a delay's poll are judged against what GitHub says now
  (:class:`~squadron.shell.pipeline_facts.GitHubFacts`, :mod:`squadron.domain.pipelines.judge`);
  an action stage, the pipeline's ``on_complete`` / ``on_error`` actions, an escalation, a
  notification and a reminder are outside effects committed as a decision keyed by the task's
  entry and carried out by the router's outbox (:class:`~squadron.shell.outbox.OutboxExecutor`),
  each once; a webhook stage is called (:class:`~squadron.adapters.webhooks.Webhooks`);
* keeps a human stage waiting for people (:mod:`squadron.shell.human_stages`, when ``humans`` is
  wired): its entry comment and assignment are the decision's effects, and the task is answered
  later, by the event that completes it (:meth:`PipelineTasks.answer_waiting`);
* puts an agent stage's role to work and keeps the task's token with the agent
  (:class:`~squadron.shell.agent_stages.AgentStages`): the token is answered when the agent's
  task ends, not now;
* answers every other task with :data:`~squadron.domain.pipeline_wire.STAGE_REJECTED` and the reason, so the run
  takes its failure path rather than waiting out its timeout.

Exactly once: the task's entry (:attr:`~squadron.domain.pipeline_wire.PipelineTask.entry`) is
claimed first (the registry's keyed-write claims); the answer is recorded before it is sent and
marked sent after. The same message delivered again sends a recorded answer that was not yet
marked sent, and nothing once it was; effects are the decision's, carried out once under their
keys. A webhook whose earlier attempt may have called it (claimed, no answer recorded) is not
called again: the stage fails saying so (its ``on_error`` retry is a new entry, and calls it).
An answer to a task that is over (timed out, its run stopped) is "gone" and harmless; an action or
webhook stage's answer gone because its timeout ran out first (its work carried out) is kept for
the stage's next entry, its extension, which takes it rather than carry the work out again.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from pydantic import TypeAdapter, ValidationError

from squadron.adapters.step_functions import Answer
from squadron.adapters.webhooks import WebhookResult
from squadron.domain.domain_events import DomainEvent
from squadron.domain.effects import Decision
from squadron.domain.events import EventEnvelope
from squadron.domain.pipeline_events import stage_changed
from squadron.domain.pipeline_wire import (
    RUN_CANCELLED,
    STAGE_FAILED,
    STAGE_REJECTED,
    TASK_INVALID,
    PipelineTask,
    StageAnswer,
    StageFailed,
    StageSucceeded,
    origin_problem,
)
from squadron.domain.pipelines.agent_stage import Wake
from squadron.domain.pipelines.judge import Facts, condition_holds
from squadron.domain.pipelines.models import HumanStage
from squadron.domain.pipelines.repo_paths import paths_read
from squadron.domain.pipelines.templates import PipelineTemplateError
from squadron.domain.pipelines.work import (
    Act,
    Call,
    Judge,
    Refuse,
    Where,
    judged,
    numbers_read,
    safe_plan,
    webhook_answer,
)
from squadron.errors import SquadronError
from squadron.registry_ports import WriteClaims
from squadron.shell.agent_stage_timeouts import stop_timed_out
from squadron.shell.agent_stages import AgentStages, Waiting
from squadron.shell.human_stages import HumanStages
from squadron.shell.outbox import OutboxExecutor

logger = logging.getLogger(__name__)


class TaskAnswers(Protocol):
    """What answers a task token (:class:`squadron.adapters.step_functions.Pipelines`)."""

    def answer(self, token: str, answer: StageSucceeded | StageFailed) -> Answer: ...


class ChildRuns(Protocol):
    """What stops the child runs a run started (:class:`squadron.adapters.step_functions.Pipelines`)."""

    def stop_children(self, execution_arn: str, *, error: str, cause: str) -> list[str]: ...


class FactsReader(Protocol):
    """:class:`squadron.shell.pipeline_facts.GitHubFacts`."""

    def facts(
        self, where: Where, number: int, others: tuple[int, ...] = (), paths: tuple[str, ...] = ()
    ) -> Facts: ...


class WebhookCaller(Protocol):
    """:class:`squadron.adapters.webhooks.Webhooks`."""

    def call(self, method: str, url: str, headers: dict[str, str], body: Any) -> WebhookResult: ...


class BusyError(SquadronError):
    """Another executor carries the task's decision out now: the message is retried later."""


def not_carried_out(task: PipelineTask, why: str = "") -> StageFailed:
    """The answer to a task this router does not carry out: the reason, for the run's history."""
    return StageFailed.of(
        STAGE_REJECTED,
        f"this router does not carry out {task.step} of {task.stage_type} stage {task.stage!r} of "
        f"pipeline {task.pipeline!r}{': ' + why if why else ''} (see docs/pipelines.md)",
    )


def _dump(answer: StageAnswer) -> dict[str, Any]:
    if isinstance(answer, StageSucceeded):
        return {"output": answer.output}
    return {"error": answer.error, "cause": answer.cause}


def _load(value: dict[str, Any]) -> StageAnswer:
    if "error" in value:
        return StageFailed(error=value["error"], cause=value.get("cause", ""))
    return StageSucceeded(output=value.get("output") or {})


def _now() -> datetime:
    return datetime.now(UTC)


class _Waiting:
    """A human stage's task left waiting for people (answered by the event that completes it)."""


WAITING = _Waiting()
_HUMAN = TypeAdapter(HumanStage)


class PipelineTasks:
    """The router's side of the pipelines of one deployment (state machines ``<prefix>_*``).

    Without ``outbox`` (the router's collaborators for effects), ``claims`` (the registry's keyed
    claims, where each task's answer is kept), ``facts`` and ``where`` (the
    repository a run's id names: its full name and installation), every task from one of its
    repository's own runs is answered :data:`STAGE_REJECTED` (nothing is carried out).
    """

    def __init__(
        self,
        answers: TaskAnswers,
        *,
        prefix: str,
        outbox: Callable[[], OutboxExecutor] | None = None,
        claims: WriteClaims | None = None,
        facts: FactsReader | None = None,
        webhooks: WebhookCaller | None = None,
        where: Callable[[int], Where | None] | None = None,
        clock: Callable[[], datetime] = _now,
        humans: HumanStages | None = None,
        events: Callable[[DomainEvent], bool] | None = None,
        where_for: Callable[[PipelineTask], Where | None] | None = None,
        agents: AgentStages | None = None,
        runs: ChildRuns | None = None,
    ) -> None:
        #: Stops the child runs a parallel stage's sub-pipeline branches left (None: such a task
        #: is answered :data:`STAGE_REJECTED`, and its run goes on all the same).
        self.runs = runs
        #: Carries out agent stages (None: they are answered :data:`STAGE_REJECTED`).
        self.agents = agents
        self.answers = answers
        #: The human stages' waits (None: a human stage is answered STAGE_REJECTED).
        self.humans = humans
        self.prefix = prefix
        self.outbox = outbox
        self.claims = claims
        self.facts = facts
        self.webhooks = webhooks
        self.where = where
        self.clock = clock
        #: Stores a run's ``pipeline.stage_changed.v1`` once (the registry's ``record_event``);
        #: None: no event (docs/pipelines.md, "Events").
        self.events = events
        #: The repository a task's run was started for, read from the run itself
        #: (:class:`squadron.shell.pipeline_where.RunRepositories`); takes the place of ``where``.
        self.where_for = where_for

    def handle(self, task: PipelineTask) -> dict[str, Any]:
        """Refuse, carry out and answer ``task``; a summary of what was done (the dispatcher's answer)."""
        summary: dict[str, Any] = {
            "pipeline_task": task.stage,
            "pipeline": task.pipeline,
            "execution": task.execution_arn,
            "step": task.step,
        }
        problem = origin_problem(task, self.prefix)
        if problem is not None:
            return {**summary, "refused": problem, "answered": False, "gone": None}
        looked = self.where_for is not None or self.where is not None
        if self.where_for is not None:
            where = self.where_for(task)
        else:
            where = self.where(task.repository_id) if self.where is not None else None
        if self.outbox is None or self.claims is None or self.facts is None or where is None:
            why = (
                ""
                if where is not None or not looked
                else f"repository {task.repository_id} is not known here"
            )
            refused = not_carried_out(task, why)
            self._report(task, refused, where)
            sent = self.answers.answer(task.task_token, refused)
            return {**summary, "refused": None, "answered": sent.delivered, "gone": sent.gone}
        return {**summary, "refused": None, **self._carry_out(task, where, self.outbox())}

    def _carry_out(self, task: PipelineTask, where: Where, outbox: OutboxExecutor) -> dict[str, Any]:
        registry = self.claims
        assert registry is not None
        scope = f"pipeline-{task.repository_id}"
        key = task.entry
        held = registry.claim_write(scope, key, self.clock())
        if held is not None and isinstance(held.result, dict):
            recorded = held.result
            if "waiting" in recorded:
                return {
                    "answered": False,
                    "gone": None,
                    "waiting": recorded["waiting"],
                    "once": "waiting already",
                }
            if recorded.get("sent"):
                return {"answered": False, "gone": None, "once": "answered already"}
            if recorded.get("waiting"):
                return {"answered": False, "gone": None, "once": "waiting already"}
            answer = _load(recorded["answer"])
        elif (carried := self._carried(task, registry, scope)) is not None:
            answer = carried
            registry.record_write(scope, key, {"answer": _dump(answer), "sent": False})
        else:
            decided = self._decide(task, where, outbox, again=held is not None)
            if isinstance(decided, _Waiting):
                registry.record_write(scope, key, {"waiting": True})
                return {"answered": False, "gone": None, "outcome": "waiting"}
            if isinstance(decided, Waiting):
                registry.record_write(scope, key, {"waiting": decided.agent_id})
                return {"answered": False, "gone": None, "waiting": decided.agent_id, "how": decided.how}
            answer = decided
            registry.record_write(scope, key, {"answer": _dump(answer), "sent": False})
        self._report(task, answer, where)
        sent = self.answers.answer(task.task_token, answer)
        if sent.gone == TIMED_OUT and _carries(task):
            # carried out, but the stage's timeout ran out first: its extension's entry takes it
            # (kept before this entry is marked sent, so a retry after a failure here keeps it)
            carry = carry_key(task)
            registry.claim_write(scope, carry, self.clock())
            registry.record_write(scope, carry, {"answer": _dump(answer), "from": key})
        registry.record_write(scope, key, {"answer": _dump(answer), "sent": True})
        outcome = "passed" if isinstance(answer, StageSucceeded) else answer.error
        return {"answered": sent.delivered, "gone": sent.gone, "outcome": outcome}

    def _carried(self, task: PipelineTask, registry: WriteClaims, scope: str) -> StageAnswer | None:
        """The answer an earlier entry of this action or webhook stage carried out and found gone
        (its timeout ran out first), for this entry, which its extension made: the comment is not
        posted again, the webhook not called again. Taken by one entry only (marked before this
        entry's answer is kept, so this entry delivered again takes it again, and a later entry
        of the stage, a loop back, never does); None when there is none to take."""
        if not _carries(task):
            return None
        carry = carry_key(task)
        held = registry.claim_write(scope, carry, self.clock())
        result = held.result if held is not None else None
        if not isinstance(result, dict) or "answer" not in result:
            return None
        if result.get("taken") not in (None, task.entry):
            return None
        if result.get("taken") is None:
            registry.record_write(scope, carry, {**result, "taken": task.entry})
        logger.info(
            "stage %s of %s: the answer of its timed-out entry, carried", task.stage, task.execution_arn
        )
        return _load(result["answer"])

    def _report(self, task: PipelineTask, answer: StageAnswer, where: Where | None) -> None:
        """The transition's event, stored before the answer is sent (keyed by the task's entry:
        once, however often the answer is sent). A repository not known here has none."""
        if self.events is not None and where is not None:
            self.events(
                stage_changed(
                    task,
                    answer,
                    repository=where.repo_full_name,
                    installation=where.installation_id,
                    at=self.clock(),
                )
            )

    def _decide(
        self, task: PipelineTask, where: Where, outbox: OutboxExecutor, *, again: bool
    ) -> StageAnswer | _Waiting | Waiting:
        """The task's answer, its effects committed and carried out first. ``again``: an earlier
        attempt claimed the task and stopped before recording its answer."""
        if task.stage_type == "human" and task.step == "stage" and self.humans is not None:
            return self._wait(task, where, outbox, self.humans, again=again)
        if task.stage_type == "agent" and task.step == "stop":
            if self.agents is None:
                return not_carried_out(task, "no agent stages are wired")
            return stop_timed_out(self.agents, task, where, outbox, _envelope(task, where, self.clock()))
        if task.stage_type == "action" and task.step == "stop":
            return self._stop_child_runs(task)
        work = safe_plan(task, where)
        if isinstance(work, Refuse):
            return work.answer
        if isinstance(work, Judge):
            assert self.facts is not None
            try:
                if task.issue_number is None:
                    raise _NoSubject
                facts = self.facts.facts(
                    where, task.issue_number, numbers_read(work, task), paths_read(work.checks)
                )
                result = judged(work, facts, task.input)
            except PipelineTemplateError as exc:
                return StageFailed.of(STAGE_FAILED, f"stage {task.stage!r}: {exc}")
            except _NoSubject:
                return StageFailed.of(
                    STAGE_FAILED, f"stage {task.stage!r}: the run has no issue or pull request to judge"
                )
            if isinstance(result, StageSucceeded):
                return result
            work = result
        if isinstance(work, Call):
            return self._call(task, work, again=again)
        if isinstance(work, Wake):
            if self.agents is None:
                return not_carried_out(task, "no agent stages are wired")
            return self.agents.begin(task, where, work, outbox, _envelope(task, where, self.clock()))
        return self._act(task, where, work, outbox, again=again)

    def _stop_child_runs(self, task: PipelineTask) -> StageAnswer:
        """A parallel stage that ended early (or timed out) with sub-pipeline branches: the child
        runs of the task's run still running are stopped (none is legitimately at work then: its
        stages run one at a time, and the stage's other branches are over). Stopping a run that
        is over is nothing, so a task delivered again stops nothing twice."""
        if self.runs is None:
            return not_carried_out(task, "no child runs can be stopped here")
        stage = task.stage.split(".", 1)[0]
        stopped = self.runs.stop_children(
            task.execution_arn,
            error=RUN_CANCELLED,
            cause=f"pipeline {task.pipeline!r} stage {stage!r} ended before its sub-pipeline branch",
        )
        return StageSucceeded(output={"stopped": len(stopped)})

    def _wait(
        self, task: PipelineTask, where: Where, outbox: OutboxExecutor, humans: HumanStages, *, again: bool
    ) -> StageAnswer | _Waiting:
        """A human stage: skipped when its condition is false; else its wait kept, then its entry
        comment and assignment carried out (a decision keyed by the entry), and no answer yet."""
        try:
            stage = _HUMAN.validate_python(task.step_config)
        except ValidationError as exc:
            first = exc.errors()[0]
            at = ".".join(str(part) for part in first["loc"]) or "config"
            return StageFailed.of(
                TASK_INVALID,
                f"human stage {task.stage!r}: its configuration is not one this router reads "
                f"({at}: {first['msg']})",
            )
        if task.issue_number is None:
            return StageFailed.of(
                STAGE_FAILED, f"human stage {task.stage!r}: the run has no issue or pull request to wait on"
            )
        if stage.condition is not None:
            assert self.facts is not None
            try:
                facts = self.facts.facts(where, task.issue_number)
                if not condition_holds(stage.condition, facts, task.input):
                    return StageSucceeded(output={"skipped": True})
            except PipelineTemplateError as exc:
                return StageFailed.of(STAGE_FAILED, f"stage {task.stage!r}: {exc}")
        try:
            opened = humans.enter(task, stage, where, self.clock())
        except PipelineTemplateError as exc:
            return StageFailed.of(STAGE_FAILED, f"stage {task.stage!r}: {exc}")
        if opened.wait.extends is not None and opened.wait.answer is not None:
            return StageSucceeded(output=opened.wait.answer)  # an extension its people answered
        if opened.effects:
            # What GitHub refused for good is recorded for operators; the stage waits all the same.
            self._act(task, where, Act(opened.effects, {}), outbox, again=again)
        return WAITING

    def answer_waiting(self, event: EventEnvelope) -> dict[str, Any]:
        """The router's hook for an event that may answer a waiting stage (its human stages' waits:
        :meth:`~squadron.shell.human_stages.HumanStages.answer_from`); a summary, empty when none."""
        if self.humans is None:
            return {}
        return self.humans.answer_from(event)

    def _call(self, task: PipelineTask, call: Call, *, again: bool) -> StageAnswer:
        if again:
            return StageFailed.of(
                STAGE_FAILED,
                f"webhook {call.method} {call.url}: an earlier attempt of this task may have called it "
                "and stopped before its answer was kept; it is not called twice",
            )
        if self.webhooks is None:
            return not_carried_out(task, "no webhook caller is wired")
        result = self.webhooks.call(call.method, call.url, call.headers, call.body)
        return webhook_answer(call, result.status or 0, result.reason, result.body, cut=result.cut)

    def _act(
        self, task: PipelineTask, where: Where, act: Act, outbox: OutboxExecutor, *, again: bool
    ) -> StageAnswer:
        if not act.effects:
            return StageSucceeded(output=act.output)
        registry = outbox.registry
        decision_key = f"pipeline-{task.entry}"
        now = self.clock()
        committed = registry.decision(decision_key) if again else None
        if committed is None:
            registry.commit(
                (),
                Decision(
                    decision_key,
                    now,
                    act.effects,
                    installation_id=where.installation_id,
                    repo_full_name=where.repo_full_name,
                    repo_id=task.repository_id,
                ),
            )
        decided_at = committed.decided_at if committed is not None else now
        outbox.carry_out(
            _envelope(task, where, decided_at),
            decision_key,
            act.effects,
            decided_at,
            resumed=committed is not None,
            finish=True,
        )
        if outbox.busy:
            done = registry.decision(decision_key)
            if done is None or not done.done:
                raise BusyError(f"decision {decision_key} is carried out by another executor now")
        if outbox.failed:
            return StageFailed.of(
                STAGE_FAILED,
                f"stage {task.stage!r}: GitHub refused {', '.join(outbox.failed)} (see `squadron` failed effects)",
            )
        return StageSucceeded(output=act.output)


#: Step Functions' answer to a task token whose task's timeout ran out.
TIMED_OUT = "TaskTimedOut"


def _carries(task: PipelineTask) -> bool:
    """Whether the task's answer may be carried to its stage's next entry: an action or webhook
    stage (or branch) doing its work, whose effects the router carries out at once."""
    return task.step == "stage" and task.stage_type in ("action", "webhook")


def carry_key(task: PipelineTask) -> str:
    """Where an answer found gone waits for the stage's next entry: the run and the stage."""
    return "carry-" + hashlib.sha256(f"{task.execution_arn}/{task.stage}".encode()).hexdigest()


class _NoSubject(Exception):
    pass


def _envelope(task: PipelineTask, where: Where, at: datetime) -> EventEnvelope:
    """The outbox's view of the task: a framework message of its repository (what an effect refused
    for good is recorded against)."""
    return EventEnvelope.model_validate(
        {
            "delivery_id": f"pipeline-{task.entry}",
            "event": "squadron",
            "action": "pipeline_task",
            "origin": "squadron",
            "received_at": at,
            "occurred_at": at,
            "installation_id": where.installation_id,
            "repository": {"id": task.repository_id, "full_name": where.repo_full_name},
            "sender": {"login": "squadron[bot]", "id": 0, "type": "Bot"},
        }
    )
