"""Wiring the router to AWS and GitHub from its environment (the imperative edge)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from squadron.adapters.delivery_records import DeliveryRecords
from squadron.adapters.dynamo_dashboards import DynamoDashboardSlots
from squadron.adapters.dynamo_memory import DynamoMemory
from squadron.adapters.dynamo_registry import DynamoRegistry
from squadron.adapters.ecs import EcsTaskLauncher, EcsTaskStatus
from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.client import GitHubAppClient
from squadron.adapters.github.for_router import AppGitHub, app_repository_files
from squadron.adapters.github.http import GitHubCallStats, GitHubHttp
from squadron.adapters.metrics import ServiceEmfMetrics
from squadron.adapters.pipeline_runs import PipelineRuns as RunsReader
from squadron.adapters.repo_volumes import RepoTaskDefinitions
from squadron.adapters.scheduler import RetroSchedules
from squadron.adapters.secrets import SecretsManagerSource
from squadron.adapters.sqs import SqsEventQueue, SqsRefreshQueue
from squadron.adapters.step_functions import Pipelines
from squadron.config import ConfigLoader
from squadron.config.parse import SquadronConfig
from squadron.domain.agents import AgentRecord
from squadron.domain.app_manifest import web_url_for
from squadron.domain.change_set_merges import SWEEP_KIND
from squadron.domain.change_sets import ChangeSetRefusedError
from squadron.domain.events import EventEnvelope
from squadron.domain.permissions import Caller
from squadron.domain.reconcile import Liveness
from squadron.domain.routing import RoutingPolicy
from squadron.ports import EventQueue, Registry, RetroStore, TaskLauncher
from squadron.settings import (
    LAMBDA_RATE_LIMIT_WAIT_SECONDS,
    AppNotConfiguredError,
    DashboardSettings,
    GatewaySettings,
    GitHubAppSettings,
    ReconcilerSettings,
    RouterSettings,
    app_configured,
    load_settings,
)
from squadron.shell.change_set_commands import ChangeSetCommands
from squadron.shell.change_set_merging import ChangeSetMerger, request_sweep
from squadron.shell.change_set_work import ChangeSetWork
from squadron.shell.change_sets import ChangeSetDesk
from squadron.shell.config_notices import ConfigNotices
from squadron.shell.dashboards import DashboardService
from squadron.shell.dispatch import Dispatcher
from squadron.shell.gateway import AgentGateway
from squadron.shell.memory import Memory
from squadron.shell.merge_gate import MergeGate
from squadron.shell.pipeline_runs import PipelineRuns
from squadron.shell.pipeline_where import PipelineStore, carrying_out
from squadron.shell.policies import PolicyCache
from squadron.shell.reconciler import ReconcilerService, liveness_of
from squadron.shell.retrospective import Retrospectives
from squadron.shell.router import RouterService

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = logging.getLogger(__name__)

#: Every GitHub request this process sends, for the handler to publish after each invocation
#: (one transport per Lambda container, so one count).
github_calls = GitHubCallStats()


@dataclass(frozen=True)
class RouterRuntime:
    dispatcher: Dispatcher
    records: DeliveryRecords | None = None

    def register_lambda_context(self, context: LambdaContext) -> None:
        if self.records is not None:
            self.records.register_lambda_context(context)


def _github_app(settings: GitHubAppSettings) -> GitHubApp:
    return GitHubApp.from_secret(
        app_id=settings.github_app_id,
        # Lambdas: never sleep past a rate limit longer than a fraction of the timeout.
        http=GitHubHttp(
            base_url=settings.github_api_url,
            max_wait_seconds=LAMBDA_RATE_LIMIT_WAIT_SECONDS,
            stats=github_calls,
        ),
        secrets=SecretsManagerSource(max_age=settings.secret_cache_seconds),
        secret_id=settings.github_private_key_secret_arn,
    )


def _pipelines(prefix: str | None, role_arn: str | None) -> Pipelines | None:
    """The deployment's pipelines on Step Functions, when its environment names them."""
    return Pipelines(prefix=prefix, role_arn=role_arn) if prefix and role_arn else None


def build_gateway(environ: Mapping[str, str] | None = None, *, namespace: str | None = None) -> AgentGateway:
    """The agent gateway wired from its environment (see GatewaySettings)."""
    if not app_configured(environ):
        raise AppNotConfiguredError("gateway")
    settings = load_settings(GatewaySettings, environ)
    app = _github_app(settings)
    github = AppGitHub(app)
    cache = PolicyCache(
        ConfigLoader(app_repository_files(github), bot_login=settings.bot_login),
        ttl=timedelta(seconds=settings.config_ttl_seconds),
    )
    registry = DynamoRegistry(settings.registry_table_name)

    def config_for(agent: AgentRecord) -> SquadronConfig:
        github.remember(agent.repo_full_name, agent.installation_id)
        return cache.config_for(agent.repo_full_name)

    return AgentGateway(
        registry=registry,
        app=app,
        queue=SqsEventQueue(settings.events_queue_url),
        secrets=SecretsManagerSource(max_age=settings.secret_cache_seconds),
        config_for=config_for,
        agent_metrics=ServiceEmfMetrics(namespace, "agent"),
        bot_login=settings.bot_login,
        copilot_token_secret=settings.copilot_token_secret,
        memory=Memory(DynamoMemory(settings.registry_table_name)),
        retros=DynamoMemory(settings.registry_table_name),
        artifacts=DynamoMemory(settings.registry_table_name),
        state_retention=timedelta(days=settings.state_retention_days),
        change_sets=ChangeSetDesk(registry, github, clock=_utc_now),
    )


def build_reconciler(environ: Mapping[str, str] | None = None) -> ReconcilerService:
    """The reconciler wired to DynamoDB, events.fifo and GitHub (see ReconcilerSettings)."""
    if not app_configured(environ):
        raise AppNotConfiguredError("reconciler")
    settings = load_settings(ReconcilerSettings, environ)
    pipelines = _pipelines(settings.pipelines_prefix, settings.pipelines_role_arn)
    app = _github_app(settings)
    github = AppGitHub(app)
    records = DeliveryRecords(settings.registry_table_name)
    cache = PolicyCache(
        ConfigLoader(app_repository_files(github), bot_login=settings.bot_login),
        ttl=timedelta(seconds=settings.config_ttl_seconds),
    )

    def liveness(agent: AgentRecord) -> Liveness:
        github.remember(agent.repo_full_name, agent.installation_id)
        return liveness_of(cache.config_for(agent.repo_full_name).config, agent)

    return ReconcilerService(
        registry=DynamoRegistry(settings.registry_table_name),
        liveness=liveness,
        policy_for=cache.policy_for,
        tasks=EcsTaskStatus(cluster=settings.agent_cluster) if settings.agent_cluster else None,
        queue=SqsEventQueue(settings.events_queue_url),
        reader=github.client,
        deliveries=GitHubAppClient(http=app.http, jwt=app.jwt, app_id=app.app_id, caller=Caller.framework()),
        completed=records.completed,
        bot_login=settings.bot_login,
        max_reads=settings.max_reads,
        schedules=RetroSchedules(
            group=settings.schedule_group,
            role_arn=settings.scheduler_role_arn,
            queue_url=settings.events_queue_url,
        )
        if settings.schedule_group and settings.scheduler_role_arn
        else None,
        dashboards=SqsRefreshQueue(settings.dashboard_queue_url) if settings.dashboard_queue_url else None,
        pipelines=PipelineRuns(pipelines, queue_url=settings.events_queue_url)
        if pipelines is not None
        else None,
        change_sets=lambda now: request_sweep(
            DynamoRegistry(settings.registry_table_name), SqsEventQueue(settings.events_queue_url), now
        ),
    )


def build_dashboards(environ: Mapping[str, str] | None = None) -> DashboardService:
    """The dashboards service wired to DynamoDB, its queue and GitHub (see DashboardSettings)."""
    if not app_configured(environ):
        raise AppNotConfiguredError("dashboards")
    settings = load_settings(DashboardSettings, environ)
    pipelines = _pipelines(settings.pipelines_prefix, settings.pipelines_role_arn)
    app = _github_app(settings)
    github = AppGitHub(app)
    cache = PolicyCache(
        ConfigLoader(app_repository_files(github), bot_login=settings.bot_login),
        ttl=timedelta(seconds=settings.config_ttl_seconds),
    )

    registry = DynamoRegistry(settings.registry_table_name)
    return DashboardService(
        registry=registry,
        slots=DynamoDashboardSlots(settings.registry_table_name),
        queue=SqsRefreshQueue(settings.dashboard_queue_url),
        reader=github.client,
        bot_login=settings.bot_login,
        policy_for=cache.policy_for,
        memory=DynamoMemory(settings.registry_table_name),
        interval=timedelta(seconds=settings.refresh_seconds),
        web_url=web_url_for(settings.github_api_url),
        pipelines=RunsReader(pipelines).running if pipelines is not None else None,
        change_sets=registry.change_sets,
    )


def build_router(environ: Mapping[str, str] | None = None) -> RouterRuntime:
    """The router wired to DynamoDB, ECS and GitHub from its environment (see RouterSettings)."""
    if not app_configured(environ):
        raise AppNotConfiguredError("router")
    settings = load_settings(RouterSettings, environ)
    return assemble_router(
        github=AppGitHub(_github_app(settings), bot_login=settings.bot_login),
        registry=DynamoRegistry(
            settings.registry_table_name, history_retention=timedelta(days=settings.history_days)
        ),
        launcher=EcsTaskLauncher(
            cluster=settings.agent_cluster,
            task_definition=settings.agent_task_definition,
            container_name=settings.agent_container_name,
            subnets=settings.agent_subnets,
            security_groups=settings.agent_security_groups,
            assign_public_ip=settings.agent_assign_public_ip == "ENABLED",
            task_definitions=(
                RepoTaskDefinitions(
                    file_system_id=settings.agent_file_system_id,
                    base_task_definition=settings.agent_task_definition,
                )
                if settings.agent_file_system_id
                else None
            ),
        ),
        queue=SqsEventQueue(settings.events_queue_url),
        records=DeliveryRecords(settings.registry_table_name),
        bot_login=settings.bot_login,
        policy_ttl=timedelta(seconds=settings.policy_ttl_seconds),
        memory=Memory(DynamoMemory(settings.registry_table_name)),
        retros=DynamoMemory(settings.registry_table_name),
        pipelines=_pipelines(settings.pipelines_prefix, settings.pipelines_role_arn),
        events_queue_url=settings.events_queue_url,
        claims=DynamoRegistry(settings.registry_table_name),  # each pipeline task's answer, kept
    )


@dataclass(frozen=True)
class ChangeSetSteps:
    """What steps a change set on after each routed delivery (docs/change-sets.md): a member's
    pull request opened or pushed is recorded and its check posted (:class:`ChangeSetWork`), and a
    member's or a revert's pull request closed steps the merging (:class:`ChangeSetMerger`)."""

    work: ChangeSetWork
    merger: ChangeSetMerger

    def after_routing(self, envelope: EventEnvelope) -> dict[str, Any]:
        summary: dict[str, Any] = {}
        try:
            recorded = self.work.pull_request(envelope)
        except ChangeSetRefusedError as exc:  # a step the set's rules refuse: the delivery is done
            logger.warning("change set not worked after %s: %s", envelope.delivery_id, exc)
            recorded = None
        if recorded is not None:
            summary["change_set"] = {"id": recorded.id, "state": str(recorded.state)}
        return {**summary, **self.merger.after_routing(envelope)}


def _utc_now() -> datetime:
    return datetime.now(UTC)


def assemble_router(
    *,
    github: AppGitHub,
    registry: Registry,
    launcher: TaskLauncher,
    queue: EventQueue,
    records: DeliveryRecords | None,
    bot_login: str,
    policy_ttl: timedelta,
    memory: Memory | None = None,
    retros: RetroStore | None = None,
    pipelines: Pipelines | None = None,
    events_queue_url: str = "",
    claims: PipelineStore | None = None,
) -> RouterRuntime:
    """The router's parts put together: each repository's policy (paused while its configuration
    is invalid, and told so through one issue), the merge gate, the routing service."""
    notices = ConfigNotices(lambda repo: github.client(None, repo))
    cache = PolicyCache(
        ConfigLoader(app_repository_files(github), bot_login=bot_login),
        ttl=policy_ttl,
        notices=lambda repo, problems, branch, sha: notices.sync(repo, problems, branch=branch, sha=sha),
    )

    def policies(event: EventEnvelope) -> RoutingPolicy:
        github.remember(event.repository.full_name, event.installation_id)
        return cache(event)

    def paused(event: EventEnvelope) -> str | None:
        github.remember(event.repository.full_name, event.installation_id)
        return cache.pause_reason(event.repository.full_name)

    def stage_policy(repo: str, installation_id: int | None) -> RoutingPolicy:
        """A pipeline's agent stage's repository policy, as its default branch has it now."""
        github.remember(repo, installation_id)
        return cache.policy_for(repo)

    # A change set member's pull request is the set's to merge (docs/change-sets.md).
    change_set_work = (
        ChangeSetWork(registry=registry, github=github, queue=queue, bot_login=bot_login)
        if isinstance(registry, DynamoRegistry)
        else None
    )
    gate = MergeGate(
        client=github.client,
        config_for=cache.config_for,
        bot_login=bot_login,
        announce=queue.send,
        permission=github.permission,  # the router's own five-minute cache of permissions
        change_set_hook=change_set_work.gate_judged if change_set_work is not None else None,
    )
    # A change set's merges, reverts and escalation, stepped after each delivery (docs/change-sets.md).
    merger = (
        ChangeSetMerger(
            registry=registry,
            github=github,
            gate=gate,
            policy_for=stage_policy,
            bot_login=bot_login,
        )
        if isinstance(registry, DynamoRegistry)
        else None
    )
    if change_set_work is not None and merger is not None:
        change_set_work.on_ready = merger.on_ready  # a set every member's gate passes merges in order
    service = RouterService(
        registry=registry,
        merge_gate=gate,
        queue=queue,
        launcher=launcher,
        github=github,
        policies=policies,
        paused=paused,
        memory=memory,
        retrospectives=Retrospectives(
            history=registry, store=retros, github=github, queue=queue, bot_login=bot_login
        )
        if retros is not None
        else None,
        pipelines=PipelineRuns(
            pipelines,
            queue_url=events_queue_url,
            # the registry records each run on its issue so events reach it (docs/pipelines.md)
            index=registry if isinstance(registry, DynamoRegistry) else None,
            events=registry.record_event,
        )
        if pipelines is not None
        else None,
        change_sets=ChangeSetCommands(
            ChangeSetDesk(registry, github, clock=_utc_now), on_approved=change_set_work.begin
        )
        if isinstance(registry, DynamoRegistry) and change_set_work is not None
        else None,
    )
    return RouterRuntime(
        Dispatcher(
            service,
            once=records.once if records is not None else None,
            kinds={SWEEP_KIND: merger.sweep_record} if merger is not None else None,
            pipeline_tasks=carrying_out(
                pipelines,
                outbox=service._outbox,  # the same executor its deliveries get
                store=claims,
                github=github,
                events=registry.record_event,
                groups=lambda where: {
                    name: group.members
                    for name, group in cache.config_for(where.repo_full_name).config.human_groups.items()
                },
                permission=github.permission,  # the router's own five-minute cache, as the gate's
                bot_login=bot_login,
                registry=registry,
                policy=lambda _task, where: stage_policy(where.repo_full_name, where.installation_id),
            )
            if pipelines is not None
            else None,
            change_sets=ChangeSetSteps(change_set_work, merger)
            if change_set_work is not None and merger is not None
            else None,
        ),
        records,
    )
