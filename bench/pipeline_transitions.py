"""Step Functions state transitions per pipeline run, and what they cost (issue 30's bench).

Each representative pipeline is compiled as Squadron publishes it (``compile_pipeline``), run on
moto's Step Functions interpreter (tests/support/step_functions.py) and driven to its end by
answering every task it puts on the queue as a scripted router would (agents finish, gates pass
or fail as the case says, people answer after the reminders). Its execution history is then
counted: Step Functions Standard bills a state transition each time a state is executed, retries
included, so a run's transitions are its ``...StateEntered`` events plus its task retries (a
``TaskScheduled`` again within one entry). Only the count is measured; the wall time of a run on
moto says nothing of AWS's.

Waits are compressed: a human stage's reminder interval (at least an hour) is rewritten to 0
seconds before the definition is published, which changes when the states run, not how many.

Price: Standard workflows, 0.025 USD per 1,000 state transitions (us-east-1 list price,
https://aws.amazon.com/step-functions/pricing/, "Standard Workflows"; the free tier's 4,000
transitions a month are left out). Express workflows are not used: a run waits days for people.

    python -m bench pipeline_transitions
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from squadron.config import parse_files
from squadron.domain.pipeline_wire import StageSucceeded, execution_name, run_input
from squadron.domain.pipelines.compile import compile_pipeline
from tests.support.step_functions import Stack, step_functions, wait_for
from tests.unit.pipelines.test_pipeline_config import files_with

#: USD per 1,000 state transitions of a Standard workflow (see the module's docstring).
USD_PER_1000_TRANSITIONS = 0.025
PRICE_SOURCE = (
    "https://aws.amazon.com/step-functions/pricing/ (Standard Workflows, us-east-1: "
    "0.025 USD per 1,000 state transitions; the free tier's 4,000 a month left out)"
)
DOCS = Path(__file__).resolve().parents[1] / "docs" / "pipelines.md"
REPOSITORY = 42
ISSUE = 7


def reference_example() -> str:
    """The reference's PR lifecycle pipeline exactly as docs/pipelines.md shows it."""
    text = DOCS.read_text(encoding="utf-8")
    found = re.search(r"```yaml\n(pipelines:\n.*?)```", text, re.DOTALL)
    assert found is not None, "docs/pipelines.md has no pipelines example"
    return found.group(1)


PARALLEL_REVIEW = """pipelines:
  parallel-review:
    trigger: {event: pull_request.opened}
    stages:
      - id: reviews
        type: parallel
        join: all
        branches:
          - {id: code, agent: pr-review, action: "Review the code"}
          - {id: tests, agent: test-coverage, action: "Review the tests"}
          - {id: security, agent: security-review, action: "Review security"}
      - id: approved
        type: gate
        conditions: [{check: pr_approvals_met, count: 1}, {check: ci_status}]
      - {id: merge, type: action, action: merge_pr, config: {method: squash}}
"""

HUMAN_WITH_REMINDERS = """pipelines:
  release-approval:
    trigger: {event: pull_request.opened}
    stages:
      - id: sign-off
        type: human
        human:
          description: "A maintainer signs the release off"
          wait_for: approval
          from: maintainers
          notify:
            on_enter: "A release waits for your approval"
            reminder: {interval: 24h, message: "Still waiting", max_reminders: 3}
      - {id: merge, type: action, action: merge_pr, config: {method: squash}}
"""


@dataclass(frozen=True)
class Case:
    """A pipeline, and how the scripted router answers its tasks."""

    config: str
    pipeline: str
    description: str
    #: (stage, step) -> the successive outputs of its answers (the last one repeats).
    answers: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    #: A human stage is answered only after this many reminders were sent.
    reminders: int = 0


def _cases() -> dict[str, Case]:
    reference = reference_example()
    skipped = {("security-review", "stage"): [{"skipped": True}]}
    return {
        "pr_lifecycle": Case(
            reference,
            "pr-lifecycle",
            "docs/pipelines.md's example: test coverage, security review skipped (no label, no "
            "auth path), code review, approval gate passes, merge, on_complete comment",
            answers={**skipped, ("approval-gate", "stage"): [{"passed": True}]},
        ),
        "pr_lifecycle_one_round_trip": Case(
            reference,
            "pr-lifecycle",
            "the same, the approval gate failing once (changes requested): back to code review, "
            "then it passes",
            answers={
                **skipped,
                ("approval-gate", "stage"): [
                    {"passed": False, "failing": ["no_changes_requested"]},
                    {"passed": True},
                ],
            },
        ),
        "parallel_review": Case(
            PARALLEL_REVIEW,
            "parallel-review",
            "three agent reviews in parallel (join all), a gate, a merge",
            answers={("approved", "stage"): [{"passed": True}]},
        ),
        "human_with_reminders": Case(
            HUMAN_WITH_REMINDERS,
            "release-approval",
            "a human approval notified on entry and answered after its 3 reminders, then a merge",
            reminders=3,
        ),
    }


def compressed(definition: dict[str, Any]) -> dict[str, Any]:
    """``definition`` with every Wait's ``Seconds`` 0 (what runs is the same; when is not)."""

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            out = {k: walk(v) for k, v in value.items()}
            if out.get("Type") == "Wait" and "Seconds" in out:
                out["Seconds"] = 0
            return out
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    result: dict[str, Any] = walk(definition)
    return result


def _history(stack: Stack, arn: str) -> Iterator[dict[str, Any]]:
    kwargs: dict[str, Any] = {"executionArn": arn, "maxResults": 1000}
    while True:
        page = stack.sfn.get_execution_history(**kwargs)
        yield from page["events"]
        if not page.get("nextToken"):
            return
        kwargs["nextToken"] = page["nextToken"]


def transitions(history: list[dict[str, Any]]) -> dict[str, int]:
    """What Step Functions bills in ``history``: each state entered, and each task retry."""
    kinds = Counter(str(e["type"]) for e in history)
    entered = sum(n for kind, n in kinds.items() if kind.endswith("StateEntered"))
    retries = max(0, kinds["TaskScheduled"] - kinds["TaskStateEntered"])
    return {
        "states_entered": entered,
        "task_retries": retries,
        "transitions": entered + retries,
        "tasks_answered": kinds["TaskSucceeded"] + kinds["TaskFailed"],
        "history_events": len(history),
    }


def run_case(stack: Stack, name: str, case: Case) -> dict[str, Any]:
    pipelines = parse_files(files_with(case.config)).config.pipelines
    compiled = compile_pipeline(
        case.pipeline, pipelines, queue_url=stack.queue_url, repository_id=REPOSITORY, children={}
    )
    version = stack.pipelines.ensure(REPOSITORY, case.pipeline, compressed(compiled.definition)).version_arn
    arn = stack.pipelines.start(
        version, execution_name("bench", name), run_input(REPOSITORY, ISSUE, {"pr_number": ISSUE})
    ).execution_arn
    given: Counter[tuple[str, str]] = Counter()
    reminded = 0
    held: list[str] = []
    steps: list[str] = []

    def next_task() -> dict[str, Any] | str | None:
        got = stack.sqs.receive_message(QueueUrl=stack.queue_url, MaxNumberOfMessages=1).get("Messages", [])
        if got:
            stack.sqs.delete_message(QueueUrl=stack.queue_url, ReceiptHandle=got[0]["ReceiptHandle"])
            body: dict[str, Any] = json.loads(got[0]["Body"])
            return body
        return "ended" if stack.sfn.describe_execution(executionArn=arn)["status"] != "RUNNING" else None

    for _ in range(200):
        task = wait_for(f"a task of {name} or its end", next_task)
        if task == "ended":
            break
        assert isinstance(task, dict)
        stage, step = str(task["stage"]), str(task["step"])
        steps.append(f"{stage}:{step}")
        if step == "remind":
            reminded += 1
        if task["stage_type"] == "human" and step == "stage" and reminded < case.reminders:
            held.append(str(task["task_token"]))
        else:
            outputs = case.answers.get((stage, step), [{}])
            output = outputs[min(given[(stage, step)], len(outputs) - 1)]
            given[(stage, step)] += 1
            stack.pipelines.answer(str(task["task_token"]), StageSucceeded(output=output))
        if held and reminded >= case.reminders:
            for token in held:
                stack.pipelines.answer(token, StageSucceeded(output={"approved": True}))
            held.clear()
    ended = stack.finished(arn)
    counted = transitions(list(_history(stack, arn)))
    return {
        "description": case.description,
        "status": ended["status"],
        "tasks": steps,
        **counted,
        "usd_per_run": round(counted["transitions"] * USD_PER_1000_TRANSITIONS / 1000, 6),
    }


def bench_pipeline_transitions() -> dict[str, Any]:
    runs: dict[str, Any] = {}
    # moto's interpreter logs the Fail a join-any branch ends with (caught by its Parallel) as an error
    logging.getLogger("moto").setLevel(logging.CRITICAL)
    with step_functions() as stack:
        for name, case in _cases().items():
            runs[name] = run_case(stack, name, case)
    lifecycle = runs["pr_lifecycle_one_round_trip"]["transitions"]
    return {
        "price": {"usd_per_1000_transitions": USD_PER_1000_TRANSITIONS, "source": PRICE_SOURCE},
        "runs": runs,
        "issue_lifecycle": {
            "assumed": "one pr-lifecycle run per issue (its pull request), the approval gate failing once",
            "transitions": lifecycle,
            "usd": round(lifecycle * USD_PER_1000_TRANSITIONS / 1000, 6),
            "usd_per_1000_issues": round(lifecycle * USD_PER_1000_TRANSITIONS, 3),
        },
    }


def summary(result: dict[str, Any]) -> str:
    runs = ", ".join(f"{name} {run['transitions']}" for name, run in result["runs"].items())
    lifecycle = result["issue_lifecycle"]
    return (
        f"transitions per run: {runs}; an issue lifecycle {lifecycle['transitions']} transitions, "
        f"{lifecycle['usd']:.5f} USD ({lifecycle['usd_per_1000_issues']:.2f} per 1,000 issues)"
    )
