"""Compiled pipelines run on moto's Step Functions interpreter through the real adapter (issue 30,
item 2): the reference's examples and every construct the compiler emits, each stage's task read
off events.fifo as the router reads it and answered as the router would; the path taken asserted.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from squadron.config import parse_files
from squadron.domain.pipeline_wire import (
    RUN_ESCALATED,
    STAGE_FAILED,
    PipelineTask,
    StageFailed,
    StageSucceeded,
    execution_name,
    origin_problem,
    parse_task,
    run_input,
)
from squadron.domain.pipelines.compile import compile_pipeline
from tests.support.step_functions import PREFIX, Stack, step_functions
from tests.unit.pipelines.test_pipeline_config import files_with

REFERENCE = Path(__file__).resolve().parents[1] / "unit" / "pipelines" / "reference"


@pytest.fixture
def stack() -> Iterator[Stack]:
    with step_functions() as made:
        yield made
        _received.pop(id(made), None)


def publish(stack: Stack, text: str, name: str) -> dict[str, str]:
    """Every pipeline of ``text`` compiled and published, sub-pipelines first; their version ARNs."""
    pipelines = parse_files(files_with(text)).config.pipelines
    versions: dict[str, str] = {}
    order = sorted(pipelines, key=lambda n: pipelines[n].trigger is not None)
    for each in order:
        compiled = compile_pipeline(
            each, pipelines, queue_url=stack.queue_url, repository_id=42, children=versions
        )
        versions[each] = stack.pipelines.ensure(42, each, compiled.definition).version_arn
    assert name in versions
    return versions


def start(stack: Stack, version_arn: str, trigger: dict[str, Any] | None = None) -> str:
    return stack.pipelines.start(
        version_arn, execution_name("delivery-1", version_arn), run_input(42, 7, trigger or {"number": 7})
    ).execution_arn


_received: dict[int, list[PipelineTask]] = {}


def next_task(stack: Stack) -> PipelineTask:
    """The next stage task on events.fifo, read as the router reads it (one receive may bring
    several: the rest wait for the next call)."""
    pending = _received.setdefault(id(stack), [])
    if not pending:
        for message in stack.messages(1):
            task = parse_task(message["Body"])
            assert task is not None and origin_problem(task, PREFIX) is None
            pending.append(task)
    return pending.pop(0)


def answer(stack: Stack, task: PipelineTask, output: dict[str, Any] | None = None) -> None:
    assert stack.pipelines.answer(task.task_token, StageSucceeded(output=output or {})).delivered


def fail(stack: Stack, task: PipelineTask, error: str = STAGE_FAILED) -> None:
    assert stack.pipelines.answer(task.task_token, StageFailed(error=error, cause="it broke")).delivered


def test_the_reference_pr_lifecycle_runs_its_path(stack: Stack) -> None:
    """Coverage, security skipped (its condition is false), review, the gate fails once and goes
    back to review, passes, the merge, then the pipeline's on_complete."""
    text = (REFERENCE / "pr-lifecycle.yaml").read_text(encoding="utf-8")
    arn = start(stack, publish(stack, text, "pr-lifecycle")["pr-lifecycle"])
    path: list[tuple[str, str]] = []
    answers: list[dict[str, Any]] = [
        {"coverage": "ok"},  # test-coverage
        {"skipped": True},  # security-review: no security label, no auth path
        {"review": 1},  # code-review
        {"passed": False},  # approval-gate: changes requested
        {"review": 2},  # code-review again
        {"passed": True},  # approval-gate
        {"merged": True},  # auto-merge
        {},  # on_complete
    ]
    for output in answers:
        task = next_task(stack)
        path.append((task.stage, task.step))
        answer(stack, task, output)
    held = stack.finished(arn)
    assert path == [
        ("test-coverage", "stage"),
        ("security-review", "stage"),
        ("code-review", "stage"),
        ("approval-gate", "stage"),
        ("code-review", "stage"),
        ("approval-gate", "stage"),
        ("auto-merge", "stage"),
        ("__complete__", "on_complete"),
    ]
    assert held["status"] == "SUCCEEDED"
    stages = json.loads(held["output"])["data"]["stages"]
    assert stages["code_1review"] == {"review": 2} and stages["auto_1merge"] == {"merged": True}


def test_a_task_carries_what_the_router_needs(stack: Stack) -> None:
    text = (REFERENCE / "pr-lifecycle.yaml").read_text(encoding="utf-8")
    arn = start(stack, publish(stack, text, "pr-lifecycle")["pr-lifecycle"], {"number": 7, "base": "main"})
    task = next_task(stack)
    assert (task.execution_arn, task.stage, task.stage_type, task.issue_number) == (
        arn,
        "test-coverage",
        "agent",
        7,
    )
    assert task.step_config["agent"] == "test-coverage"
    assert task.step_config["action"] == "Review test coverage for this PR"
    assert task.input == {"trigger": {"number": 7, "base": "main"}, "stages": {}, "context": {}}


def test_a_gate_failing_past_its_iterations_escalates(stack: Stack) -> None:
    text = (REFERENCE / "pr-lifecycle.yaml").read_text(encoding="utf-8")
    arn = start(stack, publish(stack, text, "pr-lifecycle")["pr-lifecycle"])
    for output in ({}, {"skipped": True}):
        answer(stack, next_task(stack), output)
    seen = []
    for _ in range(4):  # review, gate fails: three times back, the fourth failure escalates
        review = next_task(stack)
        answer(stack, review)
        gate = next_task(stack)
        seen.append((review.stage, gate.stage))
        answer(stack, gate, {"passed": False})
    escalate = next_task(stack)
    assert (escalate.stage, escalate.step) == ("__escalate__", "escalate")
    assert escalate.step_config["actions"][0] == {"type": "label", "add": "needs-human"}
    answer(stack, escalate)
    held = stack.finished(arn)
    assert seen == [("code-review", "approval-gate")] * 4
    assert (held["status"], held["error"]) == ("FAILED", RUN_ESCALATED)


def test_a_failed_stage_is_retried_then_escalated(stack: Stack) -> None:
    text = (REFERENCE / "issue-to-merge.yaml").read_text(encoding="utf-8")
    arn = start(stack, publish(stack, text, "feature-dev-lifecycle")["feature-dev-lifecycle"])
    first = next_task(stack)
    fail(stack, first)
    retried = next_task(stack)
    assert (retried.stage, retried.retry_count) == ("implement", 1) and retried.entry != first.entry
    fail(stack, retried)
    escalate = next_task(stack)
    assert escalate.stage == "__escalate__"
    answer(stack, escalate)
    assert stack.finished(arn)["error"] == RUN_ESCALATED


PIPELINES = "pipelines:\n  p:\n    trigger: {event: pull_request.opened}\n"


def stages(yaml: str, more: str = "") -> str:
    return (
        PIPELINES + "    stages:\n" + textwrap.indent(textwrap.dedent(yaml).strip(), "      ") + "\n" + more
    )


def test_a_human_stage_that_times_out_notifies_then_escalates(stack: Stack) -> None:
    text = stages(
        """
        - id: ask
          type: human
          human: {description: "ok?", from: maintainers}
          timeout: 1s
          on_timeout: {notify: {target: maintainers, message: "too late"}, then: escalate}
        """
    )
    arn = start(stack, publish(stack, text, "p")["p"])
    ask = next_task(stack)  # never answered: it times out
    notify = next_task(stack)
    assert (ask.stage_type, notify.stage, notify.step) == ("human", "ask.notify-end", "notify")
    assert notify.step_config["notify"] == {"target": "maintainers", "message": "too late"}
    answer(stack, notify)
    escalate = next_task(stack)
    assert escalate.stage == "__escalate__"
    answer(stack, escalate)
    assert stack.finished(arn)["error"] == RUN_ESCALATED
    assert stack.pipelines.answer(ask.task_token, StageSucceeded()).gone in {"InvalidToken", "TaskTimedOut"}


def test_a_timeout_extended_enters_the_stage_again_then_cancels(stack: Stack) -> None:
    text = stages(
        """
        - id: ask
          type: human
          human: {description: "ok?"}
          timeout: 1s
          on_timeout: {extend: 1s, max_extensions: 1, then: cancel}
        """
    )
    arn = start(stack, publish(stack, text, "p")["p"])
    first = next_task(stack)
    again = next_task(stack)  # the extension: the stage entered again
    assert (first.stage, again.stage) == ("ask", "ask") and first.entry != again.entry
    held = stack.finished(arn)
    assert (held["status"], held["error"]) == ("FAILED", "Squadron.Cancelled")


@pytest.mark.parametrize("join", ["all", "any"])
def test_parallel_branches_join(stack: Stack, join: str) -> None:
    text = stages(
        f"""
        - id: reviews
          type: parallel
          join: {join}
          branches:
            - {{id: sec, agent: pr-review}}
            - {{id: code, agent: pr-review}}
        - {{id: after, type: agent, agent: feat-dev}}
        """
    )
    arn = start(stack, publish(stack, text, "p")["p"])
    by_stage = {t.stage: t for t in (next_task(stack), next_task(stack))}
    assert set(by_stage) == {"sec", "code"}
    answer(stack, by_stage["code"], {"lgtm": True})
    if join == "all":
        answer(stack, by_stage["sec"], {"lgtm": False})
    else:
        # join any ended the stage early: a stop per agent branch before the run goes on (the
        # router leaves the branch that answered alone)
        for branch in ("sec", "code"):
            stop = next_task(stack)
            assert stop.stage == f"{branch}.ended"
            answer(stack, stop)
    after = next_task(stack)
    assert after.stage == "after"
    if join == "all":
        assert after.input["stages"]["reviews"] == {"sec": {"lgtm": False}, "code": {"lgtm": True}}
    else:
        assert after.input["stages"]["reviews"]["Cause"] == "code"
    answer(stack, after)
    assert stack.finished(arn)["status"] == "SUCCEEDED"
    if join == "any":
        # the other branch's stage is over: "gone" (moto takes it until the run ends; AWS at once)
        late = stack.pipelines.answer(by_stage["sec"].task_token, StageSucceeded())
        assert late.gone == "InvalidToken"


def test_a_sub_pipeline_runs_as_a_child_and_its_output_comes_back(stack: Stack) -> None:
    text = stages(
        "- {id: deploy, type: pipeline, pipeline: child}\n- {id: after, type: agent, agent: feat-dev}",
        "  child:\n    stages:\n      - {id: work, type: agent, agent: feat-dev}\n",
    )
    arn = start(stack, publish(stack, text, "p")["p"], {"number": 7})
    work = next_task(stack)
    assert work.stage == "work" and work.pipeline == "child" and work.execution_arn != arn
    assert work.input["trigger"] == {"number": 7}
    answer(stack, work, {"deployed": "v1"})
    after = next_task(stack)
    assert after.execution_arn == arn
    assert after.input["stages"]["deploy"]["output"]["data"]["stages"]["work"] == {"deployed": "v1"}
    answer(stack, after)
    assert stack.finished(arn)["status"] == "SUCCEEDED"


#: (why, the parallel stage's timeout lines): a stage whose timeout can extend has its branches
#: read their timeout off the run's ``timeouts`` (``TimeoutSecondsPath``)
CONDITIONAL_BRANCHES = [
    ("no timeout", ""),
    ("a timeout that extends", "timeout: 1h\non_timeout: {extend: 1h, max_extensions: 1, then: fail}"),
]


@pytest.mark.parametrize(
    "timeout", [c[1] for c in CONDITIONAL_BRANCHES], ids=[c[0] for c in CONDITIONAL_BRANCHES]
)
def test_conditional_branches_of_a_parallel_stage_run_or_skip(stack: Stack, timeout: str) -> None:
    """A sub-pipeline branch whose condition holds starts its child run with the run's trigger;
    one whose condition does not is skipped; an agent and an action branch check their own
    condition in their one task. The branch's condition answer never takes the place of the
    branch's input (the run's data and timeouts the child run and the branch's timeout read)."""
    text = stages(
        f"""
        - id: both
          type: parallel
          {textwrap.indent(timeout, "          ").strip()}
          branches:
            - {{id: run, type: pipeline, pipeline: child, condition: {{labels_include: go}}}}
            - {{id: skip, type: pipeline, pipeline: child, condition: {{labels_include: stop}}}}
            - {{id: look, agent: pr-review, condition: {{labels_include: go}}}}
            - {{id: say, type: action, action: comment, config: {{message: hi}}, condition: {{labels_include: stop}}}}
        - {{id: after, type: agent, agent: feat-dev}}
        """,
        "  child:\n    stages:\n      - {id: work, type: agent, agent: feat-dev}\n",
    )
    arn = start(stack, publish(stack, text, "p")["p"], {"number": 7, "labels": ["go"]})
    first = {t.stage: t for t in (next_task(stack) for _ in range(4))}
    assert set(first) == {"run.if", "skip.if", "look", "say"}
    assert all(t.execution_arn == arn for t in first.values())
    answer(stack, first["run.if"], {})  # the condition holds
    answer(stack, first["skip.if"], {"skipped": True})
    answer(stack, first["look"], {"looked": True})
    answer(stack, first["say"], {"skipped": True})
    work = next_task(stack)
    assert (work.stage, work.pipeline) == ("work", "child") and work.execution_arn != arn
    assert work.input["trigger"] == {"number": 7, "labels": ["go"]}
    answer(stack, work, {"deployed": "v1"})
    after = next_task(stack)
    assert after.stage == "after" and after.execution_arn == arn
    both = after.input["stages"]["both"]
    assert both["run"]["output"]["data"]["stages"]["work"] == {"deployed": "v1"}
    assert (both["skip"], both["look"], both["say"]) == (
        {"skipped": True},
        {"looked": True},
        {"skipped": True},
    )
    answer(stack, after)
    assert stack.finished(arn)["status"] == "SUCCEEDED"


def test_a_delay_then_a_skipped_stage_goes_to_skip_to(stack: Stack) -> None:
    text = stages(
        """
        - {id: cool, type: delay, duration: 1s}
        - {id: sec, type: agent, agent: pr-review, condition: {labels_include: security}, skip_to: last}
        - {id: middle, type: agent, agent: pr-review}
        - {id: last, type: agent, agent: feat-dev}
        """
    )
    arn = start(stack, publish(stack, text, "p")["p"])
    sec = next_task(stack)
    history = stack.sfn.get_execution_history(executionArn=arn)["events"]
    assert any(e["type"] == "WaitStateExited" for e in history)
    answer(stack, sec, {"skipped": True})
    last = next_task(stack)
    assert last.stage == "last"
    answer(stack, last)
    assert stack.finished(arn)["status"] == "SUCCEEDED"


def test_the_repository_context_reaches_a_stage_as_data_never_as_a_path(stack: Stack) -> None:
    """The attacker's context asks Step Functions for the task token and the run's input; the
    stage gets the literal strings."""
    text = PIPELINES + (
        "    context: {'token.$': '$$.Task.Token', 'run.$': '$$.Execution.Input'}\n"
        "    stages:\n      - {id: a, type: agent, agent: feat-dev}\n"
    )
    arn = start(stack, publish(stack, text, "p")["p"])
    task = next_task(stack)
    assert task.input["context"] == {"token.$": "$$.Task.Token", "run.$": "$$.Execution.Input"}
    assert task.task_token not in json.dumps(task.input)
    answer(stack, task)
    assert stack.finished(arn)["status"] == "SUCCEEDED"
