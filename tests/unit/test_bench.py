"""The benchmarks' parsing and bookkeeping (never their timings: a test never depends on speed)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from bench import cost, pipeline_transitions
from bench.imports import block_of, direct_imports, package_self_times, parse_importtime
from bench.machine import PACKAGES, cpuinfo, machine_info
from bench.stats import distribution, percentile

# Real `python -X importtime -c "import handler"` output (functions/router), shortened.
IMPORTTIME = """\
import time: self [us] | cumulative | imported package
import time:       111 |        111 |   _io
import time:       217 |        588 | _frozen_importlib_external
import time:        99 |        118 |   abc
import time:       868 |       2533 | site
import time:       275 |        275 |   __future__
import time:        82 |         82 |       itertools
import time:       164 |        385 |       aws_xray_sdk.core.sampling.local.sampler
import time:       259 |       1425 |     aws_xray_sdk.core.sampling.sampler
import time:     85935 |      94580 |   aws_xray_sdk.core
import time:      1513 |     268757 |   squadron.shell.wiring
import time:      6445 |     598222 | handler
"""


def test_importtime_output_is_parsed_with_its_nesting() -> None:
    records = parse_importtime(IMPORTTIME)
    assert len(records) == 11  # the header is not a record
    assert (records[0].name, records[0].self_us, records[0].cumulative_us, records[0].depth) == (
        "_io",
        111,
        111,
        1,
    )
    assert [r.depth for r in records[4:]] == [1, 3, 3, 2, 1, 1, 0]

    block = block_of(records, "handler")
    assert block[0].name == "__future__"  # after site, the previous top-level import
    assert block[-1].cumulative_us == 598222
    assert [r.name for r in direct_imports(block)] == [
        "__future__",
        "aws_xray_sdk.core",
        "squadron.shell.wiring",
    ]
    totals = package_self_times(block)
    assert totals["aws_xray_sdk"] == 164 + 259 + 85935
    assert totals["handler"] == 6445
    with pytest.raises(LookupError):
        block_of(records, "not_imported")


def test_the_machine_block_names_the_machine_the_versions_and_the_commit() -> None:
    info = machine_info()
    assert set(info) == {"machine", "versions", "commit"}
    assert set(info["machine"]) == {
        "python",
        "implementation",
        "platform",
        "kernel",
        "architecture",
        "cpu_model",
        "cpu_count",
        "memory_mb",
        "load_average",
    }
    assert set(info["versions"]) == {*PACKAGES, "copilot-cli"}
    assert set(info["commit"]) == {"sha", "dirty"}
    assert info["versions"]["boto3"]  # installed: the benchmarks import it


def test_cpuinfo_gives_the_model_and_the_processor_count() -> None:
    text = "processor\t: 0\nmodel name\t: AMD EPYC\n\nprocessor\t: 1\nmodel name\t: AMD EPYC\n"
    assert cpuinfo(text) == ("AMD EPYC", 2)
    assert cpuinfo("") == (None, 0)


def test_percentiles_interpolate_between_ranks() -> None:
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 90) == pytest.approx(4.6)
    assert distribution([1.0, 2.0, 3.0], quantiles=(50,)) == {"count": 3, "p50": 2.0, "max": 3.0, "min": 1.0}
    assert distribution([]) == {"count": 0}


LIFECYCLE = {
    "dynamodb_total": 66,
    "github": 33,
    "sqs_sent": 0,
    "dynamodb_capacity_estimate": {"rru": 2200.0, "wru": 6600.0, "wru_index": 0.0},
}


@pytest.mark.parametrize(
    ("change", "item", "factor"),
    [
        (
            {"dynamodb_capacity_estimate": {"rru": 2200.0, "wru": 13200.0, "wru_index": 0.0}},
            "DynamoDB writes (table and status index)",
            2.0,
        ),
        (
            {"dynamodb_capacity_estimate": {"rru": 4400.0, "wru": 6600.0, "wru_index": 0.0}},
            "DynamoDB reads",
            2.0,
        ),
        ({"github": 0}, "Lambda duration", None),
    ],
    ids=["twice the writes", "twice the reads", "no GitHub calls: shorter router runs"],
)
def test_the_cost_per_event_follows_the_measured_counts(
    change: dict[str, Any], item: str, factor: float | None
) -> None:
    base = cost.per_thousand_events(LIFECYCLE, 11)
    changed = cost.per_thousand_events({**LIFECYCLE, **change}, 11)
    if factor is None:
        assert changed[item] < base[item]
    else:
        assert changed[item] == pytest.approx(base[item] * factor, rel=0.05)
    assert {k: v for k, v in changed.items() if k != item} == {k: v for k, v in base.items() if k != item}


def test_the_cost_model_adds_up() -> None:
    model = cost.cost_model({"commit": {"sha": "x"}, "lifecycle_total": LIFECYCLE, "lifecycle_events": 11})
    assert model["idle_month_total_usd"] == pytest.approx(sum(model["idle_month_usd"].values()), abs=0.01)
    assert model["per_1000_events_total_usd"] == pytest.approx(
        sum(model["per_1000_events_usd"].values()), abs=1e-4
    )
    # The default network has no NAT gateway: idle, a deployment costs under 5 USD a month.
    assert not [item for item in model["idle_month_usd"] if "NAT" in item]
    assert model["idle_month_total_usd"] < 5
    assert model["nat_opt_in_month_usd"]["NAT gateway"] == pytest.approx(32.85)
    assert model["idle_month_total_with_nat_usd"] == pytest.approx(
        model["idle_month_total_usd"] + sum(model["nat_opt_in_month_usd"].values()), abs=0.01
    )
    assert model["agent_task_hour_usd"]["Fargate"] == pytest.approx(0.0583, abs=1e-4)  # 1 vCPU, 4 GB
    # + its public IPv4 and its DNS Firewall queries
    assert model["agent_task_hour_total_usd"] == pytest.approx(0.0637, abs=1e-4)


def test_the_egress_allow_list_costs_its_names_idle_and_its_queries_per_task_hour() -> None:
    """DNS Firewall: 0.0005 USD per listed name a month, 0.60 USD per million queries."""
    idle = cost.idle_month()
    (names,) = [usd for item, usd in idle.items() if item.startswith("DNS Firewall domain lists")]
    assert names == round(cost.DNS_FIREWALL_DOMAINS * 0.0005, 2)
    hour = cost.agent_hour()
    assert hour["DNS Firewall queries"] == pytest.approx(600 / 1e6 * 0.60)


@pytest.mark.parametrize(
    ("before", "charged"), [(0, 0.0), (2, 0.0), (3, 3.0)], ids=["first", "third", "fourth"]
)
def test_the_dashboard_is_free_among_an_accounts_first_three(before: int, charged: float) -> None:
    (dashboard,) = [v for k, v in cost.idle_month(dashboards_before=before).items() if "dashboard" in k]
    assert dashboard == charged


def test_the_gateway_share_of_an_agent_hour_follows_its_measured_cost() -> None:
    with_gateway = cost.cost_model(
        {"commit": {"sha": "x"}, "lifecycle_total": LIFECYCLE, "lifecycle_events": 11},
        {"usd_per_agent_hour_total": 0.0002},
    )
    assert with_gateway["agent_task_hour_usd"]["agent gateway (its calls)"] == 0.0002


_COLD = {"memory_mb": 512, "cold_path_cpu_s": 0.3, "import_cpu_s": 0.16}


@pytest.mark.parametrize(
    ("memory_mb", "wall_s"),
    [(128, 4.15), (256, 2.07), (512, 1.04), (1024, 0.52), (1769, 0.3)],
    ids=["128", "256", "512", "1024", "one-vcpu"],
)
def test_a_cold_path_is_projected_by_the_cpu_share_of_memory(memory_mb: int, wall_s: float) -> None:
    options = cost.cold_start_options(_COLD, warm_ms=60.0)
    assert options["on_demand_by_memory_mb"][str(memory_mb)]["cold_start_wall_s"] == wall_s


def test_a_cpu_bound_cold_start_costs_the_same_at_any_memory_up_to_one_vcpu() -> None:
    by_memory = cost.cold_start_options(_COLD, warm_ms=60.0)["on_demand_by_memory_mb"]
    assert len({by_memory[mb]["usd_per_month"] for mb in ("128", "256", "512", "1024", "1769")}) == 1


def test_snapstart_restores_and_caches_and_provisioned_concurrency_never_starts_cold() -> None:
    options = cost.cold_start_options(_COLD, warm_ms=60.0)
    snapstart = options["snapstart_at_configured_memory"]
    # After a restore the import is in the snapshot; what each request needs runs again.
    restored_work_s = (0.3 - 0.16) / (512 / 1769)
    assert snapstart["cold_start_wall_s"] == round(0.4 + restored_work_s, 2)
    assert snapstart["usd_per_month"] > 0.5 * 730 * 3600 * cost.PRICES["snapstart_cache_gb_second"]
    assert options["provisioned_concurrency_1_at_configured_memory"]["cold_start_wall_s"] == 0.0


def _template(*resources: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    return {"Resources": {name: {"Type": kind, "Properties": props} for name, kind, props in resources}}


_QUEUE: tuple[str, str, dict[str, Any]] = ("Queue", "AWS::SQS::Queue", {"FifoQueue": True})
_FUNCTION: tuple[str, str, dict[str, Any]] = ("Fn", "AWS::Lambda::Function", {})


@pytest.mark.parametrize(
    ("resources", "field", "count"),
    [
        ([("A", "AWS::CloudWatch::Alarm", {"MetricName": "x"})], "alarm_metrics", 1),
        (
            [
                (
                    "A",
                    "AWS::CloudWatch::Alarm",
                    {
                        "Metrics": [
                            {"Id": "e", "Expression": "a/b"},
                            {"Id": "a", "MetricStat": {}},
                            {"Id": "b", "MetricStat": {}},
                        ]
                    },
                )
            ],
            "alarm_metrics",
            2,
        ),
        (
            [("K", "AWS::KMS::Key", {"EnableKeyRotation": True}), ("L", "AWS::KMS::Key", {})],
            "rotating_kms_keys",
            1,
        ),
        ([("S", "AWS::SecretsManager::Secret", {})] * 1, "secrets", 1),
        ([("D", "AWS::CloudWatch::Dashboard", {})], "dashboards", 1),
        (
            [
                _FUNCTION,
                (
                    "R",
                    "AWS::Events::Rule",
                    {
                        "ScheduleExpression": "rate(1 hour)",
                        "Targets": [{"Arn": {"Fn::GetAtt": ["Fn", "Arn"]}}],
                    },
                ),
            ],
            "scheduled_runs_per_month",
            730,
        ),
        (
            [
                _FUNCTION,
                (
                    "R",
                    "AWS::Events::Rule",
                    {
                        "ScheduleExpression": "rate(1 hour)",
                        "State": "DISABLED",
                        "Targets": [{"Arn": {"Fn::GetAtt": ["Fn", "Arn"]}}],
                    },
                ),
            ],
            "scheduled_runs_per_month",
            0,
        ),
        (
            [
                _QUEUE,
                (
                    "M",
                    "AWS::Lambda::EventSourceMapping",
                    {"EventSourceArn": {"Fn::GetAtt": ["Queue", "Arn"]}},
                ),
            ],
            "fifo_queue_mappings",
            1,
        ),
        ([("N", "AWS::EC2::NatGateway", {})], "nat_gateways", 1),
        (
            [
                ("E", "AWS::EC2::VPCEndpoint", {"VpcEndpointType": "Interface"}),
                ("G", "AWS::EC2::VPCEndpoint", {"VpcEndpointType": "Gateway"}),
            ],
            "interface_endpoints",
            1,
        ),
        (
            [("L", "AWS::Route53Resolver::FirewallDomainList", {"Domains": ["a.org", "b.org"]})],
            "dns_firewall_domains",
            2,
        ),
    ],
    ids=[
        "alarm-on-one-metric",
        "math-alarm-counts-its-inputs",
        "rotating-key",
        "secret",
        "dashboard",
        "hourly-schedule",
        "disabled-schedule",
        "fifo-poller",
        "nat-gateway",
        "interface-endpoint-not-gateway",
        "dns-names",
    ],
)
def test_what_a_template_bills_idle_is_counted_from_it(
    resources: list[tuple[str, str, dict[str, Any]]], field: str, count: float
) -> None:
    assert getattr(cost.idle_resources(_template(*resources)), field) == count


def test_each_counted_resource_is_priced() -> None:
    """One more of anything counted costs more (or, for a dashboard, may fall in the free tier)."""
    base = cost.idle_month()
    for field, extra in [
        ("secrets", 1),
        ("kms_keys", 1),
        ("alarm_metrics", 1),
        ("nat_gateways", 1),
        ("interface_endpoints", 1),
    ]:
        more = dataclasses.replace(
            cost.DEFAULT_RESOURCES, **{field: getattr(cost.DEFAULT_RESOURCES, field) + extra}
        )
        assert sum(cost.idle_month(more).values()) > sum(base.values()), field


def test_a_schedule_the_model_cannot_count_is_refused() -> None:
    rule = (
        "R",
        "AWS::Events::Rule",
        {"ScheduleExpression": "cron(0 12 * * ? *)", "Targets": [{"Arn": {"Fn::GetAtt": ["Fn", "Arn"]}}]},
    )
    with pytest.raises(ValueError, match="cannot count"):
        cost.idle_resources(_template(_FUNCTION, rule))


def test_a_runs_transitions_are_its_states_entered_and_its_task_retries() -> None:
    history = [
        {"type": "ExecutionStarted"},
        {"type": "TaskStateEntered"},
        {"type": "TaskScheduled"},
        {"type": "TaskFailed"},
        {"type": "TaskScheduled"},  # a Retry: billed, no new StateEntered
        {"type": "TaskSucceeded"},
        {"type": "TaskStateExited"},
        {"type": "ParallelStateEntered"},
        {"type": "WaitStateEntered"},
        {"type": "ChoiceStateEntered"},
        {"type": "ExecutionSucceeded"},
    ]
    counted = pipeline_transitions.transitions(history)
    assert (counted["states_entered"], counted["task_retries"], counted["transitions"]) == (4, 1, 5)


def test_compressed_waits_run_the_same_states_at_once() -> None:
    definition: dict[str, Any] = {
        "StartAt": "w",
        "States": {
            "w": {"Type": "Wait", "Seconds": 86400, "Next": "p"},
            "p": {
                "Type": "Parallel",
                "Branches": [{"StartAt": "x", "States": {"x": {"Type": "Wait", "Seconds": 5, "End": True}}}],
                "End": True,
            },
        },
    }
    squeezed = pipeline_transitions.compressed(definition)
    assert squeezed["States"]["w"] == {"Type": "Wait", "Seconds": 0, "Next": "p"}
    assert squeezed["States"]["p"]["Branches"][0]["States"]["x"]["Seconds"] == 0
    assert definition["States"]["w"]["Seconds"] == 86400  # the published definition is a copy
