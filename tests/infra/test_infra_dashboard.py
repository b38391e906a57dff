"""The dashboard and alarms: drawn from the metric catalogue, wired to the alarm topic."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import aws_iam as iam

from squadron.domain.metrics import CATALOGUE
from tests.infra.synth import Synthesized


def _resources(synthesized: Synthesized, kind: str) -> dict[str, dict[str, Any]]:
    resources: dict[str, dict[str, Any]] = dict(synthesized.template_json["Resources"])
    return {name: body for name, body in resources.items() if body["Type"] == kind}


def _alarm(synthesized: Synthesized, logical_prefix: str) -> dict[str, Any]:
    found: dict[str, Any]
    (found,) = [
        body["Properties"]
        for name, body in _resources(synthesized, "AWS::CloudWatch::Alarm").items()
        if name.startswith(logical_prefix)
    ]
    return found


def _dashboard_body(synthesized: Synthesized) -> str:
    (dashboard,) = _resources(synthesized, "AWS::CloudWatch::Dashboard").values()
    body = dashboard["Properties"]["DashboardBody"]
    # Fn::Join of literal text and references: the literal parts are enough here.
    return "".join(part if isinstance(part, str) else json.dumps(part) for part in body["Fn::Join"][1])


def test_every_catalogued_metric_is_on_the_dashboard(synthesized: Synthesized) -> None:
    operations = synthesized.stack.operations
    shown = {name for name, _ in operations.custom_metrics} | {name for name, _ in operations.searched}
    assert shown == set(CATALOGUE)
    body = _dashboard_body(synthesized)
    for name in CATALOGUE:
        assert f'"{name}"' in body or f'MetricName=\\"{name}\\"' in body, name


def test_custom_metrics_are_read_from_their_publisher_in_the_stage_namespace(
    synthesized: Synthesized,
) -> None:
    operations = synthesized.stack.operations
    for name, service in operations.custom_metrics | operations.searched:
        assert service in (CATALOGUE[name].service, "*"), (name, service)
    assert operations.watched.namespace == "Squadron/ci"
    assert "Squadron/ci" in _dashboard_body(synthesized)


ALARMS = [
    # (logical id prefix, threshold, comparison, evaluation periods, missing data)
    ("OperationsRouterErrorRateAlarm", 10, "GreaterThanThreshold", 2, "notBreaching"),
    ("OperationsIngress5xxAlarm", 1, "GreaterThanOrEqualToThreshold", 1, "notBreaching"),
    ("OperationsNoHeartbeatAlarm", 1, "GreaterThanOrEqualToThreshold", 2, "notBreaching"),
    ("OperationsReconcilerNotRunningAlarm", 1, "LessThanThreshold", 1, "breaching"),
    ("OperationsEscalationAlarm", 1, "GreaterThanOrEqualToThreshold", 1, "notBreaching"),
    ("OperationsLaunchesHeldAlarm", 1, "GreaterThanOrEqualToThreshold", 1, "notBreaching"),
    ("OperationsEffectsFailedAlarm", 1, "GreaterThanOrEqualToThreshold", 1, "notBreaching"),
    ("EventsDeadLettersAlarm", 0, "GreaterThanThreshold", 1, "notBreaching"),
    ("EventsOldestEventAlarm", 300, "GreaterThanThreshold", 1, "notBreaching"),
    ("DomainEventsPublishFailuresAlarm", 0, "GreaterThanThreshold", 1, "notBreaching"),
    ("DashboardsDeadLettersAlarm", 0, "GreaterThanThreshold", 1, "notBreaching"),
    ("PipelineRunsFailedRunsAlarm", 0, "GreaterThanThreshold", 1, "notBreaching"),
]


@pytest.mark.parametrize(
    ("prefix", "threshold", "comparison", "periods", "missing"), ALARMS, ids=[a[0] for a in ALARMS]
)
def test_alarm(  # noqa: PLR0917 - one parameter per column of the table
    synthesized: Synthesized, prefix: str, threshold: int, comparison: str, periods: int, missing: str
) -> None:
    alarm = _alarm(synthesized, prefix)
    assert (alarm["Threshold"], alarm["ComparisonOperator"], alarm["EvaluationPeriods"]) == (
        threshold,
        comparison,
        periods,
    )
    assert alarm["TreatMissingData"] == missing
    topic = synthesized.logical_id(synthesized.stack.observability.alarm_topic)
    assert alarm["AlarmActions"] == [{"Ref": topic}]
    assert alarm["OKActions"] == [{"Ref": topic}]
    assert alarm["AlarmDescription"].startswith("Squadron: ")


def test_every_alarm_notifies_the_topic_and_is_on_the_dashboard(synthesized: Synthesized) -> None:
    alarms = _resources(synthesized, "AWS::CloudWatch::Alarm")
    assert len(alarms) == len(ALARMS)
    body = _dashboard_body(synthesized)
    for name in alarms:
        assert name in body, f"{name} is not on the dashboard's alarm row"


@pytest.mark.parametrize(
    ("prefix", "metrics"),
    [
        ("OperationsRouterErrorRateAlarm", {"DeliveriesFailed", "DeliveriesRouted", "DeliveriesDuplicate"}),
        ("OperationsEscalationAlarm", {"Escalations", "AgentEscalations"}),
    ],
)
def test_expression_alarms_read_the_catalogued_metrics(
    synthesized: Synthesized, prefix: str, metrics: set[str]
) -> None:
    alarm = _alarm(synthesized, prefix)
    used = {
        query["MetricStat"]["Metric"]["MetricName"]
        for query in alarm["Metrics"]
        if "MetricStat" in query and query["MetricStat"]["Metric"].get("Namespace") == "Squadron/ci"
    }
    assert used == metrics


def test_agent_tasks_publish_through_the_gateway_to_their_stage_namespace(synthesized: Synthesized) -> None:
    role = synthesized.stack.agents.task_definition.task_role
    assert isinstance(role, iam.Role)
    task_role = synthesized.logical_id(role)
    policies = [
        body["Properties"]
        for body in _resources(synthesized, "AWS::IAM::Policy").values()
        if {"Ref": task_role} in body["Properties"]["Roles"]
    ]
    statements = [s for policy in policies for s in policy["PolicyDocument"]["Statement"]]
    assert not [s for s in statements if "cloudwatch" in repr(s["Action"])]  # no metric rights of its own
    gateway = _resources(synthesized, "AWS::Lambda::Function")[
        synthesized.logical_id(synthesized.stack.agents.gateway)
    ]
    assert gateway["Properties"]["Environment"]["Variables"]["POWERTOOLS_METRICS_NAMESPACE"] == "Squadron/ci"


def test_every_lambda_publishes_to_the_stage_namespace(synthesized: Synthesized) -> None:
    namespaces = {
        body["Properties"]["Environment"]["Variables"].get("POWERTOOLS_METRICS_NAMESPACE")
        for body in _resources(synthesized, "AWS::Lambda::Function").values()
        if "Environment" in body["Properties"]
        and "POWERTOOLS_SERVICE_NAME" in body["Properties"]["Environment"]["Variables"]
    }
    assert namespaces == {"Squadron/ci"}


def test_failed_pipeline_runs_of_this_deployment_only_are_counted(synthesized: Synthesized) -> None:
    """The rule matches Step Functions' status changes of the stage's own state machines ending
    FAILED, TIMED_OUT or ABORTED (not a run that succeeded, nor another deployment's), and the
    alarm reads what that rule matched."""
    rules = {
        name: rule["Properties"]
        for name, rule in _resources(synthesized, "AWS::Events::Rule").items()
        if name.startswith("PipelineRunsFailedRuns")
    }
    ((name, rule),) = rules.items()
    pattern = rule["EventPattern"]
    assert pattern["source"] == ["aws.states"]
    assert pattern["detail-type"] == ["Step Functions Execution Status Change"]
    assert pattern["detail"]["status"] == ["FAILED", "TIMED_OUT", "ABORTED"]
    (machines,) = pattern["detail"]["stateMachineArn"]
    # ``squadron-ci_``: a stage ``ci-x`` of the same account is ``squadron-ci-x_`` and not matched
    assert json.dumps(machines["prefix"]).count(":stateMachine:squadron-ci_") == 1
    alarm = _alarm(synthesized, "PipelineRunsFailedRunsAlarm")
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == (
        "AWS/Events",
        "MatchedEvents",
        "Sum",
    )
    assert alarm["Dimensions"] == [{"Name": "RuleName", "Value": {"Ref": name}}]
