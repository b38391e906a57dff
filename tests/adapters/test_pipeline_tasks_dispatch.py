"""A compiled pipeline's task on events.fifo reaches the router's dispatcher (issue 30, item 2's
hook): it is no longer refused as an invalid envelope (dead-letter queue); a task from one of its
repository's own state machines is answered (a router without the collaborators stage work needs:
rejected with the reason, so the run ends failed and says why), one that names another repository's run is refused and its token
left alone, and a malformed one is an invalid record naming its problem."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from squadron.config import parse_files
from squadron.domain.pipeline_wire import STAGE_REJECTED, StageSucceeded, execution_name, run_input
from squadron.domain.pipelines.compile import compile_pipeline
from squadron.shell.dispatch import Dispatcher, InvalidRecordError
from squadron.shell.pipelines import PipelineTasks
from tests.support.step_functions import PREFIX, Stack, step_functions
from tests.support.world import World
from tests.unit.pipelines.test_pipeline_config import files_with

TEXT = """pipelines:
  p:
    trigger: {event: pull_request.opened}
    stages:
      - {id: build, type: agent, agent: feat-dev}
    on_error: [{type: label, add: needs-human}]
"""


@pytest.fixture
def stack() -> Iterator[Stack]:
    with step_functions() as made:
        yield made


def started(stack: Stack) -> str:
    pipelines = parse_files(files_with(TEXT)).config.pipelines
    compiled = compile_pipeline("p", pipelines, queue_url=stack.queue_url, repository_id=42, children={})
    version = stack.pipelines.ensure(42, "p", compiled.definition).version_arn
    return stack.pipelines.start(version, execution_name("d-1", "p"), run_input(42, 7)).execution_arn


def dispatcher(stack: Stack) -> Dispatcher:
    return Dispatcher(World().router, pipeline_tasks=PipelineTasks(stack.pipelines, prefix=PREFIX))


def test_a_stage_task_is_answered_and_the_run_ends_with_the_reason(stack: Stack) -> None:
    arn = started(stack)
    dispatch = dispatcher(stack)
    (message,) = stack.messages(1)

    summary = dispatch.handle(message["Body"], message["MessageId"])

    assert (summary["pipeline_task"], summary["answered"], summary["refused"]) == ("build", True, None)
    (on_error,) = stack.messages(1)  # the run's failure path: its on_error actions
    assert dispatch.handle(on_error["Body"])["pipeline_task"] == "__fail__"
    held = stack.finished(arn)
    assert (held["status"], held["error"]) == ("FAILED", "Squadron.Failed")
    # the same message again (a redelivery): the task is over, nothing is answered twice (moto
    # takes a second answer while the run still runs; AWS answers InvalidToken at once)
    again = dispatch.handle(message["Body"], message["MessageId"])
    assert (again["answered"], again["gone"]) == (False, "InvalidToken")
    failed = [
        e["taskFailedEventDetails"]
        for e in stack.sfn.get_execution_history(executionArn=arn)["events"]
        if e["type"] == "TaskFailed"
    ]
    assert failed[0]["error"] == STAGE_REJECTED
    assert "does not carry out stage of agent stage 'build'" in failed[0]["cause"]


def test_a_task_naming_another_repository_is_refused_and_its_token_left_alone(stack: Stack) -> None:
    """The attacker relabels repository 42's task as repository 43's: the router answers nothing,
    so the run's token is still the run's."""
    arn = started(stack)
    (message,) = stack.messages(1)
    body = json.loads(message["Body"])
    forged = json.dumps({**body, "repository_id": 43})

    summary = dispatcher(stack).handle(forged, "m-forged")

    assert summary["answered"] is False
    assert "is not a run of repository 43's pipelines" in summary["refused"]
    assert stack.sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
    assert stack.pipelines.answer(body["task_token"], StageSucceeded()).delivered


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (
            '{"kind": "squadron.pipeline_task", "schema_version": 1}',
            "pipeline task repository_id: Field required",
        ),
        (
            '{"kind": "squadron.pipeline_task", "schema_version": 1, "repository_id": 42, "pipeline": "p", '
            '"definition": "cd", "execution_arn": "x", "stage": "a", "stage_type": "agent", '
            '"entered_at": "2026-01-01T00:00:00Z", "task_token": "t"}',
            "pipeline task definition",
        ),
    ],
)
def test_a_malformed_task_is_an_invalid_record_naming_its_problem(
    stack: Stack, body: str, problem: str
) -> None:
    with pytest.raises(InvalidRecordError) as caught:
        dispatcher(stack).handle(body, "m-bad")
    assert caught.value.problem.startswith(problem)


def test_without_pipelines_a_task_is_an_invalid_record_saying_so(stack: Stack) -> None:
    started(stack)
    (message,) = stack.messages(1)
    with pytest.raises(
        InvalidRecordError, match="a pipeline task, and this router has no pipelines configured"
    ):
        Dispatcher(World().router).handle(message["Body"], message["MessageId"])
