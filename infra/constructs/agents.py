"""Where agent tasks run: VPC, ECS cluster, the agent task definition, EFS for session state,
and the token vendor that gives each task its narrowed GitHub token.

Cost note (also in the README): the VPC has one NAT gateway (about 32 USD a month plus
data) because agent tasks need outbound HTTPS (GitHub, the model provider) and should not
have public IPs; EFS is billed per GB stored (sessions are small).
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_efs as efs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.constructs.layer import SharedLayer
from infra.constructs.router import REGISTRY_ACTIONS, AgentTarget, as_nag_renders
from squadron.config.constants import BYOK_SECRET_PREFIX

REPO_ROOT = Path(__file__).resolve().parents[2]
SESSIONS_PATH = "/mnt/sessions"
CONTAINER_NAME = "agent"
#: Only what the image build reads (keeps the asset small and the synth fast).
IMAGE_EXCLUDES = [
    ".git",
    ".venv",
    "node_modules",
    "cdk.out",
    "tests",
    "bench",
    "infra",
    "functions/ingress",
    "functions/router",
    "functions/tokens",
    "functions/reconciler",
    ".squadron-local",
    "**/__pycache__",
    "**/*.pyc",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
]

_ENV_REASON = (
    "The container environment holds names only (table, queue, function, paths); secrets are "
    "read at run time from Secrets Manager or the token vendor, never passed as variables."
)
_INVOKE_REASON = (
    "The task may invoke the token vendor function and its versions ('<arn>:*', added by "
    "grant_invoke); that one function only, which itself checks the caller's launch token."
)
_ECR_LOGIN_REASON = (
    "The task execution role's only Resource '*' is ecr:GetAuthorizationToken, which has no "
    "resource-level permissions; image pulls are limited to the asset repository."
)
_PUT_METRICS_REASON = (
    "cloudwatch:PutMetricData has no resource-level permissions; the statement is conditioned on "
    "cloudwatch:namespace, so a task publishes only to its stage's namespace (Fargate's awslogs "
    "driver does not extract embedded metrics from a task's output)."
)
_BYOK_REASON = (
    "BYOK provider keys are named by each repository's configuration; the task may read only "
    "secrets under the squadron/byok/ prefix (GetSecretValue, nothing else)."
)
_RUNTIME_PIN_REASON = (
    "python3.12 on purpose: the shared layer's binary wheels (pydantic-core, cryptography) are "
    "installed for CPython 3.12; the runtime and the layer's pip target change together."
)


class AgentCompute(Construct):
    TASK_CPU = 1024
    TASK_MEMORY_MIB = 4096

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        layer: lambda_.ILayerVersion,
        table: dynamodb.ITable,
        queue: sqs.IQueue,
        private_key: secretsmanager.ISecret,
        copilot_token: secretsmanager.ISecret,
        github_app_id: str,
        log_retention: logs.RetentionDays,
        metrics_namespace: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.metrics_namespace = metrics_namespace
        self.copilot_token = copilot_token
        self.flow_logs = logs.LogGroup(self, "FlowLogs", retention=log_retention)
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=2,
            nat_gateways=1,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
                ec2.SubnetConfiguration(
                    name="agents", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=22
                ),
            ],
            flow_logs={
                "all": ec2.FlowLogOptions(
                    destination=ec2.FlowLogDestination.to_cloud_watch_logs(self.flow_logs)
                )
            },
        )
        self.security_group = ec2.SecurityGroup(
            self,
            "AgentTasks",
            vpc=self.vpc,
            description="Squadron agent tasks: outbound HTTPS only, no inbound",
        )
        self.file_system = efs.FileSystem(
            self,
            "Sessions",
            vpc=self.vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            encrypted=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,
            enable_automatic_backups=True,
        )
        self.file_system.connections.allow_default_port_from(
            self.security_group, "agent tasks mount sessions"
        )
        self.access_point = self.file_system.add_access_point(
            "SessionsAccessPoint",
            path="/sessions",
            posix_user=efs.PosixUser(uid="1000", gid="1000"),
            create_acl=efs.Acl(owner_uid="1000", owner_gid="1000", permissions="750"),
        )
        self.cluster = ecs.Cluster(
            self, "Cluster", vpc=self.vpc, container_insights_v2=ecs.ContainerInsights.ENABLED
        )
        self.token_vendor = self._token_vendor(layer, table, private_key, github_app_id, log_retention)
        self.task_definition = self._task_definition(table, queue, log_retention)

    def _token_vendor(
        self,
        layer: lambda_.ILayerVersion,
        table: dynamodb.ITable,
        private_key: secretsmanager.ISecret,
        github_app_id: str,
        log_retention: logs.RetentionDays,
    ) -> lambda_.Function:
        log_group = logs.LogGroup(self, "TokenVendorLogs", retention=log_retention)
        role = iam.Role(
            self,
            "TokenVendorRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Squadron token vendor: read agents, use the App key",
        )
        log_group.grant_write(role)
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["dynamodb:GetItem"], resources=[table.table_arn])
        )
        private_key.grant_read(role)
        function = lambda_.Function(
            self,
            "TokenVendor",
            description="Squadron: narrowed GitHub tokens for agent tasks",
            runtime=SharedLayer.RUNTIME,
            architecture=SharedLayer.ARCHITECTURE,
            handler="handler.handler",
            code=lambda_.Code.from_asset(str(REPO_ROOT / "functions" / "tokens"), exclude=["**/__pycache__"]),
            layers=[layer],
            memory_size=256,
            timeout=cdk.Duration.seconds(15),
            role=role,
            log_group=log_group,
            environment={
                "REGISTRY_TABLE_NAME": table.table_name,
                "GITHUB_APP_ID": github_app_id,
                "GITHUB_PRIVATE_KEY_SECRET_ARN": private_key.secret_arn,
                "POWERTOOLS_SERVICE_NAME": "tokens",
                "POWERTOOLS_METRICS_NAMESPACE": self.metrics_namespace,
            },
        )
        cdk.Validations.of(function.node.default_child or function).acknowledge(
            cdk.Acknowledgment(id="AwsSolutions-L1", reason=_RUNTIME_PIN_REASON)
        )
        return function

    def _task_definition(
        self, table: dynamodb.ITable, queue: sqs.IQueue, log_retention: logs.RetentionDays
    ) -> ecs.FargateTaskDefinition:
        task = ecs.FargateTaskDefinition(
            self,
            "AgentTask",
            cpu=self.TASK_CPU,
            memory_limit_mib=self.TASK_MEMORY_MIB,
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=ecs.CpuArchitecture.X86_64,
                operating_system_family=ecs.OperatingSystemFamily.LINUX,
            ),
            volumes=[
                ecs.Volume(
                    name="sessions",
                    efs_volume_configuration=ecs.EfsVolumeConfiguration(
                        file_system_id=self.file_system.file_system_id,
                        transit_encryption="ENABLED",
                        authorization_config=ecs.AuthorizationConfig(
                            access_point_id=self.access_point.access_point_id, iam="ENABLED"
                        ),
                    ),
                )
            ],
        )
        container = task.add_container(
            CONTAINER_NAME,
            image=ecs.ContainerImage.from_asset(
                str(REPO_ROOT), file="functions/agent/Dockerfile", exclude=IMAGE_EXCLUDES
            ),
            logging=ecs.LogDrivers.aws_logs(
                stream_prefix="agent", log_group=logs.LogGroup(self, "AgentLogs", retention=log_retention)
            ),
            environment={
                "REGISTRY_TABLE_NAME": table.table_name,
                "EVENTS_QUEUE_URL": queue.queue_url,
                "TOKEN_VENDOR_FUNCTION": self.token_vendor.function_name,
                "COPILOT_HOME": SESSIONS_PATH,
                "SQUADRON_METRICS_NAMESPACE": self.metrics_namespace,
                "COPILOT_GITHUB_TOKEN_SECRET": self.copilot_token.secret_arn,
            },
            readonly_root_filesystem=False,
        )
        container.add_mount_points(
            ecs.MountPoint(container_path=SESSIONS_PATH, source_volume="sessions", read_only=False)
        )
        role = task.task_role
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(REGISTRY_ACTIONS), resources=[table.table_arn])
        )
        queue.grant_send_messages(role)
        # PutMetricData has no resources; the condition keeps the task to its stage's namespace.
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": self.metrics_namespace}},
            )
        )
        self.token_vendor.grant_invoke(role)
        # The model's credentials: the Copilot token, and the keys of BYOK providers, which a
        # repository's configuration names by secret id under BYOK_SECRET_PREFIX.
        self.copilot_token.grant_read(role)
        byok = cdk.Stack.of(self).format_arn(
            service="secretsmanager",
            resource="secret",
            resource_name=f"{BYOK_SECRET_PREFIX}*",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"], resources=[byok])
        )
        self.file_system.grant(role, "elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite")
        cdk.Validations.of(task.node.default_child or task).acknowledge(
            cdk.Acknowledgment(id="AwsSolutions-ECS2", reason=_ENV_REASON),
        )
        invoke_versions = as_nag_renders(self, f"{self.token_vendor.function_arn}:*")
        cdk.Validations.of(role).acknowledge(
            cdk.Acknowledgment(id=f"AwsSolutions-IAM5[Resource::{invoke_versions}]", reason=_INVOKE_REASON),
            cdk.Acknowledgment(id="AwsSolutions-IAM5[Resource::*]", reason=_PUT_METRICS_REASON),
            cdk.Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{as_nag_renders(self, byok)}]", reason=_BYOK_REASON
            ),
        )
        if task.execution_role is not None:
            cdk.Validations.of(task.execution_role).acknowledge(
                cdk.Acknowledgment(id="AwsSolutions-IAM5[Resource::*]", reason=_ECR_LOGIN_REASON)
            )
        return task

    @property
    def target(self) -> AgentTarget:
        return AgentTarget(
            cluster=self.cluster,
            task_definition=self.task_definition,
            container_name=CONTAINER_NAME,
            subnets=self.vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS).subnets,
            security_group=self.security_group,
        )
