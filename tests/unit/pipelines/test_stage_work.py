"""What the router makes of a pipeline's task (issue 30): gate judgement against what GitHub says,
conditions, the effects an action plans, webhook answers and the addresses a webhook may reach —
pure tables (squadron.domain.pipelines.judge, .work, .addresses)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from squadron.config import parse_files
from squadron.domain.effects import AddLabels, CloseIssue, EvaluateMerge, PostComment, RemoveLabel
from squadron.domain.pipeline_wire import (
    STAGE_FAILED,
    STAGE_REJECTED,
    PipelineTask,
    StageFailed,
    StageSucceeded,
)
from squadron.domain.pipelines.addresses import address_problem
from squadron.domain.pipelines.asl import dump
from squadron.domain.pipelines.judge import CheckResult, Facts, Review
from squadron.domain.pipelines.work import (
    Act,
    Call,
    Judge,
    Refuse,
    Where,
    judged,
    safe_plan,
    webhook_answer,
)
from tests.unit.pipelines.test_pipeline_config import files_with

WHERE = Where("octo/app", 77)
ARN = "arn:aws:states:us-east-1:123456789012:execution:sq_42-p:run-1"


def stages(yaml_stages: str, extra: str = "") -> dict[str, Any]:
    text = "pipelines:\n  p:\n    trigger: {event: pull_request.opened}\n    stages:\n" + yaml_stages + extra
    pipeline = parse_files(files_with(text)).config.pipelines["p"]
    return {stage.id: stage for stage in pipeline.stages}


def task(
    stage: Any, *, step: str = "stage", config: dict[str, Any] | None = None, **changes: Any
) -> PipelineTask:
    body: dict[str, Any] = {
        "repository_id": 42,
        "issue_number": 7,
        "pipeline": "p",
        "definition": "ab" * 32,
        "execution_arn": ARN,
        "stage": stage.id if stage is not None else "__complete__",
        "stage_type": stage.type if stage is not None else "action",
        "entered_at": "2026-11-27T19:00:00+00:00",
        "task_token": "t" * 40,
        "input": {"trigger": {"n": 7}, "context": {"env": "prod"}, "stages": {}},
        "step": step,
        "config": json.dumps(config if config is not None else dump(stage)),
    }
    body.update(changes)
    return PipelineTask.model_validate(body)


def approved(login: str, *, bot: bool = False, state: str = "APPROVED") -> Review:
    return Review(login, state, bot)


PR = Facts(
    number=7,
    labels=frozenset({"security"}),
    is_pull=True,
    files=("src/auth/login.py", "README.md"),
    reviews=(approved("alice"),),
    author="dev-bot",
    permissions={"alice": "write"},
    app_login="squadron[bot]",
    # the pr-review agent's verdict: the App's status (docs/pipelines.md, "Gate checks")
    checks=(
        CheckResult("ci/test", "success"),
        CheckResult("lint", "success"),
        CheckResult("squadron/pr-review", "success", kind="status", creator="squadron[bot]"),
    ),
    mergeable_state="clean",
    head_sha="a" * 40,
)


def gate_output(checks: str, facts: Facts, *, any_of: bool = False) -> dict[str, Any]:
    key = "any_of" if any_of else "conditions"
    (gate,) = stages(f"      - id: g\n        type: gate\n        {key}:\n{checks}").values()
    work = safe_plan(task(gate), WHERE)
    assert isinstance(work, Judge)
    result = judged(work, facts, task(gate).input)
    assert isinstance(result, StageSucceeded)
    return result.output


def replace(facts: Facts, **changes: Any) -> Facts:
    return Facts(**{**facts.__dict__, **changes})


@pytest.mark.parametrize(
    ("checks", "facts", "passed", "failing"),
    [
        ("          - {check: pr_approvals_met, count: 2}\n", PR, True, []),
        ("          - {check: pr_approvals_met, count: 3}\n", PR, False, ["has 2 approval(s), needs 3"]),
        (
            "          - {check: pr_approvals_met, count: 2, scope: humans}\n",
            PR,
            False,
            ["1 approval(s) from humans"],
        ),
        (
            "          - {check: human_approved}\n",
            replace(PR, reviews=(approved("bot", bot=True),)),
            False,
            ["0 human"],
        ),
        # a later CHANGES_REQUESTED replaces the reviewer's approval; a comment replaces nothing
        (
            "          - {check: no_changes_requested}\n          - {check: pr_approvals_met}\n",
            replace(
                PR,
                reviews=(
                    approved("alice"),
                    approved("alice", state="CHANGES_REQUESTED"),
                    approved("alice", state="COMMENTED"),
                ),
                checks=(),
            ),
            False,
            ["changes requested on #7 by alice", "has 0 approval(s), needs 1"],
        ),
        ("          - {check: label_present, label: security}\n", PR, True, []),
        ("          - {check: label_present, label: approved}\n", PR, False, ["has no label 'approved'"]),
        ("          - {check: ci_status}\n", PR, True, []),
        (
            "          - {check: ci_status, workflows: [ci/test, deploy]}\n",
            replace(PR, checks=(CheckResult("ci/test", None),)),
            False,
            ["not reported: deploy; pending: ci/test"],
        ),
        (
            "          - {check: ci_status}\n",
            replace(PR, checks=(CheckResult("ci/test", "success"), CheckResult("ci/test", "failure"))),
            False,
            ["not success: ci/test (failure)"],
        ),
        ("          - {check: ci_status}\n", replace(PR, checks=()), False, ["no checks reported"]),
        (
            "          - {check: branch_up_to_date}\n",
            replace(PR, mergeable_state="behind"),
            False,
            ["behind"],
        ),
        ("          - {check: branch_up_to_date}\n", PR, True, []),
        # file_exists: what GitHub answered for each path at the head; a path not read never passes
        (
            "          - {check: file_exists, paths: [CHANGELOG.md, docs/]}\n",
            replace(PR, present={"CHANGELOG.md": True, "docs": True}),
            True,
            [],
        ),
        (
            "          - {check: file_exists, paths: [CHANGELOG.md, docs/]}\n",
            replace(PR, present={"CHANGELOG.md": False}),
            False,
            ["file_exists at #7's head aaaaaaaaaaaa: missing: CHANGELOG.md; not read: docs"],
        ),
        (
            "          - {check: file_exists, paths: [NOTICE]}\n",
            Facts(number=7, present={"NOTICE": False}),
            False,
            ["file_exists at #7's default branch: missing: NOTICE"],
        ),
        ("          - {check: label_present, label: x, pr: 9}\n", PR, False, ["#9 was not read"]),
        (
            "          - {check: label_present, label: x, pr: 9}\n",
            replace(PR, others={9: Facts(number=9, labels=frozenset({"x"}))}),
            True,
            [],
        ),
    ],
)
def test_a_gate_is_judged_against_what_github_says(
    checks: str, facts: Facts, passed: bool, failing: list[str]
) -> None:
    output = gate_output(checks, facts)
    assert output["passed"] is passed
    got = output.get("failing", [])
    assert len(got) == len(failing)
    for text, want in zip(got, failing, strict=True):
        assert want in text


def test_any_of_passes_on_one_and_names_every_failure_when_none_passes() -> None:
    checks = (
        "          - {check: label_present, label: a}\n          - {check: label_present, label: security}\n"
    )
    assert gate_output(checks, PR, any_of=True) == {"passed": True}
    output = gate_output(checks, replace(PR, labels=frozenset()), any_of=True)
    assert output["passed"] is False and len(output["failing"]) == 2


@pytest.mark.parametrize(
    ("condition", "facts", "skipped"),
    [
        ("{labels_include: security}", PR, False),
        ("{labels_include: docs}", PR, True),
        ('{paths_match: ["src/**/auth/**"]}', PR, False),
        ('{paths_match: ["docs/**"]}', PR, True),
        ("{any: [{labels_include: docs}, {expr: \"context.env == 'prod'\"}]}", PR, False),
        ("{all: [{labels_include: security}, {expr: \"context.env == 'dev'\"}]}", PR, True),
        ('"{{ trigger.n > 5 }}"', PR, False),
    ],
)
def test_a_stage_condition_answers_skipped_when_false(condition: str, facts: Facts, skipped: bool) -> None:
    (stage,) = stages(
        f"      - id: c\n        type: action\n        action: comment\n        config: {{message: hi}}\n"
        f"        condition: {condition}\n        skip_to: __complete__\n"
    ).values()
    work = safe_plan(task(stage), WHERE)
    assert isinstance(work, Judge)
    result = judged(work, facts, task(stage).input)
    if skipped:
        assert result == StageSucceeded(output={"skipped": True})
    else:
        assert result == Act((PostComment("octo/app", 77, 7, "hi", "framework"),), {"commented": True})


def test_a_condition_step_and_a_poll_are_judged() -> None:
    (stage,) = stages("      - {id: a, type: agent, agent: test-coverage}\n").values()
    step = task(stage, step="condition", config={"stage": "a", "condition": {"labels_include": "nope"}})
    work = safe_plan(step, WHERE)
    assert isinstance(work, Judge)
    assert judged(work, PR, step.input) == StageSucceeded(output={"skipped": True})
    poll = task(stage, step="poll", config={"stage": "w", "poll": {"interval": 10, "check": "ci_status"}})
    work = safe_plan(poll, WHERE)
    assert isinstance(work, Judge)
    assert judged(work, PR, poll.input) == StageSucceeded(output={"passed": True})


@pytest.mark.parametrize(
    ("yaml_stage", "effects", "output"),
    [
        (
            "{id: m, type: action, action: merge_pr, config: {method: squash}}",
            (EvaluateMerge("octo/app", 77, 7, cause="pipeline p stage m"),),
            {"merge": "asked", "pr": 7},
        ),
        (
            "{id: c, type: action, action: close_pr}",
            (CloseIssue("octo/app", 77, 7, "completed"),),
            {"closed": 7},
        ),
        (
            '{id: l, type: action, action: add_label, config: {label: "env-{{ context.env }}"}}',
            (AddLabels("octo/app", 77, 7, ("env-prod",)),),
            {"labelled": "env-prod"},
        ),
        (
            '{id: r, type: action, action: remove_label, config: {label: "env-{{ context.env }}"}}',
            (RemoveLabel("octo/app", 77, 7, "env-prod"),),
            {"unlabelled": "env-prod"},
        ),
        (
            '{id: k, type: action, action: comment, config: {message: "Done <!-- squadron:effect x -->"}}',
            (PostComment("octo/app", 77, 7, "Done <!-- squadron:effect x -->", "framework"),),
            {"commented": True},
        ),
    ],
)
def test_an_action_stage_plans_its_effects(
    yaml_stage: str, effects: tuple[Any, ...], output: dict[str, Any]
) -> None:
    (stage,) = stages(f"      - {yaml_stage}\n").values()
    assert safe_plan(task(stage), WHERE) == Act(effects, output)


def test_a_parallel_stages_remove_label_branch_plans_its_removal() -> None:
    (stage,) = stages(
        "      - {id: p, type: parallel, branches: "
        "[{id: b, type: action, action: remove_label, config: {label: x}}]}\n"
    ).values()
    (branch,) = stage.branches
    assert safe_plan(task(branch), WHERE) == Act((RemoveLabel("octo/app", 77, 7, "x"),), {"unlabelled": "x"})


def test_lifecycle_actions_and_escalation_plan_comments_and_labels() -> None:
    actions = [
        {"type": "comment", "body": "run {{ trigger.n }} failed"},
        {"type": "label", "add": "needs-human", "remove": "in-{{ context.env }}"},
    ]
    step = task(None, step="on_error", config={"actions": actions})
    assert safe_plan(step, WHERE) == Act(
        (
            PostComment("octo/app", 77, 7, "run 7 failed", "framework"),
            AddLabels("octo/app", 77, 7, ("needs-human",)),
            RemoveLabel("octo/app", 77, 7, "in-prod"),
        ),
        {"done": 3},
    )
    escalate = safe_plan(task(None, step="escalate", config={"actions": []}), WHERE)
    assert isinstance(escalate, Act)
    assert escalate.effects[1] == AddLabels("octo/app", 77, 7, ("needs-human",))
    assert "escalated to a human" in escalate.effects[0].body  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("yaml_stage", "why"),
    [
        ("{id: h, type: human, human: {description: ok}}", "waits for people's answer"),
    ],
)
def test_what_the_router_does_not_carry_out_is_refused_with_the_reason(yaml_stage: str, why: str) -> None:
    (stage,) = stages(f"      - {yaml_stage}\n").values()
    work = safe_plan(task(stage), WHERE)
    assert isinstance(work, Refuse)
    assert work.answer.error == STAGE_REJECTED and why in work.answer.cause


def test_an_action_without_an_issue_and_a_broken_config_are_refused() -> None:
    (stage,) = stages("      - {id: c, type: action, action: close_pr}\n").values()
    work = safe_plan(task(stage, issue_number=None), WHERE)
    assert isinstance(work, Refuse) and "no issue or pull request" in work.answer.cause
    broken = safe_plan(task(stage, config={"id": "c", "type": "action", "action": "explode"}), WHERE)
    assert isinstance(broken, Refuse) and broken.answer.error == "Squadron.TaskInvalid"


def test_a_template_that_cannot_evaluate_fails_the_stage() -> None:
    (stage,) = stages(
        '      - {id: k, type: action, action: comment, config: {message: "{{ context.nope }}"}}\n'
    ).values()
    work = safe_plan(task(stage), WHERE)
    assert isinstance(work, Refuse) and work.answer.error == STAGE_FAILED


def test_a_webhook_request_is_rendered_and_its_status_mapped() -> None:
    (stage,) = stages(
        "      - id: w\n        type: webhook\n        request:\n"
        '          url: "https://hooks.example.com/p/{{ trigger.n }}"\n'
        '          headers: {X-Env: "{{ context.env }}"}\n'
        '          body: {issue: "{{ trigger.n }}"}\n'
        "        expect: {status: [200, 202]}\n"
    ).values()
    call = safe_plan(task(stage), WHERE)
    assert call == Call("POST", "https://hooks.example.com/p/7", {"X-Env": "prod"}, {"issue": 7}, (200, 202))
    assert webhook_answer(call, 202, None) == StageSucceeded(output={"status": 202})
    failed = webhook_answer(call, 204, None)
    assert isinstance(failed, StageFailed) and "answered 204, expected 200, 202" in failed.cause
    refused = webhook_answer(call, 0, "refused: it resolves to 10.0.0.1")
    assert isinstance(refused, StageFailed) and refused.error == STAGE_FAILED
    plain = Call("GET", "https://x.example", {}, None, None)
    assert isinstance(webhook_answer(plain, 299, None), StageSucceeded)
    assert isinstance(webhook_answer(plain, 301, None), StageFailed)


@pytest.mark.parametrize(
    "address",
    [
        "169.254.169.254",  # the instance metadata service
        "fd00:ec2::254",  # its IPv6 address
        "127.0.0.1",
        "::1",
        "10.1.2.3",
        "172.16.0.9",
        "192.168.1.1",
        "100.64.0.1",  # carrier-grade NAT
        "0.0.0.0",  # noqa: S104 - the address a webhook must never reach
        "::",
        "::ffff:169.254.169.254",  # IPv4-mapped
        "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "fe80::1%eth0",  # link-local with a zone
        "224.0.0.1",
        "240.0.0.1",
        "not-an-address",
    ],
)
def test_a_webhook_never_connects_to_an_internal_address(address: str) -> None:
    assert address_problem(address) is not None


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:4700::1111", "8.8.8.8"])
def test_a_public_address_is_allowed(address: str) -> None:
    assert address_problem(address) is None


@pytest.mark.parametrize(
    "planted",
    ["@169.254.169.254/", "\\\\@169.254.169.254", "#@127.0.0.1", "?x=1@10.0.0.1:80/", "%2F%2F127.0.0.1"],
)
def test_run_data_an_attacker_wrote_never_moves_a_webhook_to_another_host(planted: str) -> None:
    """The trigger's data (a pull request's title, say) lands in the address's path: the host stays
    the one the configuration wrote."""
    (stage,) = stages(
        "      - id: w\n        type: webhook\n        request:\n"
        '          url: "https://hooks.example.com/p/{{ trigger.n }}"\n'
    ).values()
    call = safe_plan(task(stage, input={"trigger": {"n": planted}}), WHERE)
    assert isinstance(call, Call)
    assert httpx.URL(call.url).host == "hooks.example.com"
