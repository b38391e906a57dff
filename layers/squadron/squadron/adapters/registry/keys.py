"""The registry table's shape, its keys and how items are (de)serialized: what every port's
adapter of the table shares (see :mod:`squadron.adapters.dynamo_registry` for the access patterns)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from squadron.domain.agents import TERMINAL, AgentRecord, InboxItem, parse_agent_id
from squadron.domain.history import DEFAULT_HISTORY_DAYS, utc_instant
from squadron.domain.retention import finished_at

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import StreamSpecificationTypeDef


STATUS_INDEX = "by-status"
#: An agent held by a staged decision (:mod:`squadron.adapters.staged_decisions`) names it here;
#: an agent a staged decision creates is a placeholder of this entity until it is applied.
HELD_BY = "held_by"
HELD_ENTITY = "held"
TTL_ATTRIBUTE = "expires_at"
#: How long a decision record is kept (a redelivery within it is recognised as done).
DECISION_RETENTION = timedelta(days=14)
#: Unfinished decisions spread over this many GSI partitions (a burst never heats one key).
DECISION_SHARDS = 8
#: TransactWriteItems takes at most 100 items.
TRANSACTION_ITEMS = 100
#: BatchGetItem takes at most 100 keys.
BATCH_GET_KEYS = 100
#: How long a committed event's item is kept by default: the stream carries its insert to the bus
#: within seconds, and the item stays as the repository's history (:meth:`DynamoRegistry.history`,
#: what retrospectives are computed from) until DynamoDB's TTL removes it. Each stage sets its own
#: (``SQUADRON_HISTORY_DAYS``).
HISTORY_RETENTION = timedelta(days=DEFAULT_HISTORY_DAYS)
#: The ``entity`` of event items: the publisher's stream filter selects inserts of these.
EVENT_ENTITY = "event"
#: The ``entity`` of an event item put back as history only (the local stack's restart): it is on
#: the history index like any event, and its insert is no commit to publish.
HISTORY_ENTITY = "history"
#: The table's stream: new images, which carry committed event items to the publisher.
EVENT_STREAM: StreamSpecificationTypeDef = {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}

#: The table's shape; the CDK construct and the tests create it from this.
TABLE_DEFINITION: dict[str, Any] = {
    "KeySchema": [
        {"AttributeName": "PK", "KeyType": "HASH"},
        {"AttributeName": "SK", "KeyType": "RANGE"},
    ],
    "AttributeDefinitions": [
        {"AttributeName": "PK", "AttributeType": "S"},
        {"AttributeName": "SK", "AttributeType": "S"},
        {"AttributeName": "GSI1PK", "AttributeType": "S"},
        {"AttributeName": "GSI1SK", "AttributeType": "S"},
    ],
    "GlobalSecondaryIndexes": [
        {
            "IndexName": STATUS_INDEX,
            "KeySchema": [
                {"AttributeName": "GSI1PK", "KeyType": "HASH"},
                {"AttributeName": "GSI1SK", "KeyType": "RANGE"},
            ],
            "Projection": {"ProjectionType": "ALL"},
        }
    ],
    "BillingMode": "PAY_PER_REQUEST",
}

_KEY_ATTRIBUTES = ("PK", "SK", "GSI1PK", "GSI1SK", "entity", "lease_expires_epoch", HELD_BY)
_serializer = TypeSerializer()
deserializer = TypeDeserializer()


# --- keys and (de)serialization ------------------------------------------------------------------


def issue_pk(repo_id: int, number: int) -> str:
    return f"ISSUE#{repo_id}#{number}"


def agent_key(agent_id: str) -> dict[str, str]:
    repo_id, issue, role = parse_agent_id(agent_id)
    pk = f"REPO#{repo_id}" if issue is None else issue_pk(repo_id, issue)
    return {"PK": pk, "SK": f"AGENT#{role}"}


def epoch_us(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000)


def dump_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """An item as DynamoDB's attribute values (for every adapter of the table)."""
    return {key: _serializer.serialize(value) for key, value in item.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, set, frozenset)):
        return [_plain(v) for v in value]
    return value


def load_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """An item from DynamoDB's attribute values, numbers as ``int`` or ``float``."""
    return {key: _plain(deserializer.deserialize(value)) for key, value in item.items()}


#: Where purged agents sort in their status's partition: after every date, so the janitor's
#: range ("finished before the cutoff") never reads them again.
PURGED_SORT_PREFIX = "purged#"


def sortable(at: datetime) -> str:
    """A UTC time of fixed width, so that sort keys order as the times do."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _status_sort_key(record: AgentRecord, updated: str) -> str:
    """The agent's sort key in its status's partition: when it was last updated; a finished one
    by when it finished (the janitor's order), a purged one after them all."""
    if record.status not in TERMINAL:
        return f"{updated}#{record.agent_id}"
    if record.purged_at is not None:
        return f"{PURGED_SORT_PREFIX}{record.agent_id}"
    finished = finished_at(record) or record.updated_at
    return f"{sortable(finished)}#{record.agent_id}"


def agent_item(record: AgentRecord) -> dict[str, Any]:
    data = record.model_dump(mode="json")
    return {
        **data,
        **agent_key(record.agent_id),
        "entity": "agent",
        "GSI1PK": f"STATUS#{record.status}",
        "GSI1SK": _status_sort_key(record, data["updated_at"]),
        "lease_expires_epoch": epoch_us(record.lease_expires_at) if record.lease_expires_at else None,
    }


def agent_from(item: Mapping[str, Any]) -> AgentRecord:
    data = {key: value for key, value in item.items() if key not in _KEY_ATTRIBUTES}
    return AgentRecord.model_validate(data)


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def history_pk(repo_id: int) -> str:
    return f"HISTORY#{repo_id}"


def history_time(at: datetime) -> str:
    """A time as a history sort key: UTC, microseconds, fixed width (so text order is time order)."""
    return utc_instant(at).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def inbox_item(item: InboxItem) -> dict[str, Any]:
    parse_agent_id(item.agent_id)
    fields = item.model_dump(mode="json", exclude={"expires_at"})
    if item.expires_at is not None:  # the table's TTL: epoch seconds
        fields[TTL_ATTRIBUTE] = int(item.expires_at.timestamp())
    return dump_item({**fields, "PK": f"INBOX#{item.agent_id}", "SK": inbox_sk(item), "entity": "inbox"})


def inbox_sk(item: InboxItem) -> str:
    return f"{item.received_at.isoformat()}#{item.delivery_id}#{item.kind}"


def iso(at: datetime) -> str:
    """Datetimes as pydantic writes them in JSON (``Z`` for UTC), so records round-trip."""
    text = at.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text
