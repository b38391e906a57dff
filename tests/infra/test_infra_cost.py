"""The idle cost is counted from the synthesized template: secrets, KMS keys and their rotation,
alarms and the metrics they read, dashboards, schedules, queue pollers, DNS Firewall names, NAT
gateways and interface endpoints. A resource added to the stack changes the count, and this test
fails until bench/cost.py's DEFAULT_RESOURCES (and so the idle figure, bench/results/cost.json and
docs/costs.md, which tests/unit/test_docs_costs.py holds to it) follow."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench import cost
from tests.infra.synth import SETTINGS_CONTEXT, Synthesized

pytestmark = pytest.mark.infra


def test_the_cost_model_prices_what_the_synthesized_stack_holds(synthesized: Synthesized) -> None:
    counted = cost.idle_resources(synthesized.template_json)
    # The tests' context adds three names to the allow list; nothing else it sets is billed idle.
    added = len(str(SETTINGS_CONTEXT["agent_allowed_domains"]).split(","))
    assert counted == replace(
        cost.DEFAULT_RESOURCES,
        dns_firewall_domains=cost.DEFAULT_RESOURCES.dns_firewall_domains + added,
    )


def test_every_alarm_and_every_metric_it_reads_is_counted(synthesized: Synthesized) -> None:
    """An independent count: an alarm on one metric reads one; a metric-math alarm each MetricStat."""
    alarms = synthesized.resources("AWS::CloudWatch::Alarm")
    read = 0
    for alarm in alarms.values():
        metrics = alarm["Properties"].get("Metrics")
        read += len([m for m in metrics if m.get("MetricStat")]) if metrics else 1
    assert (cost.DEFAULT_RESOURCES.alarms, cost.DEFAULT_RESOURCES.alarm_metrics) == (len(alarms), read)
    keys = synthesized.resources("AWS::KMS::Key")
    assert cost.DEFAULT_RESOURCES.kms_keys == len(keys)
    assert cost.DEFAULT_RESOURCES.rotating_kms_keys == len(
        [k for k in keys.values() if k["Properties"].get("EnableKeyRotation")]
    )
    assert cost.DEFAULT_RESOURCES.secrets == len(synthesized.resources("AWS::SecretsManager::Secret"))
    assert cost.DEFAULT_RESOURCES.dashboards == len(synthesized.resources("AWS::CloudWatch::Dashboard"))


def test_idle_stays_under_five_dollars_a_month_with_the_defaults() -> None:
    assert sum(cost.idle_month(cost.DEFAULT_RESOURCES).values()) < 5
