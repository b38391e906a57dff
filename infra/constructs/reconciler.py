"""The reconciler: an EventBridge schedule (every five minutes) -> reconciler Lambda.

It reads the registry (the status index and delivery records), asks ECS which
agent tasks still run, reads GitHub with
the App key, puts replayed webhooks on events.fifo and asks GitHub to redeliver
failed deliveries. It never writes the registry: the router applies every repair.
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.constructs.layer import SharedLayer, function_code
from infra.constructs.router import RUNTIME_PIN_REASON, XRAY_WILDCARD_REASON, as_nag_renders
from squadron.adapters.dynamo_registry import STATUS_INDEX

REPO_ROOT = Path(__file__).resolve().parents[2]
RECONCILER_CODE = REPO_ROOT / "functions" / "reconciler"


class Reconciler(Construct):
    RUNTIME = SharedLayer.RUNTIME
    ARCHITECTURE = SharedLayer.ARCHITECTURE
    HANDLER = "handler.handler"
    MEMORY_SIZE_MB = 512
    TRACING = True  # X-Ray, active (bench/cold_start.py reads it)
    SCHEDULE = cdk.Duration.minutes(5)
    #: How late a tick may still start a run: EventBridge may hold it this long when the invoke
    #: is throttled, then Lambda's asynchronous queue as long again (both minimums).
    MAX_EVENT_AGE = cdk.Duration.minutes(1)
    #: A run reads at most RECONCILER_MAX_READS issues per installation; GitHub answers in
    #: ~0.1-0.3 s each. TIMEOUT + 2 * MAX_EVENT_AGE <= SCHEDULE: a run, even one started as late
    #: as allowed, has ended before the next tick, so two never run at once. (No reserved
    #: concurrency: it fails at create time on accounts whose quota would leave fewer than 10
    #: unreserved executions, as new accounts' quota of 10 does. Every repair is idempotent
    #: anyway, so a rare overlap, e.g. a tick delivered twice, costs reads only.)
    TIMEOUT = cdk.Duration.minutes(3)
    POWERTOOLS_SERVICE_NAME = "reconciler"

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        layer: lambda_.ILayerVersion,
        queue: sqs.IQueue,
        table: dynamodb.ITable,
        private_key: secretsmanager.ISecret,
        github_app_id: str,
        github_app_slug: str,
        cluster: ecs.ICluster,
        log_retention: logs.RetentionDays,
        metrics_namespace: str,
        log_level: str = "INFO",
        name_prefix: str = "squadron",
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(self, "FunctionLogs", retention=log_retention)
        self.role = iam.Role(
            self,
            "FunctionRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Squadron reconciler: read the registry, replay to events.fifo, GitHub App key",
        )
        self.log_group.grant_write(self.role)
        # Read-only on the registry: the status index (the sweep) and delivery records (GetItem).
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["dynamodb:Query"], resources=[f"{table.table_arn}/index/{STATUS_INDEX}"]
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["dynamodb:GetItem"], resources=[table.table_arn])
        )
        self._retrospective_schedules(queue, name_prefix)
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[queue.queue_arn])
        )
        private_key.grant_read(self.role)
        # Which agent tasks still run: DescribeTasks on the agent cluster's tasks only.
        tasks_of_cluster = cdk.Stack.of(self).format_arn(
            service="ecs", resource="task", resource_name=f"{cluster.cluster_name}/*"
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["ecs:DescribeTasks"],
                resources=[tasks_of_cluster],
                conditions={"ArnEquals": {"ecs:cluster": cluster.cluster_arn}},
            )
        )
        cdk.Validations.of(self.role).acknowledge(
            cdk.Acknowledgment(id="AwsSolutions-IAM5[Resource::*]", reason=XRAY_WILDCARD_REASON),
            cdk.Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{as_nag_renders(self, tasks_of_cluster)}]",
                reason="DescribeTasks on tasks of the agent cluster ('task/<cluster>/*'): the reconciler "
                "asks about tasks by ARN, unknown in advance; bound further by an ecs:cluster condition.",
            ),
        )
        self.function = lambda_.Function(
            self,
            "Function",
            description="Squadron: heal what the webhooks missed (every five minutes)",
            runtime=self.RUNTIME,
            architecture=self.ARCHITECTURE,
            handler=self.HANDLER,
            code=function_code(RECONCILER_CODE),
            layers=[layer],
            memory_size=self.MEMORY_SIZE_MB,
            timeout=self.TIMEOUT,
            # A failed run is not retried late: the next tick is five minutes away.
            retry_attempts=0,
            max_event_age=self.MAX_EVENT_AGE,
            role=self.role,
            log_group=self.log_group,
            tracing=lambda_.Tracing.ACTIVE if self.TRACING else lambda_.Tracing.DISABLED,
            environment={
                "REGISTRY_TABLE_NAME": table.table_name,
                "EVENTS_QUEUE_URL": queue.queue_url,
                "AGENT_CLUSTER": cluster.cluster_arn,
                "SCHEDULE_GROUP": self.schedule_group.ref,
                "SCHEDULER_ROLE_ARN": self.scheduler_role.role_arn,
                "GITHUB_APP_ID": github_app_id,
                "GITHUB_APP_SLUG": github_app_slug,
                "GITHUB_PRIVATE_KEY_SECRET_ARN": private_key.secret_arn,
                "POWERTOOLS_SERVICE_NAME": self.POWERTOOLS_SERVICE_NAME,
                "POWERTOOLS_METRICS_NAMESPACE": metrics_namespace,
                "LOG_LEVEL": log_level,
            },
        )
        cdk.Validations.of(self.function.node.default_child or self.function).acknowledge(
            cdk.Acknowledgment(id="AwsSolutions-L1", reason=RUNTIME_PIN_REASON)
        )
        self.schedule = events.Rule(
            self,
            "Schedule",
            description="Squadron reconciler tick",
            schedule=events.Schedule.rate(self.SCHEDULE),
            targets=[
                targets.LambdaFunction(
                    self.function,
                    # A tick that cannot be handed over soon is dropped: the next one comes.
                    retry_attempts=1,
                    max_event_age=self.MAX_EVENT_AGE,
                )
            ],
        )

    def _retrospective_schedules(self, queue: sqs.IQueue, name_prefix: str) -> None:
        """The stage's EventBridge Scheduler group for each repository's retrospective schedule,
        the role its schedules send to events.fifo with (that and nothing else), and the
        reconciler's right to keep schedules of that group only (squadron.adapters.scheduler)."""
        self.schedule_group = scheduler.CfnScheduleGroup(
            self, "RetrospectiveSchedules", name=f"{name_prefix}-retrospectives"
        )
        stack = cdk.Stack.of(self)
        self.scheduler_role = iam.Role(
            self,
            "SchedulerRole",
            # Only this account's schedules of this stage's group may use it (AWS's confused-deputy
            # advice for Scheduler's execution roles: the account and the schedule group's ARN).
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com",
                conditions={
                    "StringEquals": {
                        "aws:SourceAccount": stack.account,
                        "aws:SourceArn": self.schedule_group.attr_arn,
                    }
                },
            ),
            description="Squadron: a repository's retrospective schedule sends its command to events.fifo",
        )
        self.scheduler_role.add_to_principal_policy(
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[queue.queue_arn])
        )
        schedules = stack.format_arn(
            service="scheduler", resource="schedule", resource_name=f"{self.schedule_group.ref}/*"
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=[
                    "scheduler:GetSchedule",
                    "scheduler:CreateSchedule",
                    "scheduler:UpdateSchedule",
                    "scheduler:DeleteSchedule",
                ],
                resources=[schedules],
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[self.scheduler_role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
            )
        )
        cdk.Validations.of(self.role).acknowledge(
            cdk.Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{as_nag_renders(self, schedules)}]",
                reason="The retrospective schedules of the stage's own schedule group ('schedule/<group>/*'): "
                "one per repository, named by its id, unknown in advance.",
            ),
        )
