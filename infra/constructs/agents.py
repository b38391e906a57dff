"""Where agent tasks run: VPC, ECS cluster, the agent task definition, EFS for agents' files,
and the agent gateway: the one door of agent tasks to the framework.

Containment (docs/security.md, "Threat model"): the task role may invoke the gateway and mount the
agents' file system, nothing else. The gateway checks each call's launch secret and acts
only on the calling agent's own record, inbox, token and key, and on finished agents' records
only to claim their state for removal and record it removed (the janitor, which reads their
page from the status index). On EFS every agent has a
directory owned by its own POSIX user (mode 0700), so the access point enforces no user:
the host (root in the container, with a reduced capability set) creates and hands over
each directory, and the agent's processes run as its user.

Network (docs/costs.md): by default agent tasks run in public subnets, each with a
public IPv4 address while it runs and a security group with no inbound rule and outbound only
HTTPS and NFS to the file system, so nothing costs between tasks. The VPC's DNS Firewall
(infra/constructs/egress.py) resolves only the names agents need. ``egress="nat"`` puts them in
private subnets behind one NAT gateway instead (fixed egress addresses for GitHub IP allow
lists, about 36 USD a month more). EFS is billed per GB stored: finished agents' working copies
and sessions are removed ``state_retention_days`` after they finished (7 by default).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_efs as efs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.constructs.egress import EgressAllowList
from infra.constructs.layer import SharedLayer, function_code
from infra.constructs.router import AgentTarget, as_nag_renders
from squadron.adapters.dynamo_registry import STATUS_INDEX
from squadron.domain.repo_config.constants import BYOK_SECRET_PREFIX
from squadron.domain.retention import DEFAULT_RETENTION_DAYS

REPO_ROOT = Path(__file__).resolve().parents[2]
AGENTS_PATH = "/mnt/agents"
#: The Copilot CLI's package, unpacked at build time, read by every agent's user.
CLI_CACHE_PATH = "/opt/copilot-cache"
CONTAINER_NAME = "agent"
#: Capabilities the host keeps (Docker's default set minus these): it creates agents'
#: directories and hands them over (CHOWN, FOWNER, DAC_OVERRIDE), starts and stops the agent's
#: processes as the agent's user (SETUID, SETGID, SETPCAP to drop their bounding set, KILL).
DROPPED_CAPABILITIES = (
    ecs.Capability.AUDIT_WRITE,
    ecs.Capability.FSETID,
    ecs.Capability.MKNOD,
    ecs.Capability.NET_BIND_SERVICE,
    ecs.Capability.NET_RAW,
    ecs.Capability.SETFCAP,
    ecs.Capability.SYS_CHROOT,
)
#: The agent image's build context is an allow list (Docker's ignore syntax): the Dockerfile and
#: what it copies (pyproject.toml, README.md, layers/squadron), nothing else. Deployment values
#: (cdk.context.json), the App's key material (`squadron app create` output), local state and
#: every other file of the checkout stay out, so configuring a deployment never rebuilds and
#: pushes a new image and no key can end up in one (tests/infra/test_infra_image_context.py).
IMAGE_CONTEXT = ("pyproject.toml", "README.md", "layers/squadron", "functions/agent/Dockerfile")
IMAGE_EXCLUDES = [
    "*",
    *(f"!{path}" for path in IMAGE_CONTEXT),
    # Written by `pip install -e .` and Python on the user's machine: they would change the hash.
    "**/__pycache__",
    "**/*.pyc",
    "**/*.egg-info",
]

_ENV_REASON = (
    "The container environment holds names only (the gateway function, paths); the launch secret "
    "comes per task as a RunTask override, every other secret through the gateway at run time."
)
#: What the gateway does to the registry table: an agent's record, lease and uid claim
#: (GetItem, UpdateItem, PutItem; a put of a dev agent's record is a transaction with its branch
#: link), its inbox (Query, DeleteItem). No Scan, no batch, no table admin.
GATEWAY_REGISTRY_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
)
#: What a task needs of EFS: mount, write, and act as root (the host hands directories over).
EFS_CLIENT_ACTIONS = (
    "elasticfilesystem:ClientMount",
    "elasticfilesystem:ClientWrite",
    "elasticfilesystem:ClientRootAccess",
)
_INVOKE_REASON = (
    "The task may invoke the agent gateway and its versions ('<arn>:*', added by grant_invoke); "
    "that one function only, which itself checks the caller's launch secret."
)
_ECR_LOGIN_REASON = (
    "The task execution role's only Resource '*' is ecr:GetAuthorizationToken, which has no "
    "resource-level permissions; image pulls are limited to the asset repository."
)
_BYOK_REASON = (
    "BYOK provider keys are named by each repository's configuration; the gateway may read only "
    "secrets under the squadron/byok/ prefix (GetSecretValue), and hands a task only the key its "
    "own role's configuration names."
)
_RUNTIME_PIN_REASON = (
    "python3.12 on purpose: the shared layer's binary wheels (pydantic-core, cryptography) are "
    "installed for CPython 3.12; the runtime and the layer's pip target change together."
)


def task_environment(gateway_function: str) -> dict[str, str]:
    """The agent container's environment in the task definition (names and paths, no secret).

    The image adds its own (functions/agent/Dockerfile: the CLI's path and package cache); each
    RunTask adds the agent id, the launch token and purpose, and the launch's secret.
    """
    return {
        "AGENT_GATEWAY_FUNCTION": gateway_function,
        "SQUADRON_AGENTS_ROOT": AGENTS_PATH,
        "XDG_CACHE_HOME": CLI_CACHE_PATH,
    }


class AgentCompute(Construct):
    TASK_CPU = 1024
    TASK_MEMORY_MIB = 4096
    GATEWAY_MEMORY_SIZE_MB = 512  # docs/costs.md, "Cold starts": agents wait on its cold path
    GATEWAY_TRACING = False  # the gateway's handler has no Tracer

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
        github_app_slug: str,
        log_retention: logs.RetentionDays,
        metrics_namespace: str,
        egress: str = "public",
        state_retention_days: int = DEFAULT_RETENTION_DAYS,
        allowed_domains: Sequence[str] = (),
        state_backups: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        #: Days finished agents' state stays on the file system (the gateway hands out what is due).
        self.state_retention_days = state_retention_days
        self.metrics_namespace = metrics_namespace
        self.copilot_token = copilot_token
        self.nat = egress == "nat"
        #: Where agent tasks (and the file system's mount targets) live.
        self.agent_subnets = ec2.SubnetType.PRIVATE_WITH_EGRESS if self.nat else ec2.SubnetType.PUBLIC
        self.flow_logs = logs.LogGroup(self, "FlowLogs", retention=log_retention)
        subnets = [ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=22)]
        if self.nat:
            subnets.append(
                ec2.SubnetConfiguration(
                    name="agents", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=22
                )
            )
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=2,
            nat_gateways=1 if self.nat else 0,
            subnet_configuration=subnets,
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
            description="Squadron agent tasks: no inbound; outbound HTTPS, and NFS to their file system",
            allow_all_outbound=False,
        )
        self.security_group.add_egress_rule(
            ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "GitHub, the model provider and AWS APIs over HTTPS"
        )
        # Which names those are: the VPC's resolver answers only the allow list's.
        self.egress_allow_list = EgressAllowList(self, "Egress", vpc=self.vpc, extra_domains=allowed_domains)
        self.file_system = efs.FileSystem(
            self,
            "Sessions",
            vpc=self.vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_type=self.agent_subnets),
            encrypted=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,
            # AWS Backup keeps daily copies 35 days past state_retention_days: the deployer's choice.
            enable_automatic_backups=state_backups,
            # Git working copies live here: bursting credits run out under many small writes.
            throughput_mode=efs.ThroughputMode.ELASTIC,
        )
        if not state_backups:  # said, not left to the API's default
            cfn_file_system = self.file_system.node.default_child
            assert isinstance(cfn_file_system, efs.CfnFileSystem)
            cfn_file_system.backup_policy = efs.CfnFileSystem.BackupPolicyProperty(status="DISABLED")
        self.file_system.connections.allow_default_port_from(
            self.security_group, "agent tasks mount the agents' file system"
        )
        # No POSIX user is enforced: every agent's directory belongs to the agent's own uid, and
        # the access point's root is only passable (0711), never listable, by agents' users.
        self.access_point = self.file_system.add_access_point(
            "AgentsAccessPoint",
            path="/agents",
            create_acl=efs.Acl(owner_uid="0", owner_gid="0", permissions="711"),
        )
        self.cluster = ecs.Cluster(
            self, "Cluster", vpc=self.vpc, container_insights_v2=ecs.ContainerInsights.ENABLED
        )
        self.gateway = self._gateway(
            layer,
            table,
            queue,
            private_key,
            app=(github_app_id, github_app_slug),
            log_retention=log_retention,
        )
        self.task_definition = self._task_definition(log_retention)

    def _gateway(
        self,
        layer: lambda_.ILayerVersion,
        table: dynamodb.ITable,
        queue: sqs.IQueue,
        private_key: secretsmanager.ISecret,
        *,
        app: tuple[str, str],
        log_retention: logs.RetentionDays,
    ) -> lambda_.Function:
        github_app_id, github_app_slug = app
        log_group = logs.LogGroup(self, "GatewayLogs", retention=log_retention)
        role = iam.Role(
            self,
            "GatewayRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Squadron agent gateway: an agent task's own record, inbox, token, key and commands",
        )
        log_group.grant_write(role)
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(GATEWAY_REGISTRY_ACTIONS), resources=[table.table_arn])
        )
        # The janitor's page: finished agents by when they finished, on the status index.
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["dynamodb:Query"], resources=[f"{table.table_arn}/index/{STATUS_INDEX}"]
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[queue.queue_arn])
        )
        private_key.grant_read(role)
        self.copilot_token.grant_read(role)
        byok = self.byok_secrets_arn
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"], resources=[byok])
        )
        function = lambda_.Function(
            self,
            "Gateway",
            description="Squadron: the agent gateway, agent tasks' one door to the framework",
            runtime=SharedLayer.RUNTIME,
            architecture=SharedLayer.ARCHITECTURE,
            handler="handler.handler",
            code=function_code(REPO_ROOT / "functions" / "gateway"),
            layers=[layer],
            memory_size=self.GATEWAY_MEMORY_SIZE_MB,
            timeout=cdk.Duration.seconds(30),
            role=role,
            log_group=log_group,
            environment={
                "REGISTRY_TABLE_NAME": table.table_name,
                "EVENTS_QUEUE_URL": queue.queue_url,
                "GITHUB_APP_ID": github_app_id,
                "GITHUB_APP_SLUG": github_app_slug,
                "GITHUB_PRIVATE_KEY_SECRET_ARN": private_key.secret_arn,
                "COPILOT_GITHUB_TOKEN_SECRET": self.copilot_token.secret_arn,
                "SQUADRON_STATE_RETENTION_DAYS": str(self.state_retention_days),
                "POWERTOOLS_SERVICE_NAME": "gateway",
                "POWERTOOLS_METRICS_NAMESPACE": self.metrics_namespace,
            },
        )
        cdk.Validations.of(function.node.default_child or function).acknowledge(
            cdk.Acknowledgment(id="AwsSolutions-L1", reason=_RUNTIME_PIN_REASON)
        )
        cdk.Validations.of(role).acknowledge(
            cdk.Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{as_nag_renders(self, byok)}]", reason=_BYOK_REASON
            )
        )
        return function

    @property
    def byok_secrets_arn(self) -> str:
        return cdk.Stack.of(self).format_arn(
            service="secretsmanager",
            resource="secret",
            resource_name=f"{BYOK_SECRET_PREFIX}*",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )

    def _task_definition(self, log_retention: logs.RetentionDays) -> ecs.FargateTaskDefinition:
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
                    name="agents",
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
                str(REPO_ROOT),
                file="functions/agent/Dockerfile",
                exclude=IMAGE_EXCLUDES,
                ignore_mode=cdk.IgnoreMode.DOCKER,
                # The task runs on x86_64: an arm64 machine (Apple Silicon, Graviton CI) builds the
                # same image, not one of its own.
                platform=ecr_assets.Platform.LINUX_AMD64,
            ),
            logging=ecs.LogDrivers.aws_logs(
                stream_prefix="agent", log_group=logs.LogGroup(self, "AgentLogs", retention=log_retention)
            ),
            environment=task_environment(self.gateway.function_name),
            # The host runs as root with a reduced capability set: it hands each agent its own
            # directory and runs the agent's CLI, shell and git as the agent's own user.
            user="0",
            linux_parameters=ecs.LinuxParameters(self, "AgentLinux", init_process_enabled=True),
            readonly_root_filesystem=False,
        )
        assert container.linux_parameters is not None
        container.linux_parameters.drop_capabilities(*DROPPED_CAPABILITIES)
        container.add_mount_points(
            ecs.MountPoint(container_path=AGENTS_PATH, source_volume="agents", read_only=False)
        )
        role = task.task_role
        # The task role: the gateway, and the agents' file system through its access point. Nothing
        # on the registry, the queue, secrets or metrics: a task reaches those only through the
        # gateway, which checks its launch secret.
        self.gateway.grant_invoke(role)
        # Through an access point only (never the file system's root): each repository's task
        # definition mounts its own (squadron.adapters.repo_volumes), made at its first launch.
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=list(EFS_CLIENT_ACTIONS),
                resources=[self.file_system.file_system_arn],
                conditions={
                    "ArnLike": {"elasticfilesystem:AccessPointArn": self.access_points_arn},
                    "Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"},
                },
            )
        )
        cdk.Validations.of(task.node.default_child or task).acknowledge(
            cdk.Acknowledgment(id="AwsSolutions-ECS2", reason=_ENV_REASON),
        )
        invoke_versions = as_nag_renders(self, f"{self.gateway.function_arn}:*")
        cdk.Validations.of(role).acknowledge(
            cdk.Acknowledgment(id=f"AwsSolutions-IAM5[Resource::{invoke_versions}]", reason=_INVOKE_REASON),
        )
        if task.execution_role is not None:
            cdk.Validations.of(task.execution_role).acknowledge(
                cdk.Acknowledgment(id="AwsSolutions-IAM5[Resource::*]", reason=_ECR_LOGIN_REASON)
            )
        return task

    @property
    def access_points_arn(self) -> str:
        """Every access point of the stack's account and region (the file system's are the only
        ones a statement on the file system can match)."""
        return cdk.Stack.of(self).format_arn(
            service="elasticfilesystem", resource="access-point", resource_name="*"
        )

    @property
    def target(self) -> AgentTarget:
        return AgentTarget(
            file_system=self.file_system,
            cluster=self.cluster,
            task_definition=self.task_definition,
            container_name=CONTAINER_NAME,
            subnets=self.vpc.select_subnets(subnet_type=self.agent_subnets).subnets,
            security_group=self.security_group,
            assign_public_ip=not self.nat,
        )
