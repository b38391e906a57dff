"""How much one deployment sustains, on paper: webhooks per second, agents at once, what breaks first.

Not a measurement: a model over measured per-event costs and AWS's and GitHub's published limits.
The costs are the benchmarks' (router_calls: the calls one issue's lifecycle made through the real
router, per event; gateway: an agent task's calls to the agent gateway). The limits are in
PUBLISHED, each with the page it was read on and whether it was confirmed there. What cannot be
measured here is in ASSUMPTIONS, named; the router's and the ingress's durations in AWS are the
cost model's (bench/cost.py), so both models price the same seconds.

Every bound is one formula: a limit divided by what one event (or one agent) takes of it. Each has
a scope, the widest load it applies to: the whole deployment (load spread over many
installations), one installation (GitHub's limits are an installation's), one repository, or one
issue (a FIFO message group is routed one event at a time). What binds first at a scope is the
smallest bound at that scope or any wider one.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from bench import cost
from squadron.deployment import DeploymentSettings
from squadron.domain.preflight import ON_DEMAND_WARM_THROUGHPUT, PARTITION_READ_UNITS, PARTITION_WRITE_UNITS
from squadron.domain.repo_config.models import RuntimeLimits

RESULTS = Path(__file__).resolve().parent / "results"

Scope = Literal["deployment", "installation", "repository", "issue"]
#: Widest first: a bound at a scope also holds at every narrower one.
SCOPES: tuple[Scope, ...] = ("deployment", "installation", "repository", "issue")

_SQS_FIFO_THROTTLING = (
    "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/"
    "troubleshooting-fifo-throttling-issues.html"
)
_SQS_HIGH_THROUGHPUT = (
    "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/high-throughput-fifo.html"
)
_SQS_QUOTAS = (
    "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html"
)
_DYNAMODB_WARM = (
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput-scenarios.html"
)
_LAMBDA_QUOTAS = "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html"
_ECS_QUOTAS = "https://docs.aws.amazon.com/general/latest/gr/ecs-service.html"
_FARGATE_THROTTLING = "https://docs.aws.amazon.com/AmazonECS/latest/developerguide/throttling.html"
_EFS_PERFORMANCE = "https://docs.aws.amazon.com/efs/latest/ug/performance.html"
_GITHUB_APP_LIMITS = "https://docs.github.com/en/apps/creating-github-apps/registering-a-github-app/rate-limits-for-github-apps"
_GITHUB_REST_LIMITS = "https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api"
_APIGW_QUOTAS = "https://docs.aws.amazon.com/apigateway/latest/developerguide/limits.html"
_VPC_CREATE_SUBNET = "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateSubnet.html"


@dataclass(frozen=True)
class Published:
    """A limit AWS or GitHub publishes: its value, where it was read, and whether it was confirmed."""

    value: float
    unit: str
    source: str
    #: "confirmed": read on the source (or a verbatim copy of it); "unverified": not confirmed here.
    status: Literal["confirmed", "unverified"]
    note: str = ""


#: AWS's and GitHub's published limits (read 2026-11 through the search tool; check before relying).
PUBLISHED: dict[str, Published] = {
    "sqs_fifo_api_calls_per_second": Published(
        300,
        "API calls/s per action (SendMessage, ReceiveMessage, DeleteMessage), high throughput off",
        _SQS_FIFO_THROTTLING,
        "confirmed",
        "3,000 messages/s per action with batches of 10; the ingress sends one webhook per call",
    ),
    "sqs_fifo_partition_messages_per_second": Published(
        300,
        "messages/s per partition for send, receive and delete without batching, high throughput on",
        _SQS_HIGH_THROUGHPUT,
        "confirmed",
        "SQS adds partitions as distinct message group ids and traffic grow",
    ),
    "sqs_fifo_high_throughput_api_calls_per_second": Published(
        70_000,
        "API calls/s per action without batching, high throughput on (us-east-1, us-west-2, eu-west-1)",
        _SQS_QUOTAS,
        "unverified",
        "agreeing secondary sources only: the AWS page's figure was not read here; other Regions lower",
    ),
    "dynamodb_partition_write_units": Published(
        1_000, "write units/s per partition (table or index)", _DYNAMODB_WARM, "confirmed"
    ),
    "dynamodb_partition_read_units": Published(
        3_000, "read units/s per partition (table or index)", _DYNAMODB_WARM, "confirmed"
    ),
    "dynamodb_on_demand_initial_write_units": Published(
        4_000,
        "write units/s a new on-demand table takes at once (its warm throughput; it grows with use)",
        _DYNAMODB_WARM,
        "confirmed",
    ),
    "dynamodb_on_demand_initial_read_units": Published(
        12_000, "read units/s a new on-demand table takes at once", _DYNAMODB_WARM, "confirmed"
    ),
    "lambda_concurrent_executions": Published(
        1_000,
        "concurrent executions per account and Region (default quota)",
        _LAMBDA_QUOTAS,
        "confirmed",
        "AWS: new accounts have reduced concurrency quotas, raised automatically with use",
    ),
    "lambda_concurrent_executions_new_account": Published(
        10,
        "concurrent executions of a new account",
        _LAMBDA_QUOTAS,
        "unverified",
        "AWS publishes no number; 10 is what new accounts were seen with (FINDINGS: reserved concurrency)",
    ),
    "fargate_on_demand_vcpus": Published(
        6,
        "Fargate On-Demand vCPU resource count, per account and Region (default quota)",
        _ECS_QUOTAS,
        "confirmed",
        "as quoted by the AWS Batch API reference: 'The default for the Fargate On-Demand vCPU "
        "resource count quota is 6 vCPUs'",
    ),
    "fargate_task_launches_per_second": Published(
        20,
        "On-Demand task launches/s sustained per account (burst 100); RunTask 20 calls/s",
        _FARGATE_THROTTLING,
        "confirmed",
    ),
    "efs_elastic_write_mib_per_second": Published(
        1_024,
        "MiB/s of writes per file system, Elastic throughput (1-5 GiBps by Region: the low end)",
        _EFS_PERFORMANCE,
        "confirmed",
        "reads 20-60 GiBps; 1,500 MiBps per client (one client is one agent task)",
    ),
    "efs_elastic_write_iops": Published(
        50_000,
        "write operations/s per file system, Elastic throughput (default; raisable)",
        _EFS_PERFORMANCE,
        "confirmed",
    ),
    "github_installation_requests_per_hour": Published(
        5_000,
        "REST requests/h per installation token (+50 per repository past 20 and per user past 20, "
        "up to 12,500; 15,000 on GitHub Enterprise Cloud)",
        _GITHUB_APP_LIMITS,
        "confirmed",
    ),
    "github_concurrent_requests": Published(
        100,
        "concurrent requests (secondary limit, REST and GraphQL together)",
        _GITHUB_REST_LIMITS,
        "confirmed",
    ),
    "github_points_per_minute": Published(
        900,
        "points/min to REST endpoints (secondary limit; GET 1 point, POST/PATCH/PUT/DELETE 5)",
        _GITHUB_REST_LIMITS,
        "confirmed",
    ),
    "github_content_requests_per_minute": Published(
        80, "content-creating requests/min (secondary limit)", _GITHUB_REST_LIMITS, "confirmed"
    ),
    "github_content_requests_per_hour": Published(
        500, "content-creating requests/h (secondary limit)", _GITHUB_REST_LIMITS, "confirmed"
    ),
    "api_gateway_account_requests_per_second": Published(
        10_000,
        "requests/s per account and Region across HTTP, REST and WebSocket APIs (burst 5,000)",
        _APIGW_QUOTAS,
        "confirmed",
        "2,500 (burst 1,250) in the newer Regions the page lists",
    ),
    "vpc_subnet_reserved_addresses": Published(
        5,
        "IPv4 addresses AWS reserves in every subnet (the first four and the last)",
        _VPC_CREATE_SUBNET,
        "confirmed",
    ),
}

#: What this machine cannot measure, stated so the figures can be redone with better numbers.
ASSUMPTIONS: dict[str, float] = {
    # Share of accepted webhooks the router handles (the ingress drops the App's own events and
    # those no route wants): 1.0 prices every webhook as a routed one, the worst case.
    "routed_share": 1.0,
    # The event mix is the measured lifecycle's (opened, assigned, blocked, closed, a comment, a
    # PR opened, reviewed, checked, merged): a repository heavy with CI events runs the merge
    # gate (6 GitHub calls) more often than that.
    # GitHub's content-creating requests are its POSTs (the transport's rule; GitHub does not
    # list them): a commit status is one.
    # A repository's configuration is re-read (2 GitHub calls) once a minute by every router
    # container that routes its events: worst case, all of them.
    "config_recheck_calls": 2.0,
    "config_recheck_seconds": 60.0,
    # The reconciler reads GitHub at most 200 times per installation per run (every 5 minutes);
    # a run that repairs little reads far fewer.
    "reconciler_calls_per_run": 20.0,
    "reconciler_runs_per_hour": 12.0,
    # An agent task's own GitHub use (issue and PR reads, comments, its PR, reviews; git over
    # HTTPS is not REST): not measured.
    "agent_github_requests_per_hour": 60.0,
    "agent_github_content_requests_per_hour": 6.0,
    "agent_github_concurrent_requests": 1.0,
    # An agent's writes to EFS (its working copy and Copilot session), averaged over its task.
    "agent_efs_write_mib_per_second": 1.0,
    "agent_efs_write_operations_per_second": 50.0,
    # A heartbeat rewrites the agent item (up to 2 KB) and, with it, its status-index item; all
    # running agents share one index partition (STATUS#running).
    "heartbeat_write_units": 2.0,
    "heartbeat_interval_seconds": float(RuntimeLimits.model_fields["heartbeat_interval"].default),
    # The status index's writes all land on one partition: its keys are the handful of statuses.
    "status_index_partitions": 1.0,
    # EFS mount targets in the agents' subnets (one per subnet), each holding an address.
    "efs_mount_targets": 2.0,
}

#: The agent subnets of infra/constructs/agents.py: two Availability Zones, /22 each.
AGENT_SUBNETS, AGENT_SUBNET_MASK = 2, 22
#: Points GitHub counts for a REST request (secondary limit).
GET_POINTS, MUTATION_POINTS = 1.0, 5.0
MUTATIONS = ("POST", "PATCH", "PUT", "DELETE")


@dataclass(frozen=True)
class Deployment:
    """The deployment's own settings that bound it (defaults: a fresh `squadron configure`)."""

    api_throttle_rate_limit: float = DeploymentSettings.model_fields["api_throttle_rate_limit"].default
    router_max_concurrency: int = DeploymentSettings.model_fields["router_max_concurrency"].default
    agent_vcpu: float = cost.AGENT_VCPU
    max_concurrent_agents: int = RuntimeLimits.model_fields["max_concurrent_agents"].default
    #: events.fifo: DeduplicationScope=messageGroup, FifoThroughputLimit=perMessageGroupId.
    high_throughput_fifo: bool = True
    #: What else the stack's template fixes on the account's Lambda concurrency beside the router
    #: (tests/infra/test_infra_deploy.py checks these against the synthesized template): the
    #: reconciler's schedule, the dashboards queue's MaximumConcurrency, and the registry stream's
    #: publisher (a new on-demand table's partitions, so its shards, x ParallelizationFactor 1).
    reconciler_executions: int = 1
    dashboards_max_concurrency: int = 2
    stream_executions: int = max(
        ON_DEMAND_WARM_THROUGHPUT[0] // PARTITION_WRITE_UNITS,
        ON_DEMAND_WARM_THROUGHPUT[1] // PARTITION_READ_UNITS,
    )

    def lambda_left(self, account_concurrency: float) -> float:
        """What every fixed draw (the router's at most, and the others above) leaves the ingress and
        the agent gateway of the account's Lambda concurrency."""
        fixed = (
            self.router_max_concurrency
            + self.reconciler_executions
            + self.dashboards_max_concurrency
            + self.stream_executions
        )
        return max(0.0, account_concurrency - fixed)


@dataclass(frozen=True)
class EventCosts:
    """What one routed event takes, measured (router_calls) or priced (cost.ASSUMPTIONS)."""

    github_requests: float
    #: Of those, the ones GitHub counts against the primary rate limit: a conditional GET answered
    #: 304 Not Modified does not count (it still counts toward the secondary limits).
    github_rate_limited: float
    github_mutations: float
    github_posts: float
    dynamodb_calls: float
    table_write_units: float
    index_write_units: float
    read_units: float
    delivery_write_units: float
    sqs_sends: float
    task_launches: float
    router_seconds: float
    ingress_seconds: float


@dataclass(frozen=True)
class AgentCosts:
    """What one running agent takes of the shared Lambda pool (the agent gateway), measured."""

    gateway_invocations_per_hour: float
    gateway_seconds: float


@dataclass(frozen=True)
class Bound:
    """One limit turned into the load it allows."""

    name: str
    scope: Scope
    value: float
    formula: str
    limits: tuple[str, ...]
    raise_by: str


def _count(by_route: dict[str, int], methods: tuple[str, ...]) -> float:
    return float(sum(n for route, n in by_route.items() if route.split(" ", 1)[0] in methods))


def event_costs(router_calls: dict[str, Any], assumptions: dict[str, float] = ASSUMPTIONS) -> EventCosts:
    """Per routed event, from the router_calls benchmark's lifecycle (and its warm event)."""
    lifecycle, events = router_calls["lifecycle_total"], float(router_calls["lifecycle_events"])
    routes: dict[str, int] = lifecycle["github_by_route"]
    capacity = lifecycle["dynamodb_capacity_estimate"]
    # The warm event on an unknown branch writes nothing but its delivery record.
    warm = router_calls["container_costs"]["warm"]["dynamodb_capacity_estimate"]
    priced = cost.ASSUMPTIONS
    dynamodb, github = lifecycle["dynamodb_total"] / events, lifecycle["github"] / events
    router_ms = (
        priced["router_base_ms"] + dynamodb * priced["dynamodb_call_ms"] + github * priced["github_call_ms"]
    )
    return EventCosts(
        github_requests=github,
        # A benchmark from before conditional requests counted none apart: all count.
        github_rate_limited=lifecycle.get("github_rate_limited", lifecycle["github"]) / events,
        github_mutations=_count(routes, MUTATIONS) / events,
        github_posts=_count(routes, ("POST",)) / events,
        dynamodb_calls=dynamodb,
        table_write_units=capacity["wru"] / events,
        index_write_units=capacity.get("wru_index", 0.0) / events,
        read_units=capacity["rru"] / events,
        delivery_write_units=float(warm["wru"]),
        sqs_sends=1.0 + lifecycle["sqs_sent"] / events,  # the ingress's, and the router's own
        task_launches=lifecycle["ecs_by_operation"].get("RunTask", 0) / events,
        router_seconds=router_ms / 1000,
        ingress_seconds=priced["ingress_ms"] / 1000,
    )


def agent_costs(gateway: dict[str, Any]) -> AgentCosts:
    """An agent's gateway invocations an hour and their mean duration (its own work + invoke)."""
    own_ms = [call["milliseconds"]["p50"] for call in gateway["per_call"].values()]
    overhead_ms = float(gateway["assumptions"]["invoke_overhead_ms"])
    return AgentCosts(
        gateway_invocations_per_hour=float(gateway["invocations_per_agent_hour"]),
        gateway_seconds=(overhead_ms + sum(own_ms) / len(own_ms)) / 1000,
    )


def installation_overhead_per_hour(deployment: Deployment, assumptions: dict[str, float]) -> float:
    """GitHub requests an installation's budget loses each hour to configuration rechecks and the
    reconciler, whatever its events."""
    a = assumptions
    rechecks = (
        deployment.router_max_concurrency * a["config_recheck_calls"] * 3600 / a["config_recheck_seconds"]
    )
    return rechecks + a["reconciler_calls_per_run"] * a["reconciler_runs_per_hour"]


def webhook_bounds(
    event: EventCosts,
    deployment: Deployment,
    limits: dict[str, Published] = PUBLISHED,
    assumptions: dict[str, float] = ASSUMPTIONS,
) -> list[Bound]:
    """Webhooks per second each limit allows, with every other limit ignored."""
    a, routed = assumptions, assumptions["routed_share"]

    def lim(name: str) -> float:
        return limits[name].value

    lambda_left = deployment.lambda_left(lim("lambda_concurrent_executions"))
    github_hour = lim("github_installation_requests_per_hour") - installation_overhead_per_hour(deployment, a)
    points = (
        event.github_requests - event.github_mutations
    ) * GET_POINTS + event.github_mutations * MUTATION_POINTS
    if deployment.high_throughput_fifo:
        sqs = lim("sqs_fifo_high_throughput_api_calls_per_second")
        sqs_limits: tuple[str, ...] = ("sqs_fifo_high_throughput_api_calls_per_second",)
        sqs_raise = "already high throughput: a quota increase, or a second queue"
    else:
        sqs = lim("sqs_fifo_api_calls_per_second")
        sqs_limits = ("sqs_fifo_api_calls_per_second",)
        sqs_raise = "high-throughput FIFO"
    return [
        Bound(
            "API Gateway stage throttle",
            "deployment",
            deployment.api_throttle_rate_limit,
            "api_throttle_rate_limit",
            (),
            "context api_throttle_rate_limit (bursts: api_throttle_burst_limit)",
        ),
        Bound(
            "API Gateway account quota",
            "deployment",
            lim("api_gateway_account_requests_per_second"),
            "account requests/s",
            ("api_gateway_account_requests_per_second",),
            "Service Quotas",
        ),
        Bound(
            "Lambda concurrency (ingress)",
            "deployment",
            lambda_left / event.ingress_seconds,
            "(account concurrency - router_max_concurrency - reconciler, dashboards, stream) / ingress seconds",
            ("lambda_concurrent_executions",),
            "Service Quotas: Lambda concurrent executions",
        ),
        Bound(
            "SQS FIFO sends",
            "deployment",
            sqs / event.sqs_sends,
            "API calls/s / SendMessage per webhook",
            sqs_limits,
            sqs_raise,
        ),
        Bound(
            "router concurrency",
            "deployment",
            deployment.router_max_concurrency / (event.router_seconds * routed),
            "router_max_concurrency / router seconds per event",
            (),
            "context router_max_concurrency (up to the Lambda quota)",
        ),
        Bound(
            "DynamoDB table writes",
            "deployment",
            lim("dynamodb_on_demand_initial_write_units") / (event.table_write_units * routed),
            "on-demand initial write units / write units per event",
            ("dynamodb_on_demand_initial_write_units",),
            "none needed: on demand grows with sustained use (or pre-warm the table)",
        ),
        Bound(
            "DynamoDB table reads",
            "deployment",
            lim("dynamodb_on_demand_initial_read_units") / (event.read_units * routed),
            "on-demand initial read units / read units per event",
            ("dynamodb_on_demand_initial_read_units",),
            "none needed: on demand grows with sustained use",
        ),
        Bound(
            "DynamoDB hot key: delivery records",
            "deployment",
            lim("dynamodb_partition_write_units") / (event.delivery_write_units * routed),
            "partition write units / delivery-record write units per event (one key, DELIVERY#router)",
            ("dynamodb_partition_write_units",),
            "DynamoDB splits the key's items by sort key under sustained heat; or shard the key",
        ),
        Bound(
            "DynamoDB hot key: status index",
            "deployment",
            lim("dynamodb_partition_write_units")
            * a["status_index_partitions"]
            / (event.index_write_units * routed),
            "partition write units / status-index write units per event (keys: the few statuses)",
            ("dynamodb_partition_write_units",),
            "shard the index key (STATUS#<s>#<n>)",
        ),
        Bound(
            "Fargate task launches",
            "deployment",
            lim("fargate_task_launches_per_second") / (event.task_launches * routed),
            "launches/s / RunTask per event",
            ("fargate_task_launches_per_second",),
            "none (a fixed rate); launches beyond it are retried",
        ),
        Bound(
            "GitHub primary limit",
            "installation",
            github_hour / 3600 / (event.github_rate_limited * routed),
            "(requests/h - config rechecks - reconciler) / 3600 / GitHub requests per event "
            "(a 304 to a conditional GET not counted)",
            ("github_installation_requests_per_hour",),
            "more repositories or users on the installation (up to 12,500/h)",
        ),
        Bound(
            "GitHub content creation, hourly",
            "installation",
            lim("github_content_requests_per_hour") / 3600 / (event.github_posts * routed),
            "content requests/h / 3600 / POSTs per event",
            ("github_content_requests_per_hour",),
            "none (GitHub's); fewer commit statuses per event",
        ),
        Bound(
            "GitHub content creation, per minute",
            "installation",
            lim("github_content_requests_per_minute") / 60 / (event.github_posts * routed),
            "content requests/min / 60 / POSTs per event",
            ("github_content_requests_per_minute",),
            "none (GitHub's)",
        ),
        Bound(
            "GitHub points",
            "installation",
            lim("github_points_per_minute") / 60 / (points * routed),
            "points/min / 60 / points per event (all endpoints counted together: the worst case)",
            ("github_points_per_minute",),
            "none (GitHub's)",
        ),
        Bound(
            "FIFO message group",
            "issue",
            1 / (event.router_seconds * routed),
            "one event at a time / router seconds per event",
            (),
            "none: an issue's events stay in order",
        ),
        Bound(
            "DynamoDB hot key: the issue's partition",
            "issue",
            lim("dynamodb_partition_write_units") / (event.table_write_units * routed),
            "partition write units / write units per event",
            ("dynamodb_partition_write_units",),
            "none needed (the message group binds long before)",
        ),
    ]


def agent_bounds(
    agent: AgentCosts,
    deployment: Deployment,
    limits: dict[str, Published] = PUBLISHED,
    assumptions: dict[str, float] = ASSUMPTIONS,
) -> list[Bound]:
    """Agent tasks at once each limit allows, with every other limit ignored."""
    a = assumptions

    def lim(name: str) -> float:
        return limits[name].value

    addresses = AGENT_SUBNETS * (2 ** (32 - AGENT_SUBNET_MASK) - lim("vpc_subnet_reserved_addresses"))
    gateway_concurrency = agent.gateway_invocations_per_hour / 3600 * agent.gateway_seconds
    lambda_left = deployment.lambda_left(lim("lambda_concurrent_executions"))
    github_hour = lim("github_installation_requests_per_hour") - installation_overhead_per_hour(deployment, a)
    return [
        Bound(
            "Fargate vCPU quota",
            "deployment",
            lim("fargate_on_demand_vcpus") / deployment.agent_vcpu,
            "On-Demand vCPUs / vCPUs per task",
            ("fargate_on_demand_vcpus",),
            "Service Quotas: Fargate On-Demand vCPU resource count",
        ),
        Bound(
            "agent subnet addresses",
            "deployment",
            addresses - a["efs_mount_targets"],
            "2 subnets x (2^(32-22) - reserved) - EFS mount targets",
            ("vpc_subnet_reserved_addresses",),
            "larger subnets (infra/constructs/agents.py)",
        ),
        Bound(
            "EFS write throughput",
            "deployment",
            lim("efs_elastic_write_mib_per_second") / a["agent_efs_write_mib_per_second"],
            "file system write MiB/s / an agent's write MiB/s",
            ("efs_elastic_write_mib_per_second",),
            "an EFS quota increase (Region-dependent)",
        ),
        Bound(
            "EFS write operations",
            "deployment",
            lim("efs_elastic_write_iops") / a["agent_efs_write_operations_per_second"],
            "file system write IOPS / an agent's write IOPS",
            ("efs_elastic_write_iops",),
            "an EFS quota increase (up to 10x)",
        ),
        Bound(
            "Lambda concurrency (agent gateway)",
            "deployment",
            lambda_left / gateway_concurrency,
            "(account concurrency - router_max_concurrency - reconciler, dashboards, stream) / an agent's gateway concurrency",
            ("lambda_concurrent_executions",),
            "Service Quotas: Lambda concurrent executions",
        ),
        Bound(
            "DynamoDB hot key: status index",
            "deployment",
            lim("dynamodb_partition_write_units")
            * a["status_index_partitions"]
            / (a["heartbeat_write_units"] / a["heartbeat_interval_seconds"]),
            "partition write units / heartbeat write units per second",
            ("dynamodb_partition_write_units",),
            "shard the index key, or a longer heartbeat_interval",
        ),
        Bound(
            "GitHub primary limit",
            "installation",
            github_hour / a["agent_github_requests_per_hour"],
            "(requests/h - config rechecks - reconciler) / an agent's requests/h",
            ("github_installation_requests_per_hour",),
            "more repositories or users on the installation (up to 12,500/h)",
        ),
        Bound(
            "GitHub content creation, hourly",
            "installation",
            lim("github_content_requests_per_hour") / a["agent_github_content_requests_per_hour"],
            "content requests/h / an agent's content requests/h",
            ("github_content_requests_per_hour",),
            "none (GitHub's)",
        ),
        Bound(
            "GitHub concurrent requests",
            "installation",
            (lim("github_concurrent_requests") - deployment.router_max_concurrency)
            / a["agent_github_concurrent_requests"],
            "(concurrent requests - router_max_concurrency) / an agent's",
            ("github_concurrent_requests",),
            "none (GitHub's)",
        ),
        Bound(
            "max_concurrent_agents",
            "repository",
            float(deployment.max_concurrent_agents),
            "runtime.max_concurrent_agents of .squadron/config.yaml",
            (),
            "the repository's .squadron/config.yaml",
        ),
    ]


def installation_webhooks(
    event: EventCosts,
    agents: int,
    deployment: Deployment,
    limits: dict[str, Published] = PUBLISHED,
    assumptions: dict[str, float] = ASSUMPTIONS,
) -> float:
    """Webhooks per second one installation's GitHub budget leaves while ``agents`` of its agents
    run: agents and the router draw on the same primary and content-creation limits."""
    a, routed = assumptions, assumptions["routed_share"]
    primary = (
        limits["github_installation_requests_per_hour"].value
        - installation_overhead_per_hour(deployment, a)
        - agents * a["agent_github_requests_per_hour"]
    ) / (event.github_rate_limited * routed)
    content = (
        limits["github_content_requests_per_hour"].value
        - agents * a["agent_github_content_requests_per_hour"]
    ) / (event.github_posts * routed)
    return max(0.0, min(primary, content) / 3600)


def binding(bounds: list[Bound], scope: Scope) -> Bound:
    """What binds first for load at ``scope``: the smallest bound at that scope or a wider one."""
    reach = SCOPES[: SCOPES.index(scope) + 1]
    return min((b for b in bounds if b.scope in reach), key=lambda b: b.value)


def headroom(bound: Bound, bounds: list[Bound]) -> float:
    """How far ``bound`` is above what binds first at its own scope (1.0: it is what binds;
    infinite when what binds allows nothing at all)."""
    first = binding(bounds, bound.scope).value
    if first == 0:
        return 1.0 if bound.value == 0 else math.inf
    return bound.value / first


def fifo_recommendation(
    event: EventCosts, deployment: Deployment, limits: dict[str, Published] = PUBLISHED
) -> dict[str, Any]:
    """Whether events.fifo should be high throughput, and when its absence would bind."""
    without = limits["sqs_fifo_api_calls_per_second"].value / event.sqs_sends
    with_it = limits["sqs_fifo_high_throughput_api_calls_per_second"].value / event.sqs_sends
    per_group = limits["sqs_fifo_partition_messages_per_second"].value
    # The router concurrency at which a queue without high throughput would bind first.
    concurrency = math.ceil(without * event.router_seconds)
    return {
        "recommended": True,
        "configured": deployment.high_throughput_fifo,
        "webhooks_per_second_without": round(without, 1),
        "webhooks_per_second_with": round(with_it, 1),
        "partition_messages_per_second": per_group,
        "binds_without_it_from_router_max_concurrency": concurrency,
        "reason": (
            f"Keep it on (infra already sets DeduplicationScope=messageGroup and "
            f"FifoThroughputLimit=perMessageGroupId). Without it events.fifo takes {without:.0f} "
            f"SendMessage calls a second, and the ingress cannot batch (one webhook per invocation): "
            f"that binds once router_max_concurrency reaches about {concurrency}. With it the queue "
            f"scales by partitions ({per_group:.0f} messages/s each) over message groups, one per "
            f"issue, to the Regional limit. It costs nothing more, and deduplication per group loses "
            f"nothing: the deduplication id is the delivery id, and every copy of a delivery carries "
            f"the same payload, so the same group."
        ),
    }


def _bound_json(bound: Bound, bounds: list[Bound]) -> dict[str, Any]:
    return {
        **asdict(bound),
        "value": round(bound.value, 2),
        "limits": list(bound.limits),
        "headroom": None if math.isinf(room := headroom(bound, bounds)) else round(room, 2),
    }


def bounds_view(bounds: list[Bound]) -> dict[str, Any]:
    present = [s for s in SCOPES if any(b.scope == s for b in bounds)]
    return {
        "bounds": [_bound_json(b, bounds) for b in bounds],
        "binds_first": {
            scope: {"name": binding(bounds, scope).name, "value": round(binding(bounds, scope).value, 2)}
            for scope in present
        },
    }


def capacity_model(
    router_calls: dict[str, Any],
    gateway: dict[str, Any],
    deployment: Deployment | None = None,
    limits: dict[str, Published] = PUBLISHED,
    assumptions: dict[str, float] = ASSUMPTIONS,
) -> dict[str, Any]:
    deployment = deployment or Deployment()
    event, agent = event_costs(router_calls, assumptions), agent_costs(gateway)
    webhooks = webhook_bounds(event, deployment, limits, assumptions)
    agents = agent_bounds(agent, deployment, limits, assumptions)
    new_limits = {
        **limits,
        "lambda_concurrent_executions": limits["lambda_concurrent_executions_new_account"],
    }
    new_webhooks = webhook_bounds(event, deployment, new_limits, assumptions)
    new_agents = agent_bounds(agent, deployment, new_limits, assumptions)
    return {
        "published_limits": {name: asdict(p) for name, p in limits.items()},
        "assumptions": assumptions,
        "deployment": asdict(deployment),
        "from": {
            "router_calls": router_calls.get("commit"),
            "gateway": gateway.get("commit"),
            "per_event": {k: round(v, 4) for k, v in asdict(event).items()},
            "per_agent": {k: round(v, 4) for k, v in asdict(agent).items()},
        },
        "webhooks_per_second": bounds_view(webhooks),
        "concurrent_agents": bounds_view(agents),
        "new_account": {
            "note": "the same with a new account's Lambda concurrency (lambda_concurrent_executions_new_account)",
            "webhooks_per_second": bounds_view(new_webhooks)["binds_first"],
            "concurrent_agents": bounds_view(new_agents)["binds_first"],
            "lambda_ingress_webhooks_per_second": round(
                next(b.value for b in new_webhooks if b.name == "Lambda concurrency (ingress)"), 2
            ),
        },
        "installation_webhooks_per_second_with_agents": {
            str(n): round(installation_webhooks(event, n, deployment, limits, assumptions), 3)
            for n in (0, 6, 10, 30, 60)
        },
        "high_throughput_fifo": fifo_recommendation(event, deployment, limits),
    }


def _inputs() -> tuple[dict[str, Any], dict[str, Any]]:
    loaded = []
    for name in ("router_calls", "gateway"):
        source = RESULTS / f"{name}.json"
        if not source.exists():
            raise FileNotFoundError(f"{source} is missing: run `python -m bench {name}` first")
        loaded.append(json.loads(source.read_text(encoding="utf-8")))
    return loaded[0], loaded[1]


def bench_capacity() -> dict[str, Any]:
    return capacity_model(*_inputs())


def _figure(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.0f}"
    return f"{value:.2g}" if value < 1 else f"{value:.1f}"


_SCOPE_WORDS: dict[str, str] = {
    "deployment": "deployment",
    "installation": "one installation",
    "repository": "one repository",
    "issue": "one issue",
}


def readme_table(view: dict[str, Any], unit: str) -> str:
    """The table of one view in docs/limits.md (webhooks/s or agents), smallest first within each scope."""
    rows = [f"| Bound | Applies to | {unit} | Headroom | Raised by |", "| --- | --- | ---: | ---: | --- |"]
    order = {scope: i for i, scope in enumerate(SCOPES)}
    for b in sorted(view["bounds"], key=lambda b: (order[b["scope"]], b["value"])):
        first = view["binds_first"][b["scope"]]["name"] == b["name"]
        name = f"**{b['name']}**" if first else b["name"]
        rows.append(
            f"| {name} | {_SCOPE_WORDS[b['scope']]} | {_figure(b['value'])} | "
            f"{'-' if b['headroom'] is None else _figure(b['headroom']) + 'x'} | {b['raise_by']} |"
        )
    return "\n".join(rows)


def summary(result: dict[str, Any]) -> str:
    hooks, agents = result["webhooks_per_second"]["binds_first"], result["concurrent_agents"]["binds_first"]
    return (
        f"{hooks['deployment']['value']:g} webhooks/s ({hooks['deployment']['name']}), "
        f"{hooks['installation']['value']:g} per installation ({hooks['installation']['name']}); "
        f"{agents['deployment']['value']:g} agents at once ({agents['deployment']['name']})"
    )
