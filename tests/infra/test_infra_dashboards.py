"""The dashboard issues in the stack: a rule on the bus to the dashboards queue, the dashboards
Lambda on it (batched, bounded concurrency, partial failures), and a role that reads what a
rendering shows and writes only its slots."""

from __future__ import annotations

import json
from typing import Any

import pytest

from squadron.domain.dashboard_refresh import DASHBOARD_EVENTS, REFRESH_INTERVAL
from tests.infra.synth import Synthesized

pytestmark = pytest.mark.infra


def _arn(synthesized: Synthesized, construct: Any) -> dict[str, Any]:
    return {"Fn::GetAtt": [synthesized.logical_id(construct), "Arn"]}


def _statements(synthesized: Synthesized, role: Any) -> list[dict[str, Any]]:
    role_id = synthesized.logical_id(role)
    return [
        statement
        for policy in synthesized.resources("AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _actions(statement: dict[str, Any]) -> tuple[str, ...]:
    action = statement["Action"]
    return tuple(sorted([action] if isinstance(action, str) else action))


def test_every_event_of_a_repository_on_the_bus_goes_to_the_dashboards_queue(
    synthesized: Synthesized,
) -> None:
    stack = synthesized.stack
    rule = synthesized.resources("AWS::Events::Rule")[synthesized.logical_id(stack.dashboards.rule)][
        "Properties"
    ]
    assert rule["EventBusName"] == {"Ref": synthesized.logical_id(stack.domain_events.bus)}
    assert rule["EventPattern"] == json.loads(json.dumps(DASHBOARD_EVENTS))
    (target,) = rule["Targets"]
    assert target["Arn"] == _arn(synthesized, stack.dashboards.queue)
    assert "InputTransformer" not in target  # the whole event: the handler reads what it needs
    # Only this rule may send to the queue on EventBridge's behalf, and only over TLS.
    (policy,) = [
        p["Properties"]
        for p in synthesized.resources("AWS::SQS::QueuePolicy").values()
        if {"Ref": synthesized.logical_id(stack.dashboards.queue)} in p["Properties"]["Queues"]
    ]
    allowed = [s for s in policy["PolicyDocument"]["Statement"] if s["Effect"] == "Allow"]
    assert [(s["Principal"], s["Action"], s["Condition"]) for s in allowed] == [
        (
            {"Service": "events.amazonaws.com"},
            "sqs:SendMessage",
            {"ArnEquals": {"aws:SourceArn": _arn(synthesized, stack.dashboards.rule)}},
        )
    ]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in policy["PolicyDocument"]["Statement"]
    )


def test_the_queue_retries_then_dead_letters_and_is_encrypted(synthesized: Synthesized) -> None:
    stack = synthesized.stack
    queue = synthesized.resources("AWS::SQS::Queue")[synthesized.logical_id(stack.dashboards.queue)][
        "Properties"
    ]
    assert queue["QueueName"] == "squadron-ci-dashboards"
    assert queue["SqsManagedSseEnabled"] is True
    assert queue["VisibilityTimeout"] == 300  # six times the function's timeout
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": _arn(synthesized, stack.dashboards.dead_letter_queue),
        "maxReceiveCount": 5,
    }
    function = synthesized.resources("AWS::Lambda::Function")[
        synthesized.logical_id(stack.dashboards.function)
    ]
    # a rendering ends before its repository's next claim (renderings never overlap)
    assert function["Properties"]["Timeout"] < REFRESH_INTERVAL.total_seconds()
    environment = function["Properties"]["Environment"]["Variables"]
    assert environment["DASHBOARD_REFRESH_SECONDS"] == str(int(REFRESH_INTERVAL.total_seconds()))
    alarm = synthesized.resources("AWS::CloudWatch::Alarm")[
        synthesized.logical_id(stack.dashboards.dead_letters_alarm)
    ]
    assert alarm["Properties"]["AlarmActions"]  # it notifies the alarm topic


def test_the_function_takes_batches_with_partial_failures_two_at_a_time(synthesized: Synthesized) -> None:
    stack = synthesized.stack
    (mapping,) = [
        m["Properties"]
        for m in synthesized.resources("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["EventSourceArn"] == _arn(synthesized, stack.dashboards.queue)
    ]
    assert mapping["FunctionName"] == {"Ref": synthesized.logical_id(stack.dashboards.function)}
    assert (mapping["BatchSize"], mapping["MaximumBatchingWindowInSeconds"]) == (100, 5)
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": 2}
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_the_role_reads_what_a_dashboard_shows_and_writes_only_its_slots(synthesized: Synthesized) -> None:
    stack = synthesized.stack
    table = _arn(synthesized, stack.registry.table)
    queue = _arn(synthesized, stack.dashboards.queue)
    granted = {
        (
            _actions(s),
            json.dumps(s["Resource"], sort_keys=True),
            json.dumps(s.get("Condition"), sort_keys=True),
        )
        for s in _statements(synthesized, stack.dashboards.role)
        if s["Effect"] == "Allow"
    }

    def leading(prefix: str) -> str:
        return json.dumps({"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [prefix]}}, sort_keys=True)

    def res(resource: object) -> str:
        return json.dumps(resource, sort_keys=True)

    def states(kind: str) -> object:
        where = [{"Ref": "AWS::Region"}, ":", {"Ref": "AWS::AccountId"}]
        return {
            "Fn::Join": [
                "",
                ["arn:", {"Ref": "AWS::Partition"}, ":states:", *where, f":{kind}:squadron-ci_*"],
            ]
        }

    assert granted == {
        (("dynamodb:Query",), res({"Fn::Join": ["", [table, "/index/by-status"]]}), "null"),
        (("dynamodb:BatchGetItem",), res(table), leading("ISSUE#*")),
        (("dynamodb:Query",), res(table), leading("MEMORY#*")),
        (("dynamodb:UpdateItem",), res(table), leading("DASHBOARD#*")),
        (  # its event source, and its deferred renderings
            (
                "sqs:ChangeMessageVisibility",
                "sqs:DeleteMessage",
                "sqs:GetQueueAttributes",
                "sqs:GetQueueUrl",
                "sqs:ReceiveMessage",
                "sqs:SendMessage",
            ),
            res(queue),
            "null",
        ),
        (
            ("secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue"),
            res({"Ref": synthesized.logical_id(stack.secrets.private_key)}),
            "null",
        ),
        (
            ("logs:CreateLogStream", "logs:PutLogEvents"),
            res(_arn(synthesized, stack.dashboards.log_group)),
            "null",
        ),
        # the "Pipelines" section: the stage's runs only (tests/infra/test_infra_pipelines.py)
        (("states:ListExecutions",), res(states("stateMachine")), "null"),
        (("states:DescribeExecution", "states:GetExecutionHistory"), res(states("execution")), "null"),
        (("states:ListStateMachines",), res("*"), "null"),
    }
