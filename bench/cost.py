"""What a deployment costs: at idle per month, and per 1,000 events, from measured call counts.

The call counts are the router_calls benchmark's (one issue's whole lifecycle through the real
router on DynamoDB under moto, every AWS and GitHub call counted); the prices are AWS's
published on-demand list prices for us-east-1 (PRICES, with the date they were read). What
cannot be measured on this machine is an assumption, named in ASSUMPTIONS and in the result:
Lambda durations in AWS (from the calls an event makes), log volume, the SQS pollers of an
idle event source mapping. Fargate time and the model are not per event: an agent task costs
by the hour it works, reported apart; the model's tokens are billed by Copilot or the BYOK
provider, not AWS.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
HOURS_PER_MONTH = 730

#: us-east-1 on-demand list prices in USD (read 2026-11; check the pricing pages before relying).
PRICES: dict[str, float] = {
    "nat_gateway_hour": 0.045,
    "nat_gateway_gb": 0.045,
    "public_ipv4_hour": 0.005,
    "secret_month": 0.40,
    "kms_key_month": 1.00,
    "dashboard_month": 3.00,
    "alarm_metric_month": 0.10,
    "custom_metric_month": 0.30,
    "http_api_million_requests": 1.00,
    "lambda_million_requests": 0.20,
    "lambda_gb_second": 0.0000166667,
    "sqs_fifo_million_requests": 0.50,
    "sqs_standard_million_requests": 0.40,
    "dynamodb_million_rru": 0.125,
    "dynamodb_million_wru": 0.625,
    "logs_ingested_gb": 0.50,
    "ecr_gb_month": 0.10,
    "fargate_vcpu_hour": 0.04048,
    "fargate_gb_hour": 0.004445,
    # Cold starts (x86): provisioned concurrency, and SnapStart for Python (cache and restore).
    "lambda_provisioned_gb_second": 0.0000041667,
    "lambda_provisioned_duration_gb_second": 0.0000097222,
    "snapstart_cache_gb_second": 0.0000015046,
    "snapstart_restore_gb": 0.0001397998,
    # Route 53 Resolver DNS Firewall (the agents' egress allow list), https://aws.amazon.com/route53/pricing/
    # (read 2026-09): 0.0005 USD per domain name a month in the account's domain lists (prorated
    # hourly), 0.60 USD per million queries the firewall inspects (the first billion a month).
    "dns_firewall_domain_month": 0.0005,
    "dns_firewall_million_queries": 0.60,
    # https://aws.amazon.com/privatelink/pricing/ (read 2026-11): per endpoint and AZ, an hour.
    "interface_endpoint_hour": 0.01,
}

#: What this machine cannot measure, stated so the figures can be redone with better numbers.
ASSUMPTIONS: dict[str, float] = {
    # Lambda durations in AWS: a base, plus the round trips an event makes (counted).
    "ingress_ms": 60.0,  # secret cached; one SendMessage
    "router_base_ms": 30.0,
    "dynamodb_call_ms": 8.0,
    "github_call_ms": 150.0,
    "reconciler_run_ms": 1500.0,  # an idle run: the status index, nothing to read on GitHub
    # Worst case for SQS: the router gets each event in a batch of its own.
    "sqs_requests_per_event": 3.0,  # SendMessage, ReceiveMessage, DeleteMessage(Batch)
    "log_kb_per_event": 6.0,  # the ingress's and the router's JSON lines
    # An idle FIFO event source mapping long-polls (20 s) with a few pollers.
    "idle_pollers": 5.0,
    # The dashboards: every domain event is a refresh request on the dashboards queue (sent by the
    # bus's rule, received, deleted). Worst case: each webhook's decision commits one event and
    # each request is an invocation of its own, which claims or defers (one slot write), reads
    # the registry and lists the repository's issues (a 304 when unchanged).
    "dashboard_requests_per_event": 1.0,
    "dashboard_run_ms": 300.0,
    "agent_image_gb": 0.7,  # bench/results/image.json: about 680 MB
    # Cold starts of one function a month: Lambda keeps an idle environment for minutes, not
    # hours (undocumented), so a webhook stream with quiet gaps starts cold ~100 times a day.
    "cold_starts_per_month": 3000.0,
    # What a SnapStart restore takes before the handler runs (not measurable without AWS).
    "snapstart_restore_ms": 400.0,
    # Names an agent task resolves in an hour: git and API calls to GitHub, model calls, the
    # gateway's heartbeat, the file system (each name cached for its TTL, a minute or less).
    "dns_queries_per_agent_hour": 600.0,
}

#: Memory of each function (infra/constructs): GB-seconds follow from it.
MEMORY_GB = {"ingress": 0.5, "router": 0.5, "reconciler": 0.5, "dashboards": 0.5}
#: The agent task's size (infra/constructs/agents.py).
AGENT_VCPU, AGENT_GB = 1.0, 4.0


@dataclass(frozen=True)
class IdleResources:
    """What a synthesized template bills a month while nothing happens, counted from the template
    itself (:func:`idle_resources`), so the cost model cannot drift from the stack: a test
    (tests/infra/test_infra_cost.py) counts the real synthesized stack and compares it with
    :data:`DEFAULT_RESOURCES`, the defaults' count this model prices."""

    secrets: int  # AWS::SecretsManager::Secret (BYOK keys the operator adds are their own)
    kms_keys: int  # AWS::KMS::Key (customer managed: 1 USD a month each)
    rotating_kms_keys: int  # with EnableKeyRotation: each of the first two yearly rotations adds 1 USD
    alarms: int  # AWS::CloudWatch::Alarm
    alarm_metrics: int  # what alarms are billed by: one per metric an alarm reads (math: each input)
    dashboards: int  # AWS::CloudWatch::Dashboard
    scheduled_runs_per_month: float  # invocations of functions by scheduled rules
    fifo_queue_mappings: int  # SQS event source mappings long-polling a FIFO queue
    standard_queue_mappings: int  # ... a standard queue
    dns_firewall_domains: int  # names in the Route 53 Resolver DNS Firewall's domain lists
    nat_gateways: int  # AWS::EC2::NatGateway (agent_egress=nat)
    interface_endpoints: int  # AWS::EC2::VPCEndpoint of type Interface (7.30 USD a month per AZ)


#: The count of `cdk synth` with the default settings (tests/infra/test_infra_cost.py keeps it equal).
DEFAULT_RESOURCES = IdleResources(
    secrets=3,
    kms_keys=1,
    rotating_kms_keys=1,
    alarms=12,
    alarm_metrics=16,
    dashboards=1,
    scheduled_runs_per_month=12 * HOURS_PER_MONTH,
    fifo_queue_mappings=1,
    standard_queue_mappings=1,
    dns_firewall_domains=12,
    nat_gateways=0,
    interface_endpoints=0,
)
#: Domain names in the DNS Firewall's lists with no agent_allowed_domains (infra/constructs/egress.py:
#: GitHub and Copilot 5, the task's AWS endpoints 6, the block list's "*" 1).
DNS_FIREWALL_DOMAINS = DEFAULT_RESOURCES.dns_firewall_domains
#: Metrics the reconciler publishes on an idle run: the run itself (zero gauges are not published).
IDLE_METRICS = 1
_MINUTES = {"minute": 1, "minutes": 1, "hour": 60, "hours": 60, "day": 1440, "days": 1440}


def _runs_per_month(expression: str) -> float:
    """Runs a month of ``rate(N unit)``; a cron expression is refused (count it by hand)."""
    words = expression.removeprefix("rate(").removesuffix(")").split()
    if not expression.startswith("rate(") or len(words) != 2 or words[1] not in _MINUTES:
        raise ValueError(f"cannot count the runs of {expression!r}")
    number, unit = words
    return HOURS_PER_MONTH * 60 / (int(number) * _MINUTES[unit])


def _ref(value: Any) -> str | None:
    if isinstance(value, Mapping):
        if isinstance(value.get("Ref"), str):
            return str(value["Ref"])
        attribute = value.get("Fn::GetAtt")
        if isinstance(attribute, list) and attribute:
            return str(attribute[0])
    return None


def idle_resources(template: Mapping[str, Any]) -> IdleResources:
    """Count what ``template`` (a synthesized CloudFormation template) bills while idle."""
    resources: Mapping[str, Any] = template.get("Resources", {})

    def of(kind: str) -> list[Mapping[str, Any]]:
        return [r.get("Properties", {}) for r in resources.values() if r.get("Type") == kind]

    functions = {name for name, r in resources.items() if r.get("Type") == "AWS::Lambda::Function"}
    alarm_metrics = 0
    for alarm in of("AWS::CloudWatch::Alarm"):
        metrics = alarm.get("Metrics")
        alarm_metrics += sum(1 for m in metrics if "MetricStat" in m) if metrics else 1
    runs = 0.0
    for rule in of("AWS::Events::Rule"):
        if "ScheduleExpression" in rule and rule.get("State", "ENABLED") == "ENABLED":
            invoked = [t for t in rule.get("Targets", []) if _ref(t.get("Arn")) in functions]
            runs += len(invoked) * _runs_per_month(str(rule["ScheduleExpression"]))
    fifo = standard = 0
    for mapping in of("AWS::Lambda::EventSourceMapping"):
        source = resources.get(_ref(mapping.get("EventSourceArn")) or "", {})
        if source.get("Type") == "AWS::SQS::Queue":
            if source.get("Properties", {}).get("FifoQueue"):
                fifo += 1
            else:
                standard += 1
    keys = of("AWS::KMS::Key")
    return IdleResources(
        secrets=len(of("AWS::SecretsManager::Secret")),
        kms_keys=len(keys),
        rotating_kms_keys=sum(1 for k in keys if k.get("EnableKeyRotation")),
        alarms=len(of("AWS::CloudWatch::Alarm")),
        alarm_metrics=alarm_metrics,
        dashboards=len(of("AWS::CloudWatch::Dashboard")),
        scheduled_runs_per_month=runs,
        fifo_queue_mappings=fifo,
        standard_queue_mappings=standard,
        dns_firewall_domains=sum(
            len(d.get("Domains", [])) for d in of("AWS::Route53Resolver::FirewallDomainList")
        ),
        nat_gateways=len(of("AWS::EC2::NatGateway")),
        interface_endpoints=sum(
            1 for e in of("AWS::EC2::VPCEndpoint") if e.get("VpcEndpointType") == "Interface"
        ),
    )


#: CloudWatch's free tier: an account's first three dashboards cost nothing.
FREE_DASHBOARDS = 3


def nat_month() -> dict[str, float]:
    """What the opt-in NAT gateway (deployment value agent_egress=nat) adds a month, by item."""
    p = PRICES
    return {
        "NAT gateway": round(HOURS_PER_MONTH * p["nat_gateway_hour"], 2),
        "NAT gateway's public IPv4 address": round(HOURS_PER_MONTH * p["public_ipv4_hour"], 2),
    }


def idle_month(
    resources: IdleResources = DEFAULT_RESOURCES, *, dashboards_before: int = 0
) -> dict[str, float]:
    """USD a month with no event at all, by item, for what a template holds (``resources``; by
    default the default settings' stack, no NAT gateway).

    ``dashboards_before``: how many CloudWatch dashboards the account had already (the first
    three are free).
    """
    p, a, r = PRICES, ASSUMPTIONS, resources
    runs = r.scheduled_runs_per_month
    reconciler_gb_s = runs * a["reconciler_run_ms"] / 1000 * MEMORY_GB["reconciler"]
    idle_polls = a["idle_pollers"] * 3 * 60 * HOURS_PER_MONTH  # three 20-s polls a minute each
    free = max(0, FREE_DASHBOARDS - dashboards_before)
    dashboards = max(0, r.dashboards - free) * p["dashboard_month"]
    items = {
        f"Secrets Manager ({r.secrets} secrets)": r.secrets * p["secret_month"],
        f"KMS keys ({r.kms_keys}: the alarm topic's)": r.kms_keys * p["kms_key_month"],
        f"CloudWatch dashboards ({r.dashboards}; 3 USD each once the account has three)": dashboards,
        f"CloudWatch alarms ({r.alarms} alarms reading {r.alarm_metrics} metrics)": r.alarm_metrics
        * p["alarm_metric_month"],
        f"custom metrics an idle reconciler publishes ({IDLE_METRICS})": IDLE_METRICS
        * p["custom_metric_month"],
        "reconciler Lambda (its schedule's runs)": runs / 1e6 * p["lambda_million_requests"]
        + reconciler_gb_s * p["lambda_gb_second"],
        "events.fifo long polls of the idle router": r.fifo_queue_mappings
        * idle_polls
        / 1e6
        * p["sqs_fifo_million_requests"],
        "long polls of the idle refresh queue (the issues' renderer)": r.standard_queue_mappings
        * idle_polls
        / 1e6
        * p["sqs_standard_million_requests"],
        "ECR (the agent image)": a["agent_image_gb"] * p["ecr_gb_month"],
        f"DNS Firewall domain lists ({r.dns_firewall_domains} names; no query while no task runs)": (
            r.dns_firewall_domains * p["dns_firewall_domain_month"]
        ),
    }
    if r.nat_gateways:
        items[f"NAT gateways ({r.nat_gateways}) and their IPv4 addresses"] = (
            r.nat_gateways * HOURS_PER_MONTH * (p["nat_gateway_hour"] + p["public_ipv4_hour"])
        )
    if r.interface_endpoints:
        items[f"interface VPC endpoints ({r.interface_endpoints})"] = (
            r.interface_endpoints * HOURS_PER_MONTH * p["interface_endpoint_hour"]
        )
    return {name: round(value, 2) for name, value in items.items()}


def per_thousand_events(lifecycle: dict[str, Any], events: int) -> dict[str, float]:
    """USD per 1,000 events, by item, from one measured lifecycle of ``events`` events."""
    p, a = PRICES, ASSUMPTIONS
    dynamodb = lifecycle["dynamodb_total"] / events
    github = lifecycle["github"] / events
    capacity = lifecycle["dynamodb_capacity_estimate"]
    rru = capacity["rru"] / events
    wru = (capacity["wru"] + capacity.get("wru_index", 0.0)) / events
    sqs = a["sqs_requests_per_event"] + lifecycle["sqs_sent"] / events
    router_ms = a["router_base_ms"] + dynamodb * a["dynamodb_call_ms"] + github * a["github_call_ms"]
    lambda_gb_s = a["ingress_ms"] / 1000 * MEMORY_GB["ingress"] + router_ms / 1000 * MEMORY_GB["router"]
    thousand = 1000.0
    items = {
        "API Gateway (HTTP API)": thousand / 1e6 * p["http_api_million_requests"],
        "Lambda requests (ingress, router)": 2 * thousand / 1e6 * p["lambda_million_requests"],
        "Lambda duration": thousand * lambda_gb_s * p["lambda_gb_second"],
        "SQS FIFO requests": thousand * sqs / 1e6 * p["sqs_fifo_million_requests"],
        "DynamoDB reads": thousand * rru / 1e6 * p["dynamodb_million_rru"],
        "DynamoDB writes (table and status index)": thousand * wru / 1e6 * p["dynamodb_million_wru"],
        "CloudWatch Logs ingestion": thousand * a["log_kb_per_event"] / 1024 / 1024 * p["logs_ingested_gb"],
        "dashboard refreshes (queue, Lambda, slot writes)": thousand
        * a["dashboard_requests_per_event"]
        * (
            3 / 1e6 * p["sqs_standard_million_requests"]
            + 1 / 1e6 * p["lambda_million_requests"]
            + a["dashboard_run_ms"] / 1000 * MEMORY_GB["dashboards"] * p["lambda_gb_second"]
            + 1 / 1e6 * p["dynamodb_million_wru"]
        ),
    }
    return {name: round(value, 4) for name, value in items.items()}


def agent_hour(gateway_usd: float = 0.0) -> dict[str, float]:
    """USD for one hour of one agent task, by item (Fargate, x86; the model's tokens are not AWS's).

    By default a running task has a public IPv4 address (no NAT gateway); ``gateway_usd`` is the
    agent gateway's share, measured by the gateway benchmark.
    """
    p, a = PRICES, ASSUMPTIONS
    return {
        "Fargate": round(AGENT_VCPU * p["fargate_vcpu_hour"] + AGENT_GB * p["fargate_gb_hour"], 4),
        "the task's public IPv4 address": p["public_ipv4_hour"],
        "DNS Firewall queries": round(
            a["dns_queries_per_agent_hour"] / 1e6 * p["dns_firewall_million_queries"], 6
        ),
        "agent gateway (its calls)": round(gateway_usd, 6),
    }


def _share(memory_mb: int) -> float:
    """Lambda's CPU share of one vCPU at ``memory_mb`` (1,769 MB is one vCPU)."""
    return min(1.0, memory_mb / 1769)


def cold_start_options(function: Mapping[str, Any], *, warm_ms: float) -> dict[str, Any]:
    """A month of one function's cold starts three ways, from its measured cold path.

    ``function`` is one entry of bench/results/cold_start.json (its cold path's CPU seconds and
    the part that must run again after a SnapStart restore); ``warm_ms`` what an event takes
    warm at the configured memory. The INIT phase is billed like the handler's duration (AWS
    bills it for on-demand functions since August 2025).
    """
    p, a = PRICES, ASSUMPTIONS
    starts = a["cold_starts_per_month"]
    month_s = HOURS_PER_MONTH * 3600
    cpu_s = float(function["cold_path_cpu_s"])
    memory = int(function["memory_mb"])
    sizes = sorted({128, 256, 512, 1024, 1769, memory})
    on_demand = {}
    for mb in sizes:
        wall = cpu_s / _share(mb)
        on_demand[str(mb)] = {
            "cold_start_wall_s": round(wall, 2),
            "usd_per_month": round(starts * wall * mb / 1024 * p["lambda_gb_second"], 4),
        }
    gb = memory / 1024
    # After a restore only the per-request work remains: clients and the secret are refreshed
    # in the after-restore hook (a secret may have rotated), the import is in the snapshot.
    after_restore_s = float(function["cold_path_cpu_s"]) - float(function["import_cpu_s"])
    snapstart_wall = a["snapstart_restore_ms"] / 1000 + after_restore_s / _share(memory)
    snapstart = {
        "cold_start_wall_s": round(snapstart_wall, 2),
        "usd_per_month": round(
            gb * month_s * p["snapstart_cache_gb_second"]
            + starts * gb * p["snapstart_restore_gb"]
            + starts * after_restore_s / _share(memory) * gb * p["lambda_gb_second"],
            4,
        ),
        "note": "one published version cached all month; restores billed per GB; needs a version "
        "or alias behind API Gateway, and excludes provisioned concurrency",
    }
    provisioned = {
        "cold_start_wall_s": 0.0,
        "usd_per_month": round(gb * month_s * p["lambda_provisioned_gb_second"], 4),
        "note": "one instance always warm (a second concurrent request still starts cold); its "
        f"events bill {p['lambda_provisioned_duration_gb_second']} USD per GB-second instead of "
        f"{p['lambda_gb_second']}",
    }
    return {
        "memory_mb": memory,
        "cold_starts_per_month": starts,
        "warm_event_usd_per_million_by_memory_mb": {
            str(mb): round(1e6 * warm_ms / 1000 * mb / 1024 * p["lambda_gb_second"], 2) for mb in sizes
        },
        "on_demand_by_memory_mb": on_demand,
        "snapstart_at_configured_memory": snapstart,
        "provisioned_concurrency_1_at_configured_memory": provisioned,
    }


def cost_model(
    router_calls: dict[str, Any],
    gateway: dict[str, Any] | None = None,
    cold_start: dict[str, Any] | None = None,
) -> dict[str, Any]:
    lifecycle, events = router_calls["lifecycle_total"], int(router_calls["lifecycle_events"])
    idle = idle_month()
    nat = nat_month()
    per_event = per_thousand_events(lifecycle, events)
    hour = agent_hour(float(gateway["usd_per_agent_hour_total"]) if gateway else 0.0)
    return {
        "region": "us-east-1",
        "prices_usd": PRICES,
        "assumptions": ASSUMPTIONS,
        "from": {
            "router_calls": router_calls.get("commit"),
            "lifecycle_events": events,
            "dynamodb_calls_per_event": round(lifecycle["dynamodb_total"] / events, 2),
            "github_calls_per_event": round(lifecycle["github"] / events, 2),
        },
        "idle_resources": asdict(DEFAULT_RESOURCES),
        "idle_month_usd": idle,
        "idle_month_total_usd": round(sum(idle.values()), 2),
        "nat_opt_in_month_usd": nat,
        "idle_month_total_with_nat_usd": round(sum(idle.values()) + sum(nat.values()), 2),
        "per_1000_events_usd": per_event,
        "per_1000_events_total_usd": round(sum(per_event.values()), 4),
        "agent_task_hour_usd": hour,
        "agent_task_hour_total_usd": round(sum(hour.values()), 4),
        "cold_starts": (
            {
                "from": cold_start.get("commit"),
                "ingress": cold_start_options(
                    cold_start["functions"]["ingress"], warm_ms=ASSUMPTIONS["ingress_ms"]
                ),
            }
            if cold_start
            else None
        ),
        "not_counted": [
            "the model's tokens (Copilot seats or the BYOK provider's bill)",
            "with agent_egress=nat: NAT data processing of agent traffic (0.045 USD per GB: git clones, model calls)",
            "the CloudWatch dashboard once the account has three others (3 USD a month)",
            "the alarm topic's KMS key after its yearly rotations: 1 USD a month more after each of the "
            "first two",
            "Container Insights metrics while agent tasks run; EFS storage of sessions (0.30 USD per GB-month)",
            "custom metrics while events flow: each series is billed by the hour it is published "
            "(0.30 USD a metric-month); some 40 series in an hour with traffic is about 0.016 USD",
            "GitHub (no charge for API calls)",
            "DNS Firewall: 0.0005 USD a month per name the deployment adds with agent_allowed_domains",
            "per-repository EFS access points and task definitions: free (10,000 access points per file system)",
        ],
    }


def bench_cost() -> dict[str, Any]:
    source = RESULTS / "router_calls.json"
    if not source.exists():
        raise FileNotFoundError(f"{source} is missing: run `python -m bench router_calls` first")
    gateway = RESULTS / "gateway.json"
    cold_start = RESULTS / "cold_start.json"
    return cost_model(
        json.loads(source.read_text(encoding="utf-8")),
        json.loads(gateway.read_text(encoding="utf-8")) if gateway.exists() else None,
        json.loads(cold_start.read_text(encoding="utf-8")) if cold_start.exists() else None,
    )


def summary(result: dict[str, Any]) -> str:
    return (
        f"idle {result['idle_month_total_usd']:.2f} USD/month "
        f"({result['idle_month_total_with_nat_usd']:.2f} with the NAT gateway), "
        f"{result['per_1000_events_total_usd']:.4f} USD per 1,000 events, "
        f"{result['agent_task_hour_total_usd']:.4f} USD per agent-task hour"
    )
