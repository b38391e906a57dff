"""Failed pipeline runs: an EventBridge rule on Step Functions' own execution status changes and an
alarm on what it matches.

Step Functions puts a "Step Functions Execution Status Change" event on the account's default bus
for every Standard execution; the rule matches this deployment's state machines
(``<prefix>_<repository id>-<pipeline>``, see docs/architecture.md, "Pipelines on Step
Functions"; their ARN's head is :class:`~infra.constructs.pipelines.PipelineRuntime`'s) whose run ended FAILED, TIMED_OUT or ABORTED. EventBridge counts the rule's matches
(``AWS/Events`` ``MatchedEvents`` by ``RuleName``): the alarm fires on one, so a failed run is
seen in the alarm topic whatever the repository (Step Functions' own ``ExecutionsFailed`` is per
state machine, and the state machines come and go with repositories' configurations). Idle it
costs the alarm's one metric; the rule has no target and bills nothing.
"""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from constructs import Construct

from infra.constructs.observability import ALARM_PERIOD
from infra.constructs.pipelines import PipelineRuntime
from squadron.domain.pipeline_runs import FAILED_STATUSES


class PipelineRunAlarms(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, runtime: PipelineRuntime) -> None:
        super().__init__(scope, construct_id)
        prefix = self.prefix = runtime.prefix
        machines = runtime.machines_arn_head
        self.failed_rule = events.Rule(
            self,
            "FailedRuns",
            description=f"Squadron: runs of the {prefix}_* pipelines that failed, timed out or were aborted",
            event_pattern=events.EventPattern(
                source=["aws.states"],
                detail_type=["Step Functions Execution Status Change"],
                detail={
                    "status": list(FAILED_STATUSES),
                    "stateMachineArn": events.Match.prefix(machines),
                },
            ),
        )
        self.alarms = [
            cloudwatch.Alarm(
                self,
                "FailedRunsAlarm",
                alarm_description=(
                    "Squadron: a pipeline run failed, timed out or was aborted "
                    "(squadron pipelines list --status FAILED)"
                ),
                metric=cloudwatch.Metric(
                    namespace="AWS/Events",
                    metric_name="MatchedEvents",
                    dimensions_map={"RuleName": self.failed_rule.rule_name},
                    statistic=cloudwatch.Stats.SUM,
                    period=ALARM_PERIOD,
                ),
                threshold=0,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
        ]
