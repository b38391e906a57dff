"""Approval flows migrated to pipelines run on moto's Step Functions interpreter (issue 30, item 3):
each stage's task read off events.fifo, planned and judged by the router's own pure code
(:func:`~squadron.domain.pipelines.work.safe_plan`, :func:`~squadron.domain.pipelines.work.judged`)
against what GitHub would say of the pull request; the path taken and whether the merge gate is
asked, asserted per pull request."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from squadron.config import parse_files
from squadron.config.migration import migration
from squadron.domain.effects import EvaluateMerge
from squadron.domain.pipeline_wire import (
    StageSucceeded,
    execution_name,
    origin_problem,
    parse_task,
    run_input,
)
from squadron.domain.pipelines.compile import compile_pipeline
from squadron.domain.pipelines.judge import CheckResult, Facts, Review
from squadron.domain.pipelines.work import Act, Judge, Refuse, Where, judged, safe_plan
from tests.support.step_functions import PREFIX, Stack, step_functions, wait_for

FLOWS = textwrap.dedent(
    """\
    default:
      required_reviews: [{role: agent:pr-review}]
      required_status_checks: [ci]
      merge_policy: {auto_merge: true, method: rebase}
      protected_paths:
        - paths: [".squadron/**"]
          required_reviews: [{role: human_group:maintainers}]
          require_human: true
    branch_rules:
      - pattern: main
        merge_policy: {require_human: true}
    """
)
CONFIG = "human_groups:\n  maintainers: {members: [octocat]}\n"
WHERE = Where("octo/repo", 1)


@pytest.fixture
def stack() -> Iterator[Stack]:
    with step_functions() as made:
        yield made


def green(*files: str, reviews: tuple[Review, ...] = ()) -> Facts:
    return Facts(
        number=7,
        is_pull=True,
        files=files or ("src/app.py",),
        reviews=reviews,
        permissions={"octocat": "write"},
        app_login="squadron[bot]",
        # the review agent's verdict is the App's status (docs/pipelines.md, "Gate checks")
        checks=(
            CheckResult("squadron/pr-review", "success", kind="status", creator="squadron[bot]"),
            CheckResult("ci", "success"),
        ),
        mergeable_state="clean",
        head_sha="abc123",
    )


@dataclass(frozen=True)
class Ran:
    path: list[str]
    merge_asked: bool
    status: str


def run(stack: Stack, base: str, facts: Facts) -> Ran:
    pipelines = migration(
        parse_files({"config.yaml": CONFIG, "workflows/approval-flows.yaml": FLOWS})
    ).models()
    versions = {
        name: stack.pipelines.ensure(
            42,
            name,
            compile_pipeline(
                name, pipelines, queue_url=stack.queue_url, repository_id=42, children={}
            ).definition,
        ).version_arn
        for name in pipelines
    }
    name = "approval-main" if base == "main" else "approval-default"
    arn = stack.pipelines.start(
        versions[name],
        execution_name("delivery-1", versions[name]),
        run_input(42, 7, {"pr_number": 7, "base_branch": base, "number": 7}),
    ).execution_arn
    path: list[str] = []
    merge_asked = False
    while (body := next_task_or_end(stack, arn)) is not None:
        task = parse_task(body)
        assert task is not None and origin_problem(task, PREFIX) is None
        path.append(task.stage if task.step == "stage" else f"{task.stage}.{task.step}")
        work = safe_plan(task, WHERE)
        assert not isinstance(work, Refuse), work
        if isinstance(work, Judge):
            result = judged(work, facts, task.input)
            assert isinstance(result, StageSucceeded | Act), result
            work = result if isinstance(result, Act) else Act((), result.output)
        assert isinstance(work, Act), work
        merge_asked |= any(isinstance(effect, EvaluateMerge) for effect in work.effects)
        assert stack.pipelines.answer(task.task_token, StageSucceeded(output=work.output)).delivered
    return Ran(path, merge_asked, stack.finished(arn)["status"])


def next_task_or_end(stack: Stack, arn: str) -> str | None:
    """The next task's message body, or None once the run ended with none left."""

    def probe() -> tuple[str | None] | None:
        answer = stack.sqs.receive_message(QueueUrl=stack.queue_url, MaxNumberOfMessages=1)
        for message in answer.get("Messages", []):
            stack.sqs.delete_message(QueueUrl=stack.queue_url, ReceiptHandle=message["ReceiptHandle"])
            return (str(message["Body"]),)
        running = stack.sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
        return None if running else (None,)

    return wait_for("a task or the run's end", probe)[0]


HUMAN = Review("octocat", "APPROVED", bot=False, submitted_at="2026-01-01T00:00:00Z")
ASKING = Review("octocat", "CHANGES_REQUESTED", bot=False, submitted_at="2026-01-01T00:00:00Z")

CASES = [
    (
        "into dev, reviewed and green: the gate passes, the protected path is skipped, merge_pr asks the gate",
        "dev",
        green(),
        Ran(["approval", "protected-1", "hand-over", "merge"], True, "SUCCEEDED"),
    ),
    (
        "into dev, changing .squadron/ with a person's approval: the run ends without merging (a person merges)",
        "dev",
        green(".squadron/config.yaml", reviews=(HUMAN,)),
        Ran(["approval", "protected-1", "hand-over"], False, "SUCCEEDED"),
    ),
    (
        "into dev, changing .squadron/ without a person: the protected gate fails the run (no on_fail)",
        "dev",
        green(".squadron/config.yaml"),
        Ran(["approval", "protected-1"], False, "FAILED"),
    ),
    (
        "into dev, changes requested: the first gate fails the run",
        "dev",
        green(reviews=(ASKING,)),
        Ran(["approval"], False, "FAILED"),
    ),
    (
        "into main, run by approval-main: a person merges, nothing asked",
        "main",
        green(reviews=(HUMAN,)),
        Ran(["approval", "protected-1"], False, "SUCCEEDED"),
    ),
]


@pytest.mark.parametrize(("case", "base", "facts", "expected"), CASES, ids=[c[0] for c in CASES])
def test_a_migrated_flow_runs_its_path_on_moto(
    stack: Stack, case: str, base: str, facts: Facts, expected: Ran
) -> None:
    assert run(stack, base, facts) == expected


def test_approval_default_skips_a_branch_that_has_its_own_pipeline(stack: Stack) -> None:
    pipelines = migration(
        parse_files({"config.yaml": CONFIG, "workflows/approval-flows.yaml": FLOWS})
    ).models()
    compiled = compile_pipeline(
        "approval-default", pipelines, queue_url=stack.queue_url, repository_id=42, children={}
    )
    version = stack.pipelines.ensure(42, "approval-default", compiled.definition).version_arn
    arn = stack.pipelines.start(
        version,
        execution_name("delivery-2", version),
        run_input(42, 7, {"pr_number": 7, "base_branch": "main"}),
    ).execution_arn
    body = next_task_or_end(stack, arn)
    assert body is not None
    task = parse_task(body)
    assert task is not None
    work = safe_plan(task, WHERE)
    assert isinstance(work, Judge)
    result = judged(work, green(), task.input)
    assert result == StageSucceeded(output={"skipped": True})
    assert stack.pipelines.answer(task.task_token, result).delivered
    assert next_task_or_end(stack, arn) is None
    assert stack.finished(arn)["status"] == "SUCCEEDED"
