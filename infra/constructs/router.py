"""The router: events.fifo -> router Lambda -> registry table, agent tasks (ECS RunTask), GitHub."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_efs as efs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.constructs.event_queue import EventQueue
from infra.constructs.layer import SharedLayer, function_code
from squadron.adapters.dynamo_registry import STATUS_INDEX
from squadron.deployment import DeploymentSettings
from squadron.domain.repo_volumes import REPO_FAMILY_INFIX, REPO_TAG

REPO_ROOT = Path(__file__).resolve().parents[2]
ROUTER_CODE = REPO_ROOT / "functions" / "router"

#: What the router does to the registry table (item-level; no Scan, no batch, no table admin).
#: TransactWriteItems is authorized through the item actions of each part.
REGISTRY_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:ConditionCheckItem",
)

#: Router invocations at once (the SQS event source's MaximumConcurrency; 2 is its minimum).
DEFAULT_MAX_CONCURRENCY: int = DeploymentSettings.model_fields["router_max_concurrency"].default
#: Days the domain events the router commits stay in the registry as history.
DEFAULT_HISTORY_DAYS: int = DeploymentSettings.model_fields["history_days"].default

XRAY_WILDCARD_REASON = (
    "The only Resource '*' is X-Ray's PutTraceSegments/PutTelemetryRecords, added by active "
    "tracing: X-Ray has no resource-level permissions for these actions."
)
_TASK_WILDCARD_REASON = (
    "RunTask is allowed on the agent task definition family (any revision, 'family:*') and on "
    "each repository's family ('family-repo-*', registered at its first launch, tagged) and "
    "StopTask/TagResource/DescribeTasks on tasks of the agent cluster ('task/<cluster>/*'): task "
    "ids do not exist before launch, and all are further bound by an ecs:cluster condition. "
    "ListTasks (a retried launch looks up the task an earlier attempt started, by startedBy) is "
    "authorized on container instances ('container-instance/<cluster>/*', the resource type IAM "
    "names for it), bound by the same ecs:cluster condition."
)
_ACCESS_POINT_TAG_REASON = (
    "elasticfilesystem:TagResource on access points ('access-point/*') only as part of "
    "CreateAccessPoint (elasticfilesystem:CreateAction): a repository's access point has no id "
    "before it is created; creating one is allowed on the agents' file system only."
)
RUNTIME_PIN_REASON = (
    "python3.12 on purpose: the shared layer's binary wheels (pydantic-core, cryptography) are "
    "installed for CPython 3.12; the runtime and the layer's pip target change together."
)


@dataclass(frozen=True)
class AgentTarget:
    """Where agent tasks run: the router may start and stop these, and nothing else."""

    cluster: ecs.ICluster
    task_definition: ecs.TaskDefinition
    container_name: str
    subnets: list[ec2.ISubnet]
    security_group: ec2.ISecurityGroup
    #: Public subnets (the default, no NAT gateway): each task gets a public IPv4 address.
    assign_public_ip: bool = False
    #: The agents' file system: each repository's tasks mount only its own access point of it.
    file_system: efs.IFileSystem | None = None


class EventRouter(Construct):
    RUNTIME = SharedLayer.RUNTIME
    ARCHITECTURE = SharedLayer.ARCHITECTURE
    HANDLER = "handler.handler"
    MEMORY_SIZE_MB = 512
    TRACING = True  # X-Ray, active (bench/cold_start.py reads it)
    TIMEOUT = EventQueue.ROUTER_TIMEOUT
    BATCH_SIZE = EventQueue.ROUTER_BATCH_SIZE
    POWERTOOLS_SERVICE_NAME = "router"

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
        agents: AgentTarget,
        log_retention: logs.RetentionDays,
        metrics_namespace: str,
        log_level: str = "INFO",
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        history_days: int = DEFAULT_HISTORY_DAYS,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(self, "FunctionLogs", retention=log_retention)
        self.role = iam.Role(
            self,
            "FunctionRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Squadron router: registry, agent tasks, GitHub App key",
        )
        self.log_group.grant_write(self.role)
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(REGISTRY_ACTIONS), resources=[table.table_arn])
        )
        # A retrospective reads its repository's history (domain events by time) on the index.
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["dynamodb:Query"], resources=[f"{table.table_arn}/index/{STATUS_INDEX}"]
            )
        )
        private_key.grant_read(self.role)
        # The merge gate announces the App's own merges on events.fifo (their webhooks are dropped).
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[queue.queue_arn])
        )
        self._grant_agent_tasks(agents)
        cdk.Validations.of(self.role).acknowledge(
            cdk.Acknowledgment(id="AwsSolutions-IAM5[Resource::*]", reason=XRAY_WILDCARD_REASON),
            *[
                cdk.Acknowledgment(
                    id=f"AwsSolutions-IAM5[Resource::{as_nag_renders(self, arn)}]",
                    reason=_TASK_WILDCARD_REASON,
                )
                for arn in self._task_wildcards
            ],
        )
        self.function = lambda_.Function(
            self,
            "Function",
            description="Squadron: route events.fifo deliveries to agents",
            runtime=self.RUNTIME,
            architecture=self.ARCHITECTURE,
            handler=self.HANDLER,
            code=function_code(ROUTER_CODE),
            layers=[layer],
            memory_size=self.MEMORY_SIZE_MB,
            timeout=self.TIMEOUT,
            role=self.role,
            log_group=self.log_group,
            tracing=lambda_.Tracing.ACTIVE if self.TRACING else lambda_.Tracing.DISABLED,
            environment={
                "REGISTRY_TABLE_NAME": table.table_name,
                "EVENTS_QUEUE_URL": queue.queue_url,
                "AGENT_CLUSTER": agents.cluster.cluster_arn,
                "AGENT_TASK_DEFINITION": agents.task_definition.task_definition_arn,
                "AGENT_CONTAINER_NAME": agents.container_name,
                "AGENT_SUBNETS": ",".join(subnet.subnet_id for subnet in agents.subnets),
                "AGENT_SECURITY_GROUPS": agents.security_group.security_group_id,
                "AGENT_ASSIGN_PUBLIC_IP": "ENABLED" if agents.assign_public_ip else "DISABLED",
                **({"AGENT_FILE_SYSTEM_ID": agents.file_system.file_system_id} if agents.file_system else {}),
                "GITHUB_APP_ID": github_app_id,
                "GITHUB_APP_SLUG": github_app_slug,
                "GITHUB_PRIVATE_KEY_SECRET_ARN": private_key.secret_arn,
                "POWERTOOLS_SERVICE_NAME": self.POWERTOOLS_SERVICE_NAME,
                "POWERTOOLS_METRICS_NAMESPACE": metrics_namespace,
                "LOG_LEVEL": log_level,
                # The router commits every domain event; its item is history this long.
                "SQUADRON_HISTORY_DAYS": str(history_days),
            },
        )
        cdk.Validations.of(self.function.node.default_child or self.function).acknowledge(
            cdk.Acknowledgment(id="AwsSolutions-L1", reason=RUNTIME_PIN_REASON)
        )
        # Bounded concurrency (reserved concurrency would fail on accounts with a low quota): a
        # burst of events never takes the executions the ingress needs to answer GitHub.
        self.function.add_event_source(
            event_sources.SqsEventSource(
                queue,
                batch_size=self.BATCH_SIZE,
                report_batch_item_failures=True,
                max_concurrency=max_concurrency,
            )
        )

    def _grant_agent_tasks(self, agents: AgentTarget) -> None:
        stack = cdk.Stack.of(self)
        cluster_arn = agents.cluster.cluster_arn
        family = agents.task_definition.family
        on_cluster = {"ArnEquals": {"ecs:cluster": cluster_arn}}
        tasks_of_cluster = stack.format_arn(
            service="ecs", resource="task", resource_name=f"{agents.cluster.cluster_name}/*"
        )
        definitions = stack.format_arn(service="ecs", resource="task-definition", resource_name=f"{family}:*")
        # Each repository's own family (squadron.domain.repo_volumes.repo_family), any revision.
        repo_definitions = stack.format_arn(
            service="ecs", resource="task-definition", resource_name=f"{family}{REPO_FAMILY_INFIX}*"
        )
        instances_of_cluster = stack.format_arn(
            service="ecs", resource="container-instance", resource_name=f"{agents.cluster.cluster_name}/*"
        )
        self._task_wildcards = (definitions, tasks_of_cluster, repo_definitions, instances_of_cluster)
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["ecs:RunTask"],
                resources=[definitions, repo_definitions],
                conditions=on_cluster,
            )
        )
        if agents.file_system is not None:
            self._grant_repo_volumes(agents.file_system, repo_definitions)
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["ecs:StopTask"], resources=[tasks_of_cluster], conditions=on_cluster)
        )
        # A retried launch adopts the task an earlier attempt started (squadron.shell.launching):
        # ListTasks by startedBy, then DescribeTasks to skip a stopped one; this cluster only.
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["ecs:ListTasks"], resources=[instances_of_cluster], conditions=on_cluster
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["ecs:DescribeTasks"], resources=[tasks_of_cluster], conditions=on_cluster
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["ecs:TagResource"],
                resources=[tasks_of_cluster],
                conditions={"StringEquals": {"ecs:CreateAction": "RunTask"}},
            )
        )
        passed = [agents.task_definition.task_role.role_arn]
        if agents.task_definition.execution_role is not None:
            passed.append(agents.task_definition.execution_role.role_arn)
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=passed,
                conditions={"StringEquals": {"iam:PassedToService": "ecs-tasks.amazonaws.com"}},
            )
        )

    def _grant_repo_volumes(self, file_system: efs.IFileSystem, repo_definitions: str) -> None:
        """A repository's first launch makes its access point and task definition
        (squadron.adapters.repo_volumes): on the agents' file system and in the repositories'
        families only, each tagged with its repository; the roles the definition names are the
        agent task's two (iam:PassRole above)."""
        stack = cdk.Stack.of(self)
        tagged = {"Null": {f"aws:RequestTag/{REPO_TAG}": "false"}}
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["elasticfilesystem:CreateAccessPoint"],
                resources=[file_system.file_system_arn],
                conditions=tagged,
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["elasticfilesystem:DescribeAccessPoints"], resources=[file_system.file_system_arn]
            )
        )
        access_points = stack.format_arn(
            service="elasticfilesystem", resource="access-point", resource_name="*"
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["elasticfilesystem:TagResource"],
                resources=[access_points],
                conditions={"StringEquals": {"elasticfilesystem:CreateAction": "CreateAccessPoint"}},
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["ecs:RegisterTaskDefinition"], resources=[repo_definitions], conditions=tagged
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["ecs:TagResource"],
                resources=[repo_definitions],
                conditions={"StringEquals": {"ecs:CreateAction": "RegisterTaskDefinition"}},
            )
        )
        # Read-only, and without resource-level permissions in ECS: the one '*' of these grants.
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["ecs:DescribeTaskDefinition"], resources=["*"])
        )
        cdk.Validations.of(self.role).acknowledge(
            cdk.Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{as_nag_renders(self, access_points)}]",
                reason=_ACCESS_POINT_TAG_REASON,
            )
        )


def as_nag_renders(scope: Construct, value: str) -> str:
    """``value`` (possibly holding tokens) the way cdk-nag prints it in a finding id."""
    return _render(cdk.Stack.of(scope).resolve(value))


def _render(resolved: object) -> str:
    if isinstance(resolved, str):
        return resolved
    if isinstance(resolved, dict):
        if "Ref" in resolved:
            return f"<{resolved['Ref']}>"
        if "Fn::GetAtt" in resolved:
            logical_id, attribute = resolved["Fn::GetAtt"]
            return f"<{logical_id}.{attribute}>"
        if "Fn::Join" in resolved:
            separator, parts = resolved["Fn::Join"]
            return str(separator).join(_render(part) for part in parts)
    raise ValueError(f"cannot render {resolved!r} as cdk-nag does")
