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
  ``max_extensions`` times, then fail, escalate or cancel); a human stage's reminders are a
  loop running beside its wait;
* the run ends through ``__complete__`` (the pipeline's ``on_complete`` actions), ``__escalate__``
  (escalation, then ``on_error``), ``__fail__`` (``on_error``) or ``__cancel__``.

A run's state: ``squadron`` (the run input's), ``data`` (what a stage's task gets as input:
``trigger``, the run input's ``data``; ``context``, the pipeline's; ``stages``, each finished
stage's output under :func:`state_key` of its id), ``counts`` (loops, extensions, polls,
reminders) and ``timeouts`` (a stage's current timeout when it may be extended).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from squadron.domain.pipeline_wire import (
    JOIN_ANY,
    MERGE_CONFLICT,
    RUN_CANCELLED,
    RUN_ESCALATED,
    RUN_FAILED,
    SEND_AND_WAIT,
    STAGE_FAILED,
    START_CHILD,
    StageType,
    Step,
    child_parameters,
    task_parameters,
)
from squadron.domain.pipelines.models import (
    AgentBranch,
    DelayStage,
    GateStage,
    Goto,
    HumanStage,
    MergePrStage,
    ParallelStage,
    Pipeline,
    PipelineBranch,
    PipelineStage,
)

#: Step Functions' largest state machine definition we publish (bytes of its JSON); a pipeline
#: past it is refused with the reason, never published cut.
MAX_DEFINITION_BYTES = 256 * 1024
#: Step Functions' longest state name.
MAX_STATE_NAME = 80
#: What a timed-out task raises: ``States.Timeout`` (moto raises it for a missed heartbeat too)
#: and ``States.HeartbeatTimeout``.
TIMEOUT_ERRORS = ["States.Timeout", "States.HeartbeatTimeout"]
#: Where a stage's task reads its input from.
INPUT = "$.data"

COMPLETE = "__complete__"
SUCCEEDED = "__succeeded__"
ESCALATE = "__escalate__"
ESCALATED = "__escalated__"
FAIL = "__fail__"
FAILED = "__failed__"
CANCEL = "__cancel__"
START = "__start__"
CONTEXT = "__context__"

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


def state_key(stage_id: str) -> str:
    """A stage id as a key of ``$.data.stages`` (a JSONPath name: ``_`` becomes ``_0``, ``-``
    becomes ``_1``, so two ids never meet): ``code-review`` is ``code_1review``."""
    return stage_id.replace("_", "_0").replace("-", "_1")


def stage_of_key(key: str) -> str:
    """The stage id :func:`state_key` made ``key`` of."""
    out: list[str] = []
    escaped = False
    for char in key:
        if escaped:
            out.append("_" if char == "0" else "-")
            escaped = False
        elif char == "_":
            escaped = True
        else:
            out.append(char)
    return "".join(out)


def _canonical(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _dump(model: Any) -> dict[str, Any]:
    value: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


def _is_set(path: str, *, value: bool = True) -> dict[str, Any]:
    """A Choice rule: ``path`` is there and is ``value`` (a missing key is false, never an error)."""
    return {"And": [{"Variable": path, "IsPresent": True}, {"Variable": path, "BooleanEquals": value}]}


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
        _canonical(
            {
                "name": name,
                "repository_id": repository_id,
                "pipeline": _dump(pipeline),
                "children": {child: children[child] for child in used},
            }
        ).encode("utf-8")
    ).hexdigest()
    builder = _Builder(
        name, pipeline, queue_url=queue_url, repository_id=repository_id, digest=digest, children=children
    )
    definition = builder.build()
    text = _canonical(definition)
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
        self.states[START] = {
            "Type": "Pass",
            "Parameters": {
                "squadron.$": "$.squadron",
                "data": {"trigger.$": "$.data", "stages": {}},
                "counts": self.counts,
                "timeouts": self.timeouts,
            },
            "Next": CONTEXT,
        }
        # a literal (``Result``): the repository's context is data, never read as a path
        self.states[CONTEXT] = {
            "Type": "Pass",
            "Result": self.pipeline.context,
            "ResultPath": "$.data.context",
            "Next": first,
        }
        states = _reachable(START, self.states)
        for state in states:
            if len(state) > MAX_STATE_NAME:  # ids are at most 64 characters, suffixes at most 12
                raise CompileError(f"state name {state!r} is over {MAX_STATE_NAME} characters")
        return {
            "Comment": f"squadron pipeline {self.name} ({self.digest})",
            "StartAt": START,
            "TimeoutSeconds": self.pipeline.timeout,
            "States": states,
        }

    def _terminals(self) -> None:
        on_error = [_dump(action) for action in self.pipeline.on_error]
        on_complete = [_dump(action) for action in self.pipeline.on_complete]
        self.states[SUCCEEDED] = {"Type": "Succeed"}
        self.states[COMPLETE] = (
            self._task(COMPLETE, "action", "on_complete", {"actions": on_complete}, SUCCEEDED, lenient=True)
            if on_complete
            else {"Type": "Pass", "Next": SUCCEEDED}
        )
        self.states[FAILED] = {"Type": "Fail", "Error": RUN_FAILED, "Cause": "the pipeline failed"}
        self.states[FAIL] = (
            self._task(FAIL, "action", "on_error", {"actions": on_error}, FAILED, lenient=True)
            if on_error
            else {"Type": "Pass", "Next": FAILED}
        )
        self.states[ESCALATED] = {"Type": "Fail", "Error": RUN_ESCALATED, "Cause": "escalated to a human"}
        self.states[ESCALATE] = self._task(
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
        return stage.type in _ROUTER_TYPES and not _reminds(stage)

    @staticmethod
    def _main(stage: Any) -> str:
        return f"{stage.id}.wait" if _reminds(stage) else str(stage.id)

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

    def _done(self, stage: Any, position: int) -> str:
        """Where a stage goes when it succeeded."""
        chosen = getattr(stage, "on_pass", None) or getattr(stage, "on_success", None) or stage.on_complete
        return self.target(self._ref(chosen), position)

    def _count(self, key: str) -> str:
        self.counts.setdefault(key, {"n": 0})
        return f"$.counts.{key}.n"

    def _increment(self, key: str, next_state: str) -> dict[str, Any]:
        return {
            "Type": "Pass",
            "Parameters": {"n.$": f"States.MathAdd({self._count(key)}, 1)"},
            "ResultPath": f"$.counts.{key}",
            "Next": next_state,
        }

    # --- tasks -------------------------------------------------------------------------------

    def _task(
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

    def _catches(self, stage: Any, position: int) -> list[dict[str, Any]]:
        """A stage's ``Catch``: a merge conflict, a timeout, a failure after its retries, then any
        other error fails the run (its ``on_error`` actions)."""
        catches: list[dict[str, Any]] = []
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
                    "ErrorEquals": TIMEOUT_ERRORS,
                    "ResultPath": "$.error",
                    "Next": self._timed_out(stage, position),
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

    def _retry(self, stage: Any) -> list[dict[str, Any]]:
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

    def _timeout(self, stage: Any, task: dict[str, Any]) -> None:
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
        key = state_key(stage.id)
        main = self._main(stage)
        end = self.target(on_timeout.then, position)
        notify = _dump(on_timeout.notify) if on_timeout.notify is not None else None
        expired = end
        if notify is not None:
            expired = f"{stage.id}.notify-end"
            self.states[expired] = self._task(
                expired,
                "action",
                "notify",
                {"stage": stage.id, "notify": notify, "why": "timeout"},
                end,
                lenient=True,
            )
        if not on_timeout.max_extensions:
            return expired
        extensions = f"{key}_x"
        again: str = main
        if notify is not None:
            again = f"{stage.id}.notify-ext"
            self.states[again] = self._task(
                again,
                "action",
                "notify",
                {"stage": stage.id, "notify": notify, "why": "extended"},
                main,
                lenient=True,
            )
        self.states[f"{stage.id}.extended"] = {
            "Type": "Pass",
            "Result": on_timeout.extend,
            "ResultPath": f"$.timeouts.{key}",
            "Next": again,
        }
        self.states[f"{stage.id}.extend"] = self._increment(extensions, f"{stage.id}.extended")
        self.states[f"{stage.id}.timeout"] = {
            "Type": "Choice",
            "Choices": [
                {
                    "Variable": self._count(extensions),
                    "NumericLessThan": on_timeout.max_extensions,
                    "Next": f"{stage.id}.extend",
                }
            ],
            "Default": expired,
        }
        return f"{stage.id}.timeout"

    # --- stages ------------------------------------------------------------------------------

    def _stage(self, position: int, stage: Any) -> None:
        skip = self.target(stage.skip_to, position)
        if stage.condition is not None and not self._one_task(stage):
            check = f"{stage.id}.if"
            self.states[check] = self._task(
                check,
                "gate",
                "condition",
                {"stage": stage.id, "condition": _dump(stage)["condition"]},
                f"{stage.id}.skip",
                result_path=f"$.data.stages.{state_key(stage.id)}",
            )
            self.states[check]["Catch"] = [
                {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": FAIL}
            ]
            self.states[f"{stage.id}.skip"] = {
                "Type": "Choice",
                "Choices": [{**_is_set(f"$.data.stages.{state_key(stage.id)}.skipped"), "Next": skip}],
                "Default": self._main(stage),
            }
        if isinstance(stage, DelayStage):
            self._delay(stage, position)
        elif isinstance(stage, ParallelStage):
            self._parallel(stage, position)
        elif isinstance(stage, PipelineStage):
            self._child(stage, position)
        elif _reminds(stage):
            self._reminding(stage, position)
        else:
            self._router_stage(stage, position, skip)

    def _router_stage(self, stage: Any, position: int, skip: str) -> None:
        after = f"{stage.id}.ran"
        key = state_key(stage.id)
        task = self._task(
            stage.id, stage.type, "stage", _dump(stage), after, result_path=f"$.data.stages.{key}"
        )
        self._timeout(stage, task)
        retry = self._retry(stage)
        if retry:
            task["Retry"] = retry
        task["Catch"] = self._catches(stage, position)
        self.states[stage.id] = task
        choices: list[dict[str, Any]] = []
        if stage.condition is not None:
            choices.append({**_is_set(f"$.data.stages.{key}.skipped"), "Next": skip})
        if isinstance(stage, GateStage):
            choices.append({**_is_set(f"$.data.stages.{key}.passed"), "Next": self._done(stage, position)})
            self.states[after] = {
                "Type": "Choice",
                "Choices": choices,
                "Default": self._gate_failed(stage, position),
            }
        elif choices:
            self.states[after] = {
                "Type": "Choice",
                "Choices": choices,
                "Default": self._done(stage, position),
            }
        else:
            task["Next"] = self._done(stage, position)

    def _gate_failed(self, stage: GateStage, position: int) -> str:
        """A failed gate: back to ``on_fail.goto`` at most ``max_iterations`` times, then ``then``;
        without ``on_fail``, the run fails."""
        on_fail = stage.fail_transition()
        if on_fail is None:
            return FAIL
        loops = f"{state_key(stage.id)}_l"
        self.states[f"{stage.id}.again"] = self._increment(loops, self.target(on_fail.goto, position))
        self.states[f"{stage.id}.failed"] = {
            "Type": "Choice",
            "Choices": [
                {
                    "Variable": self._count(loops),
                    "NumericGreaterThanEquals": on_fail.max_iterations,
                    "Next": self.target(on_fail.then, position),
                }
            ],
            "Default": f"{stage.id}.again",
        }
        return f"{stage.id}.failed"

    def _reminding(self, stage: HumanStage, position: int) -> None:
        """A human stage with reminders: its wait and a reminder loop side by side; the first
        answer ends both (the join-any pattern), the loop ends after ``max_reminders``."""
        assert stage.human.notify is not None and stage.human.notify.reminder is not None
        reminder = stage.human.notify.reminder
        key = state_key(stage.id)
        reminded = f"{key}_r"
        wait = self._task(stage.id, "human", "stage", _dump(stage), f"{stage.id}.answered", result_path="$")
        self._timeout(stage, wait)
        retry = self._retry(stage)
        if retry:
            wait["Retry"] = retry
        remind_states = {
            f"{stage.id}.remind-wait": {
                "Type": "Wait",
                "Seconds": reminder.interval,
                "Next": f"{stage.id}.remind",
            },
            f"{stage.id}.remind": self._task(
                f"{stage.id}.remind",
                "action",
                "remind",
                {"stage": stage.id, "reminder": _dump(reminder)},
                f"{stage.id}.reminded",
                lenient=True,
            ),
            f"{stage.id}.reminded": {
                "Type": "Choice",
                "Choices": [
                    {
                        "Variable": self._count(reminded),
                        "NumericGreaterThanEquals": reminder.max_reminders - 1,
                        "Next": f"{stage.id}.reminders-done",
                    }
                ],
                "Default": f"{stage.id}.remind-next",
            },
            f"{stage.id}.remind-next": self._increment(reminded, f"{stage.id}.remind-wait"),
            f"{stage.id}.reminders-done": {"Type": "Succeed"},
        }
        self.states[f"{stage.id}.wait"] = {
            "Type": "Parallel",
            "Branches": [
                {
                    "StartAt": stage.id,
                    "States": {
                        stage.id: wait,
                        f"{stage.id}.answered": {"Type": "Fail", "Error": JOIN_ANY, "Cause": stage.id},
                    },
                },
                {"StartAt": f"{stage.id}.remind-wait", "States": remind_states},
            ],
            "ResultPath": "$.ignored",
            "Next": self._done(stage, position),
            "Catch": [
                {
                    "ErrorEquals": [JOIN_ANY],
                    "ResultPath": f"$.data.stages.{key}",
                    "Next": self._done(stage, position),
                },
                *self._catches(stage, position),
            ],
        }

    def _delay(self, stage: DelayStage, position: int) -> None:
        done = self._done(stage, position)
        if stage.poll is None:
            self.states[stage.id] = {"Type": "Wait", "Seconds": stage.duration, "Next": done}
            return
        key = state_key(stage.id)
        polls = f"{key}_p"
        most = max(1, math.ceil(stage.duration / stage.poll.interval))
        self.states[stage.id] = {"Type": "Wait", "Seconds": stage.poll.interval, "Next": f"{stage.id}.poll"}
        poll = self._task(
            f"{stage.id}.poll",
            "gate",
            "poll",
            {"stage": stage.id, "poll": _dump(stage.poll)},
            f"{stage.id}.polled",
            result_path=f"$.data.stages.{key}",
        )
        poll["Catch"] = [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": FAIL}]
        self.states[f"{stage.id}.poll"] = poll
        self.states[f"{stage.id}.polled"] = {
            "Type": "Choice",
            "Choices": [
                {**_is_set(f"$.data.stages.{key}.passed"), "Next": done},
                {"Variable": self._count(polls), "NumericGreaterThanEquals": most - 1, "Next": done},
            ],
            "Default": f"{stage.id}.again",
        }
        self.states[f"{stage.id}.again"] = self._increment(polls, stage.id)

    def _child_task(self, pipeline: str, state: str, next_state: str | None) -> dict[str, Any]:
        task: dict[str, Any] = {
            "Type": "Task",
            "Resource": START_CHILD,
            "Parameters": child_parameters(self.children[pipeline], "$.data.trigger"),
            "ResultSelector": {"output.$": "$.Output"},
        }
        if next_state is None:
            task["End"] = True
        else:
            task["Next"] = next_state
        return task

    def _child(self, stage: PipelineStage, position: int) -> None:
        task = self._child_task(stage.pipeline, stage.id, self._done(stage, position))
        task["ResultPath"] = f"$.data.stages.{state_key(stage.id)}"
        self._timeout(stage, task)
        task["Catch"] = self._catches(stage, position)
        self.states[stage.id] = task

    def _parallel(self, stage: ParallelStage, position: int) -> None:
        done = self._done(stage, position)
        key = state_key(stage.id)
        branches = [self._branch(branch, stage.join) for branch in stage.branches]
        state: dict[str, Any] = {
            "Type": "Parallel",
            "Branches": branches,
            "ResultPath": f"$.data.stages.{key}",
            "Next": done,
        }
        if stage.join == "all":
            state["ResultSelector"] = {
                f"{state_key(branch.id)}.$": f"$[{index}]" for index, branch in enumerate(stage.branches)
            }
        retry = self._retry(stage)
        if retry:
            state["Retry"] = retry
        catches = self._catches(stage, position)
        if stage.join == "any":
            catches.insert(0, {"ErrorEquals": [JOIN_ANY], "ResultPath": f"$.data.stages.{key}", "Next": done})
        state["Catch"] = catches
        self.states[stage.id] = state

    def _branch(self, branch: Any, join: str) -> dict[str, Any]:
        """One branch of a parallel stage: its task, and for join any the ``Fail`` that ends the
        ``Parallel`` when it is the first done (a skipped branch only ends itself)."""
        states: dict[str, dict[str, Any]] = {}
        bid = str(branch.id)
        finish: str | None = None
        if join == "any":
            finish = f"{bid}.first"
            states[finish] = {"Type": "Fail", "Error": JOIN_ANY, "Cause": bid}
        start = bid
        if isinstance(branch, PipelineBranch):
            task = self._child_task(branch.pipeline, bid, finish)
            if branch.condition is not None:
                start = f"{bid}.if"
                states[start] = self._task(
                    start,
                    "gate",
                    "condition",
                    {"stage": bid, "condition": _dump(branch)["condition"]},
                    f"{bid}.skip",
                    result_path="$",
                )
                states[f"{bid}.skip"] = {
                    "Type": "Choice",
                    "Choices": [{**_is_set("$.skipped"), "Next": f"{bid}.skipped"}],
                    "Default": bid,
                }
                states[f"{bid}.skipped"] = {"Type": "Succeed"}
        else:
            stage_type: StageType = "agent" if isinstance(branch, AgentBranch) else "action"
            after = f"{bid}.ran" if branch.condition is not None else finish
            task = self._task(bid, stage_type, "stage", _dump(branch), after, result_path="$")
            if branch.condition is not None:
                states[f"{bid}.ran"] = {
                    "Type": "Choice",
                    "Choices": [{**_is_set("$.skipped"), "Next": f"{bid}.skipped"}],
                    **({"Default": finish} if finish else {"Default": f"{bid}.done"}),
                }
                states[f"{bid}.skipped"] = {"Type": "Succeed"}
                if finish is None:
                    states[f"{bid}.done"] = {"Type": "Succeed"}
        if branch.timeout is not None:
            task["TimeoutSeconds"] = branch.timeout
        states[bid] = task
        return {"StartAt": start, "States": states}


def _reminds(stage: Any) -> bool:
    """A human stage that reminds (its wait runs beside a reminder loop)."""
    return (
        isinstance(stage, HumanStage)
        and stage.human.notify is not None
        and stage.human.notify.reminder is not None
    )


def _reachable(start: str, states: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The states reachable from ``start`` (Step Functions refuses a definition with others), in
    the order they were built."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(_targets(states[name]))
    return {name: state for name, state in states.items() if name in seen}


def _targets(state: dict[str, Any]) -> list[str]:
    found = [state[key] for key in ("Next", "Default") if key in state]
    found += [choice["Next"] for choice in state.get("Choices", [])]
    found += [catch["Next"] for catch in state.get("Catch", [])]
    return found


def task_states(definition: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A compiled definition's task states, by name, inside ``Parallel`` branches too."""
    found: dict[str, dict[str, Any]] = {}

    def visit(scope: Mapping[str, Any]) -> None:
        for name, state in scope["States"].items():
            if state["Type"] == "Task":
                found[name] = state
            for branch in state.get("Branches", []):
                visit(branch)

    visit(definition)
    return found
