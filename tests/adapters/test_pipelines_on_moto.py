"""Pipelines' runtime contract, proven on moto's Step Functions with hand-written ASL built through
the wire (squadron.domain.pipeline_wire): what the compiler will emit, and what the router answers.

A stage waits for a token on events.fifo; the consumer here reads it as the router does
(:func:`parse_task`, :func:`origin_problem`) and answers through the real adapter.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from squadron.domain.pipeline_wire import (
    JOIN_ANY,
    SEND_AND_WAIT,
    START_CHILD,
    STARTED_BY,
    PipelineTask,
    StageSucceeded,
    child_parameters,
    execution_name,
    message_group_id,
    origin_problem,
    parse_task,
    run_input,
    task_parameters,
)
from tests.support.step_functions import PREFIX, Stack, step_functions, wait_for

DIGEST = "cd" * 32


@pytest.fixture
def stack() -> Iterator[Stack]:
    with step_functions() as made:
        yield made


def stage(stack: Stack, pipeline: str, **state: Any) -> dict[str, Any]:
    parameters = task_parameters(
        queue_url=stack.queue_url, repository_id=42, pipeline=pipeline, definition=DIGEST, stage_type="agent"
    )
    return {"Type": "Task", "Resource": SEND_AND_WAIT, "Parameters": parameters, **state}


def tasks(stack: Stack, count: int, pipeline: str) -> list[PipelineTask]:
    """The next ``count`` stage tasks, read as the router reads them."""
    found = []
    for message in stack.messages(count):
        task = parse_task(message["Body"])
        assert task is not None
        assert origin_problem(task, PREFIX) is None
        assert task.pipeline == pipeline
        assert message["Attributes"]["MessageGroupId"] == message_group_id(42, 7)
        found.append(task)
    return found


def run(stack: Stack, pipeline: str, definition: dict[str, Any], data: dict[str, Any] | None = None) -> str:
    made = stack.pipelines.ensure(42, pipeline, definition)
    return stack.pipelines.start(
        made.version_arn, execution_name("d-1", pipeline), run_input(42, 7, data)
    ).execution_arn


def test_a_stage_waits_for_the_router_and_the_run_goes_on(stack: Stack) -> None:
    definition = {
        "StartAt": "Develop",
        "States": {
            "Develop": stage(stack, "dev", ResultPath="$.develop", Next="Done"),
            "Done": {"Type": "Succeed"},
        },
    }
    arn = run(stack, "dev", definition, {"issue": 7})
    (task,) = tasks(stack, 1, "dev")
    assert (task.stage, task.stage_type, task.execution_arn, task.input) == (
        "Develop",
        "agent",
        arn,
        {"issue": 7},
    )
    assert stack.sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
    assert stack.pipelines.answer(task.task_token, StageSucceeded(output={"pr": 12})).delivered
    held = stack.finished(arn)
    assert held["status"] == "SUCCEEDED"
    assert '"develop": {"pr": 12}' in held["output"]


def test_each_entry_of_a_stage_is_its_own_message(stack: Stack) -> None:
    """A stage entered twice (a loop back) sends twice: the deduplication id is per entry."""
    definition = {
        "StartAt": "Review",
        "States": {
            "Review": stage(stack, "loop", ResultPath="$.review", Next="Again"),
            "Again": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.review.again", "BooleanEquals": True, "Next": "Review"}],
                "Default": "Done",
            },
            "Done": {"Type": "Succeed"},
        },
    }
    arn = run(stack, "loop", definition)
    (first,) = tasks(stack, 1, "loop")
    stack.pipelines.answer(first.task_token, StageSucceeded(output={"again": True}))
    (second,) = tasks(stack, 1, "loop")
    assert second.entry != first.entry and second.task_token != first.task_token
    stack.pipelines.answer(second.task_token, StageSucceeded(output={"again": False}))
    assert stack.finished(arn)["status"] == "SUCCEEDED"


def parallel(stack: Stack, pipeline: str, any_of: bool) -> dict[str, Any]:
    def branch(name: str) -> dict[str, Any]:
        if not any_of:
            return {"StartAt": name, "States": {name: stage(stack, pipeline, End=True)}}
        # join any: the first branch done ends the Parallel with a sentinel error it catches
        return {
            "StartAt": name,
            "States": {
                name: stage(stack, pipeline, Next=f"{name}First"),
                f"{name}First": {"Type": "Fail", "Error": JOIN_ANY, "Cause": name},
            },
        }

    state: dict[str, Any] = {
        "Type": "Parallel",
        "Branches": [branch("Dev"), branch("Docs")],
        "ResultPath": "$.joined",
    }
    if any_of:
        state["Catch"] = [{"ErrorEquals": [JOIN_ANY], "ResultPath": "$.first", "Next": "Done"}]
    return {"StartAt": "Both", "States": {"Both": {**state, "Next": "Done"}, "Done": {"Type": "Succeed"}}}


def test_parallel_join_all_waits_for_every_branch(stack: Stack) -> None:
    arn = run(stack, "all", parallel(stack, "all", any_of=False))
    by_stage = {t.stage: t for t in tasks(stack, 2, "all")}
    assert set(by_stage) == {"Dev", "Docs"}
    stack.pipelines.answer(by_stage["Dev"].task_token, StageSucceeded(output={"dev": 1}))
    wait_for("Dev's answer to be taken", lambda: stack.pipelines.heartbeat(by_stage["Dev"].task_token).gone)
    assert stack.sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
    stack.pipelines.answer(by_stage["Docs"].task_token, StageSucceeded(output={"docs": 2}))
    held = stack.finished(arn)
    assert held["status"] == "SUCCEEDED"
    assert '"joined": [{"dev": 1}, {"docs": 2}]' in held["output"]


def test_parallel_join_any_goes_on_with_the_first_branch_and_drops_the_other(stack: Stack) -> None:
    arn = run(stack, "any", parallel(stack, "any", any_of=True))
    by_stage = {t.stage: t for t in tasks(stack, 2, "any")}
    stack.pipelines.answer(by_stage["Docs"].task_token, StageSucceeded(output={"docs": 2}))
    held = stack.finished(arn)
    assert held["status"] == "SUCCEEDED"
    assert '"first": {"Error": "Squadron.JoinAny", "Cause": "Docs"}' in held["output"]
    # the other branch's stage is over: its answer is "gone", not an error to retry
    late = stack.pipelines.answer(by_stage["Dev"].task_token, StageSucceeded(output={"dev": 1}))
    assert late.gone == "InvalidToken"


def test_a_stage_that_times_out_escalates(stack: Stack) -> None:
    definition = {
        "StartAt": "Gate",
        "States": {
            "Gate": stage(
                stack,
                "gate",
                TimeoutSeconds=1,
                # moto raises States.Timeout for a missed heartbeat too; AWS States.HeartbeatTimeout
                Catch=[
                    {
                        "ErrorEquals": ["States.Timeout", "States.HeartbeatTimeout"],
                        "ResultPath": "$.late",
                        "Next": "Escalate",
                    }
                ],
                Next="Done",
            ),
            "Escalate": {"Type": "Pass", "Result": "escalated", "ResultPath": "$.escalated", "Next": "Done"},
            "Done": {"Type": "Succeed"},
        },
    }
    arn = run(stack, "gate", definition)
    (task,) = tasks(stack, 1, "gate")
    held = stack.finished(arn)
    assert held["status"] == "SUCCEEDED"
    assert '"escalated": "escalated"' in held["output"] and "States.Timeout" in held["output"]
    assert stack.pipelines.answer(task.task_token, StageSucceeded()).gone in {"InvalidToken", "TaskTimedOut"}


def test_a_delay_stage_is_a_wait(stack: Stack) -> None:
    definition = {
        "StartAt": "Delay",
        "States": {
            "Delay": {"Type": "Wait", "SecondsPath": "$.data.delay", "Next": "After"},
            "After": stage(stack, "delay", End=True),
        },
    }
    arn = run(stack, "delay", definition, {"delay": 1})
    assert stack.sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
    (task,) = tasks(stack, 1, "delay")  # sent only once the Wait is over
    history = stack.sfn.get_execution_history(executionArn=arn)["events"]
    assert any(e["type"] == "WaitStateExited" for e in history)
    stack.pipelines.answer(task.task_token, StageSucceeded())
    assert stack.finished(arn)["status"] == "SUCCEEDED"


def test_a_run_stays_on_the_version_it_started_with(stack: Stack) -> None:
    def definition(mark: str) -> dict[str, Any]:
        return {
            "StartAt": "Develop",
            "States": {
                "Develop": stage(stack, "pinned", ResultPath="$.develop", Next="Mark"),
                "Mark": {"Type": "Pass", "Result": mark, "ResultPath": "$.version", "End": True},
            },
        }

    first = stack.pipelines.ensure(42, "pinned", definition("v1"))
    old = stack.pipelines.start(
        first.version_arn, execution_name("d-1", "pinned"), run_input(42, 7)
    ).execution_arn
    (task,) = tasks(stack, 1, "pinned")
    second = stack.pipelines.ensure(42, "pinned", definition("v2"))
    assert (second.outcome, second.version_arn) == ("published", f"{first.state_machine_arn}:2")
    new = stack.pipelines.start(
        second.version_arn, execution_name("d-2", "pinned"), run_input(42, 7)
    ).execution_arn
    (task2,) = tasks(stack, 1, "pinned")
    stack.pipelines.answer(task.task_token, StageSucceeded())
    stack.pipelines.answer(task2.task_token, StageSucceeded())
    assert '"version": "v1"' in stack.finished(old)["output"]
    assert '"version": "v2"' in stack.finished(new)["output"]


def test_a_sub_pipeline_is_a_child_run_stopped_with_its_parent(stack: Stack) -> None:
    child = stack.pipelines.ensure(
        42, "child", {"StartAt": "Work", "States": {"Work": stage(stack, "child", End=True)}}
    )
    parent_definition = {
        "StartAt": "Sub",
        "States": {
            "Sub": {
                "Type": "Task",
                "Resource": START_CHILD,
                "Parameters": child_parameters(child.version_arn),
                "End": True,
            }
        },
    }
    parent = run(stack, "parent", parent_definition, {"for": "child"})
    (task,) = tasks(stack, 1, "child")  # the child's stage: in the parent's message group
    child_arn = task.execution_arn
    view = stack.pipelines.describe(child_arn)
    assert view is not None and view.parent == parent and view.input[STARTED_BY] == parent
    assert view.input["data"] == {"for": "child"}
    stopped = stack.pipelines.stop(parent, error="Squadron.Cancelled", cause="the issue was closed")
    assert stopped == [parent, child_arn]
    # the parent ends; moto 5.2.5 does not wake the stopped child's waiting stage (AWS ends it)
    assert stack.finished(parent)["status"] in {"ABORTED", "FAILED"}  # AWS: ABORTED
    assert parent not in stack.pipelines.stop(parent, error="Squadron.Cancelled", cause="again")
