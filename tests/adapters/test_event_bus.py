"""Committed events through the registry's stream, the publisher, the bus and its rule to the
event log, on moto; and ``squadron events tail`` reading them back (--repo, --json)."""

from __future__ import annotations

import io
import json
import os
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from squadron.adapters.dynamo_registry import EVENT_ENTITY, EVENT_STREAM, TABLE_DEFINITION, DynamoRegistry
from squadron.adapters.event_bus import EventBusPublisher, EventLog, StreamReader, committed_events
from squadron.adapters.local_aws import provision, provision_event_bus, restore_state, save_state
from squadron.adapters.operations import Target
from squadron.cli import main
from squadron.domain.agents import AgentRecord, ConflictError, RoleKind
from squadron.domain.domain_events import (
    AgentSlept,
    DomainEvent,
    PullRequestMerged,
    Repository,
    event_id,
    make_event,
)
from squadron.domain.effects import AddLabels, AgentWrite, Decision, PutAgent
from tests.support.lambdas import FakeLambdaContext, load_handler

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
TABLE = "registry"


def _event(decision: str, index: int, repo: str, data: AgentSlept | PullRequestMerged) -> DomainEvent:
    return make_event(
        data,
        event_id=event_id(decision, index),
        at=NOW,
        repository=Repository(id=1 if repo == "octo/shop" else 2, full_name=repo),
        correlation_id=decision,
        issue=38,
        agent="1-38-feat-dev",
    )


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """A moto server (its in-process mock serves no DynamoDB Streams reads)."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    for name, value in {
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
    }.items():
        monkeypatch.setenv(name, value)
    reset = urllib.request.Request(f"http://{host}:{port}/moto-api/reset", method="POST")
    urllib.request.urlopen(reset, timeout=10).close()  # noqa: S310 (loopback)
    try:
        boto3.client("dynamodb").create_table(
            TableName=TABLE, StreamSpecification=EVENT_STREAM, **TABLE_DEFINITION
        )
        yield provision_event_bus(None)
    finally:
        server.stop()


def _publish(bus: str) -> list[DomainEvent]:
    stream = boto3.client("dynamodb").describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    events = [event for _, event in committed_events(StreamReader(stream).poll())]
    EventBusPublisher(bus, "ci").publish(events)
    return events


def test_only_committed_events_reach_the_bus_once_each(aws: tuple[str, str]) -> None:
    bus, log_group = aws
    registry = DynamoRegistry(TABLE)
    slept = _event("d1", 0, "octo/shop", AgentSlept(role="feat-dev", generation=1, blocked_by=(42,)))
    registry.commit([], Decision("d1", NOW, (), done=True), [slept])
    with pytest.raises(ConflictError):  # a retry's commit stores nothing (nor its events again)
        registry.commit([], Decision("d1", NOW, (), done=True), [slept])
    published = _publish(bus)
    assert [e.id for e in published] == [slept.id]  # the decision record and others are not events
    logged = EventLog(log_group).read(0, set())
    assert [(e.detail_type, e.detail["id"], e.detail["stage"]) for e in logged] == [
        ("agent.slept.v1", slept.id, "ci")
    ]
    assert logged[0].detail["data"]["blocked_by"] == [42]


def test_a_record_delivered_twice_is_shown_once(aws: tuple[str, str]) -> None:
    bus, log_group = aws
    merged = _event("d2", 0, "octo/shop", PullRequestMerged(pr_number=101, merged_by="alice"))
    EventBusPublisher(bus, "ci").publish([merged, merged])  # a retried stream batch
    assert len(EventLog(log_group).read(0, set())) == 1


def test_the_stream_filter_selects_event_inserts_only_though_other_items_share_the_index(
    aws: tuple[str, str],
) -> None:
    """Event items carry the history index's keys (HISTORY#<repo>), as agents (STATUS#) and open
    decisions (DECISION#OPEN#) do: the publisher's filter (INSERT of ``entity = event``, pinned in
    tests/infra) still selects exactly the committed events, and each event once."""
    registry = DynamoRegistry(TABLE)
    agent = AgentRecord(
        agent_id="1-38-feat-dev",
        role="feat-dev",
        kind=RoleKind.DEV,
        repo_id=1,
        repo_full_name="octo/shop",
        issue_number=38,
        created_at=NOW,
        updated_at=NOW,
        generation_started_at=NOW,
    )
    slept = _event("d6", 0, "octo/shop", AgentSlept(role="feat-dev", generation=1, blocked_by=(42,)))
    outside = (AddLabels("octo/shop", 77, 38, ("needs-human",)),)
    registry.commit([PutAgent(AgentWrite(agent, None))], Decision("d6", NOW, outside, done=False), [slept])
    registry.finish_decision("d6", NOW)  # a MODIFY of the decision, then the index keys removed
    stream = boto3.client("dynamodb").describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    records = StreamReader(stream).poll()
    indexed = {
        str(r["dynamodb"]["NewImage"]["GSI1PK"]["S"]).split("#")[0]
        for r in records
        if "GSI1PK" in r["dynamodb"].get("NewImage", {})
    }
    assert indexed == {"STATUS", "DECISION", "HISTORY"}  # three kinds of items on the one index
    selected = [
        r
        for r in records
        if r["eventName"] == "INSERT" and r["dynamodb"]["NewImage"].get("entity", {}).get("S") == EVENT_ENTITY
    ]
    assert [r["dynamodb"]["NewImage"]["GSI1PK"]["S"] for r in selected] == ["HISTORY#1"]
    assert [e for _, e in committed_events(records)] == [slept]
    assert registry.history(1, NOW, NOW + timedelta(seconds=1)) == [slept]


def test_a_local_restart_keeps_the_history_and_publishes_nothing_again(
    aws: tuple[str, str], tmp_path: Path
) -> None:
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    resources = provision(endpoint, webhook_secret="s" * 20, private_key_pem="key")
    registry = DynamoRegistry(resources.table_name)
    slept = _event("d7", 0, "octo/shop", AgentSlept(role="feat-dev", generation=1, blocked_by=(42,)))
    registry.commit([], Decision("d7", NOW, (), done=True), [slept])
    save_state(resources, tmp_path / "aws.json")
    again = provision(endpoint, webhook_secret="s" * 20, private_key_pem="key")  # a fresh server
    assert registry.history(1, NOW, NOW + timedelta(seconds=1)) == []
    restore_state(again, tmp_path / "aws.json")
    assert registry.history(1, NOW, NOW + timedelta(seconds=1)) == [slept]
    assert registry.decision("d7") is not None
    assert committed_events(StreamReader(again.stream_arn).poll()) == []  # nothing to publish twice


def test_a_local_restart_keeps_the_event_log_so_events_tail_shows_the_history(
    aws: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    resources = provision(endpoint, webhook_secret="s" * 20, private_key_pem="key")
    recent = datetime.now(UTC) - timedelta(hours=1)  # CloudWatch Logs takes the last 14 days
    before = [
        make_event(
            AgentSlept(role="feat-dev", generation=1, blocked_by=(n,)),
            event_id=event_id("r", n),
            at=recent + timedelta(minutes=n),
            repository=Repository(id=1, full_name="octo/shop"),
            correlation_id="r",
            issue=38,
            agent="1-38-feat-dev",
        )
        for n in range(3)
    ]
    EventBusPublisher(resources.event_bus_name, "local").publish(before)
    logged = EventLog(resources.event_log_group).read(0, set())
    assert len(logged) == 3
    saved = save_state(resources, tmp_path / "aws.json")
    assert saved["history"] == 3
    again = provision(endpoint, webhook_secret="s" * 20, private_key_pem="key")  # a fresh server
    assert EventLog(again.event_log_group).read(0, set()) == []
    assert restore_state(again, tmp_path / "aws.json")["history"] == 3
    # What `squadron events tail --local` reads after the restart: the earlier runs' events, in order.
    target = Target(
        table_name=TABLE, queue_url="q", dead_letter_queue_url="d", event_log_group=again.event_log_group
    )
    monkeypatch.setattr("squadron.adapters.operations.local_target", lambda *a, **k: target)
    out = io.StringIO()
    assert main(["events", "tail", "--local", "--once", "--since", "1d"], out=out) == 0
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and all("agent.slept.v1 octo/shop#38 feat-dev-38" in line for line in lines)
    assert [line.split("blocked_by=")[1] for line in lines] == ["[0]", "[1]", "[2]"]
    # Saved again after the restart: the history is kept once, not doubled.
    assert save_state(again, tmp_path / "aws.json")["history"] == 3


def test_a_decision_of_many_events_commits_them_with_its_record(aws: tuple[str, str]) -> None:
    """Over 100 items in all: the writes go first, the events ride with the record."""
    bus, _ = aws
    registry = DynamoRegistry(TABLE)
    events = [
        _event("big", n, "octo/shop", AgentSlept(role="feat-dev", generation=1, blocked_by=(n + 1,)))
        for n in range(150)
    ]
    registry.commit([], Decision("big", NOW, (), done=True), events)
    assert sorted(e.id for e in _publish(bus)) == sorted(e.id for e in events)


def test_events_tail_prints_one_line_per_event_of_the_repository(
    aws: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bus, log_group = aws
    publisher = EventBusPublisher(bus, "ci")
    publisher.publish(
        [
            _event("d3", 0, "octo/shop", AgentSlept(role="feat-dev", generation=1, blocked_by=(42,))),
            _event("d4", 0, "octo/other", PullRequestMerged(pr_number=7)),
        ]
    )
    target = Target(table_name=TABLE, queue_url="q", dead_letter_queue_url="d", event_log_group=log_group)
    monkeypatch.setattr("squadron.adapters.operations.stack_target", lambda *a, **k: target)
    out = io.StringIO()
    assert main(["events", "tail", "--repo", "octo/shop", "--once", "--since", "700d"], out=out) == 0
    (line,) = out.getvalue().splitlines()
    assert "agent.slept.v1 octo/shop#38 feat-dev-38" in line and "blocked_by=[42]" in line
    out = io.StringIO()
    assert main(["events", "tail", "--json", "--once", "--since", "700d"], out=out) == 0
    details = [json.loads(text) for text in out.getvalue().splitlines()]
    assert {d["detail-type"] for d in details} == {"agent.slept.v1", "pr.merged.v1"}
    assert all(d["stage"] == "ci" for d in details)


def _stream_records() -> list[dict[str, object]]:
    stream = boto3.client("dynamodb").describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    return StreamReader(stream).poll()


@pytest.mark.parametrize(
    ("bus_exists", "published", "failed"),
    [(True, 2, []), (False, 0, ["first"])],
    ids=["both events published", "a refusal hands the stream back its first record"],
)
def test_the_publisher_lambda_publishes_the_stream_batch_or_reports_where_to_resume(
    aws: tuple[str, str], monkeypatch: pytest.MonkeyPatch, bus_exists: bool, published: int, failed: list[str]
) -> None:
    bus, log_group = aws
    monkeypatch.setenv("EVENT_BUS_NAME", bus if bus_exists else "no-such-bus")
    monkeypatch.setenv("STAGE", "ci")
    registry = DynamoRegistry(TABLE)
    first = _event("d5", 0, "octo/shop", AgentSlept(role="feat-dev", generation=1))
    second = _event("d5", 1, "octo/shop", PullRequestMerged(pr_number=9))
    registry.commit([], Decision("d5", NOW, (), done=True), [first, second])
    records = _stream_records()
    module = load_handler("publisher")
    module.publisher.cache_clear()
    answer = module.handler({"Records": records}, FakeLambdaContext())
    assert answer["published"] == published
    sequences = {e.id: seq for seq, e in committed_events(records)}
    assert [f["itemIdentifier"] for f in answer["batchItemFailures"]] == [sequences[first.id] for _ in failed]
    assert len(EventLog(log_group).read(0, set())) == published
