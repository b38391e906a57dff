"""The repositories' dashboard issues, kept up to date from the domain events: a rule on the bus
-> the dashboards queue -> the dashboards Lambda (at most one edit per repository a minute).

Why this shape (see :mod:`squadron.domain.dashboard_refresh` for the rules):

- **A rule on the bus, not the publisher.** The publisher stays the one job it has (the stream
  onto the bus, exactly as committed); the dashboards are one more consumer of the bus, as a
  user's own rule is, and see exactly what was published, replays of the archive included.
- **A standard SQS queue between them.** It absorbs bursts (a merge can commit a dozen events),
  keeps what Lambda could not do (retries, then a dead-letter queue with an alarm: nothing is
  lost) and delays a message per request (``DelaySeconds``), which is how a deferred rendering
  comes back when its minute is over. A FIFO queue would give neither per-message delays nor
  anything the debounce needs: order does not matter, the slot in the registry decides.
- **The debounce is a conditional write, not timing.** Lambda's batching window only gathers a
  burst into fewer invocations (cheaper); the bound itself is the repository's slot in the
  registry: a rendering is claimed only if the last one is a minute old, so no number of
  concurrent invocations can edit one repository's issue twice within the minute.
- **The reconciler sweeps.** Each tick it asks for every repository with agents (one
  SendMessageBatch per ten): what no event reports (a merge gate's reasons moving while its
  verdict stands, an edit of the issue by hand) is shown within five minutes.

Least privilege: the function reads agents through the status index, the merge gate's views
(``ISSUE#`` items, BatchGetItem) and memory (``MEMORY#`` partitions, Query) and writes only its
slots (``DASHBOARD#`` items, UpdateItem), each bounded by a ``dynamodb:LeadingKeys`` condition;
it reads the App's key, consumes its queue and sends only to it.
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
import jsii
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from aws_cdk.interfaces.aws_events import IRuleRef
from constructs import Construct

from infra.constructs.layer import SharedLayer, function_code
from infra.constructs.observability import messages_waiting_alarm
from infra.constructs.router import RUNTIME_PIN_REASON
from squadron.adapters.dynamo_dashboards import dashboard_pk
from squadron.adapters.dynamo_memory import memory_pk
from squadron.adapters.dynamo_registry import STATUS_INDEX, issue_pk
from squadron.domain.dashboard_refresh import DASHBOARD_EVENTS, REFRESH_INTERVAL

REPO_ROOT = Path(__file__).resolve().parents[2]
DASHBOARD_CODE = REPO_ROOT / "functions" / "dashboard"


@jsii.implements(events.IRuleTarget)
class _QueueTarget:
    """A rule target sending to a queue whose policy the construct writes itself."""

    def __init__(self, queue: sqs.IQueue) -> None:
        self.queue = queue

    def bind(self, rule: IRuleRef, id: str | None = None) -> events.RuleTargetConfig:
        return events.RuleTargetConfig(arn=self.queue.queue_arn)


def _prefix_of(example: str) -> str:
    """``DASHBOARD#*`` from ``DASHBOARD#1``: the items of one kind, for a LeadingKeys condition."""
    return example.split("#", 1)[0] + "#*"


class DashboardIssues(Construct):
    RUNTIME = SharedLayer.RUNTIME
    ARCHITECTURE = SharedLayer.ARCHITECTURE
    HANDLER = "handler.handler"
    MEMORY_SIZE_MB = 512
    #: A batch renders a few repositories (a GitHub listing each, an edit when changed). Under the
    #: refresh interval on purpose: a rendering has ended before the next claim of its repository
    #: can be made, so an older rendering never overwrites a newer one.
    TIMEOUT = cdk.Duration.seconds(50)
    #: Requests handled by one invocation at most, and how long Lambda gathers a burst's.
    BATCH_SIZE = 100
    BATCHING_WINDOW = cdk.Duration.seconds(5)
    #: Invocations at once at most (SQS's smallest): bounds the stage's dashboard work and GitHub
    #: calls; the slot, not this, bounds the edits per repository.
    MAX_CONCURRENCY = 2
    #: Six times the timeout (AWS's advice for an SQS event source): a failed request comes back
    #: after it, when the minute of its repository is long over.
    VISIBILITY_TIMEOUT = cdk.Duration.seconds(300)
    MAX_RECEIVE_COUNT = 5
    RETENTION = cdk.Duration.days(1)  # a request older than the next sweeps is worth nothing
    DEAD_LETTER_RETENTION = cdk.Duration.days(14)
    POWERTOOLS_SERVICE_NAME = "dashboards"

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        layer: lambda_.ILayerVersion,
        bus: events.IEventBus,
        table: dynamodb.ITable,
        private_key: secretsmanager.ISecret,
        github_app_id: str,
        github_app_slug: str,
        log_retention: logs.RetentionDays,
        metrics_namespace: str,
        log_level: str = "INFO",
    ) -> None:
        super().__init__(scope, construct_id)
        if self.TIMEOUT.to_seconds() >= REFRESH_INTERVAL.total_seconds():  # pragma: no cover - a constant
            raise ValueError("the dashboards Lambda's timeout must be under the refresh interval")
        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetterQueue",
            queue_name=f"squadron-{stage}-dashboards-dlq",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=self.DEAD_LETTER_RETENTION,
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            queue_name=f"squadron-{stage}-dashboards",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            visibility_timeout=self.VISIBILITY_TIMEOUT,
            retention_period=self.RETENTION,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letter_queue, max_receive_count=self.MAX_RECEIVE_COUNT
            ),
        )
        self.rule = events.Rule(
            self,
            "ToDashboards",
            event_bus=bus,
            description="Every Squadron domain event of a repository asks for its dashboard issue",
            event_pattern=events.EventPattern(
                source=DASHBOARD_EVENTS["source"], detail=DASHBOARD_EVENTS["detail"]
            ),
        )
        self.rule.add_target(_QueueTarget(self.queue))
        # EventBridge sends to the queue for this rule only, and nothing but SendMessage (CDK's
        # own SqsQueue target grants GetQueueAttributes and GetQueueUrl too).
        self.queue.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["sqs:SendMessage"],
                resources=[self.queue.queue_arn],
                conditions={"ArnEquals": {"aws:SourceArn": self.rule.rule_arn}},
            )
        )
        self.log_group = logs.LogGroup(self, "FunctionLogs", retention=log_retention)
        self.role = self._build_role(table, private_key)
        self.function = lambda_.Function(
            self,
            "Function",
            description="Squadron: each repository's dashboard issue, from its domain events",
            runtime=self.RUNTIME,
            architecture=self.ARCHITECTURE,
            handler=self.HANDLER,
            code=function_code(DASHBOARD_CODE),
            layers=[layer],
            memory_size=self.MEMORY_SIZE_MB,
            timeout=self.TIMEOUT,
            role=self.role,
            log_group=self.log_group,
            environment={
                "REGISTRY_TABLE_NAME": table.table_name,
                "DASHBOARD_QUEUE_URL": self.queue.queue_url,
                "DASHBOARD_REFRESH_SECONDS": str(int(REFRESH_INTERVAL.total_seconds())),
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
        self.function.add_event_source(
            event_sources.SqsEventSource(
                self.queue,
                batch_size=self.BATCH_SIZE,
                max_batching_window=self.BATCHING_WINDOW,
                max_concurrency=self.MAX_CONCURRENCY,
                report_batch_item_failures=True,
            )
        )
        self.dead_letters_alarm = messages_waiting_alarm(
            self,
            "DeadLettersAlarm",
            self.dead_letter_queue,
            "Squadron: dashboard refreshes reached their dead-letter queue after repeated failures "
            "(GitHub refusing the App, a malformed request). The reconciler's sweeps render the "
            "dashboards anyway; inspect the messages for the cause.",
        )

    @property
    def alarms(self) -> tuple[cloudwatch.Alarm, ...]:
        return (self.dead_letters_alarm,)

    def _build_role(self, table: dynamodb.ITable, private_key: secretsmanager.ISecret) -> iam.Role:
        role = iam.Role(
            self,
            "FunctionRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Squadron dashboards: read agents, gate views and memory, write dashboard slots",
        )
        self.log_group.grant_write(role)
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["dynamodb:Query"], resources=[f"{table.table_arn}/index/{STATUS_INDEX}"]
            )
        )
        for actions, example in (
            (["dynamodb:BatchGetItem"], issue_pk(1, 1)),  # the merge gate's views of a repository's PRs
            (["dynamodb:Query"], memory_pk(1)),  # the repository's memory
            (["dynamodb:UpdateItem"], dashboard_pk(1)),  # its slot: claims and deferrals
        ):
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=actions,
                    resources=[table.table_arn],
                    conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [_prefix_of(example)]}},
                )
            )
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[self.queue.queue_arn])
        )
        private_key.grant_read(role)
        return role

    def accept_sweeps_from(self, function: lambda_.Function) -> None:
        """Let ``function`` (the reconciler) ask for every repository's dashboard: it may send to
        the dashboards queue (SendMessage covers SendMessageBatch), and is told where it is."""
        if function.role is None:  # pragma: no cover - every function of the stack has its role
            raise ValueError(f"{function.node.path} has no role")
        function.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[self.queue.queue_arn])
        )
        function.add_environment("DASHBOARD_QUEUE_URL", self.queue.queue_url)
