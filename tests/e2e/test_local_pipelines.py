"""Pipeline runs played whole in the local stack: the router starts a repository's pipeline on
moto's Step Functions interpreter (its server, as ``squadron local`` runs it), each stage's
``sqs:sendMessage.waitForTaskToken`` task comes back through events.fifo to the router, which
carries it out against the GitHub sandbox and answers. Each test asserts on what the sandbox
shows and on the execution's status and history.

The stages here are those the router carries out today (gate, condition, delay, action,
sub-pipeline, parallel); a webhook stage needs the internet. Agent and human stages belong
beside these, with :mod:`tests.support.local_pipelines`.
"""

from __future__ import annotations

from typing import Any

import pytest

from squadron.local.stack import LocalStack
from tests.e2e.conftest import Human, StackFactory
from tests.support.local_pipelines import CONFIG, FLOWS, LocalPipelines, config_with, until

pytestmark = pytest.mark.e2e

OPENED = {"event": "pull_request.opened", "conditions": {"base_branch": "main"}}
#: Only the status check ``ci`` is required, and the framework merges what passes (no agent
#: reviews: no agent is started).
FLOWS_CI_ONLY = """\
version: 1
default:
  required_reviews: []
  required_status_checks: [ci]
  merge_policy: {method: squash, auto_merge: true, require_ci_pass: true, delete_branch: true}
"""


def start(
    local_stack: StackFactory, pipelines: dict[str, Any], **options: Any
) -> tuple[LocalStack, LocalPipelines]:
    stack = local_stack(files={CONFIG: config_with(pipelines), FLOWS: FLOWS_CI_ONLY}, **options)
    return stack, LocalPipelines(stack)


def test_a_writers_pull_request_runs_its_pipeline_through_a_gate_to_the_merge_gate(
    local_stack: StackFactory,
) -> None:
    pipelines = {
        "ship": {
            "trigger": OPENED,
            "stages": [
                {"id": "settle", "type": "delay", "duration": "1s"},
                {
                    "id": "ci-gate",
                    "type": "gate",
                    "conditions": [{"check": "ci_status", "workflows": ["ci"]}],
                    "on_fail": {"goto": "settle", "max_iterations": 10, "then": "escalate"},
                },
                {"id": "merge", "type": "action", "action": "merge_pr", "config": {"method": "squash"}},
            ],
            "on_complete": [{"type": "comment", "body": "Pipeline ship complete."}],
        }
    }
    stack, runs = start(local_stack, pipelines)
    # Someone without write access opens a pull request first: it starts nothing.
    stranger = runs.open_pull("stranger", "A stranger's change", login="mallory")
    pull = runs.open_pull("feature", "A writer's change")
    number = int(pull["number"])
    run = runs.run_of("ship", number)
    # The gate judged the pull request as GitHub has it (no ``ci`` yet) and went round the delay.
    until("the gate to fail once", lambda: "ci-gate.failed" in runs.entered(run))
    assert not runs.repo.pulls[number]["merged"]
    (failing, *_) = runs.outputs(run, "ci-gate")
    assert failing["data"]["stages"]["ci_1gate"] == {
        "passed": False,
        "failing": [f"ci_status on #{number}: not reported: ci"],
    }
    Human(stack).call("POST", f"/statuses/{pull['head']['sha']}", state="success", context="ci")

    ended = runs.finished(run)
    assert ended.status == "SUCCEEDED", (ended.error, ended.cause)
    entered = runs.entered(run)
    assert entered[-3:] == ["merge", "__complete__", "__succeeded__"], entered
    assert entered.count("settle") >= 2  # it waited, then judged again
    merged = runs.repo.pulls[number]
    bot = runs.bot
    assert merged["merged"] and merged["merged_by"]["login"] == bot
    # Through Squadron's merge gate: its verdict on the head, as the App.
    verdicts = runs.repo.statuses[pull["head"]["sha"]]
    assert ("squadron/merge", "success", bot) in {
        (v["context"], v["state"], v["creator"]["login"]) for v in verdicts
    }
    assert runs.said(number, "Pipeline ship complete.")
    # The stranger's pull request: routed, and no run of it; it stays open and unmerged.
    until(
        "the stranger's pull request to be routed",
        lambda: runs.routed("pull_request", "opened", int(stranger["number"])),
    )
    assert [
        runs.view(e["executionArn"]).input["squadron"]["issue_number"] for e in runs.executions("ship")
    ] == [number]
    assert not runs.repo.pulls[int(stranger["number"])]["merged"]
    assert stack.errors == []


def comment(stage: str, message: str) -> dict[str, Any]:
    return {"id": stage, "type": "action", "action": "comment", "config": {"message": message}}


def test_parallel_branches_join_all_then_any(local_stack: StackFactory) -> None:
    pipelines = {
        "fan": {
            "trigger": OPENED,
            "stages": [
                {
                    "id": "both",
                    "type": "parallel",
                    "join": "all",
                    "branches": [
                        {"id": "tag", "type": "action", "action": "add_label", "config": {"label": "fanned"}},
                        {"id": "greet", "type": "pipeline", "pipeline": "greet"},
                    ],
                },
                {
                    "id": "first",
                    "type": "parallel",
                    "join": "any",
                    "branches": [
                        {**comment("quick", "quick branch done"), "type": "action"},
                        {"id": "slow", "type": "pipeline", "pipeline": "slow"},
                    ],
                },
            ],
        },
        "greet": {
            "stages": [
                {"id": "pause", "type": "delay", "duration": "1s"},
                comment("hello", "greet branch done"),
            ]
        },
        "slow": {
            "stages": [{"id": "long", "type": "delay", "duration": "1h"}, comment("late", "slow branch done")]
        },
    }
    stack, runs = start(local_stack, pipelines)
    number = int(runs.open_pull("fan", "Fan out")["number"])
    run = runs.run_of("fan", number)
    ended = runs.finished(run)
    assert ended.status == "SUCCEEDED", (ended.error, ended.cause)
    assert "fanned" in runs.labels(number)
    assert runs.said(number, "greet branch done") and runs.said(number, "quick branch done")
    assert not runs.said(number, "slow branch done")
    # Join all: the stage ended after its slower branch, the child run, had succeeded.
    (greet,) = [runs.view(e["executionArn"]) for e in runs.executions("greet")]
    assert greet.parent == run and greet.status == "SUCCEEDED"
    assert greet.stopped_at is not None and greet.stopped_at <= runs.exited_at(run, "both")
    # Join any: the quick branch ended the stage and the run while the slow child still waited.
    (slow,) = [runs.view(e["executionArn"]) for e in runs.executions("slow")]
    assert slow.parent == run and slow.status != "SUCCEEDED"
    assert "long" in runs.entered(slow.execution_arn) and "late" not in runs.entered(slow.execution_arn)
    assert stack.errors == []


def test_a_sub_pipeline_stage_runs_a_child_execution_and_the_parent_goes_on(
    local_stack: StackFactory,
) -> None:
    """The child labels the pull request and gates on it; the parent's stages after it have
    conditions judged on what the child did: one true, one false that skips to the end."""
    pipelines = {
        "outer": {
            "trigger": OPENED,
            "stages": [
                {"id": "checks", "type": "pipeline", "pipeline": "checks"},
                {**comment("if-checked", "the checks passed"), "condition": {"labels_include": "checked"}},
                {
                    "id": "if-urgent",
                    "type": "action",
                    "action": "add_label",
                    "config": {"label": "urgent-seen"},
                    "condition": {"labels_include": "urgent"},
                    "skip_to": "done",
                },
                comment("unreached", "never said"),
                comment("done", "outer done"),
            ],
        },
        "checks": {
            "stages": [
                {"id": "mark", "type": "action", "action": "add_label", "config": {"label": "checked"}},
                {
                    "id": "marked",
                    "type": "gate",
                    "conditions": [{"check": "label_present", "label": "checked"}],
                },
            ]
        },
    }
    stack, runs = start(local_stack, pipelines)
    number = int(runs.open_pull("nested", "Nested")["number"])
    run = runs.run_of("outer", number)
    ended = runs.finished(run)
    assert ended.status == "SUCCEEDED", (ended.error, ended.cause)
    (child,) = [runs.view(e["executionArn"]) for e in runs.executions("checks")]
    assert child.parent == run and child.status == "SUCCEEDED"
    assert [s for s in runs.entered(child.execution_arn) if s in ("mark", "marked")] == ["mark", "marked"]
    assert runs.outputs(child.execution_arn, "marked")[-1]["data"]["stages"]["marked"] == {"passed": True}
    outer = runs.entered(run)
    assert outer.index("checks") < outer.index("if-checked") < outer.index("if-urgent") < outer.index("done")
    assert "unreached" not in outer
    assert runs.outputs(run, "if-urgent")[-1]["data"]["stages"]["if_1urgent"] == {"skipped": True}
    assert "checked" in runs.labels(number) and "urgent-seen" not in runs.labels(number)
    assert runs.said(number, "the checks passed") and runs.said(number, "outer done")
    assert not runs.said(number, "never said")
    assert stack.errors == []


def holding(version: str) -> dict[str, Any]:
    """A pipeline whose run waits (a delay, then a gate, again) until its pull request is labelled
    ``go``, then says which version it ran."""
    return {
        "hold": {
            "trigger": OPENED,
            "stages": [
                {"id": "pause", "type": "delay", "duration": "2s"},
                {
                    "id": "go",
                    "type": "gate",
                    "conditions": [{"check": "label_present", "label": "go"}],
                    "on_fail": {"goto": "pause", "max_iterations": 10, "then": "escalate"},
                },
                comment("say", f"hold {version} finished"),
            ],
        }
    }


def test_a_config_change_mid_run_leaves_the_run_on_its_version_and_the_next_run_takes_the_new(
    local_stack: StackFactory,
) -> None:
    # Each event reads the default branch's configuration (the stack's cache is off).
    stack, runs = start(local_stack, holding("v1"), config_ttl_seconds=0)
    human = Human(stack)
    first = int(runs.open_pull("first", "First")["number"])
    run_1 = runs.run_of("hold", first)
    until("the first run to wait", lambda: "go.failed" in runs.entered(run_1))
    runs.write_config(holding("v2"))
    second = int(runs.open_pull("second", "Second")["number"])
    run_2 = runs.run_of("hold", second)
    assert runs.view(run_1).status == "RUNNING"  # the new version came while it waited
    for number in (first, second):
        human.call("POST", f"/issues/{number}/labels", labels=["go"])
    for run in (run_1, run_2):
        ended = runs.finished(run)
        assert ended.status == "SUCCEEDED", (ended.error, ended.cause)
    assert runs.said(first, "hold v1 finished") and not runs.said(first, "hold v2")
    assert runs.said(second, "hold v2 finished") and not runs.said(second, "hold v1")
    assert runs.versions("hold") == 2
    assert stack.errors == []
