"""Where the router carries a pipeline task out: the repository its own run was started for
(squadron.shell.pipeline_where), read once per execution."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from squadron.adapters.step_functions import RunView
from squadron.domain import pipeline_wire as wire
from squadron.domain.pipelines.work import Where
from squadron.shell.pipeline_where import RunRepositories
from squadron.shell.pipelines import PipelineTasks

ARN = "arn:aws:states:us-east-1:123456789012:execution:sq_42-p:run-1"


def task(execution_arn: str = ARN, repository_id: int = 42) -> wire.PipelineTask:
    return wire.PipelineTask(
        repository_id=repository_id,
        issue_number=7,
        pipeline="p",
        definition="ab" * 32,
        execution_arn=execution_arn,
        stage="s",
        stage_type="gate",
        entered_at=datetime(2026, 1, 1, tzinfo=UTC),
        task_token="t",
    )


class Runs:
    def __init__(self, inputs: dict[str, dict[str, Any]]) -> None:
        self.inputs = inputs
        self.described: list[str] = []

    def describe(self, execution_arn: str) -> RunView | None:
        self.described.append(execution_arn)
        held = self.inputs.get(execution_arn)
        if held is None:
            return None
        at = datetime(2026, 1, 1, tzinfo=UTC)
        return RunView(execution_arn, "run-1", "sm", "RUNNING", at, None, held, None, None, None)


def test_the_repository_is_read_from_the_tasks_execution_once() -> None:
    runs = Runs({ARN: wire.run_input(42, 7, repository="octo/demo", installation_id=77)})
    where = RunRepositories(runs)
    assert where(task()) == Where("octo/demo", 77)
    assert where(task()) == Where("octo/demo", 77)
    assert runs.described == [ARN]


def test_an_unknown_run_or_one_of_another_repository_is_nowhere_and_not_remembered() -> None:
    other = ARN.replace("run-1", "run-2")
    runs = Runs({other: wire.run_input(43, 7, repository="octo/other", installation_id=77)})
    where = RunRepositories(runs)
    assert where(task()) is None  # no such execution
    assert where(task(other)) is None  # its input names repository 43, the task 42
    assert where(task(other)) is None
    assert runs.described == [ARN, other, other]


def test_at_most_keep_executions_are_remembered() -> None:
    arns = [ARN.replace("run-1", f"run-{n}") for n in range(3)]
    runs = Runs({arn: wire.run_input(42, 7, repository="octo/demo") for arn in arns})
    where = RunRepositories(runs, keep=2)
    for arn in [*arns, arns[0]]:
        where(task(arn))
    assert runs.described == [*arns, arns[0]]  # the oldest was forgotten


class Answers:
    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    def answer(self, token: str, answer: Any) -> Any:
        self.sent.append((token, answer))
        return type("Sent", (), {"delivered": True, "gone": None})()


def test_a_task_whose_run_names_no_repository_is_refused_saying_so() -> None:
    answers = Answers()
    tasks = PipelineTasks(answers, prefix="sq", where_for=RunRepositories(Runs({ARN: wire.run_input(42, 7)})))
    summary = tasks.handle(task())
    assert summary["answered"] is True
    ((_, answer),) = answers.sent
    assert answer.error == wire.STAGE_REJECTED and "repository 42 is not known here" in answer.cause
