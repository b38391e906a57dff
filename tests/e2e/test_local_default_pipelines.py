"""An issue's whole life through the built-in default pipelines (issue 30, item 3), in the local
stack: moto's Step Functions interpreter, the GitHub sandbox, and every agent through the real
Copilot CLI against the scripted model (:func:`happy_policy`).

The repository chooses ``orchestration: pipelines``. A person opens an issue; the PM (the fixed
routing's: triage is kept by the framework) labels it and assigns the App; that assignment starts
``feature-development`` (and ``bug-development``, which skips to its end without ``bug``), and
no dev agent starts but the run's. The run's ``implement`` stage starts feat-dev, which opens a
pull request; the stage answers with the framework's ``pr_number``; the ``review`` stage takes
that pull request's reviewer; the gate judges that pull request; ``merge`` asks the merge gate
for it, which merges once CI passes. The same issue played with ``orchestration: fixed`` starts
no run and ends the same way (today's scenario, kept).
"""

from __future__ import annotations

import io
from typing import Any

import pytest

from squadron.local.demo import DEMO_FLOWS, ISSUE_TITLE, demo_policy, play, prompt_role
from squadron.local.model import Json, Turn, calls_since_prompt
from squadron.local.stack import LocalStack
from tests.e2e.conftest import ROOT, Human, StackFactory, launches
from tests.support.local_pipelines import CONFIG, FLOWS, LocalPipelines, until

pytestmark = pytest.mark.e2e

#: Long enough for agents through the real CLI on a loaded machine; every wait ends at its condition.
AGENTS = 300.0


def _all_calls(request: Json) -> list[str]:
    return [
        str(call.get("function", {}).get("name"))
        for message in request.get("messages", [])
        for call in message.get("tool_calls") or []
    ]


def _reviewer(request: Json) -> Turn:
    """Reviews once per session, reads its news first at each prompt (the run's review stage tells
    the reviewer the fixed routing started), and reports once per prompt."""
    since, done = calls_since_prompt(request), _all_calls(request)
    if "check_for_events" not in since:
        return ("check_for_events", {})
    steps: list[Turn] = [
        ("read_pull_request", {}),
        ("submit_review", {"event": "APPROVE", "body": "Read the diff: the export is small."}),
        ("post_status", {"state": "success", "description": "approved"}),
    ]
    for step in steps:
        if isinstance(step, tuple) and step[0] not in done:
            return step
    if "report_complete" not in since:
        return ("report_complete", {"summary": "Approved."})
    return "Approved."


def happy_policy(request: Json) -> Turn | None:
    """The demo's model, but a dev agent that implements at once (no blocker)."""
    role = prompt_role(request)
    if role == "pr-review":
        return _reviewer(request)
    if role != "feat-dev":
        return demo_policy(request)
    plan: list[Turn] = [
        ("check_for_events", {}),
        (
            "bash",
            {
                "command": "printf 'def export(rows):\\n    return rows\\n' > export.py",
                "description": "write the export",
            },
        ),
        ("open_pr", {"title": ISSUE_TITLE, "body": "Adds export.py."}),
        ("report_complete", {"summary": "Opened the pull request for the CSV export."}),
        "PR open.",
    ]
    done = calls_since_prompt(request)
    return plan[len(done)] if len(done) < len(plan) else "Done."


#: What the router's decision of the PM's assignment says under ``orchestration: pipelines``.
LEFT = "left to pipeline run(s) bug-development, feature-development (orchestration: pipelines)"


def routing_log(stack: LocalStack) -> str:
    """The Lambdas' log (each decision's discards are in it)."""
    return (stack.options.state_dir / "logs" / "lambdas.log").read_text(encoding="utf-8")


def blocked_policy(request: Json) -> Turn | None:
    """The demo's model (its dev agent files a blocker and sleeps on it first), with the reviewer
    that reads its news."""
    return _reviewer(request) if prompt_role(request) == "pr-review" else demo_policy(request)


def start(
    local_stack: StackFactory, orchestration: str, policy: Any = happy_policy
) -> tuple[LocalStack, LocalPipelines]:
    own = (ROOT / CONFIG).read_text(encoding="utf-8")
    config = own + f"\norchestration: {orchestration}\n"
    stack = local_stack(policy, files={CONFIG: config, FLOWS: DEMO_FLOWS})
    return stack, LocalPipelines(stack)


def pull_of(runs: LocalPipelines, issue: int) -> dict[str, Any]:
    return until(
        "the dev agent's pull request",
        lambda: next((p for n, p in runs.repo.pulls.items() if n > issue), None),
        AGENTS,
    )


def reviewed(runs: LocalPipelines, pull: dict[str, Any]) -> bool:
    return any(
        s["context"] == "squadron/pr-review" and s["state"] == "success"
        for s in runs.repo.statuses.get(pull["head"]["sha"], [])
    )


def pass_ci(stack: LocalStack, pull: dict[str, Any]) -> None:
    Human(stack, login="ci-bot").call(
        "POST",
        "/check-runs",
        name="ci",
        head_sha=pull["head"]["sha"],
        status="completed",
        conclusion="success",
    )


def test_an_issue_plays_through_the_default_pipelines_to_its_merge(local_stack: StackFactory) -> None:
    stack, runs = start(local_stack, "pipelines")
    repo_id = runs.repo.id
    number = Human(stack).open_issue(ISSUE_TITLE, body="Operators want the registry as a CSV file.")

    run = runs.run_of("feature-development", number)
    skipped = runs.finished(runs.run_of("bug-development", number))
    assert skipped.status == "SUCCEEDED" and "fix" in runs.entered(skipped.execution_arn)

    pull = pull_of(runs, number)
    pr = int(pull["number"])
    until("the review's verdict", lambda: reviewed(runs, pull), AGENTS)
    until("the gate to pass", lambda: "merge" in runs.entered(run), AGENTS)
    pass_ci(stack, pull)

    ended = runs.finished(run)
    assert ended.status == "SUCCEEDED", (ended.error, ended.cause)
    entered = runs.entered(run)
    assert [s for s in entered if s in ("implement", "review", "gate", "merge")] == [
        "implement",
        "review",
        "gate",
        "merge",
    ], entered
    # The dev stage answered with the App's pull request, which the review, gate and merge acted on.
    (implemented,) = runs.outputs(run, "implement")
    assert implemented["data"]["stages"]["implement"]["outputs"]["pr_number"] == str(pr)
    (review,) = runs.outputs(run, "review")
    assert review["data"]["stages"]["review"]["agent"] == f"{repo_id}-{pr}-pr-review"
    (gate,) = runs.outputs(run, "gate")
    assert gate["data"]["stages"]["gate"]["passed"] is True
    (merge,) = runs.outputs(run, "merge")
    assert merge["data"]["stages"]["merge"] == {"merge": "asked", "pr": pr}
    until("the merge", lambda: runs.repo.pulls[pr]["merged"], AGENTS)
    until("the issue to close", lambda: runs.repo.issues[number]["state"] == "closed", AGENTS)
    # One dev agent, started by the run's stage: the PM's assignment left it to the runs.
    assert launches(stack, f"{repo_id}-{number}-feat-dev")[:1] == ["start"]
    assert LEFT in routing_log(stack)
    assert stack.errors == []


def test_the_same_issue_with_fixed_orchestration_starts_no_run(local_stack: StackFactory) -> None:
    stack, runs = start(local_stack, "fixed")
    number = Human(stack).open_issue(ISSUE_TITLE, body="Operators want the registry as a CSV file.")

    pull = pull_of(runs, number)
    until("the review's verdict", lambda: reviewed(runs, pull), AGENTS)
    pass_ci(stack, pull)
    until("the merge", lambda: runs.repo.pulls[int(pull["number"])]["merged"], AGENTS)
    until("the issue to close", lambda: runs.repo.issues[number]["state"] == "closed", AGENTS)
    assert runs.executions("feature-development") == []
    assert LEFT not in routing_log(stack)
    assert stack.errors == []


@pytest.mark.parametrize("orchestration", ["pipelines", "fixed"])
def test_the_demo_s_blocked_issue_plays_the_same_both_ways(
    local_stack: StackFactory, orchestration: str
) -> None:
    """The demo's scenario (squadron local --demo): the dev agent files a blocker and sleeps; a
    person closes it; the dev wakes with its conversation, opens its pull request; review, CI,
    merge, the issue closes. Under ``pipelines`` the dev's stage waits through its sleep."""
    stack, runs = start(local_stack, orchestration, blocked_policy)
    play(stack, io.StringIO(), step_timeout=AGENTS)

    (number, *_) = sorted(runs.repo.issues)
    dev = f"{runs.repo.id}-{number}-feat-dev"
    assert launches(stack, dev)[:2] == ["start", "wake"]
    if orchestration == "fixed":
        assert runs.executions("feature-development") == []
        return
    run = runs.run_of("feature-development", number)
    ended = runs.finished(run)
    assert ended.status == "SUCCEEDED", (ended.error, ended.cause)
    entered = runs.entered(run)
    assert entered.count("implement") == 1, entered  # no retry: the stage waited for the wake
    (merge,) = runs.outputs(run, "merge")
    pull = merge["data"]["stages"]["merge"]["pr"]
    assert runs.repo.pulls[pull]["merged"]
    assert "needs-human" not in runs.labels(number)
    assert stack.errors == []
