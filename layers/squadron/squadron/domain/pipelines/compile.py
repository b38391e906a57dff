"""A validated pipeline compiled to Amazon States Language — pure (docs/pipelines.md, "How a
pipeline runs").

:func:`compile_pipeline` turns one pipeline of a repository's ``pipelines:`` (already checked by
:mod:`.checks`) into a Step Functions definition. The state machine owns waiting and the
router owns work:

* an ``agent``, ``human``, ``gate``, ``action`` or ``webhook`` stage is a task
  ``sqs:sendMessage.waitForTaskToken`` to events.fifo (:func:`~squadron.domain.pipeline_wire.task_parameters`:
  the issue's message group, ``$$.Task.Token``), state named after the stage, carrying the
  stage's configuration as compiled: the router does the work and answers the token;
* a ``delay`` is a ``Wait`` (with a poll: a loop of ``Wait`` and a check task, bounded by the
  delay); a ``parallel`` stage is a ``Parallel`` (join any: each branch ends with a ``Fail`` of
  :data:`~squadron.domain.pipeline_wire.JOIN_ANY` that the ``Parallel`` catches); a ``pipeline``
  stage or branch is a child execution (``startExecution.sync:2``) of the sub-pipeline's
  published version;
* transitions (``on_complete``, ``on_pass``, ``on_success``, ``skip_to``, a gate's ``on_fail``
  with its iteration count, ``on_error`` after its retries, ``on_conflict``) are ``Next``,
  ``Choice`` states on the router's answer (``passed``, ``skipped``), ``Retry`` and ``Catch``;
* a stage's ``timeout`` is ``TimeoutSeconds`` caught to its ``on_timeout`` (notify, extend up to
  ``max_extensions`` times, then fail, escalate or cancel); a parallel stage's is each branch's
  without a timeout of its own; a human stage's reminders are a loop running beside its wait;
* the run ends through ``__complete__`` (the pipeline's ``on_complete`` actions), ``__escalate__``
  (escalation, then ``on_error``), ``__fail__`` (``on_error``) or ``__cancel__``.

A run's state: ``squadron`` (the run input's), ``data`` (what a stage's task gets as input:
``trigger``, the run input's ``data``; ``context``, the pipeline's; ``stages``, each finished
stage's output under :func:`state_key` of its id), ``counts`` (loops, extensions, polls,
reminders) and ``timeouts`` (a stage's current timeout when it may be extended).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from squadron.domain.pipeline_wire import (
    MERGE_CONFLICT,
    RUN_CANCELLED,
    RUN_ESCALATED,
    RUN_FAILED,
    SEND_AND_WAIT,
    STAGE_FAILED,
    StageType,
    Step,
    task_parameters,
)
from squadron.domain.pipelines import own_states
from squadron.domain.pipelines.asl import (
    CANCEL,
    COMPLETE,
    CONTEXT,
    ESCALATE,
    ESCALATED,
    FAIL,
    FAILED,
    FRESH,
    INPUT,
    MAX_STATE_NAME,
    RESTART,
    RESTART_FROM,
    START,
    SUCCEEDED,
    TIMEOUT_ERRORS,
    canonical,
    dump,
    is_set,
    reachable,
    state_key,
)
from squadron.domain.pipelines.models import (
    AgentStage,
    DelayStage,
    GateStage,
    Goto,
    MergePrStage,
    ParallelStage,
    Pipeline,
    PipelineBranch,
    PipelineStage,
)
from squadron.domain.pipelines.reactions import restarts

#: Step Functions' largest state machine definition we publish (bytes of its JSON); a pipeline
#: past it is refused with the reason, never published cut.
MAX_DEFINITION_BYTES = 256 * 1024

#: The stage types whose one task the router answers (the others compile to Step Functions' own
#: states, and check their ``condition`` in a task of their own before them).
_ROUTER_TYPES: frozenset[str] = frozenset({"agent", "gate", "human", "action", "webhook"})


class CompileError(ValueError):
    """A pipeline that cannot become a state machine; ``problem`` says why."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(problem)


@dataclass(frozen=True)
class Compiled:
    """A pipeline's definition: the ASL, its canonical JSON text, and the digest stamped in its tasks."""

    pipeline: str
    definition: dict[str, Any]
    text: str
    digest: str


def compile_pipeline(
    name: str,
    pipelines: Mapping[str, Pipeline],
    *,
    queue_url: str,
    repository_id: int,
    children: Mapping[str, str],
) -> Compiled:
    """``pipelines[name]`` as a state machine definition.

    ``children`` maps each sub-pipeline this one starts to the version ARN it runs (published
    first: a run of this version keeps its children's versions too). Raises :class:`CompileError`
    for a sub-pipeline without an ARN, a step configuration past the wire's bound, or a definition
    past :data:`MAX_DEFINITION_BYTES`.
    """
    pipeline = pipelines[name]
    used = sorted(_sub_pipelines(pipeline))
    missing = [child for child in used if child not in children]
    if missing:
        raise CompileError(f"pipeline {name!r}: no published version of sub-pipeline(s) {', '.join(missing)}")
    digest = hashlib.sha256(
        canonical(
            {
                "name": name,
                "repository_id": repository_id,
                "pipeline": dump(pipeline),
                "children": {child: children[child] for child in used},
            }
        ).encode("utf-8")
    ).hexdigest()
    builder = _Builder(
        name, pipeline, queue_url=queue_url, repository_id=repository_id, digest=digest, children=children
    )
    definition = builder.build()
    text = canonical(definition)
    size = len(text.encode("utf-8"))
    if size > MAX_DEFINITION_BYTES:
        raise CompileError(
            f"pipeline {name!r} compiles to a state machine of {size} bytes, over Step Functions' "
            f"{MAX_DEFINITION_BYTES} (fewer stages, branches or shorter texts)"
        )
    return Compiled(name, definition, text, digest)


def _sub_pipelines(pipeline: Pipeline) -> set[str]:
    found: set[str] = set()
    for stage in pipeline.stages:
        if isinstance(stage, PipelineStage):
            found.add(stage.pipeline)
        elif isinstance(stage, ParallelStage):
            found |= {b.pipeline for b in stage.branches if isinstance(b, PipelineBranch)}
    return found


class _Builder:
    """One pipeline's states, built stage by stage; terminal states only when something goes there."""

    def __init__(
        self,
        name: str,
        pipeline: Pipeline,
        *,
        queue_url: str,
        repository_id: int,
        digest: str,
        children: Mapping[str, str],
    ) -> None:
        self.name = name
        self.pipeline = pipeline
        self.queue_url = queue_url
        self.repository_id = repository_id
        self.digest = digest
        self.children = children
        self.states: dict[str, dict[str, Any]] = {}
        self.counts: dict[str, dict[str, int]] = {}
        self.timeouts: dict[str, int] = {}
        self.index = {stage.id: position for position, stage in enumerate(pipeline.stages)}

    # --- the whole machine ------------------------------------------------------------------

    def build(self) -> dict[str, Any]:
        for position, stage in enumerate(self.pipeline.stages):
            self._stage(position, stage)
        self._terminals()
        first = self.entry(self.pipeline.stages[0].id)
        fresh = START
        if restarts(self.pipeline):
            fresh = self._restart_entry(first)
        self.states[fresh] = {
            "Type": "Pass",
            "Parameters": {
                "squadron.$": "$.squadron",
                "data": {"trigger.$": "$.data", "stages": {}},
                "counts": self.counts,
                "timeouts": self.timeouts,
            },
            "Next": CONTEXT,
        }
        self.states[CONTEXT] = {**self._context(), "Next": first}
        states = reachable(START, self.states)
        for state in states:
            if len(state) > MAX_STATE_NAME:  # ids are at most 64 characters, suffixes at most 12
                raise CompileError(f"state name {state!r} is over {MAX_STATE_NAME} characters")
        return {
            "Comment": f"squadron pipeline {self.name} ({self.digest})",
            "StartAt": START,
            "TimeoutSeconds": self.pipeline.timeout,
            "States": states,
        }

    def _restart_entry(self, first: str) -> str:
        """A run that may be restarted part-way (its ``on_events`` restart or re-evaluate): a
        ``Choice`` first. A run whose input has ``restart`` (:mod:`squadron.domain.pipelines.reactions`)
        takes its stages' outputs, counts, timeouts and context from there and begins at
        ``restart.from``;
        any other run starts as usual. The name of the state that starts as usual."""
        self.states[START] = {
            "Type": "Choice",
            "Choices": [{"Variable": "$.restart.from", "IsPresent": True, "Next": RESTART}],
            "Default": FRESH,
        }
        self.states[RESTART] = {
            "Type": "Pass",
            "Parameters": {
                "squadron.$": "$.squadron",
                # the run's context as it was, with the handler's on top (reactions.with_context)
                "data": {
                    "trigger.$": "$.data",
                    "stages.$": "$.restart.stages",
                    "context.$": "$.restart.context",
                },
                "counts.$": "$.restart.counts",
                "timeouts.$": "$.restart.timeouts",
                "restart_from.$": "$.restart.from",
            },
            "Next": RESTART_FROM,
        }
        self.states[RESTART_FROM] = {
            "Type": "Choice",
            "Choices": [
                {"Variable": "$.restart_from", "StringEquals": stage.id, "Next": self.entry(stage.id)}
                for stage in self.pipeline.stages
            ],
            "Default": first,
        }
        return FRESH

    def _context(self) -> dict[str, Any]:
        # a literal (``Result``): the repository's context is data, never read as a path
        return {"Type": "Pass", "Result": self.pipeline.context, "ResultPath": "$.data.context"}

    def _terminals(self) -> None:
        on_error = [dump(action) for action in self.pipeline.on_error]
        on_complete = [dump(action) for action in self.pipeline.on_complete]
        self.states[SUCCEEDED] = {"Type": "Succeed"}
        self.states[COMPLETE] = (
            self.task(COMPLETE, "action", "on_complete", {"actions": on_complete}, SUCCEEDED, lenient=True)
            if on_complete
            else {"Type": "Pass", "Next": SUCCEEDED}
        )
        self.states[FAILED] = {"Type": "Fail", "Error": RUN_FAILED, "Cause": "the pipeline failed"}
        self.states[FAIL] = (
            self.task(FAIL, "action", "on_error", {"actions": on_error}, FAILED, lenient=True)
            if on_error
            else {"Type": "Pass", "Next": FAILED}
        )
        self.states[ESCALATED] = {"Type": "Fail", "Error": RUN_ESCALATED, "Cause": "escalated to a human"}
        self.states[ESCALATE] = self.task(
            ESCALATE, "action", "escalate", {"actions": on_error}, ESCALATED, lenient=True
        )
        self.states[CANCEL] = {"Type": "Fail", "Error": RUN_CANCELLED, "Cause": "the pipeline was cancelled"}

    # --- names and transitions ---------------------------------------------------------------

    def entry(self, stage_id: str) -> str:
        """The state a transition to ``stage_id`` enters."""
        stage = self.pipeline.stages[self.index[stage_id]]
        if stage.condition is not None and not self._one_task(stage):
            return f"{stage_id}.if"
        return self._main(stage)

    @staticmethod
    def _one_task(stage: Any) -> bool:
        """A stage compiled to one task the router answers (it checks the condition itself)."""
        return stage.type in _ROUTER_TYPES and not own_states.reminds(stage)

    @staticmethod
    def _main(stage: Any) -> str:
        return f"{stage.id}.wait" if own_states.reminds(stage) else str(stage.id)

    def target(self, ref: str | None, position: int) -> str:
        """The state a transition (a stage id, a special target, or None: the next stage) enters."""
        if ref in (None, "__next__"):
            following = position + 1
            return (
                self.entry(self.pipeline.stages[following].id)
                if following < len(self.pipeline.stages)
                else COMPLETE
            )
        if ref == "__complete__":
            return COMPLETE
        if ref in ("__escalate__", "escalate"):
            return ESCALATE
        if ref == "fail":
            return FAIL
        if ref == "cancel":
            return CANCEL
        assert ref is not None
        return self.entry(ref)

    @staticmethod
    def _ref(transition: Goto | str | None) -> str | None:
        return transition.goto if isinstance(transition, Goto) else transition

    def done(self, stage: Any, position: int) -> str:
        """Where a stage goes when it succeeded."""
        chosen = getattr(stage, "on_pass", None) or getattr(stage, "on_success", None) or stage.on_complete
        return self.target(self._ref(chosen), position)

    def count(self, key: str) -> str:
        self.counts.setdefault(key, {"n": 0})
        return f"$.counts.{key}.n"

    def increment(self, key: str, next_state: str) -> dict[str, Any]:
        return {
            "Type": "Pass",
            "Parameters": {"n.$": f"States.MathAdd({self.count(key)}, 1)"},
            "ResultPath": f"$.counts.{key}",
            "Next": next_state,
        }

    # --- tasks -------------------------------------------------------------------------------

    def task(
        self,
        state: str,
        stage_type: StageType,
        step: Step,
        config: dict[str, Any],
        next_state: str | None,
        *,
        result_path: str | None = "$.ignored",
        lenient: bool = False,
    ) -> dict[str, Any]:
        """A task that waits for the router; ``lenient``: a failure of it goes on all the same
        (a notification, a lifecycle action), else its errors are the caller's to catch."""
        try:
            parameters = task_parameters(
                queue_url=self.queue_url,
                repository_id=self.repository_id,
                pipeline=self.name,
                definition=self.digest,
                stage_type=stage_type,
                input_path=INPUT,
                step=step,
                config=config,
            )
        except ValueError as exc:
            raise CompileError(f"pipeline {self.name!r}, state {state!r}: {exc}") from exc
        task: dict[str, Any] = {"Type": "Task", "Resource": SEND_AND_WAIT, "Parameters": parameters}
        if result_path != "$":
            task["ResultPath"] = result_path
        if next_state is None:
            task["End"] = True
        else:
            task["Next"] = next_state
            if lenient:
                task["Catch"] = [
                    {"ErrorEquals": ["States.ALL"], "ResultPath": "$.ignored", "Next": next_state}
                ]
        return task

    def catches(self, stage: Any, position: int) -> list[dict[str, Any]]:
        """A stage's ``Catch``: a merge conflict, a timeout, a failure after its retries, then any
        other error fails the run (its ``on_error`` actions)."""
        catches: list[dict[str, Any]] = []
        # The run was cancelled (its waiting task is answered so): by its own ``on_events``, or by a
        # person who ended its agent (closed the issue, merged the PR...), which any run may meet.
        catches.append({"ErrorEquals": [RUN_CANCELLED], "ResultPath": "$.error", "Next": CANCEL})
        if isinstance(stage, MergePrStage) and stage.on_conflict is not None:
            catches.append(
                {
                    "ErrorEquals": [MERGE_CONFLICT],
                    "ResultPath": "$.error",
                    "Next": self.target(stage.on_conflict, position),
                }
            )
        if stage.timeout is not None and stage.on_timeout is not None:
            catches.append(
                {
                    "ErrorEquals": own_states.timeout_errors(stage),
                    "ResultPath": "$.error",
                    "Next": self._timed_out(stage, position),
                }
            )
        elif isinstance(stage, AgentStage) and stage.timeout is not None:
            catches.append(
                {
                    "ErrorEquals": TIMEOUT_ERRORS,
                    "ResultPath": "$.error",
                    "Next": self._stop_agent(stage, FAIL),
                }
            )
        if stage.on_error is not None and stage.on_error.then is not None:
            catches.append(
                {
                    "ErrorEquals": [STAGE_FAILED],
                    "ResultPath": "$.error",
                    "Next": self.target(stage.on_error.then, position),
                }
            )
        catches.append({"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": FAIL})
        return catches

    def retry(self, stage: Any) -> list[dict[str, Any]]:
        if stage.on_error is None or not stage.on_error.retry:
            return []
        return [
            {
                "ErrorEquals": [STAGE_FAILED],
                "MaxAttempts": stage.on_error.retry,
                "IntervalSeconds": 1,
                "BackoffRate": 2.0,
            }
        ]

    def timeout(self, stage: Any, task: dict[str, Any]) -> None:
        if stage.timeout is None:
            return
        on_timeout = stage.on_timeout
        if on_timeout is not None and on_timeout.max_extensions:
            key = state_key(stage.id)
            self.timeouts[key] = stage.timeout
            task["TimeoutSecondsPath"] = f"$.timeouts.{key}"
        else:
            task["TimeoutSeconds"] = stage.timeout

    def _timed_out(self, stage: Any, position: int) -> str:
        """The states a stage's timeout goes through: extensions while any is left (the stage
        entered again with the extension as its timeout), then ``notify``, then ``then``."""
        on_timeout = stage.on_timeout
        main = self._main(stage)
        end = self.target(on_timeout.then, position)
        notify = dump(on_timeout.notify) if on_timeout.notify is not None else None
        expired = end
        if notify is not None:
            expired = f"{stage.id}.notify-end"
            self.states[expired] = self.task(
                expired,
                "action",
                "notify",
                {"stage": stage.id, "notify": notify, "why": "timeout"},
                end,
                lenient=True,
            )
        if isinstance(stage, AgentStage):
            expired = self._stop_agent(stage, expired)
        elif isinstance(stage, ParallelStage):
            expired = own_states.expired_branches(self, stage, expired)
        if not on_timeout.max_extensions or isinstance(stage, ParallelStage):
            # a parallel stage's branches extend themselves (own_states.extend_branch): what
            # reaches the stage is a timeout past its extensions, or a branch's own
            return expired
        if isinstance(stage, PipelineStage):
            main = own_states.rejoined(stage.id)  # the child at work, not a new one
        return own_states.extensions(self, self.states, stage.id, stage, again=main, past=expired)

    def _stop_agent(self, stage: AgentStage, next_state: str) -> str:
        """An agent stage timed out for good: a task the router answers by stopping the stage's
        agent (its record and its task), so a late answer of it moves nothing; then ``next_state``
        whatever the answer (the timeout's error kept in ``$.error``)."""
        name = f"{stage.id}.stop"
        self.states[name] = self.task(name, "agent", "stop", dump(stage), next_state, lenient=True)
        return name

    # --- stages ------------------------------------------------------------------------------

    def _stage(self, position: int, stage: Any) -> None:
        skip = self.target(stage.skip_to, position)
        if stage.condition is not None and not self._one_task(stage):
            check = f"{stage.id}.if"
            self.states[check] = self.task(
                check,
                "gate",
                "condition",
                {"stage": stage.id, "condition": dump(stage)["condition"]},
                f"{stage.id}.skip",
                result_path=f"$.data.stages.{state_key(stage.id)}",
            )
            self.states[check]["Catch"] = [
                {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": FAIL}
            ]
            self.states[f"{stage.id}.skip"] = {
                "Type": "Choice",
                "Choices": [{**is_set(f"$.data.stages.{state_key(stage.id)}.skipped"), "Next": skip}],
                "Default": self._main(stage),
            }
        if isinstance(stage, DelayStage):
            own_states.delay(self, stage, position)
        elif isinstance(stage, ParallelStage):
            own_states.parallel(self, stage, position)
        elif isinstance(stage, PipelineStage):
            own_states.child(self, stage, position)
        elif own_states.reminds(stage):
            own_states.reminding(self, stage, position)
        else:
            self._router_stage(stage, position, skip)

    def _router_stage(self, stage: Any, position: int, skip: str) -> None:
        after = f"{stage.id}.ran"
        key = state_key(stage.id)
        task = self.task(
            stage.id, stage.type, "stage", dump(stage), after, result_path=f"$.data.stages.{key}"
        )
        self.timeout(stage, task)
        retry = self.retry(stage)
        if retry:
            task["Retry"] = retry
        task["Catch"] = self.catches(stage, position)
        self.states[stage.id] = task
        choices: list[dict[str, Any]] = []
        if stage.condition is not None:
            choices.append({**is_set(f"$.data.stages.{key}.skipped"), "Next": skip})
        if isinstance(stage, GateStage):
            choices.append({**is_set(f"$.data.stages.{key}.passed"), "Next": self.done(stage, position)})
            self.states[after] = {
                "Type": "Choice",
                "Choices": choices,
                "Default": self._gate_failed(stage, position),
            }
        elif choices:
            self.states[after] = {
                "Type": "Choice",
                "Choices": choices,
                "Default": self.done(stage, position),
            }
        else:
            task["Next"] = self.done(stage, position)

    def _gate_failed(self, stage: GateStage, position: int) -> str:
        """A failed gate: back to ``on_fail.goto`` at most ``max_iterations`` times, then ``then``;
        without ``on_fail``, the run fails."""
        on_fail = stage.fail_transition()
        if on_fail is None:
            return FAIL
        loops = f"{state_key(stage.id)}_l"
        self.states[f"{stage.id}.again"] = self.increment(loops, self.target(on_fail.goto, position))
        self.states[f"{stage.id}.failed"] = {
            "Type": "Choice",
            "Choices": [
                {
                    "Variable": self.count(loops),
                    "NumericGreaterThanEquals": on_fail.max_iterations,
                    "Next": self.target(on_fail.then, position),
                }
            ],
            "Default": f"{stage.id}.again",
        }
        return f"{stage.id}.failed"
