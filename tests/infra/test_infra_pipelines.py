"""The pipelines' IAM (infra/constructs/pipelines.py): each role gets only the Step Functions
actions it uses, on the stage's state machines and runs only."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.constructs.pipelines import PUBLISH_ACTIONS
from tests.infra.synth import Synthesized

pytestmark = pytest.mark.infra


def granted(synthesized: Synthesized, role: Any) -> dict[str, set[str]]:
    """Action -> the resources (as JSON text) the role's policies grant it on."""
    role_id = synthesized.logical_id(role)
    out: dict[str, set[str]] = {}
    for policy in synthesized.resources("AWS::IAM::Policy").values():
        if {"Ref": role_id} not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            resources = (
                statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            )
            for action in actions:
                out.setdefault(action, set()).update(json.dumps(r, sort_keys=True) for r in resources)
    return out


def states(grants: dict[str, set[str]]) -> set[str]:
    return {action for action in grants if action.startswith("states:")}


def test_the_execution_role_sends_to_events_fifo_and_runs_sub_pipelines_only(
    synthesized: Synthesized,
) -> None:
    grants = granted(synthesized, synthesized.stack.pipelines.role)
    assert set(grants) == {
        "sqs:SendMessage",
        "states:StartExecution",
        "states:DescribeExecution",
        "states:StopExecution",
        "events:PutTargets",
        "events:PutRule",
        "events:DescribeRule",
    }
    (queue,) = grants["sqs:SendMessage"]
    assert synthesized.logical_id(synthesized.stack.events.queue) in queue
    for action in ("states:StartExecution", "states:DescribeExecution", "states:StopExecution"):
        (resource,) = grants[action]
        assert "squadron-ci_*" in resource


def test_the_reconciler_publishes_and_the_router_publishes_starts_and_answers(
    synthesized: Synthesized,
) -> None:
    reconciler = granted(synthesized, synthesized.stack.reconciler.role)
    router = granted(synthesized, synthesized.stack.router.role)
    assert states(reconciler) == {*PUBLISH_ACTIONS, "states:ListStateMachines"}
    assert states(router) == {
        *PUBLISH_ACTIONS,
        "states:StartExecution",
        "states:DescribeExecution",
        "states:SendTaskSuccess",
        "states:SendTaskFailure",
        "states:SendTaskHeartbeat",
        # an event reaching a running run (on_events): where it is, stop it and its child runs
        "states:GetExecutionHistory",
        "states:StopExecution",
        "states:ListExecutions",
        "states:ListStateMachines",
    }
    for action in ("states:GetExecutionHistory", "states:StopExecution"):
        (resource,) = router[action]
        assert ":execution:squadron-ci_*" in resource
    (listed,) = router["states:ListExecutions"]
    assert ":stateMachine:squadron-ci_*" in listed
    assert "states:StopExecution" not in reconciler
    for grants in (reconciler, router):
        for action in PUBLISH_ACTIONS:
            (resource,) = grants[action]
            assert ":stateMachine:squadron-ci_*" in resource
        assert "states:DeleteStateMachine" not in grants
        execution_role = synthesized.logical_id(synthesized.stack.pipelines.role)
        assert any(execution_role in resource for resource in grants["iam:PassRole"])


def test_the_dashboards_read_the_stages_runs_only(synthesized: Synthesized) -> None:
    """The dashboards Lambda lists the stage's state machines' runs and reads each running run's
    description and history (its current stages): no start, stop, answer or publish, and only
    ``squadron-ci_*`` (a stage ``ci-x`` in the same account is ``squadron-ci-x_*``, not covered)."""
    stack = synthesized.stack
    grants = granted(synthesized, stack.dashboards.role)
    assert states(grants) == {
        "states:ListStateMachines",
        "states:ListExecutions",
        "states:DescribeExecution",
        "states:GetExecutionHistory",
    }
    assert grants["states:ListStateMachines"] == {json.dumps("*")}
    (machines,) = grants["states:ListExecutions"]
    assert ":stateMachine:squadron-ci_*" in machines
    for action in ("states:DescribeExecution", "states:GetExecutionHistory"):
        (resource,) = grants[action]
        assert ":execution:squadron-ci_*" in resource
    variables = synthesized.resources("AWS::Lambda::Function")[
        synthesized.logical_id(stack.dashboards.function)
    ]["Properties"]["Environment"]["Variables"]
    assert variables["PIPELINES_PREFIX"] == "squadron-ci"
    assert synthesized.logical_id(stack.pipelines.role) in json.dumps(variables["PIPELINES_ROLE_ARN"])


def test_the_failed_run_rule_takes_the_state_machines_from_the_runtime(synthesized: Synthesized) -> None:
    """One home of the state machines' ARN: the rule's prefix is the runtime's."""
    stack = synthesized.stack
    assert stack.pipeline_runs.prefix == stack.pipelines.prefix
    rule = synthesized.resources("AWS::Events::Rule")[synthesized.logical_id(stack.pipeline_runs.failed_rule)]
    (machines,) = rule["Properties"]["EventPattern"]["detail"]["stateMachineArn"]
    assert stack.resolve(stack.pipelines.machines_arn_head) == machines["prefix"]
