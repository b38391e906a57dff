"""The :class:`~squadron.registry_ports.History` contract: a repository's committed events of a period, in
time order."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Protocol

import boto3
import pytest
from moto import mock_aws

from squadron.adapters.dynamo_registry import HISTORY_RETENTION, TABLE_DEFINITION, DynamoRegistry
from squadron.domain.agents import ConflictError
from squadron.domain.domain_events import (
    AgentSlept,
    AgentStarted,
    DomainEvent,
    MergeGateVerdictChanged,
    PullRequestMerged,
    Repository,
    event_id,
    gate_event_id,
    make_event,
)
from squadron.domain.effects import AgentWrite, Decision, PutAgent
from squadron.domain.history import PeriodError
from squadron.registry_ports import AgentRecords, Decisions, GateRecords, History
from tests.unit.registry.support import REPO, T0, agent, created


class Subject(History, Decisions, GateRecords, AgentRecords, Protocol):
    """History, and the commits and verdicts that write it."""


def domain_event(key: str, index: int, at: datetime, *, repo: int = REPO, issue: int = 38) -> DomainEvent:
    return make_event(
        AgentStarted(role="feat-dev", generation=1)
        if index % 2 == 0
        else AgentSlept(role="feat-dev", generation=1),
        event_id=event_id(key, index),
        at=at,
        repository=Repository(id=repo, full_name="octo/app" if repo == REPO else "octo/other"),
        correlation_id=key,
        issue=issue,
        agent=f"{repo}-{issue}-feat-dev",
    )


def committed(
    registry: Subject, key: str, at: datetime, count: int, *, repo: int = REPO
) -> list[DomainEvent]:
    events = [domain_event(key, i, at, repo=repo) for i in range(count)]
    registry.commit([], Decision(key, at, (), done=True), events)
    return events


def ordered(events: list[DomainEvent]) -> list[DomainEvent]:
    return sorted(events, key=lambda e: (e.time, e.id))


def test_history_is_a_repositorys_committed_events_of_a_period_in_time_order(
    registry: Subject,
) -> None:
    before = committed(registry, "d-before", T0 - timedelta(microseconds=1), 1)
    at_start = committed(registry, "d-start", T0, 3)
    later = committed(registry, "d-later", T0 + timedelta(days=2, microseconds=5), 2)
    committed(registry, "d-other-repo", T0 + timedelta(hours=1), 2, repo=2)
    verdict = make_event(
        MergeGateVerdictChanged(pr_number=101, verdict="ready"),
        event_id=gate_event_id("effect-1", "ready"),
        at=T0 + timedelta(days=1),
        repository=Repository(id=REPO, full_name="octo/app"),
        correlation_id="gate",
        issue=38,
    )
    assert registry.change_verdict(REPO, 101, None, verdict)
    at_end = committed(registry, "d-end", T0 + timedelta(days=7), 1)
    week = registry.history(REPO, T0, T0 + timedelta(days=7))
    assert week == [*ordered(at_start), verdict, *ordered(later)]
    # [start, end): an event exactly at the end belongs to the next period, one a microsecond
    # before the start to the previous one.
    assert registry.history(REPO, T0 + timedelta(days=7), T0 + timedelta(days=14)) == at_end
    assert registry.history(REPO, T0 - timedelta(days=1), T0) == before
    assert registry.history(REPO, T0, T0) == []
    assert [e.repository.id for e in registry.history(2, T0, T0 + timedelta(days=7))] == [2, 2]
    assert registry.history(3, T0 - timedelta(days=365), T0 + timedelta(days=365)) == []


def test_history_bounds_in_any_time_zone_name_the_same_instants(registry: Subject) -> None:
    events = committed(registry, "d-1", T0 + timedelta(hours=1), 2)
    paris = timezone(timedelta(hours=1))
    start = (T0 + timedelta(hours=1)).astimezone(paris)  # 14:00 in Paris is 13:00 UTC
    assert registry.history(REPO, start, start + timedelta(seconds=1)) == ordered(events)
    assert registry.history(REPO, start + timedelta(microseconds=1), start + timedelta(seconds=1)) == []


def test_history_returns_the_oldest_events_up_to_its_limit_across_pages(registry: Subject) -> None:
    if isinstance(registry, DynamoRegistry):
        registry.HISTORY_PAGE = 3  # every read below takes several Query pages
    events: list[DomainEvent] = []
    for n in range(5):
        events += committed(registry, f"d-{n}", T0 + timedelta(minutes=n), 2)
    period = (T0, T0 + timedelta(hours=1))
    assert registry.history(REPO, *period) == ordered(events)
    assert registry.history(REPO, *period, limit=7) == ordered(events)[:7]
    assert registry.history(REPO, *period, limit=1) == ordered(events)[:1]


BAD_PERIODS = [
    ("naive-start", T0.replace(tzinfo=None), T0, "start must be timezone-aware"),
    ("naive-both", T0.replace(tzinfo=None), T0.replace(tzinfo=None), "start and end must be timezone-aware"),
    ("end-before-start", T0, T0 - timedelta(seconds=1), "start is after end"),
]


@pytest.mark.parametrize(
    ("start", "end", "problem"),
    [case[1:] for case in BAD_PERIODS],
    ids=[case[0] for case in BAD_PERIODS],
)
def test_a_history_period_that_names_no_instants_is_a_clear_error(
    registry: Subject, start: datetime, end: datetime, problem: str
) -> None:
    committed(registry, "d-1", T0, 1)
    with pytest.raises(PeriodError, match=problem):
        registry.history(REPO, start, end)
    with pytest.raises(ValueError, match="limit must be at least 1"):
        registry.history(REPO, T0, T0 + timedelta(days=1), limit=0)


def test_a_decision_that_loses_a_condition_leaves_no_history(registry: Subject) -> None:
    stored = created(registry, agent())
    registry.put_agent(AgentWrite(stored.updated(now=T0), stored.version))  # a heartbeat moves it
    event = domain_event("d-lost", 0, T0)
    with pytest.raises(ConflictError):
        registry.commit(
            [PutAgent(AgentWrite(stored.updated(now=T0, wake_reason="x"), stored.version))],
            Decision("d-lost", T0, (), done=True),
            [event],
        )
    assert registry.history(REPO, T0, T0 + timedelta(days=1)) == []


def test_history_items_live_for_the_stages_retention() -> None:
    with mock_aws():
        client = boto3.client("dynamodb")
        client.create_table(TableName="registry", **TABLE_DEFINITION)
        for days, table_registry in (
            (120, DynamoRegistry("registry", client=client)),
            (30, DynamoRegistry("registry", client=client, history_retention=timedelta(days=30))),
        ):
            merged = make_event(
                PullRequestMerged(pr_number=101),
                event_id=event_id(f"d-{days}", 0),
                at=T0,
                repository=Repository(id=REPO, full_name="octo/app"),
                correlation_id=f"d-{days}",
            )
            table_registry.commit([], Decision(f"d-{days}", T0, (), done=True), [merged])
            item = client.get_item(
                TableName="registry", Key={"PK": {"S": f"EVENT#{merged.id}"}, "SK": {"S": "EVENT"}}
            )
            assert int(item["Item"]["expires_at"]["N"]) == int((T0 + timedelta(days=days)).timestamp())
            assert item["Item"]["GSI1PK"] == {"S": f"HISTORY#{REPO}"}
            assert item["Item"]["GSI1SK"] == {"S": f"2026-11-23T12:00:00.000000Z#{merged.id}"}
        assert timedelta(days=120) == HISTORY_RETENTION
        with pytest.raises(ValueError, match="must be positive"):
            DynamoRegistry("registry", client=client, history_retention=timedelta(0))


def test_an_event_recorded_alone_is_stored_once_and_is_history(registry: Subject) -> None:
    """A pipeline's transition is recorded outside a decision: every attempt after the first
    stores nothing (the stream publishes an item once), and a stored event is the repository's
    history like a committed decision's."""
    event = domain_event("pipeline-entry", 0, T0)
    assert registry.record_event(event) is True
    again = make_event(
        PullRequestMerged(pr_number=9),  # a second attempt that would say otherwise changes nothing
        event_id=event.id,
        at=T0 + timedelta(seconds=1),
        repository=Repository(id=REPO, full_name="octo/app"),
        correlation_id="pipeline-entry",
    )
    assert registry.record_event(again) is False
    assert registry.record_event(event) is False
    assert registry.history(REPO, T0, T0 + timedelta(days=1)) == [event]
