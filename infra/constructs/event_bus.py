"""The domain event bus: the registry's stream -> publisher Lambda -> a custom bus per stage.

The router commits each decision's domain events as items in the decision's own transaction
(:mod:`squadron.domain.domain_events`); the table's stream (new images) carries their inserts
to the publisher, filtered on ``entity = event`` by the event source mapping, and the publisher
puts each on the bus with its detail-type and the stage. The bus archives every Squadron event
(replayable), a rule writes every event to a log group (what ``squadron events tail`` reads),
and the schema registry holds the JSON Schema of every detail-type, from ``schemas/events``.

Why a Lambda and not an EventBridge Pipe: a Pipe's input template cannot turn the stored
detail (a JSON string, or a DynamoDB map with typed lists) into the event's detail object
without an enrichment step (a Lambda anyway), and moto runs no Pipes, so the local stack
would test a different path. The publisher is the same code in both.
"""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import jsii
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_eventschemas as eventschemas
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk.interfaces.aws_events import IRuleRef
from constructs import Construct

from infra.constructs.layer import SharedLayer, function_code
from infra.constructs.observability import messages_waiting_alarm
from infra.constructs.router import RUNTIME_PIN_REASON
from squadron.adapters.dynamo_registry import EVENT_ENTITY
from squadron.domain.domain_events import CATALOGUE, SOURCE

REPO_ROOT = Path(__file__).resolve().parents[2]
PUBLISHER_CODE = REPO_ROOT / "functions" / "publisher"
SCHEMAS = REPO_ROOT / "schemas" / "events"


@jsii.implements(events.IRuleTarget)
class _LogGroupTarget:
    """A rule target writing to a log group whose resource policy is created here (CDK's own
    CloudWatchLogGroup target installs that policy through a custom-resource Lambda)."""

    def __init__(self, log_group: logs.ILogGroup) -> None:
        self.log_group = log_group

    def bind(self, rule: IRuleRef, id: str | None = None) -> events.RuleTargetConfig:
        stack = cdk.Stack.of(self.log_group)
        arn = stack.format_arn(
            service="logs",
            resource="log-group",
            resource_name=self.log_group.log_group_name,
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        return events.RuleTargetConfig(arn=arn)


class DomainEventBus(Construct):
    RUNTIME = SharedLayer.RUNTIME
    ARCHITECTURE = SharedLayer.ARCHITECTURE
    HANDLER = "handler.handler"
    MEMORY_SIZE_MB = 256
    TIMEOUT = cdk.Duration.seconds(30)
    BATCH_SIZE = 50
    #: A record EventBridge keeps refusing is retried this often, then its place goes to the
    #: failure queue (the shard moves on instead of stalling for the stream's 24 hours).
    RETRY_ATTEMPTS = 10
    ARCHIVE_RETENTION = cdk.Duration.days(365)
    POWERTOOLS_SERVICE_NAME = "publisher"

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        layer: lambda_.ILayerVersion,
        table: dynamodb.ITable,
        log_retention: logs.RetentionDays,
        log_level: str = "INFO",
        metrics_namespace: str = "Squadron",
    ) -> None:
        super().__init__(scope, construct_id)
        self.metrics_namespace = metrics_namespace
        self.bus = events.EventBus(
            self, "Bus", event_bus_name=f"squadron-{stage}", description="Squadron domain events (versioned)"
        )
        self.archive = self.bus.archive(
            "Archive",
            archive_name=f"squadron-{stage}-domain-events",
            description="Every Squadron domain event, replayable (consumers dedupe by detail.id)",
            event_pattern=events.EventPattern(source=[SOURCE]),
            retention=self.ARCHIVE_RETENTION,
        )
        self._build_schemas(stage)
        self.log_group = self._build_event_log(stage, log_retention)
        self.function, self.failures = self._build_publisher(stage, layer, table, log_retention, log_level)
        self.alarms = [
            messages_waiting_alarm(
                self,
                "PublishFailuresAlarm",
                self.failures,
                "Squadron: domain events that could not be put on the bus (see the failure queue)",
            )
        ]

    def _build_schemas(self, stage: str) -> None:
        registry_name = f"squadron-{stage}"
        self.schema_registry = eventschemas.CfnRegistry(
            self,
            "Schemas",
            registry_name=registry_name,
            description="JSON Schemas of Squadron's domain events (detail of each detail-type)",
        )
        self.schemas: list[eventschemas.CfnSchema] = []
        for detail_type in CATALOGUE:
            schema = eventschemas.CfnSchema(
                self,
                f"Schema-{detail_type}",
                registry_name=registry_name,
                schema_name=f"{SOURCE}@{detail_type}",
                type="JSONSchemaDraft4",
                content=json.dumps(json.loads((SCHEMAS / f"{detail_type}.json").read_text())),
                description=f"{SOURCE} {detail_type}",
            )
            schema.node.add_dependency(self.schema_registry)  # the registry exists before its schemas
            self.schemas.append(schema)

    def _build_event_log(self, stage: str, retention: logs.RetentionDays) -> logs.LogGroup:
        """Every event, as the bus delivered it: what ``squadron events tail`` reads."""
        group = logs.LogGroup(
            self,
            "EventLog",
            log_group_name=f"/aws/events/squadron-{stage}-domain-events",
            retention=retention,
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        rule = events.Rule(
            self,
            "ToEventLog",
            event_bus=self.bus,
            description="Every Squadron domain event to the event log (squadron events tail)",
            event_pattern=events.EventPattern(source=[SOURCE]),
        )
        rule.add_target(_LogGroupTarget(group))
        # EventBridge writes to the group under its service principal, for this rule only.
        logs.ResourcePolicy(
            self,
            "EventLogPolicy",
            policy_statements=[
                iam.PolicyStatement(
                    principals=[iam.ServicePrincipal("events.amazonaws.com")],
                    actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                    resources=[group.log_group_arn],
                    conditions={"ArnEquals": {"aws:SourceArn": rule.rule_arn}},
                )
            ],
        )
        return group

    def _build_publisher(
        self,
        stage: str,
        layer: lambda_.ILayerVersion,
        table: dynamodb.ITable,
        retention: logs.RetentionDays,
        log_level: str,
    ) -> tuple[lambda_.Function, sqs.Queue]:
        log_group = logs.LogGroup(self, "PublisherLogs", retention=retention)
        role = iam.Role(
            self,
            "PublisherRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Squadron publisher: read the registry's stream, put events on this bus",
        )
        log_group.grant_write(role)
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["events:PutEvents"], resources=[self.bus.event_bus_arn])
        )
        failures = sqs.Queue(
            self,
            "PublishFailures",
            enforce_ssl=True,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            retention_period=cdk.Duration.days(14),
        )
        cdk.Validations.of(failures).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-SQS3",
                reason="This queue is the failure destination of the stream mapping (it holds the shard "
                "positions of events that were not published); it has no queue of its own behind it.",
            )
        )
        function = lambda_.Function(
            self,
            "Publisher",
            description="Squadron: committed domain events -> the event bus",
            runtime=self.RUNTIME,
            architecture=self.ARCHITECTURE,
            handler=self.HANDLER,
            code=function_code(PUBLISHER_CODE),
            layers=[layer],
            memory_size=self.MEMORY_SIZE_MB,
            timeout=self.TIMEOUT,
            role=role,
            log_group=log_group,
            environment={
                "EVENT_BUS_NAME": self.bus.event_bus_name,
                "STAGE": stage,
                "POWERTOOLS_SERVICE_NAME": self.POWERTOOLS_SERVICE_NAME,
                "POWERTOOLS_METRICS_NAMESPACE": self.metrics_namespace,
                "LOG_LEVEL": log_level,
            },
        )
        cdk.Validations.of(function.node.default_child or function).acknowledge(
            cdk.Acknowledgment(id="AwsSolutions-L1", reason=RUNTIME_PIN_REASON)
        )
        function.add_event_source(
            event_sources.DynamoEventSource(
                table,
                starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                batch_size=self.BATCH_SIZE,
                bisect_batch_on_error=True,
                report_batch_item_failures=True,
                retry_attempts=self.RETRY_ATTEMPTS,
                on_failure=event_sources.SqsDlq(failures),
                filters=[
                    lambda_.FilterCriteria.filter(
                        {
                            "eventName": lambda_.FilterRule.is_equal("INSERT"),
                            "dynamodb": {
                                "NewImage": {"entity": {"S": lambda_.FilterRule.is_equal(EVENT_ENTITY)}}
                            },
                        }
                    )
                ],
            )
        )
        cdk.Validations.of(role).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="dynamodb:ListStreams, which the stream mapping needs, has no resource-level "
                "permissions; reading records is granted on this table's stream only.",
            )
        )
        return function, failures
