"""The capacity model (bench/capacity.py): its formulas, what binds first, and the tables in docs/limits.md."""

from __future__ import annotations

import ast
import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bench import capacity, cost
from bench.capacity import (
    ASSUMPTIONS,
    PUBLISHED,
    SCOPES,
    AgentCosts,
    Deployment,
    EventCosts,
    Published,
    agent_bounds,
    binding,
    event_costs,
    fifo_recommendation,
    headroom,
    installation_webhooks,
    webhook_bounds,
)

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"

#: Round figures, so each case's expected value can be worked out by hand.
EVENT = EventCosts(
    github_requests=4.0,
    github_rate_limited=4.0,
    github_mutations=1.0,
    github_posts=0.5,
    dynamodb_calls=7.0,
    table_write_units=8.0,
    index_write_units=2.0,
    read_units=2.0,
    delivery_write_units=2.0,
    sqs_sends=1.0,
    task_launches=0.25,
    router_seconds=0.5,
    ingress_seconds=0.05,
)
AGENT = AgentCosts(gateway_invocations_per_hour=100.0, gateway_seconds=0.036)
DEFAULTS = Deployment()


def _limits(**values: float) -> dict[str, Published]:
    return {name: replace(p, value=values[name]) if name in values else p for name, p in PUBLISHED.items()}


def _bound(bounds: list[capacity.Bound], name: str) -> float:
    (value,) = [b.value for b in bounds if b.name == name]
    return value


# --- each bound is its formula -------------------------------------------------------------

OVERHEAD = 5 * 2 * 60 + 20 * 12  # config rechecks of 5 router containers, the reconciler


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("API Gateway stage throttle", 50.0),
        ("router concurrency", 5 / 0.5),
        ("Lambda concurrency (ingress)", (1000 - 5 - 1 - 2 - 4) / 0.05),
        ("SQS FIFO sends", 70_000.0),
        ("DynamoDB table writes", 4000 / 8),
        ("DynamoDB table reads", 12_000 / 2),
        ("DynamoDB hot key: delivery records", 1000 / 2),
        ("DynamoDB hot key: status index", 1000 / 2),
        ("Fargate task launches", 20 / 0.25),
        ("GitHub primary limit", (5000 - OVERHEAD) / 3600 / 4),
        ("GitHub content creation, hourly", 500 / 3600 / 0.5),
        ("GitHub content creation, per minute", 80 / 60 / 0.5),
        ("GitHub points", 900 / 60 / (3 * 1 + 1 * 5)),
        ("FIFO message group", 1 / 0.5),
        ("DynamoDB hot key: the issue's partition", 1000 / 8),
    ],
    ids=str,
)
def test_each_webhook_bound_is_a_limit_over_what_an_event_takes(name: str, expected: float) -> None:
    assert _bound(webhook_bounds(EVENT, DEFAULTS), name) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Fargate vCPU quota", 6.0),
        ("agent subnet addresses", 2 * (1024 - 5) - 2),
        ("EFS write throughput", 1024 / 1.0),
        ("EFS write operations", 50_000 / 50),
        ("Lambda concurrency (agent gateway)", (1000 - 5 - 1 - 2 - 4) / (100 / 3600 * 0.036)),
        ("DynamoDB hot key: status index", 1000 / (2 / 60)),
        ("GitHub primary limit", (5000 - OVERHEAD) / 60),
        ("GitHub content creation, hourly", 500 / 6),
        ("GitHub concurrent requests", 100 - 5),
        ("max_concurrent_agents", 10.0),
    ],
    ids=str,
)
def test_each_agent_bound_is_a_limit_over_what_an_agent_takes(name: str, expected: float) -> None:
    assert _bound(agent_bounds(AGENT, DEFAULTS), name) == pytest.approx(expected)


NOT_MODIFIED = [
    # (case, a GitHub bound, its value when one of the event's four requests is a GET answered 304)
    ("the primary limit does not count a 304", "GitHub primary limit", (5000 - OVERHEAD) / 3600 / 3),
    ("the points still count it", "GitHub points", 900 / 60 / (3 * 1 + 1 * 5)),
    ("nor does content creation change", "GitHub content creation, hourly", 500 / 3600 / 0.5),
]


@pytest.mark.parametrize(
    ("name", "expected"), [c[1:] for c in NOT_MODIFIED], ids=[c[0] for c in NOT_MODIFIED]
)
def test_a_304_costs_no_primary_rate_limit(name: str, expected: float) -> None:
    revalidated = replace(EVENT, github_rate_limited=3.0)  # one of the four requests a 304
    assert _bound(webhook_bounds(revalidated, DEFAULTS), name) == pytest.approx(expected)
    # Beside six agents (60 requests and 6 content creations an hour each), 304s are free there too.
    primary, content = (5000 - OVERHEAD - 6 * 60) / 3, (500 - 6 * 6) / 0.5
    assert installation_webhooks(revalidated, 6, DEFAULTS) == pytest.approx(min(primary, content) / 3600)


# --- what binds first changes with the inputs ---------------------------------------------


@pytest.mark.parametrize(
    ("event", "deployment", "limits", "scope", "binds"),
    [
        (EVENT, DEFAULTS, {}, "deployment", "router concurrency"),
        (EVENT, Deployment(router_max_concurrency=100), {}, "deployment", "API Gateway stage throttle"),
        (
            EVENT,
            Deployment(router_max_concurrency=500, api_throttle_rate_limit=10_000),
            {},
            "deployment",
            "Fargate task launches",
        ),
        (
            replace(EVENT, task_launches=0.01, delivery_write_units=0.1, index_write_units=0.1),
            Deployment(router_max_concurrency=500, api_throttle_rate_limit=10_000),
            {},
            "deployment",
            "DynamoDB table writes",
        ),
        (
            replace(
                EVENT,
                task_launches=0.01,
                table_write_units=1.0,
                delivery_write_units=1.0,
                index_write_units=0.1,
            ),
            Deployment(router_max_concurrency=600, api_throttle_rate_limit=10_000),
            {},
            "deployment",
            "DynamoDB hot key: delivery records",
        ),
        (
            replace(
                EVENT, task_launches=0.01, table_write_units=0.1, delivery_write_units=0.1, read_units=0.1
            ),
            Deployment(
                router_max_concurrency=500, api_throttle_rate_limit=10_000, high_throughput_fifo=False
            ),
            {},
            "deployment",
            "SQS FIFO sends",
        ),
        (
            EVENT,
            Deployment(router_max_concurrency=5),
            {"lambda_concurrent_executions": 20.0},
            "deployment",
            "router concurrency",
        ),
        (
            EVENT,
            Deployment(router_max_concurrency=5),
            {"lambda_concurrent_executions": 10.0},
            "deployment",
            "Lambda concurrency (ingress)",
        ),
        (
            replace(EVENT, ingress_seconds=1.0),
            DEFAULTS,
            {"lambda_concurrent_executions": 20.0},
            "deployment",
            "Lambda concurrency (ingress)",
        ),
        (
            EVENT,
            Deployment(router_max_concurrency=9),
            {"lambda_concurrent_executions": 10.0},
            "deployment",
            "Lambda concurrency (ingress)",
        ),
        # One busy repository: GitHub's per-installation limits bind long before the deployment's.
        (EVENT, DEFAULTS, {}, "installation", "GitHub content creation, hourly"),
        (replace(EVENT, github_posts=0.1), DEFAULTS, {}, "installation", "GitHub primary limit"),
        (
            replace(
                EVENT, github_posts=0.01, github_requests=0.01, github_rate_limited=0.01, github_mutations=0.0
            ),
            DEFAULTS,
            {},
            "installation",
            "router concurrency",
        ),
        # One issue: its events are routed one at a time.
        (
            replace(
                EVENT,
                github_posts=0.0001,
                github_requests=0.0001,
                github_rate_limited=0.0001,
                github_mutations=0.0,
            ),
            Deployment(router_max_concurrency=10),
            {},
            "issue",
            "FIFO message group",
        ),
    ],
    ids=[
        "defaults: the router",
        "more router: the API throttle",
        "no throttles: Fargate's launch rate",
        "few launches: the table's writes",
        "heavier delivery records: their hot key",
        "without high-throughput FIFO: SQS",
        "a Lambda quota of 20 still leaves the router first",
        "a new account's quota of 10: the fixed draws leave the ingress nothing",
        "a slow ingress on a quota of 20: Lambda concurrency",
        "the router takes a new account's whole quota: the ingress gets none",
        "one installation: GitHub's content limit",
        "fewer statuses: GitHub's primary limit",
        "almost no GitHub calls: the deployment's bound again",
        "one issue: its message group",
    ],
)
def test_what_binds_first_follows_the_inputs(
    event: EventCosts, deployment: Deployment, limits: dict[str, float], scope: capacity.Scope, binds: str
) -> None:
    bounds = webhook_bounds(event, deployment, _limits(**limits))
    assert binding(bounds, scope).name == binds


@pytest.mark.parametrize(
    ("deployment", "limits", "scope", "binds"),
    [
        (DEFAULTS, {}, "deployment", "Fargate vCPU quota"),
        (DEFAULTS, {"fargate_on_demand_vcpus": 100_000}, "deployment", "EFS write operations"),
        (
            DEFAULTS,
            {"fargate_on_demand_vcpus": 100_000, "efs_elastic_write_iops": 500_000},
            "deployment",
            "EFS write throughput",
        ),
        (Deployment(agent_vcpu=0.25), {}, "deployment", "Fargate vCPU quota"),
        (DEFAULTS, {"fargate_on_demand_vcpus": 100_000}, "installation", "GitHub primary limit"),
        (DEFAULTS, {"fargate_on_demand_vcpus": 100_000}, "repository", "max_concurrent_agents"),
        (Deployment(max_concurrent_agents=3), {}, "repository", "max_concurrent_agents"),
    ],
    ids=[
        "defaults: Fargate's vCPU quota",
        "quota raised: EFS write operations",
        "and EFS IOPS raised: EFS throughput",
        "quarter-vCPU tasks: still the quota, at 24",
        "one installation: GitHub's primary limit",
        "one repository: its max_concurrent_agents",
        "a repository capped below the quota",
    ],
)
def test_what_binds_agents_first_follows_the_inputs(
    deployment: Deployment, limits: dict[str, float], scope: capacity.Scope, binds: str
) -> None:
    bounds = agent_bounds(AGENT, deployment, _limits(**limits))
    assert binding(bounds, scope).name == binds


def test_a_bound_holds_at_every_narrower_scope_and_headroom_is_measured_from_what_binds() -> None:
    bounds = webhook_bounds(EVENT, DEFAULTS)
    values = [binding(bounds, scope).value for scope in SCOPES]
    assert values == sorted(values, reverse=True)  # narrower load never allows more
    first = binding(bounds, "deployment")
    assert headroom(first, bounds) == 1.0
    throttle = next(b for b in bounds if b.name == "API Gateway stage throttle")
    assert headroom(throttle, bounds) == pytest.approx(50 / 10)
    issue = next(b for b in bounds if b.name == "FIFO message group")
    assert headroom(issue, bounds) == pytest.approx(2.0 / binding(bounds, "issue").value)


def test_a_bound_that_allows_nothing_binds_and_the_others_have_no_finite_headroom() -> None:
    starved = Deployment(router_max_concurrency=9)
    bounds = webhook_bounds(EVENT, starved, _limits(lambda_concurrent_executions=10.0))
    first = binding(bounds, "deployment")
    assert (first.name, first.value) == ("Lambda concurrency (ingress)", 0.0)
    assert headroom(first, bounds) == 1.0
    assert all(math.isinf(headroom(b, bounds)) for b in bounds if b is not first and b.value > 0)
    view = capacity.readme_table(capacity.bounds_view(bounds), "Webhooks/s")
    assert "| **Lambda concurrency (ingress)** | deployment | 0 | 1.0x |" in view
    assert "| router concurrency | deployment | 18 | - |" in view


@pytest.mark.parametrize(
    ("agents", "expected"),
    [
        (0, min(5000 - OVERHEAD, 500 * 8) / 4 / 3600),  # primary: 4 per event; content: 0.5 per event
        (10, min(5000 - OVERHEAD - 600, (500 - 60) * 8) / 4 / 3600),
        (70, 0.0),  # the agents alone spend the installation's hour: nothing left, never negative
    ],
    ids=["no agents", "ten agents", "more agents than the budget"],
)
def test_agents_and_events_share_an_installations_github_budget(agents: int, expected: float) -> None:
    assert installation_webhooks(EVENT, agents, DEFAULTS) == pytest.approx(expected)


def test_high_throughput_fifo_is_recommended_with_where_its_absence_would_bind() -> None:
    advice = fifo_recommendation(EVENT, DEFAULTS)
    assert advice["recommended"] and advice["configured"]
    assert advice["webhooks_per_second_without"] == 300.0
    assert advice["binds_without_it_from_router_max_concurrency"] == math.ceil(300 * 0.5)
    # At that concurrency, a queue without high throughput is indeed what binds first.
    at = Deployment(router_max_concurrency=151, api_throttle_rate_limit=10_000, high_throughput_fifo=False)
    few = replace(
        EVENT, task_launches=0.001, delivery_write_units=0.1, index_write_units=0.1, table_write_units=0.1
    )
    assert binding(webhook_bounds(few, at), "deployment").name == "SQS FIFO sends"


# --- measured inputs are read as the benchmarks wrote them ---------------------------------


def test_event_costs_count_mutations_posts_and_launches_per_event() -> None:
    router_calls: dict[str, Any] = {
        "lifecycle_events": 4,
        "lifecycle_total": {
            "dynamodb_total": 20,
            "github": 8,
            "sqs_sent": 2,
            "ecs_by_operation": {"RunTask": 2, "StopTask": 1},
            "github_by_route": {
                "GET /repos/{owner}/{repo}/pulls/{n}": 4,
                "POST /repos/{owner}/{repo}/statuses/{sha}": 2,
                "PATCH /repos/{owner}/{repo}/issues/{n}": 1,
                "PUT /repos/{owner}/{repo}/pulls/{n}/merge": 1,
            },
            "dynamodb_capacity_estimate": {"rru": 8.0, "wru": 20.0, "wru_index": 4.0},
        },
        "container_costs": {"warm": {"dynamodb_capacity_estimate": {"rru": 1.0, "wru": 2.0}}},
    }
    costs = event_costs(router_calls)
    assert (costs.github_requests, costs.github_mutations, costs.github_posts) == (2.0, 1.0, 0.5)
    assert costs.github_rate_limited == 2.0  # a benchmark without 304s counted: every request
    router_calls["lifecycle_total"] |= {"github_not_modified": 3, "github_rate_limited": 5}
    assert event_costs(router_calls).github_rate_limited == 1.25
    assert (costs.table_write_units, costs.index_write_units, costs.read_units) == (5.0, 1.0, 2.0)
    assert (costs.delivery_write_units, costs.sqs_sends, costs.task_launches) == (2.0, 1.5, 0.5)
    # The router's seconds are the cost model's: one price for the same work in both models.
    priced = cost.ASSUMPTIONS
    expected_ms = priced["router_base_ms"] + 5 * priced["dynamodb_call_ms"] + 2 * priced["github_call_ms"]
    assert costs.router_seconds == pytest.approx(expected_ms / 1000)


def test_every_limit_names_its_source_and_every_bound_names_limits_that_exist() -> None:
    for name, limit in PUBLISHED.items():
        assert limit.source.startswith("https://"), name
        assert limit.status in ("confirmed", "unverified"), name
        assert limit.value > 0, name
    bounds = webhook_bounds(EVENT, DEFAULTS) + agent_bounds(AGENT, DEFAULTS)
    assert {name for b in bounds for name in b.limits} <= set(PUBLISHED)
    assert all(value >= 0 for value in ASSUMPTIONS.values())


def _class_constant(path: Path, cls: str, name: str) -> Any:
    """A constant of a class in ``path``, read without importing it (CDK stays out of unit tests)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    (node,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
    (value,) = [
        a.value
        for a in node.body
        if isinstance(a, ast.Assign) and any(getattr(t, "id", "") == name for t in a.targets)
    ]
    return ast.literal_eval(value)


def test_the_model_prices_the_infra_it_describes() -> None:
    constructs = ROOT / "infra" / "constructs"
    assert DEFAULTS.agent_vcpu == _class_constant(constructs / "agents.py", "AgentCompute", "TASK_CPU") / 1024
    agents = (constructs / "agents.py").read_text(encoding="utf-8")
    assert agents.count(f"cidr_mask={capacity.AGENT_SUBNET_MASK}") >= 1
    assert f"max_azs={capacity.AGENT_SUBNETS}" in agents
    # events.fifo is high throughput, as the model assumes (the infra tests check the template).
    queue = (constructs / "event_queue.py").read_text(encoding="utf-8")
    assert "deduplication_scope=sqs.DeduplicationScope.MESSAGE_GROUP" in queue
    assert "fifo_throughput_limit=sqs.FifoThroughputLimit.PER_MESSAGE_GROUP_ID" in queue


# --- docs/limits.md and capacity.json show the model's figures --------------------------


def _model() -> dict[str, Any]:
    inputs = [
        json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))
        for name in ("router_calls", "gateway")
    ]
    return capacity.capacity_model(inputs[0], inputs[1])


@pytest.mark.parametrize(
    ("view", "unit"),
    [("webhooks_per_second", "Webhooks/s"), ("concurrent_agents", "Agents")],
    ids=["webhooks", "agents"],
)
def test_the_docs_tables_are_the_models(view: str, unit: str) -> None:
    page = (ROOT / "docs" / "limits.md").read_text(encoding="utf-8")
    assert capacity.readme_table(_model()[view], unit) in page


def test_capacity_json_is_the_model_over_the_committed_results() -> None:
    written = json.loads((RESULTS / "capacity.json").read_text(encoding="utf-8"))
    model = json.loads(json.dumps(_model()))
    assert {key: written[key] for key in model} == model
