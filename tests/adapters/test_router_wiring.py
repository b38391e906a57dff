"""The router's wiring from its environment: every variable named when missing, lazy clients."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from squadron.adapters.dynamo_dashboards import DynamoDashboardSlots
from squadron.adapters.dynamo_registry import DynamoRegistry
from squadron.adapters.ecs import EcsTaskLauncher
from squadron.adapters.sqs import SqsEventQueue, SqsRefreshQueue
from squadron.errors import ConfigurationError
from squadron.settings import AppNotConfiguredError
from squadron.shell.merge_gate import MergeGate
from squadron.shell.pipeline_facts import GitHubFacts
from squadron.shell.pipeline_where import RunRepositories
from squadron.shell.wiring import build_dashboards, build_reconciler, build_router

ENVIRONMENT = {
    "REGISTRY_TABLE_NAME": "squadron-registry",
    "AGENT_CLUSTER": "arn:aws:ecs:us-east-1:123456789012:cluster/squadron",
    "AGENT_TASK_DEFINITION": "arn:aws:ecs:us-east-1:123456789012:task-definition/agent:3",
    "AGENT_CONTAINER_NAME": "agent",
    "AGENT_SUBNETS": "subnet-1, subnet-2",
    "AGENT_SECURITY_GROUPS": "sg-1",
    "EVENTS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/events.fifo",
    "GITHUB_APP_ID": "123456",
    "GITHUB_APP_SLUG": "acme-bot",
    "GITHUB_PRIVATE_KEY_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:key",
}


def test_builds_from_its_environment_without_calling_aws() -> None:
    runtime = build_router(ENVIRONMENT)  # no moto: any AWS call here would fail
    service = runtime.dispatcher.service
    assert isinstance(service.registry, DynamoRegistry)
    assert service.registry.table_name == "squadron-registry"
    assert isinstance(service.launcher, EcsTaskLauncher)
    assert service.launcher.subnets == ["subnet-1", "subnet-2"]
    assert runtime.records is not None
    assert service.merge_gate is not None  # PRs are judged against their approval flows
    assert isinstance(service.merge_gate, MergeGate)
    assert service.merge_gate.bot_login == "acme-bot[bot]"  # its reviews are not a human's


@pytest.mark.parametrize("missing", sorted(ENVIRONMENT))
def test_a_missing_variable_is_named(missing: str) -> None:
    environment = {k: v for k, v in ENVIRONMENT.items() if k != missing}
    with pytest.raises(ConfigurationError, match=f"{missing} is required"):
        build_router(environment)


RECONCILER_ENVIRONMENT = {
    "REGISTRY_TABLE_NAME": "squadron-registry",
    "EVENTS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/events.fifo",
    "GITHUB_APP_ID": "123456",
    "GITHUB_APP_SLUG": "acme-bot",
    "GITHUB_PRIVATE_KEY_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:key",
}


def test_the_reconciler_builds_from_its_environment_without_calling_aws() -> None:
    service = build_reconciler({**RECONCILER_ENVIRONMENT, "RECONCILER_MAX_READS": "500"})
    assert isinstance(service.registry, DynamoRegistry)
    assert service.registry.table_name == "squadron-registry"
    assert isinstance(service.queue, SqsEventQueue)
    assert (service.max_reads, service.bot_login) == (500, "acme-bot[bot]")
    assert service.deliveries is not None


@pytest.mark.parametrize("missing", sorted(RECONCILER_ENVIRONMENT))
def test_a_missing_reconciler_variable_is_named(missing: str) -> None:
    environment = {k: v for k, v in RECONCILER_ENVIRONMENT.items() if k != missing}
    with pytest.raises(ConfigurationError, match=f"{missing} is required"):
        build_reconciler(environment)


def test_the_reconciler_asks_the_dashboards_queue_when_it_has_one() -> None:
    assert build_reconciler(RECONCILER_ENVIRONMENT).dashboards is None
    url = "https://sqs.us-east-1.amazonaws.com/123456789012/squadron-dev-dashboards"
    dashboards = build_reconciler({**RECONCILER_ENVIRONMENT, "DASHBOARD_QUEUE_URL": url}).dashboards
    assert isinstance(dashboards, SqsRefreshQueue) and dashboards.queue_url == url


DASHBOARD_ENVIRONMENT = {
    "REGISTRY_TABLE_NAME": "squadron-registry",
    "DASHBOARD_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/squadron-dev-dashboards",
    "GITHUB_APP_ID": "123456",
    "GITHUB_APP_SLUG": "acme-bot",
    "GITHUB_PRIVATE_KEY_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:key",
}


def test_the_dashboards_build_from_their_environment_without_calling_aws() -> None:
    service = build_dashboards(DASHBOARD_ENVIRONMENT)
    assert isinstance(service.registry, DynamoRegistry) and service.registry.table_name == "squadron-registry"
    assert isinstance(service.slots, DynamoDashboardSlots) and service.slots.table_name == "squadron-registry"
    assert isinstance(service.queue, SqsRefreshQueue)
    assert service.queue.queue_url == DASHBOARD_ENVIRONMENT["DASHBOARD_QUEUE_URL"]
    assert (service.interval, service.bot_login) == (timedelta(seconds=60), "acme-bot[bot]")
    assert service.memory is not None  # the memory section is shown
    shorter = build_dashboards({**DASHBOARD_ENVIRONMENT, "DASHBOARD_REFRESH_SECONDS": "5"})
    assert shorter.interval == timedelta(seconds=5)


@pytest.mark.parametrize("missing", sorted(DASHBOARD_ENVIRONMENT))
def test_a_missing_dashboards_variable_is_named(missing: str) -> None:
    environment = {k: v for k, v in DASHBOARD_ENVIRONMENT.items() if k != missing}
    with pytest.raises(ConfigurationError, match=f"{missing} is required"):
        build_dashboards(environment)


@pytest.mark.parametrize("value", ["0", "901", "soon"], ids=["zero", "over SQS's delay", "no number"])
def test_a_bad_refresh_interval_is_named(value: str) -> None:
    with pytest.raises(ConfigurationError, match=f"DASHBOARD_REFRESH_SECONDS .*got '{value}'"):
        build_dashboards({**DASHBOARD_ENVIRONMENT, "DASHBOARD_REFRESH_SECONDS": value})


@pytest.mark.parametrize(
    ("build", "environment"),
    [
        (build_router, ENVIRONMENT),
        (build_reconciler, RECONCILER_ENVIRONMENT),
        (build_dashboards, DASHBOARD_ENVIRONMENT),
    ],
    ids=["router", "reconciler", "dashboards"],
)
def test_a_stack_deployed_before_its_app_says_so(
    build: Callable[[dict[str, str]], object], environment: dict[str, str]
) -> None:
    with pytest.raises(AppNotConfiguredError, match=r"does not know its GitHub App yet \(GITHUB_APP_ID=0\)"):
        build({**environment, "GITHUB_APP_ID": "0"})


@pytest.mark.parametrize(
    "slug", ["", "Acme", "acme_bot", "acme-bot[bot]"], ids=["empty", "upper", "underscore", "login"]
)
def test_a_bad_slug_is_named(slug: str) -> None:
    with pytest.raises(ConfigurationError, match="GITHUB_APP_SLUG"):
        build_router({**ENVIRONMENT, "GITHUB_APP_SLUG": slug})


HISTORY_DAYS = [
    ("default", None, 120),
    ("a stage's own", "30", 30),
]


@pytest.mark.parametrize(
    ("value", "days"), [case[1:] for case in HISTORY_DAYS], ids=[case[0] for case in HISTORY_DAYS]
)
def test_the_router_keeps_its_committed_events_as_history_for_the_stages_retention(
    value: str | None, days: int
) -> None:
    environment = ENVIRONMENT if value is None else {**ENVIRONMENT, "SQUADRON_HISTORY_DAYS": value}
    registry = build_router(environment).dispatcher.service.registry
    assert isinstance(registry, DynamoRegistry)
    assert registry.history_retention == timedelta(days=days)


@pytest.mark.parametrize(
    "value", ["0", "-3", "forever", "4000"], ids=["zero", "negative", "word", "past-ten-years"]
)
def test_a_bad_history_retention_is_named(value: str) -> None:
    with pytest.raises(ConfigurationError, match=rf"SQUADRON_HISTORY_DAYS .*\(got '{value}'\)"):
        build_router({**ENVIRONMENT, "SQUADRON_HISTORY_DAYS": value})


PIPELINES = {
    "PIPELINES_PREFIX": "squadron-dev",
    "PIPELINES_ROLE_ARN": "arn:aws:iam::123456789012:role/squadron-dev-pipelines",
}


def test_the_router_and_reconciler_get_the_pipelines_when_their_environment_names_them() -> None:
    assert build_router(ENVIRONMENT).dispatcher.service.pipelines is None
    assert build_router(ENVIRONMENT).dispatcher.pipeline_tasks is None
    assert build_reconciler(RECONCILER_ENVIRONMENT).pipelines is None
    runtime = build_router({**ENVIRONMENT, **PIPELINES})
    runs = runtime.dispatcher.service.pipelines
    assert runs is not None and runs.queue_url == ENVIRONMENT["EVENTS_QUEUE_URL"]
    assert runs.pipelines.prefix == "squadron-dev"
    assert runs.pipelines.role_arn == PIPELINES["PIPELINES_ROLE_ARN"]
    # the router records each run it starts, so an event reaches it (on_events)
    assert runs.steering is not None and isinstance(runs.index, DynamoRegistry)
    tasks = runtime.dispatcher.pipeline_tasks
    assert tasks is not None and tasks.prefix == "squadron-dev"
    # It carries tasks out (not only refuses them): the router's outbox, its claims, GitHub, webhooks,
    # and each task's repository from its own run.
    assert tasks.outbox is not None and tasks.claims is not None and tasks.facts is not None
    assert tasks.webhooks is not None and isinstance(tasks.where_for, RunRepositories)
    # Human stages wait in the registry, and every stage's answer is a stored domain event.
    assert tasks.humans is not None and tasks.events is not None and tasks.agents is not None
    # Gate checks read reviewers' permissions through the router's cache and know the App's login.
    assert isinstance(tasks.facts, GitHubFacts) and tasks.facts.permission is not None
    assert tasks.facts.bot_login == f"{ENVIRONMENT['GITHUB_APP_SLUG']}[bot]"
    published = build_reconciler({**RECONCILER_ENVIRONMENT, **PIPELINES}).pipelines
    assert published is not None and published.pipelines.prefix == "squadron-dev"
    # The prefix names the IAM scope: one that is not a state machine name's start is refused.
    with pytest.raises(Exception, match="PIPELINES_PREFIX"):
        build_router({**ENVIRONMENT, **PIPELINES, "PIPELINES_PREFIX": "squadron/dev"})
