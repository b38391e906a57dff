"""SquadronStack: composes one construct per concern, nothing else."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct

from infra.constructs.agents import AgentCompute
from infra.constructs.dashboard import OperationsDashboard, Watched
from infra.constructs.event_bus import DomainEventBus
from infra.constructs.event_queue import EventQueue
from infra.constructs.ingress import WebhookIngress
from infra.constructs.layer import SharedLayer
from infra.constructs.observability import Observability
from infra.constructs.pipeline_runs import PipelineRunAlarms
from infra.constructs.pipelines import PipelineRuntime
from infra.constructs.reconciler import Reconciler
from infra.constructs.registry import RegistryTable
from infra.constructs.repo_dashboards import DashboardIssues
from infra.constructs.router import EventRouter
from infra.constructs.secrets import GitHubAppSecrets
from infra.constructs.service_roles import EcsServiceLinkedRole
from infra.settings import SquadronSettings


class SquadronStack(cdk.Stack):
    """GitHub webhook -> HTTP API -> ingress Lambda -> events.fifo -> router -> agent tasks (+ DLQ,
    reconciler, agent gateway, secrets, domain event bus, dashboard issues, dashboard and alarms)."""

    def __init__(
        self, scope: Construct, construct_id: str, *, settings: SquadronSettings, **kwargs: Any
    ) -> None:
        super().__init__(
            scope, construct_id, description=f"Squadron ({settings.stage}): GitHub App agents", **kwargs
        )
        self.settings = settings
        self.observability = Observability(self, "Observability", alarm_email=settings.alarm_email)
        self.secrets = GitHubAppSecrets(self, "Secrets", stage=settings.stage)
        self.layer = SharedLayer(self, "SharedLayer")
        self.events = EventQueue(
            self,
            "Events",
            name_prefix=f"squadron-{settings.stage}",
            max_receive_count=settings.events_max_receive_count,
        )
        self.observability.notify_on(*self.events.alarms)
        self.registry = RegistryTable(self, "Registry")
        self.ingress = WebhookIngress(
            self,
            "Ingress",
            settings=settings,
            layer=self.layer.layer,
            queue=self.events.queue,
            webhook_secret=self.secrets.webhook_secret,
        )
        self.agents = AgentCompute(
            self,
            "Agents",
            layer=self.layer.layer,
            table=self.registry.table,
            queue=self.events.queue,
            private_key=self.secrets.private_key,
            copilot_token=self.secrets.copilot_token,
            github_app_id=settings.github_app_id,
            github_app_slug=settings.github_app_slug,
            log_retention=settings.log_retention,
            metrics_namespace=settings.metrics_namespace,
            egress=settings.agent_egress,
            state_retention_days=settings.state_retention_days,
            allowed_domains=settings.agent_allowed_domains,
            state_backups=settings.state_backups,
        )
        # An account's first ECS cluster needs ECS's service-linked role ready (FINDINGS).
        self.ecs_service_role = EcsServiceLinkedRole(
            self, "EcsServiceRole", log_retention=settings.log_retention
        )
        self.agents.target.cluster.node.add_dependency(self.ecs_service_role.resource)
        self.router = EventRouter(
            self,
            "Router",
            layer=self.layer.layer,
            queue=self.events.queue,
            table=self.registry.table,
            private_key=self.secrets.private_key,
            github_app_id=settings.github_app_id,
            github_app_slug=settings.github_app_slug,
            agents=self.agents.target,
            log_retention=settings.log_retention,
            metrics_namespace=settings.metrics_namespace,
            log_level=settings.log_level,
            max_concurrency=settings.router_max_concurrency,
            history_days=settings.history_days,
        )
        self.reconciler = Reconciler(
            self,
            "Reconciler",
            layer=self.layer.layer,
            queue=self.events.queue,
            table=self.registry.table,
            private_key=self.secrets.private_key,
            github_app_id=settings.github_app_id,
            github_app_slug=settings.github_app_slug,
            cluster=self.agents.target.cluster,
            log_retention=settings.log_retention,
            metrics_namespace=settings.metrics_namespace,
            log_level=settings.log_level,
            name_prefix=f"squadron-{settings.stage}",
        )
        self.pipelines = PipelineRuntime(
            self, "Pipelines", queue=self.events.queue, prefix=f"squadron-{settings.stage}"
        )
        self.pipelines.grant_running(self.router.role, self.router.function)
        self.pipelines.grant_publishing(self.reconciler.role, self.reconciler.function)
        self.domain_events = DomainEventBus(
            self,
            "DomainEvents",
            stage=settings.stage,
            layer=self.layer.layer,
            table=self.registry.table,
            log_retention=settings.log_retention,
            log_level=settings.log_level,
            metrics_namespace=settings.metrics_namespace,
        )
        self.observability.notify_on(*self.domain_events.alarms)
        self.dashboards = DashboardIssues(
            self,
            "Dashboards",
            stage=settings.stage,
            layer=self.layer.layer,
            bus=self.domain_events.bus,
            table=self.registry.table,
            private_key=self.secrets.private_key,
            github_app_id=settings.github_app_id,
            github_app_slug=settings.github_app_slug,
            log_retention=settings.log_retention,
            metrics_namespace=settings.metrics_namespace,
            log_level=settings.log_level,
        )
        self.dashboards.accept_sweeps_from(self.reconciler.function)
        self.observability.notify_on(*self.dashboards.alarms)
        self.pipelines.grant_reading(self.dashboards.role, self.dashboards.function)
        self.pipeline_runs = PipelineRunAlarms(self, "PipelineRuns", runtime=self.pipelines)
        self.observability.notify_on(*self.pipeline_runs.alarms)
        self.operations = OperationsDashboard(
            self,
            "Operations",
            stage=settings.stage,
            watched=Watched(
                namespace=settings.metrics_namespace,
                api=self.ingress.api,
                ingress=self.ingress.function,
                router=self.router.function,
                reconciler=self.reconciler.function,
                gateway=self.agents.gateway,
                queue=self.events.queue,
                dead_letter_queue=self.events.dead_letter_queue,
                table=self.registry.table,
                alarms=[
                    *self.events.alarms,
                    *self.domain_events.alarms,
                    *self.dashboards.alarms,
                    *self.pipeline_runs.alarms,
                ],
            ),
        )
        self.observability.notify_on(*self.operations.alarms)
        self._build_outputs()

    def _build_outputs(self) -> None:
        outputs = {
            "WebhookUrl": (self.ingress.webhook_url, "Payload URL for the GitHub App's webhook settings"),
            "WebhookSecretName": (
                self.secrets.webhook_secret.secret_name,
                "Secret holding the webhook secret to paste into the GitHub App",
            ),
            "GitHubAppPrivateKeySecretName": (
                self.secrets.private_key.secret_name,
                "Secret to store the GitHub App's PEM private key in",
            ),
            "EventsQueueUrl": (self.events.queue.queue_url, "events.fifo"),
            "RegistryTableName": (self.registry.table.table_name, "The agent registry (DynamoDB)"),
            "EventsDeadLetterQueueUrl": (self.events.dead_letter_queue.queue_url, "events DLQ"),
            "AlarmTopicArn": (self.observability.alarm_topic.topic_arn, "SNS topic receiving alarms"),
            "CopilotTokenSecretName": (
                self.secrets.copilot_token.secret_name,
                "Secret to store a GitHub token with a Copilot seat in (agents whose model Copilot serves)",
            ),
            "EventBusName": (
                self.domain_events.bus.event_bus_name,
                "The domain event bus (subscribe with a rule)",
            ),
            "DomainEventsLogGroupName": (
                self.domain_events.log_group.log_group_name,
                "Every domain event as published (squadron events tail reads it)",
            ),
            "PipelinePrefix": (
                self.pipeline_runs.prefix,
                "The pipelines' state machines are <prefix>_<repository id>-<pipeline> (squadron pipelines)",
            ),
            "PipelineRoleArn": (
                self.pipelines.role.role_arn,
                "The role the pipelines' state machines run as (squadron pipelines reads the account from it)",
            ),
            "GitHubAppId": (self.settings.github_app_id, "The GitHub App (squadron replay signs in as it)"),
            "DashboardUrl": (
                f"https://console.aws.amazon.com/cloudwatch/home?region={self.region}"
                f"#dashboards:name={self.operations.dashboard.dashboard_name}",
                "The CloudWatch dashboard: is it healthy, and what is it doing?",
            ),
        }
        for output_id, (value, description) in outputs.items():
            cdk.CfnOutput(self, output_id, value=value, description=description)
