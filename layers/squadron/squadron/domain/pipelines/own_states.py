"""The stages Step Functions runs with its own states (compiled by :mod:`.compile`): a delay
(``Wait``, a poll's bounded loop), a parallel stage (``Parallel``; join any through
:data:`~squadron.domain.pipeline_wire.JOIN_ANY`), a sub-pipeline (a child execution), and a human
stage that reminds (its wait beside a reminder loop). Each is a function of the compiler's
builder (:class:`Core`), which holds the states and makes the tasks the router answers."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Protocol

from squadron.domain.pipeline_wire import (
    BRANCH_TIMED_OUT,
    CHILD_NAME,
    JOIN_ANY,
    START_CHILD,
    StageType,
    Step,
    child_parameters,
    execution_head,
)
from squadron.domain.pipelines.asl import FAIL, TIMEOUT_ERRORS, dump, is_set, state_key
from squadron.domain.pipelines.models import (
    AgentBranch,
    DelayStage,
    HumanStage,
    ParallelStage,
    PipelineBranch,
    PipelineStage,
)


class Core(Protocol):
    """What these stages need of the compiler's builder."""

    states: dict[str, dict[str, Any]]
    children: Mapping[str, str]
    timeouts: dict[str, int]

    def task(
        self,
        state: str,
        stage_type: StageType,
        step: Step,
        config: dict[str, Any],
        next_state: str | None,
        *,
        result_path: str | None = ...,
        lenient: bool = ...,
    ) -> dict[str, Any]: ...

    def catches(self, stage: Any, position: int) -> list[dict[str, Any]]: ...

    def retry(self, stage: Any) -> list[dict[str, Any]]: ...

    def timeout(self, stage: Any, task: dict[str, Any]) -> None: ...

    def count(self, key: str) -> str: ...

    def increment(self, key: str, next_state: str) -> dict[str, Any]: ...

    def done(self, stage: Any, position: int) -> str: ...


def reminds(stage: Any) -> bool:
    """A human stage that reminds (its wait runs beside a reminder loop)."""
    return (
        isinstance(stage, HumanStage)
        and stage.human.notify is not None
        and stage.human.notify.reminder is not None
    )


def reminding(b: Core, stage: HumanStage, position: int) -> None:
    """A human stage with reminders: its wait and a reminder loop side by side; the first
    answer ends both (the join-any pattern: the answer travels in the error's cause and is read
    back into the stage's output), the loop ends after ``max_reminders``."""
    assert stage.human.notify is not None and stage.human.notify.reminder is not None
    reminder = stage.human.notify.reminder
    key = state_key(stage.id)
    reminded = f"{key}_r"
    wait = b.task(stage.id, "human", "stage", dump(stage), f"{stage.id}.answered", result_path="$")
    b.timeout(stage, wait)
    retry = b.retry(stage)
    if retry:
        wait["Retry"] = retry
    remind_states = {
        f"{stage.id}.remind-wait": {
            "Type": "Wait",
            "Seconds": reminder.interval,
            "Next": f"{stage.id}.remind",
        },
        f"{stage.id}.remind": b.task(
            f"{stage.id}.remind",
            "action",
            "remind",
            {"stage": stage.id, "reminder": dump(reminder), "from": stage.human.from_},
            f"{stage.id}.reminded",
            lenient=True,
        ),
        f"{stage.id}.reminded": {
            "Type": "Choice",
            "Choices": [
                {
                    "Variable": b.count(reminded),
                    "NumericGreaterThanEquals": reminder.max_reminders - 1,
                    "Next": f"{stage.id}.reminders-done",
                }
            ],
            "Default": f"{stage.id}.remind-next",
        },
        f"{stage.id}.remind-next": b.increment(reminded, f"{stage.id}.remind-wait"),
        f"{stage.id}.reminders-done": {"Type": "Succeed"},
    }
    b.states[f"{stage.id}.wait"] = {
        "Type": "Parallel",
        "Branches": [
            {
                "StartAt": stage.id,
                "States": {
                    stage.id: wait,
                    # The answer rides out of the Parallel in the error's cause (a Fail has no output).
                    f"{stage.id}.answered": {
                        "Type": "Fail",
                        "Error": JOIN_ANY,
                        "CausePath": "States.JsonToString($)",
                    },
                },
            },
            {"StartAt": f"{stage.id}.remind-wait", "States": remind_states},
        ],
        "ResultPath": "$.ignored",
        "Next": b.done(stage, position),
        "Catch": [
            {
                "ErrorEquals": [JOIN_ANY],
                "ResultPath": f"$.data.stages.{key}",
                "Next": f"{stage.id}.answer",
            },
            *b.catches(stage, position),
        ],
    }
    # The stage's answer, read back from the cause: what the stages after it see.
    b.states[f"{stage.id}.answer"] = {
        "Type": "Pass",
        "Parameters": {"v.$": f"States.StringToJson($.data.stages.{key}.Cause)"},
        "ResultPath": f"$.data.stages.{key}",
        "Next": f"{stage.id}.answer-kept",
    }
    b.states[f"{stage.id}.answer-kept"] = {
        "Type": "Pass",
        "InputPath": f"$.data.stages.{key}.v",
        "ResultPath": f"$.data.stages.{key}",
        "Next": b.done(stage, position),
    }


def delay(b: Core, stage: DelayStage, position: int) -> None:
    done = b.done(stage, position)
    if stage.poll is None:
        b.states[stage.id] = {"Type": "Wait", "Seconds": stage.duration, "Next": done}
        return
    key = state_key(stage.id)
    polls = f"{key}_p"
    most = max(1, math.ceil(stage.duration / stage.poll.interval))
    b.states[stage.id] = {"Type": "Wait", "Seconds": stage.poll.interval, "Next": f"{stage.id}.poll"}
    poll = b.task(
        f"{stage.id}.poll",
        "gate",
        "poll",
        {"stage": stage.id, "poll": dump(stage.poll)},
        f"{stage.id}.polled",
        result_path=f"$.data.stages.{key}",
    )
    poll["Catch"] = [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": FAIL}]
    b.states[f"{stage.id}.poll"] = poll
    b.states[f"{stage.id}.polled"] = {
        "Type": "Choice",
        "Choices": [
            {**is_set(f"$.data.stages.{key}.passed"), "Next": done},
            {"Variable": b.count(polls), "NumericGreaterThanEquals": most - 1, "Next": done},
        ],
        "Default": f"{stage.id}.again",
    }
    b.states[f"{stage.id}.again"] = b.increment(polls, stage.id)


def child_task(b: Core, pipeline: str, state: str, next_state: str | None) -> dict[str, Any]:
    task: dict[str, Any] = {
        "Type": "Task",
        "Resource": START_CHILD,
        "Parameters": child_parameters(b.children[pipeline], "$.data.trigger"),
        "ResultSelector": {"output.$": "$.Output"},
    }
    if next_state is None:
        task["End"] = True
    else:
        task["Next"] = next_state
    return task


#: What a sub-pipeline's task fails with when its child's name is taken (StartExecution: a run of
#: that name is over, or was started with another input).
CHILD_EXISTS = "StepFunctions.ExecutionAlreadyExistsException"
#: Where a sub-pipeline whose timeout may be extended keeps its child run's name, by state key.
CHILD_NAMES = "$.children"


def rejoined(state: str) -> str:
    """The state an extension of sub-pipeline ``state`` enters: its child task (``<state>.run``),
    past the state that names the child."""
    return f"{state}.run"


#: Step Functions' DescribeExecution, as a state calls it (an AWS SDK integration).
DESCRIBE_RUN = "arn:aws:states:::aws-sdk:sfn:describeExecution"


def named_once(states: dict[str, dict[str, Any]], state: str, task: dict[str, Any], child_arn: str) -> None:
    """A sub-pipeline whose timeout may be extended, as states of its own: ``state`` names the child
    run for this entry (a ``Pass``: the name :func:`child_parameters` would give), and its task
    (:func:`rejoined`) starts the child under that name. An extension enters the task again, not
    ``state``: StartExecution of the same name and input while that child runs is the child at
    work (Step Functions' idempotent start), so the stage waits on it again rather than starting
    a second beside it. A name taken by a run that is over (:data:`CHILD_EXISTS`: it ended between
    the timeout and the extension's start, or Step Functions stopped it when the timeout ran out)
    is looked up (``<state>.ended``, DescribeExecution): a child that succeeded is the stage's
    result, as if its task had waited (its work is not done twice); any other names a new child
    for this entry."""
    key = state_key(state)
    names = f"{CHILD_NAMES}.{key}"
    states[state] = {
        "Type": "Pass",
        "Parameters": {"name.$": CHILD_NAME},
        "ResultPath": names,
        "Next": rejoined(state),
    }
    task["Parameters"]["Name.$"] = f"{names}.name"
    task["Catch"] = [
        {"ErrorEquals": [CHILD_EXISTS], "ResultPath": "$.error", "Next": f"{state}.ended"},
        *task.get("Catch", []),
    ]
    states[rejoined(state)] = task
    states[f"{state}.ended"] = {
        "Type": "Task",
        "Resource": DESCRIBE_RUN,
        "Parameters": {"ExecutionArn.$": f"States.Format('{execution_head(child_arn)}:{{}}', {names}.name)"},
        "ResultSelector": {"status.$": "$.Status", "run.$": "$"},
        "ResultPath": f"{names}.ended",
        "Next": f"{state}.over",
        # a run it cannot describe is not one it can take: a new child
        "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": state}],
    }
    states[f"{state}.over"] = {
        "Type": "Choice",
        "Choices": [
            {"Variable": f"{names}.ended.status", "StringEquals": "SUCCEEDED", "Next": f"{state}.took"}
        ],
        "Default": state,
    }
    took: dict[str, Any] = {
        "Type": "Pass",
        "Parameters": {"output.$": f"States.StringToJson({names}.ended.run.Output)"},
    }
    if "ResultPath" in task:
        took["ResultPath"] = task["ResultPath"]
        # the child's description is not the run's data: what was read goes
        states[f"{state}.took"] = {**took, "Next": f"{state}.read"}
        states[f"{state}.read"] = {"Type": "Pass", "Result": {}, "ResultPath": names}
        after = states[f"{state}.read"]
    else:  # a branch: its result is its state (as the task's would have been)
        states[f"{state}.took"] = took
        after = states[f"{state}.took"]
    if task.get("End"):
        after["End"] = True
    else:
        after["Next"] = task["Next"]


def child(b: Core, stage: PipelineStage, position: int) -> None:
    task = child_task(b, stage.pipeline, stage.id, b.done(stage, position))
    task["ResultPath"] = f"$.data.stages.{state_key(stage.id)}"
    b.timeout(stage, task)
    task["Catch"] = b.catches(stage, position)
    if "TimeoutSecondsPath" in task:  # its timeout may be extended
        named_once(b.states, stage.id, task, b.children[stage.pipeline])
    else:
        b.states[stage.id] = task


def parallel(b: Core, stage: ParallelStage, position: int) -> None:
    done = b.done(stage, position)
    key = state_key(stage.id)
    branches = [one_branch(b, each, stage) for each in stage.branches]
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
    retry = b.retry(stage)
    if retry:
        state["Retry"] = retry
    catches = b.catches(stage, position)
    if stage.join == "any":
        catches.insert(0, {"ErrorEquals": [JOIN_ANY], "ResultPath": f"$.data.stages.{key}", "Next": done})
    agents = [branch for branch in stage.branches if isinstance(branch, AgentBranch)]
    for number, catch in enumerate(catches, start=1):
        if stage.on_timeout is not None and catch["ErrorEquals"] == timeout_errors(stage):
            continue  # its on_timeout stops them once the timeout ran out for good (expired_branches)
        catch["Next"] = stop_child_runs(b, stage, f"{stage.id}.subs-ended", number, catch["Next"])
        if agents:
            catch["Next"] = stop_other_branches(b, agents, number, catch["Next"])
    state["Catch"] = catches
    b.states[stage.id] = state


def stop_other_branches(b: Core, agents: list[AgentBranch], number: int, next_state: str) -> str:
    """A parallel stage that ended early (join any's first branch, a branch that failed or timed
    out, a cancelled run: every way out through its ``Catch``) stops the agents of its branches
    still at work before it goes on to ``next_state``: one ``<branch>.ended[-n]`` stop task per
    agent branch (``n``: which of the stage's catches), answered as a timed-out agent stage's stop
    is (:mod:`squadron.shell.agent_stage_timeouts`), whatever happens. An agent whose branch is
    over (it answered, or its branch stopped it) is left as it is. Step Functions abandons the
    other branches' tasks, not the agents they put to work. Returns the first state."""
    first = next_state
    for branch in reversed(agents):
        state = f"{branch.id}.ended" if number == 1 else f"{branch.id}.ended-{number}"
        b.states[state] = b.task(state, "agent", "stop", dump(branch), first, lenient=True)
        first = state
    return first


def expired_branches(b: Core, stage: ParallelStage, next_state: str) -> str:
    """A parallel stage whose timeout ran out for good (past its extensions) stops the agents of
    its branches, one ``<branch>.expired`` stop task each, answered as :func:`stop_other_branches`'
    are (an agent whose branch is over is left), then goes on to ``next_state``. An extension
    stops nothing: it enters the stage again, its branches' agents still at work. Returns the
    first state."""
    first = stop_child_runs(b, stage, f"{stage.id}.subs-expired", 1, next_state)
    for branch in reversed([each for each in stage.branches if isinstance(each, AgentBranch)]):
        state = f"{branch.id}.expired"
        b.states[state] = b.task(state, "agent", "stop", dump(branch), first, lenient=True)
        first = state
    return first


def stop_child_runs(b: Core, stage: ParallelStage, name: str, number: int, next_state: str) -> str:
    """A parallel stage with sub-pipeline branches, on a way out before its end (see
    :func:`stop_other_branches`, :func:`expired_branches`): one task ``name`` (``-n``: which of its
    catches) the router answers by stopping the run's child runs still running
    (:meth:`squadron.adapters.step_functions.Pipelines.stop_children`), whatever happens, then
    ``next_state``. Step Functions abandons a branch's ``startExecution.sync`` task, and moto
    leaves its child running; AWS stops it at best effort, which the task does not rely on.
    Without such branches, ``next_state`` itself."""
    subs = [branch.id for branch in stage.branches if isinstance(branch, PipelineBranch)]
    if not subs:
        return next_state
    state = name if number == 1 else f"{name}-{number}"
    b.states[state] = b.task(
        state, "action", "stop", {"stage": stage.id, "branches": subs}, next_state, lenient=True
    )
    return state


#: Where a sub-pipeline branch's condition answer goes in the branch's state.
BRANCH_CONDITION = "$.branch_condition"


def one_branch(b: Core, branch: Any, stage: ParallelStage) -> dict[str, Any]:
    """One branch of a parallel stage: its task, and for join any the ``Fail`` that ends the
    ``Parallel`` when it is the first done (a skipped branch only ends itself).

    A branch's own ``timeout`` bounds its task (an agent branch then stops its agent:
    :func:`stop_timed_out_branch`); a branch without one has the stage's (a ``Parallel`` has no
    ``TimeoutSeconds``), extended with the stage's ``on_timeout`` (its current timeout read from
    the run's ``timeouts``); it ends with :data:`~squadron.domain.pipeline_wire.BRANCH_TIMED_OUT`
    when that runs out, its agent stopped by the stage's timeout (:func:`expired_branches`) or its
    way out (:func:`stop_other_branches`), never by an extension."""
    join = stage.join
    states: dict[str, dict[str, Any]] = {}
    bid = str(branch.id)
    finish: str | None = None
    if join == "any":
        finish = f"{bid}.first"
        states[finish] = {"Type": "Fail", "Error": JOIN_ANY, "Cause": bid}
    start = bid
    if isinstance(branch, PipelineBranch):
        task = child_task(b, branch.pipeline, bid, finish)
        if branch.condition is not None:
            start = f"{bid}.if"
            states[start] = b.task(
                start,
                "gate",
                "condition",
                {"stage": bid, "condition": dump(branch)["condition"]},
                f"{bid}.skip",
                # beside the branch's input, never in its place: the child run reads the run's
                # data, and the branch's timeout may read the run's timeouts
                result_path=BRANCH_CONDITION,
            )
            states[f"{bid}.skip"] = {
                "Type": "Choice",
                "Choices": [{**is_set(f"{BRANCH_CONDITION}.skipped"), "Next": f"{bid}.skipped"}],
                "Default": bid,
            }
            states[f"{bid}.skipped"] = {"Type": "Pass", "Result": {"skipped": True}, "End": True}
    else:
        stage_type: StageType = "agent" if isinstance(branch, AgentBranch) else "action"
        after = f"{bid}.ran" if branch.condition is not None else finish
        task = b.task(bid, stage_type, "stage", dump(branch), after, result_path="$")
        if branch.condition is not None:
            states[f"{bid}.ran"] = {
                "Type": "Choice",
                "Choices": [{**is_set("$.skipped"), "Next": f"{bid}.skipped"}],
                **({"Default": finish} if finish else {"Default": f"{bid}.done"}),
            }
            states[f"{bid}.skipped"] = {"Type": "Succeed"}
            if finish is None:
                states[f"{bid}.done"] = {"Type": "Succeed"}
    if branch.timeout is not None and isinstance(branch, AgentBranch):
        task["TimeoutSeconds"] = branch.timeout
        stop_timed_out_branch(b, branch, task, states)
    elif branch.timeout is not None or stage.timeout is not None:
        if branch.timeout is not None:
            task["TimeoutSeconds"] = branch.timeout
        elif stage.timeout is not None and stage.on_timeout is not None and stage.on_timeout.max_extensions:
            key = state_key(stage.id)
            b.timeouts[key] = stage.timeout
            task["TimeoutSecondsPath"] = f"$.timeouts.{key}"
        else:
            task["TimeoutSeconds"] = stage.timeout
        # raised again by name, as an agent branch's is: a Parallel in moto cannot pass a
        # branch's States.Timeout on (AWS can; the parallel stage catches both)
        timed_out = f"{bid}.timed-out"
        states[timed_out] = {"Type": "Fail", "Error": BRANCH_TIMED_OUT, "Cause": f"branch {bid} timed out"}
        if "TimeoutSecondsPath" in task:
            timed_out = extend_branch(b, branch, stage, states, timed_out)
        task["Catch"] = [{"ErrorEquals": TIMEOUT_ERRORS, "ResultPath": "$.error", "Next": timed_out}]
    if isinstance(branch, PipelineBranch) and "TimeoutSecondsPath" in task:
        named_once(states, bid, task, b.children[branch.pipeline])
    else:
        states[bid] = task
    return {"StartAt": start, "States": states}


def extensions(
    b: Core,
    states: dict[str, dict[str, Any]],
    name: str,
    stage: Any,
    *,
    again: str,
    past: str,
    note: Mapping[str, Any] | None = None,
) -> str:
    """The states of ``stage``'s timeout extensions, named after ``name`` (the stage, or a branch of
    it): while extensions are left (counted in the run's ``counts`` as ``<key>_x``),
    ``<name>.extend`` counts one, ``<name>.extended`` makes the extension the timeout (the run's
    ``timeouts``), ``<name>.notify-ext`` says so with the timeout's ``notify`` (``note``: more of
    what it says), and ``again`` is entered; past them, ``past``. Returns ``<name>.timeout``, the
    state the timeout goes to."""
    on_timeout = stage.on_timeout
    assert on_timeout is not None and on_timeout.extend is not None
    key = state_key(stage.id)
    counted = f"{key}_x"
    then = again
    if on_timeout.notify is not None:
        then = f"{name}.notify-ext"
        states[then] = b.task(
            then,
            "action",
            "notify",
            {"stage": stage.id, **(note or {}), "notify": dump(on_timeout.notify), "why": "extended"},
            again,
            lenient=True,
        )
    states[f"{name}.extended"] = {
        "Type": "Pass",
        "Result": on_timeout.extend,
        "ResultPath": f"$.timeouts.{key}",
        "Next": then,
    }
    states[f"{name}.extend"] = b.increment(counted, f"{name}.extended")
    states[f"{name}.timeout"] = {
        "Type": "Choice",
        "Choices": [
            {
                "Variable": b.count(counted),
                "NumericLessThan": on_timeout.max_extensions,
                "Next": f"{name}.extend",
            }
        ],
        "Default": past,
    }
    return f"{name}.timeout"


def extend_branch(
    b: Core, branch: Any, stage: ParallelStage, states: dict[str, dict[str, Any]], timed_out: str
) -> str:
    """A branch on its parallel stage's extensible timeout is extended in the branch itself
    (:func:`extensions`, counted in the branch's copy of the run's ``counts`` and ``timeouts``):
    its task is entered again (an agent branch waits again on the agent at work, a sub-pipeline
    branch on its child run at work: :func:`named_once`; its condition is not asked again). The
    ``Parallel`` is never entered again, so a branch already done keeps its result and its effect
    is not carried out twice. Past its extensions the branch ends ``timed_out`` (the stage's
    ``on_timeout`` then stops its other agents: :func:`expired_branches`). Returns the state its
    task's timeout goes to."""
    bid = str(branch.id)
    task = rejoined(bid) if isinstance(branch, PipelineBranch) else bid  # the child at work
    return extensions(b, states, bid, stage, again=task, past=timed_out, note={"branch": bid})


def stop_timed_out_branch(
    b: Core, branch: AgentBranch, task: dict[str, Any], states: dict[str, dict[str, Any]]
) -> None:
    """An agent branch whose timeout ran out stops its agent, as an agent stage does (its
    ``<id>.stop`` task, answered whatever happens), and then ends its branch with
    :data:`~squadron.domain.pipeline_wire.BRANCH_TIMED_OUT`, which its parallel stage catches as
    the timeout it is (:data:`~squadron.domain.pipelines.asl.TIMEOUT_ERRORS` cannot be raised by a
    ``Fail``)."""
    bid = str(branch.id)
    stop, timed_out = f"{bid}.stop", f"{bid}.timed-out"
    task["Catch"] = [{"ErrorEquals": TIMEOUT_ERRORS, "ResultPath": "$.error", "Next": stop}]
    states[stop] = b.task(stop, "agent", "stop", dump(branch), timed_out, lenient=True)
    states[timed_out] = {"Type": "Fail", "Error": BRANCH_TIMED_OUT, "Cause": f"branch {bid} timed out"}


def timeout_errors(stage: Any) -> list[str]:
    """What a stage's timeout catches: its task's timeout; for a parallel stage, an agent
    branch's, raised again once the branch stopped its agent (:func:`one_branch`)."""
    if isinstance(stage, ParallelStage):
        return [*TIMEOUT_ERRORS, BRANCH_TIMED_OUT]
    return TIMEOUT_ERRORS
