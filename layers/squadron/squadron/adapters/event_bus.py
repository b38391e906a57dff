"""The domain event bus: committed event items -> EventBridge, and back out for ``events tail``.

Publication (the commit point is the router's; see :mod:`squadron.domain.domain_events`):
the registry table's stream carries every inserted event item (``entity = event``) to the
publisher, which puts it on the stage's bus with its own ``detail-type``, its decision's
time and the stage stamped into the detail. A stream record can be delivered more than
once (a retried batch), so a consumer may see an event twice: its ``detail.id`` is the same
every time, and consumers (and the archive's replays) dedupe by it. An event is never
published for a decision that was not committed: its item exists only in that commit.

The same publisher runs in AWS (a Lambda on the stream) and in the local stack (a poller on
the moto server's stream, :class:`StreamReader`). ``events tail`` reads the CloudWatch Logs
group a rule of the bus delivers every event to (:class:`EventLog`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import boto3
from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from squadron.adapters.dynamo_registry import EVENT_ENTITY
from squadron.adapters.errors import AdapterError
from squadron.domain.agents import name_for_id
from squadron.domain.domain_events import SOURCE, DomainEvent

#: PutEvents takes at most ten entries.
PUT_EVENTS_BATCH = 10
_deserializer = TypeDeserializer()


class EventBusError(AdapterError):
    """EventBridge refused or failed to take events (the stream batch is retried)."""


def committed_events(records: Iterable[Mapping[str, Any]]) -> list[tuple[str, DomainEvent]]:
    """(sequence number, event) of each stream record that inserted an event item, in order.

    Records of other items, and modifications or removals (a TTL expiry), are not events.
    An event item that does not parse is a bug in its writer: raised, never skipped.
    """
    found: list[tuple[str, DomainEvent]] = []
    for record in records:
        if record.get("eventName") != "INSERT":
            continue
        change = record.get("dynamodb") or {}
        image = change.get("NewImage") or {}
        if image.get("entity", {}).get("S") != EVENT_ENTITY:
            continue
        detail = _deserializer.deserialize(image["detail"])
        found.append((str(change.get("SequenceNumber", "")), DomainEvent.from_stored(str(detail))))
    return found


@dataclass
class EventBusPublisher:
    """Puts committed events on the stage's bus (``detail.stage`` stamped here)."""

    bus_name: str
    stage: str
    _client: Any | None = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = boto3.client("events")
        return self._client

    def entry(self, event: DomainEvent) -> dict[str, Any]:
        return {
            "EventBusName": self.bus_name,
            "Source": SOURCE,
            "DetailType": event.detail_type,
            "Detail": json.dumps(event.published(self.stage).detail(), separators=(",", ":")),
            "Time": event.time,
            "Resources": [],
        }

    def publish(self, events: Sequence[DomainEvent]) -> int:
        """Put ``events`` in order, ten at a time; raises :class:`EventBusError` naming the first refusal."""
        for start in range(0, len(events), PUT_EVENTS_BATCH):
            batch = events[start : start + PUT_EVENTS_BATCH]
            try:
                answer = self.client.put_events(Entries=[self.entry(e) for e in batch])
            except (ClientError, BotoCoreError) as exc:
                raise EventBusError(f"PutEvents on {self.bus_name} failed: {exc}") from exc
            if answer.get("FailedEntryCount"):
                failed = [
                    f"{event.id} ({entry.get('ErrorCode')}: {entry.get('ErrorMessage')})"
                    for event, entry in zip(batch, answer["Entries"], strict=True)
                    if entry.get("ErrorCode")
                ]
                raise EventBusError(f"EventBridge refused {', '.join(failed)}")
        return len(events)


@dataclass
class StreamReader:
    """Reads a table's stream from its start, shard by shard (the local stack's "pipe")."""

    stream_arn: str
    _client: Any | None = None
    _iterators: dict[str, str | None] = field(default_factory=dict)

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = boto3.client("dynamodbstreams")
        return self._client

    def poll(self) -> list[dict[str, Any]]:
        """The records written since the last poll (every shard, each in order)."""
        shards = self.client.describe_stream(StreamArn=self.stream_arn)["StreamDescription"].get("Shards", [])
        records: list[dict[str, Any]] = []
        for shard in shards:
            shard_id = shard["ShardId"]
            if shard_id not in self._iterators:
                self._iterators[shard_id] = self.client.get_shard_iterator(
                    StreamArn=self.stream_arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]
            iterator = self._iterators[shard_id]
            if iterator is None:
                continue  # a closed shard, read to its end
            page = self.client.get_records(ShardIterator=iterator)
            records += page.get("Records", [])
            self._iterators[shard_id] = page.get("NextShardIterator")
        return records


@dataclass(frozen=True)
class LoggedEvent:
    """An event as the bus delivered it to the log group (the whole EventBridge event)."""

    detail_type: str
    time: datetime
    detail: Mapping[str, Any]

    @property
    def repository(self) -> str:
        return str((self.detail.get("repository") or {}).get("full_name") or "")

    def line(self) -> str:
        """``12:00:03 agent.slept.v1 octo/repo#38 feat-dev-38 blocked_by=[42]`` (the agent by its name)."""
        data = self.detail.get("data") or {}
        issue = self.detail.get("issue")
        subject = f"{self.repository}{f'#{issue}' if issue else ''}"
        agent = name_for_id(str(self.detail["agent"])) if self.detail.get("agent") else None
        facts = " ".join(f"{k}={json.dumps(v)}" for k, v in data.items() if v not in (None, "", [], {}))
        when = self.time.strftime("%H:%M:%S")
        return " ".join(part for part in (when, self.detail_type, subject, agent, facts) if part)


def parse_logged(message: str) -> LoggedEvent | None:
    """The EventBridge event a log line holds, or None (not one of ours)."""
    try:
        event = json.loads(message)
        if event.get("source") != SOURCE:
            return None
        detail = event["detail"]
        stamp = str(detail.get("time") or event.get("time"))
        return LoggedEvent(
            detail_type=str(event["detail-type"]),
            time=datetime.fromisoformat(stamp.replace("Z", "+00:00")),
            detail=detail,
        )
    except (ValueError, KeyError, TypeError, AttributeError, ValidationError):
        return None


@dataclass
class EventLog:
    """The log group every event of the bus is written to; ``follow`` yields them as they come."""

    log_group: str
    _client: Any | None = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = boto3.client("logs")
        return self._client

    def read(self, since_ms: int, seen: set[str]) -> list[LoggedEvent]:
        """Events logged since ``since_ms`` not in ``seen`` (event ids; updated), oldest first."""
        found: list[tuple[int, LoggedEvent]] = []
        kwargs: dict[str, Any] = {"logGroupName": self.log_group, "startTime": since_ms}
        while True:
            try:
                page = self.client.filter_log_events(**kwargs)
            except ClientError as exc:
                raise EventBusError(f"reading {self.log_group} failed: {exc}") from exc
            for entry in page.get("events", []):
                logged = parse_logged(str(entry.get("message", "")))
                event_id = str(logged.detail.get("id")) if logged is not None else ""
                if logged is None or event_id in seen:
                    continue  # a stream record delivered twice is shown once
                seen.add(event_id)
                found.append((int(entry.get("timestamp", 0)), logged))
            token = page.get("nextToken")
            if not token:
                break
            kwargs["nextToken"] = token
        return [logged for _, logged in sorted(found, key=lambda pair: (pair[1].time, pair[0]))]
