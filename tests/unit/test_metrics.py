"""The metric catalogue, the points each outcome becomes, and how they are published."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.metrics import Metrics
from moto import mock_aws

from squadron.adapters.metrics import CloudWatchMetrics, EmfMetrics, metric_data
from squadron.domain.events import EventEnvelope
from squadron.domain.metrics import (
    CATALOGUE,
    GITHUB_METRICS,
    GitHubTraffic,
    MetricPoint,
    agent_task_points,
    gateway_points,
    github_points,
    ingress_points,
    namespace,
    point,
    reconcile_points,
    routing_points,
    totals,
)
from squadron.shell.dispatch import Dispatcher
from tests.support.events import Events
from tests.support.world import World

AT = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def test_the_catalogue_is_consistent() -> None:
    for name, spec in CATALOGUE.items():
        assert spec.name == name
        assert name[0].isupper() and name.isalnum(), name
        assert spec.description and spec.description == spec.description.strip()
    assert namespace("prod") == "Squadron/prod"


@pytest.mark.parametrize(
    ("name", "dimension", "problem"),
    [
        ("WebhooksRejected", None, "broken down by 'Reason'"),
        ("WebhooksReceived", "x", "broken down by None"),
    ],
)
def test_a_point_must_match_its_catalogue_entry(name: str, dimension: str | None, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        point(name, dimension=dimension)


def test_an_uncatalogued_metric_cannot_be_published() -> None:
    with pytest.raises(KeyError):
        point("SomethingNew")


@pytest.mark.parametrize(
    ("outcome", "code", "expected"),
    [
        ("accepted", "issues", [("WebhooksReceived", None), ("WebhooksEnqueued", ("Event", "issues"))]),
        (
            "rejected",
            "bad_signature",
            [("WebhooksReceived", None), ("WebhooksRejected", ("Reason", "bad_signature"))],
        ),
        ("dropped", "own_event", [("WebhooksReceived", None), ("WebhooksDropped", ("Reason", "own_event"))]),
        (
            "failed",
            "queue_unavailable",
            [("WebhooksReceived", None), ("WebhooksFailed", ("Reason", "queue_unavailable"))],
        ),
        ("pong", "ping", [("WebhooksReceived", None), ("WebhooksPinged", None)]),
    ],
)
def test_ingress_points(outcome: str, code: str, expected: list[tuple[str, tuple[str, str] | None]]) -> None:
    assert [(p.name, p.dimension) for p in ingress_points(outcome, code)] == expected


@pytest.mark.parametrize(
    ("summary", "expected"),
    [
        (
            {
                "event": "issues.assigned",
                "effects": ["PutAgent", "LaunchAgent"],
                "launches": ["start"],
                "transitions": ["NEW>CREATED"],
            },
            {"DeliveriesRouted": 1, "RoutingEffects": 2, "AgentLaunches": 1},
        ),
        (
            {
                "event": "issues.closed",
                "effects": ["PutAgent", "DeliverInbox", "LaunchAgent"],
                "launches": ["wake"],
                "transitions": ["SLEEPING>ACTIVE"],
            },
            {"DeliveriesRouted": 1, "RoutingEffects": 3, "AgentWakes": 1},
        ),
        (
            {
                "event": "squadron_command.report_blocked",
                "effects": ["AddBlocker"],
                "launches": [],
                "transitions": ["ACTIVE>SLEEPING"],
            },
            {"DeliveriesRouted": 1, "RoutingEffects": 1, "AgentSleeps": 1},
        ),
        (
            {
                "event": "pull_request.closed",
                "effects": ["PutAgent", "PutAgent"],
                "transitions": ["ACTIVE>COMPLETED", "CREATED>COMPLETED"],
            },
            {"DeliveriesRouted": 1, "RoutingEffects": 2, "AgentCompletions": 2},
        ),
        (
            {
                "event": "squadron_command.recover_agent",
                "effects": ["PutAgent", "AddLabels"],
                "transitions": ["SLEEPING>ESCALATED"],
            },
            {"DeliveriesRouted": 1, "RoutingEffects": 2, "Escalations": 1},
        ),
        (
            {"event": "star", "effects": ["Discard"], "transitions": []},
            {"DeliveriesRouted": 1, "RoutingEffects": 1, "DeliveriesDiscarded": 1},
        ),
        ({"event": "issues.edited", "effects": []}, {"DeliveriesRouted": 1}),
        (
            {
                "event": "pull_request_review.submitted",
                "effects": ["Discard"],
                "refused": ["no-write-access"],
            },
            {"DeliveriesRouted": 1, "RoutingEffects": 1, "DeliveriesDiscarded": 1, "HumanInputsRefused": 1},
        ),
    ],
    ids=["start", "wake", "sleep", "completions", "escalation", "discard", "nothing to do", "refused"],
)
def test_routing_points(summary: dict[str, object], expected: dict[str, float]) -> None:
    assert totals(routing_points(summary)) == expected


def _lifecycle_metrics(world: World) -> dict[str, float]:
    e = world.events
    script = [
        e.assigned(1),
        e.register_blocker(1, 2, agent_id="1-1-feat-dev", sleep=True),
        e.closed(2),
        e.pr(10, "feat/issue-1", "Fixes #1"),
        e.pr_closed(10, "feat/issue-1", merged=True, body="Fixes #1"),
    ]
    dispatcher = Dispatcher(world.router)
    points: list[MetricPoint] = []
    for envelope in script:
        points.extend(routing_points(dispatcher.handle(envelope.model_dump_json())))
    return totals(points)


def test_a_whole_issue_lifecycle_is_counted_from_the_router_decisions() -> None:
    counted = _lifecycle_metrics(World(events=Events()))
    # Assigned: launched; blocked: asleep; the blocker closed: woken; merged: completed (the
    # dev, and the reviewer the PR started: launched too).
    assert counted["DeliveriesRouted"] == 5
    assert counted["AgentSleeps"] == 1
    assert counted["AgentWakes"] == 1
    assert counted["AgentLaunches"] == counted["AgentCompletions"] == 2
    assert "Escalations" not in counted


def test_refused_inputs_are_counted_by_the_rule_that_refused_them() -> None:
    world = World()
    e = world.events
    dispatcher = Dispatcher(world.router)
    points: list[MetricPoint] = []
    for envelope in [
        e.assigned(1),
        e.comment(1, by="mallory"),
        e.review(10, "feat/issue-1", "approved", by="helper[bot]"),
        e.comment(1, by="alice"),
    ]:
        points.extend(routing_points(dispatcher.handle(envelope.model_dump_json())))
    refused = [p.dimension for p in points if p.name == "HumanInputsRefused"]
    assert refused == [("Rule", "no-write-access"), ("Rule", "other-bot")]


def test_a_duplicate_delivery_says_so_and_changes_nothing() -> None:
    world = World()
    stored: dict[str, dict[str, Any]] = {}

    def once(route: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        """What the idempotency decorator does: a delivery seen before gets its stored answer."""

        def wrapped(*, envelope: EventEnvelope) -> dict[str, Any]:
            if envelope.delivery_id not in stored:
                stored[envelope.delivery_id] = route(envelope=envelope)
            return stored[envelope.delivery_id]

        return wrapped

    dispatcher = Dispatcher(world.router, once=once)
    body = world.events.assigned(1).model_dump_json()
    first, again = dispatcher.handle(body), dispatcher.handle(body)
    assert (first["duplicate"], again["duplicate"]) == (False, True)
    assert (first["launches"], first["transitions"]) == (["start"], ["NEW>CREATED"])
    assert {**again, "duplicate": False} == first  # the first routing's summary, nothing done again
    assert len(world.launcher.launched) == 1


@pytest.mark.parametrize(
    ("repairs", "by_status", "silent", "problems", "expected"),
    [
        (
            {"relaunch": 0},
            {"ACTIVE": 0, "SLEEPING": 0},
            0,
            0,
            {"ReconcilerRuns": 1},
        ),
        (
            {"relaunch": 2, "missed_event": 1, "redelivery": 0},
            {"ACTIVE": 3, "SLEEPING": 1, "ESCALATED": 1, "CREATED": 0},
            2,
            1,
            {
                "ReconcilerRuns": 1,
                "ReconcilerProblems": 1,
                "SilentAgents": 2,
                "ReconcilerRepairs": 3,
                "AgentsByStatus": 5,
            },
        ),
    ],
    ids=["idle run: only the run itself is published (nothing billed for idle gauges)", "repairs"],
)
def test_reconcile_points(
    repairs: dict[str, int], by_status: dict[str, int], silent: int, problems: int, expected: dict[str, float]
) -> None:
    points = reconcile_points(repairs=repairs, problems=problems, by_status=by_status, silent=silent)
    assert totals(points) == expected
    # Zeros are not published: neither repairs nor statuses nor gauges.
    assert {p.dimension for p in points if p.name == "ReconcilerRepairs"} == {
        ("Kind", kind) for kind, n in repairs.items() if n
    }
    assert {p.dimension for p in points if p.name == "AgentsByStatus"} == {
        ("Status", s) for s, n in by_status.items() if n
    }


@pytest.mark.parametrize(
    ("op", "refused", "expected"),
    [
        ("github_token", None, [("GatewayCalls", ("Op", "github_token")), ("TokensVended", None)]),
        ("inbox", None, [("GatewayCalls", ("Op", "inbox"))]),
        ("begin", "wrong_secret", [("GatewayRefusals", ("Reason", "wrong_secret"))]),
        ("github_token", "replaced", [("GatewayRefusals", ("Reason", "replaced"))]),
    ],
    ids=["token", "inbox", "wrong-secret", "replaced"],
)
def test_gateway_points(
    op: str, refused: str | None, expected: list[tuple[str, tuple[str, str] | None]]
) -> None:
    assert [(p.name, p.dimension) for p in gateway_points(op, refused)] == expected


#: What every ended task publishes of what it cost.
COST = ("AgentTokens", "AgentCost")


@pytest.mark.parametrize(
    ("outcome", "tripped", "mode", "expected"),
    [
        (
            "idle",
            None,
            "create",
            {
                "AgentTasks",
                "AgentToolCalls",
                "AgentTurns",
                "AgentActiveSeconds",
                "SessionStartSeconds",
                *COST,
            },
        ),
        (
            "escalated",
            "tool_calls",
            "resume",
            {
                "AgentTasks",
                "AgentToolCalls",
                "AgentTurns",
                "AgentActiveSeconds",
                "SessionStartSeconds",
                "AgentEscalations",
                "BreakerTrips",
                *COST,
            },
        ),
        (
            "superseded",
            None,
            None,
            {"AgentTasks", "AgentToolCalls", "AgentTurns", "AgentActiveSeconds", *COST},
        ),
    ],
)
def test_agent_task_points(outcome: str, tripped: str | None, mode: str | None, expected: set[str]) -> None:
    points = agent_task_points(
        outcome=outcome,
        tool_calls=7,
        turns=3,
        active_seconds=12.34567,
        tripped=tripped,
        session_mode=mode,
        session_seconds=1.5 if mode else None,
        input_tokens=1200,
        output_tokens=80,
        cost_usd=0.0048,
    )
    assert {p.name for p in points} == expected
    assert [(p.dimension, p.value) for p in points if p.name == "AgentTokens"] == [
        (("Direction", "input"), 1200),
        (("Direction", "output"), 80),
    ]
    assert totals(points)["AgentCost"] == 0.0048
    assert totals(points)["AgentToolCalls"] == 7
    assert [p.dimension for p in points if p.name == "AgentTasks"] == [("Outcome", outcome)]
    if tripped:
        assert [p.dimension for p in points if p.name == "BreakerTrips"] == [("Limit", tripped)]


@pytest.mark.parametrize(
    ("traffic", "expected"),
    [
        (GitHubTraffic(), {}),
        (
            GitHubTraffic(calls=3),
            {"GitHubCalls": 3, "GitHubRetries": 0, "GitHubRateLimitWaits": 0, "GitHubNotModified": 0},
        ),
        (
            GitHubTraffic(calls=4, retries=1, rate_limit_waits=1, lowest_remaining=12),
            {
                "GitHubCalls": 4,
                "GitHubRetries": 1,
                "GitHubRateLimitWaits": 1,
                "GitHubRateLimitRemaining": 12,
                "GitHubNotModified": 0,
            },
        ),
        (
            GitHubTraffic(calls=5, not_modified=3),
            {"GitHubCalls": 5, "GitHubRetries": 0, "GitHubRateLimitWaits": 0, "GitHubNotModified": 3},
        ),
    ],
    ids=["no traffic: nothing published", "calls", "retries, waits and headroom", "answered from the cache"],
)
def test_github_points(traffic: GitHubTraffic, expected: dict[str, float]) -> None:
    assert totals(github_points(traffic)) == expected


def test_metric_data_publishes_each_point_as_a_total_and_a_breakdown() -> None:
    data = metric_data(
        [point("BreakerTrips", dimension="turns"), point("AgentTurns", 4)], service="agent", at=AT
    )
    assert [(d["MetricName"], d["Dimensions"], d["Value"]) for d in data] == [
        ("BreakerTrips", [{"Name": "service", "Value": "agent"}], 1.0),
        ("BreakerTrips", [{"Name": "service", "Value": "agent"}, {"Name": "Limit", "Value": "turns"}], 1.0),
        ("AgentTurns", [{"Name": "service", "Value": "agent"}], 4),
    ]


@mock_aws
def test_cloudwatch_metrics_reach_cloudwatch() -> None:
    client = boto3.client("cloudwatch")
    CloudWatchMetrics("Squadron/test", "agent", client=client).publish(
        agent_task_points(
            outcome="escalated",
            tool_calls=2,
            turns=1,
            active_seconds=3.0,
            tripped="turns",
            session_mode=None,
            session_seconds=None,
        ),
        at=AT,
    )
    listed = client.list_metrics(Namespace="Squadron/test")["Metrics"]
    names = {(m["MetricName"], tuple(sorted(d["Name"] for d in m["Dimensions"]))) for m in listed}
    assert ("BreakerTrips", ("Limit", "service")) in names
    assert ("BreakerTrips", ("service",)) in names
    assert ("AgentEscalations", ("service",)) in names


def test_emf_lines_carry_totals_and_breakdowns(capsys: pytest.CaptureFixture[str]) -> None:
    metrics = Metrics(namespace="Squadron/test", service="router")
    metrics.clear_metrics()  # Metrics instances share one set: drop what other tests left in it
    EmfMetrics(metrics).publish([point("RoutingEffects", dimension="PutAgent"), point("DeliveriesFailed")])
    metrics.flush_metrics()
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    shapes = sorted(
        (metric["Name"], tuple(sorted(directive["Dimensions"][0])))
        for line in lines
        for directive in line["_aws"]["CloudWatchMetrics"]
        for metric in directive["Metrics"]
    )
    assert shapes == [
        ("DeliveriesFailed", ("service",)),
        ("RoutingEffects", ("Effect", "service")),
        ("RoutingEffects", ("service",)),
    ]
    assert all(line["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Squadron/test" for line in lines)


def test_the_operations_page_lists_the_catalogue() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \| ([^|]*) \| ([^|]+) \|$", page, flags=re.MULTILINE)
    listed = {
        name: (publisher.strip(), dimension.strip(), text.strip())
        for name, publisher, dimension, text in rows
    }
    assert listed == {
        spec.name: (
            "every component that calls GitHub" if spec.name in GITHUB_METRICS else spec.service,
            spec.dimension or "",
            spec.description,
        )
        for spec in CATALOGUE.values()
    }


def test_disabled_metrics_are_not_kept(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    metrics = Metrics(namespace="Squadron/test", service="router")
    metrics.clear_metrics()
    sink = EmfMetrics(metrics)
    for _ in range(150):  # past Powertools' 100 values, when it prints a set whatever the flag
        sink.publish([point("RoutingEffects", dimension="PutAgent")])
    assert metrics.metric_set == {}
    assert '"_aws"' not in capsys.readouterr().out
