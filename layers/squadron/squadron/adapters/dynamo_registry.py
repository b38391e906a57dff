"""The agent registry on one DynamoDB table: the :class:`~squadron.ports.Registry` port.

Access patterns and where they live (``PK`` / ``SK``; ``<r>`` repository id):

=====================================  =========================================  ==============
What                                   Item                                       Read with
=====================================  =========================================  ==============
an issue's agents (one per role)       ``ISSUE#<r>#<n>`` / ``AGENT#<role>``       Query on PK
the repository's PM                    ``REPO#<r>`` / ``AGENT#pm``                GetItem
an agent by id                         (the id names its partition and role)      GetItem
issue state, App assignment            ``ISSUE#<r>#<n>`` / ``STATE``              Query on PK
"#n is blocked by #b"                  ``ISSUE#<r>#<n>`` / ``BLOCKED_BY#<b>``     Query on PK
"who is blocked by #b" (reverse edge)  ``ISSUE#<r>#<b>`` / ``BLOCKS#<n>``         Query on PK
PR → issue                             ``ISSUE#<r>#<pr>`` / ``PRLINK``            Query on PK
issue → PRs                            ``ISSUE#<r>#<n>`` / ``PR#<pr>``            Query on PK
branch → issue                         ``BRANCH#<r>#<branch>`` / ``BRANCH``       GetItem
reviews of a PR, latest per reviewer   ``ISSUE#<r>#<pr>`` / ``REVIEW#<login>``    Query on PK
an agent's inbox, oldest first         ``INBOX#<agent>`` / ``<time>#<delivery>#<kind>``  Query on PK
agents by status (reconciler)          GSI ``by-status``: ``STATUS#<s>`` / ``<updated>#<agent>``  Query on GSI
finished agents whose state is kept    GSI ``by-status``: ``STATUS#<COMPLETED|CANCELLED>`` /      Query on GSI
  (the janitor, through the gateway)   ``<finished>#<agent>`` (``purged#<agent>`` once purged)
who owns a POSIX uid (agent gateway)   ``UID#<uid>`` / ``UID``                    PutItem (claim)
a committed decision (the outbox)      ``DECISION#<delivery>`` / ``DECISION``     GetItem
decisions not carried out yet          GSI ``by-status``: ``DECISION#OPEN#<s>`` / ``<time>#<key>``  Query on GSI
a committed domain event (the stream)  ``EVENT#<event id>`` / ``EVENT``           the table's stream
a repository's history, by time        GSI ``by-status``: ``HISTORY#<r>`` / ``<time>#<event id>``  Query on GSI
the gate's verdict and what it said    ``ISSUE#<r>#<pr>`` / ``GATE``              GetItem, BatchGetItem
=====================================  =========================================  ==============

So everything the router needs about one number is one Query on its
partition (:meth:`DynamoRegistry.issue_view`), and no read is ever a Scan.
Every write is conditional: agents on their ``version`` (or on not existing
yet), state and assignment on the GitHub time of the news they carry, reviews
on the review id, inbox items on not existing, launch confirmations on the
pending launch token, leases on the current holder. Writes that span items
(an edge and its reverse, an agent and its branch or PR link) are one
TransactWriteItems. A lost condition raises
:class:`~squadron.domain.agents.ConflictError`; a write whose condition only
guards against older news is a silent no-op, as in the in-memory fake.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import boto3
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import BotoCoreError, ClientError

from squadron.adapters.decision_outbox import DecisionOutbox
from squadron.adapters.errors import AdapterError
from squadron.adapters.staged_decisions import LOCKING, StagedDecisions
from squadron.domain.agents import (
    TERMINAL,
    AgentRecord,
    AgentStatus,
    ConflictError,
    InboxItem,
    IssueState,
    RegistryError,
    RoleKind,
    candidate_uid,
    parse_agent_id,
)
from squadron.domain.dashboard import GateView
from squadron.domain.domain_events import DomainEvent
from squadron.domain.effects import (
    AddBlocker,
    AgentWrite,
    Decision,
    DeliverInbox,
    LinkPullRequest,
    PutAgent,
    RecordReview,
    RemoveBlocker,
    Write,
    commit_agents,
)
from squadron.domain.history import DEFAULT_HISTORY_DAYS, MAX_HISTORY_EVENTS, check_period, utc_instant
from squadron.domain.issue_budget import LiveSpend
from squadron.domain.retention import finished_at
from squadron.domain.routing import IssueView
from squadron.domain.usage import ModelTokens
from squadron.domain.writes import MAX_WRITE_RESULT_BYTES, WRITE_RETENTION, WriteClaim

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
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
_deserializer = TypeDeserializer()


class RegistryUnavailableError(AdapterError):
    """DynamoDB failed for a reason other than a lost condition."""


# --- keys and (de)serialization ------------------------------------------------------------------


#: The sort key of a running task's spend in its costed issue's partition, and how long it is kept.
LIVE_PREFIX = "LIVE#"
LIVE_RETENTION = timedelta(days=7)


def _live_from(item: Mapping[str, Any]) -> LiveSpend:
    return LiveSpend(
        agent_id=str(item["SK"]).removeprefix(LIVE_PREFIX),
        launch_token=str(item.get("launch_token") or ""),
        tokens=tuple(ModelTokens.model_validate(t) for t in json.loads(str(item.get("tokens") or "[]"))),
        active_seconds=int(item.get("active_seconds") or 0),
        at=datetime.fromisoformat(str(item["at"])) if item.get("at") else None,
    )


def issue_pk(repo_id: int, number: int) -> str:
    return f"ISSUE#{repo_id}#{number}"


def _agent_key(agent_id: str) -> dict[str, str]:
    repo_id, issue, role = parse_agent_id(agent_id)
    pk = f"REPO#{repo_id}" if issue is None else issue_pk(repo_id, issue)
    return {"PK": pk, "SK": f"AGENT#{role}"}


def _epoch_us(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000)


def _dump(item: Mapping[str, Any]) -> dict[str, Any]:
    return {key: _serializer.serialize(value) for key, value in item.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, set, frozenset)):
        return [_plain(v) for v in value]
    return value


def _load(item: Mapping[str, Any]) -> dict[str, Any]:
    return {key: _plain(_deserializer.deserialize(value)) for key, value in item.items()}


#: An item to DynamoDB's attribute values and back (for the other adapters of the table).
dump_item = _dump
load_item = _load
#: Where purged agents sort in their status's partition: after every date, so the janitor's
#: range ("finished before the cutoff") never reads them again.
PURGED_SORT_PREFIX = "purged#"


def _sortable(at: datetime) -> str:
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
    return f"{_sortable(finished)}#{record.agent_id}"


def _agent_item(record: AgentRecord) -> dict[str, Any]:
    data = record.model_dump(mode="json")
    return {
        **data,
        **_agent_key(record.agent_id),
        "entity": "agent",
        "GSI1PK": f"STATUS#{record.status}",
        "GSI1SK": _status_sort_key(record, data["updated_at"]),
        "lease_expires_epoch": _epoch_us(record.lease_expires_at) if record.lease_expires_at else None,
    }


def _agent_from(item: Mapping[str, Any]) -> AgentRecord:
    data = {key: value for key, value in item.items() if key not in _KEY_ATTRIBUTES}
    return AgentRecord.model_validate(data)


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def history_pk(repo_id: int) -> str:
    return f"HISTORY#{repo_id}"


def history_time(at: datetime) -> str:
    """A time as a history sort key: UTC, microseconds, fixed width (so text order is time order)."""
    return utc_instant(at).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class DynamoTable:
    """One DynamoDB table and the plumbing its adapters share (errors named, queries paged)."""

    def __init__(self, table_name: str, *, client: DynamoDBClient | None = None) -> None:
        self.table_name = table_name
        self._client = client

    @property
    def client(self) -> DynamoDBClient:
        if self._client is None:
            self._client = boto3.client("dynamodb")
        return self._client

    # --- plumbing ---------------------------------------------------------------------------

    def _call(self, operation: str, **kwargs: Any) -> Any:
        try:
            return getattr(self.client, operation)(**kwargs)
        except ClientError as exc:
            if _error_code(exc) in ("ConditionalCheckFailedException", "TransactionCanceledException"):
                raise
            error = exc.response.get("Error", {})
            raise RegistryUnavailableError(
                f"DynamoDB {operation} on {self.table_name} failed: {error.get('Message', exc)}",
                code=error.get("Code"),
            ) from exc
        except BotoCoreError as exc:
            raise RegistryUnavailableError(
                f"DynamoDB {operation} on {self.table_name} failed: {exc}"
            ) from exc

    def _query(self, **kwargs: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        request = {"TableName": self.table_name, **kwargs}
        while True:
            page = self._call("query", **request)
            items += [_load(item) for item in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                return items
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _partition(self, pk: str) -> list[dict[str, Any]]:
        return self._query(
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues={":pk": {"S": pk}},
            ConsistentRead=True,
        )


class DynamoRegistry(DynamoTable, DecisionOutbox, StagedDecisions):
    """The agent registry (:class:`~squadron.ports.Registry`) on its table."""

    #: Events one history Query page asks for (DynamoDB also cuts a page at 1 MB).
    HISTORY_PAGE = 1000

    def __init__(
        self,
        table_name: str,
        *,
        client: DynamoDBClient | None = None,
        history_retention: timedelta = HISTORY_RETENTION,
    ) -> None:
        if history_retention <= timedelta(0):
            raise ValueError(f"history retention must be positive, got {history_retention}")
        super().__init__(table_name, client=client)
        self.history_retention = history_retention

    def _agent_put(self, write: AgentWrite) -> dict[str, Any]:
        """The Put of an agent write, conditional on its expected version."""
        put: dict[str, Any] = {"TableName": self.table_name, "Item": _dump(_agent_item(write.record))}
        if write.expected_version is None:
            put["ConditionExpression"] = "attribute_not_exists(PK)"
        else:
            # Not while a staged decision holds the agent (it read this version and will write it).
            put["ConditionExpression"] = "version = :expected AND attribute_not_exists(held_by)"
            put["ExpressionAttributeValues"] = {":expected": {"N": str(write.expected_version)}}
        return put

    def _branch_put(self, record: AgentRecord) -> dict[str, Any] | None:
        if not (record.branch and record.issue_number is not None and record.kind is RoleKind.DEV):
            return None
        item = {
            "PK": f"BRANCH#{record.repo_id}#{record.branch}",
            "SK": "BRANCH",
            "entity": "branch",
            "issue_number": record.issue_number,
        }
        return {"TableName": self.table_name, "Item": _dump(item)}

    def _transact(self, parts: Sequence[tuple[str, dict[str, Any], str]]) -> None:
        """Write ``parts`` ((kind, request, what) triples) all or nothing; name the lost condition."""
        try:
            self._call("transact_write_items", TransactItems=[{kind: request} for kind, request, _ in parts])
        except ClientError as exc:
            reasons = exc.response.get("CancellationReasons", [])
            lost = [
                parts[i][2]
                for i, reason in enumerate(reasons)
                if reason.get("Code") == "ConditionalCheckFailed"
            ]
            what, _, detail = (lost[0] if lost else "a transaction: its condition failed").partition(": ")
            raise ConflictError(what, detail) from exc

    def _write_agent(self, write: AgentWrite, *extra: tuple[str, dict[str, Any], str]) -> None:
        expected = write.expected_version
        detail = "already exists" if expected is None else f"expected version {expected}"
        what = f"agent {write.record.agent_id}"
        branch = self._branch_put(write.record)
        parts = [("Put", self._agent_put(write), f"{what}: {detail}"), *extra]
        if branch is not None:
            parts.append(("Put", branch, f"branch {write.record.branch}: not written"))
        if len(parts) > 1:
            self._transact(parts)
            return
        try:
            self._call("put_item", **self._agent_put(write))
        except ClientError as exc:
            raise ConflictError(what, detail) from exc

    # --- reads -------------------------------------------------------------------------------

    def issue_view(self, repo_id: int, number: int) -> IssueView:
        agents: list[AgentRecord] = []
        state: dict[str, Any] = {}
        blockers: set[int] = set()
        blocks: set[int] = set()
        linked: int | None = None
        prs: set[int] = set()
        live: dict[str, LiveSpend] = {}
        pk = issue_pk(repo_id, number)
        for item in self._unheld(self._partition(pk), lambda: self._partition(pk)):
            sk: str = item["SK"]
            if sk.startswith("AGENT#"):
                agents.append(_agent_from(item))
            elif sk == "STATE":
                state = item
            elif sk.startswith("BLOCKED_BY#"):
                if not item.get("resolved"):
                    blockers.add(int(sk.removeprefix("BLOCKED_BY#")))
            elif sk.startswith("BLOCKS#"):
                blocks.add(int(sk.removeprefix("BLOCKS#")))
            elif sk == "PRLINK":
                linked = int(item["issue_number"])
            elif sk.startswith("PR#"):
                prs.add(int(sk.removeprefix("PR#")))
            elif sk.startswith(LIVE_PREFIX):
                spend = _live_from(item)
                live[spend.agent_id] = spend
        return IssueView(
            number=number,
            state=IssueState(state["state"]) if state.get("state") else None,
            state_at=datetime.fromisoformat(state["state_at"]) if state.get("state_at") else None,
            app_assigned=state.get("app_assigned"),
            assigned_at=datetime.fromisoformat(state["assigned_at"]) if state.get("assigned_at") else None,
            vouched_by=state.get("vouched_by"),
            agents=tuple(sorted(agents, key=lambda a: a.agent_id)),
            blockers=frozenset(blockers),
            blocks=frozenset(blocks),
            linked_issue=linked,
            pull_requests=frozenset(prs),
            live=live,
        )

    def record_live_spend(self, repo_id: int, issue: int, spend: LiveSpend) -> None:
        """Keep what a running task has spent so far in its costed issue's partition (``LIVE#<agent>``).

        The agent gateway writes it for the task's host before each model call it admits; one
        item per agent, replaced each time (the host sends them one at a time), gone a week
        after its last report. It counts only while it is the agent's running launch's
        (:func:`squadron.domain.issue_budget.live_counts`).
        """
        at = spend.at or datetime.now(UTC)
        item = {
            "PK": issue_pk(repo_id, issue),
            "SK": f"{LIVE_PREFIX}{spend.agent_id}",
            "entity": "live_spend",
            "launch_token": spend.launch_token,
            "tokens": json.dumps([t.model_dump(mode="json") for t in spend.tokens], separators=(",", ":")),
            "active_seconds": spend.active_seconds,
            "at": _iso(at),
            TTL_ATTRIBUTE: int((at + LIVE_RETENTION).timestamp()),
        }
        self._call("put_item", TableName=self.table_name, Item=_dump(item))

    def branch_links(self, repo_id: int, branches: Iterable[str]) -> dict[str, int]:
        links: dict[str, int] = {}
        for branch in dict.fromkeys(branches):
            response = self._call(
                "get_item",
                TableName=self.table_name,
                Key=_dump({"PK": f"BRANCH#{repo_id}#{branch}", "SK": "BRANCH"}),
                ConsistentRead=True,
            )
            if "Item" in response:
                links[branch] = int(_load(response["Item"])["issue_number"])
        return links

    def get_agent(self, agent_id: str) -> AgentRecord | None:
        def read() -> list[dict[str, Any]]:
            response = self._call(
                "get_item", TableName=self.table_name, Key=_dump(_agent_key(agent_id)), ConsistentRead=True
            )
            return [_load(response["Item"])] if "Item" in response else []

        found = self._unheld(read(), read)
        return _agent_from(found[0]) if found else None

    def _unheld(
        self, items: list[dict[str, Any]], read_again: Callable[[], list[dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        """``items`` as they are once the staged decisions holding any of them are carried to their
        end (:mod:`squadron.adapters.staged_decisions`): a reader never sees half of one. An agent
        held again meanwhile is as stored; a placeholder (an agent not created yet) is left out."""
        held = sorted({str(item[HELD_BY]) for item in items if item.get(HELD_BY)})
        for key in held:
            self.drive(key)
        found = read_again() if held else items
        return [item for item in found if item.get("entity") != HELD_ENTITY]

    def pm_agent(self, repo_id: int) -> AgentRecord | None:
        return self.get_agent(f"{repo_id}-pm")

    def blocker_graph(self, repo_id: int, roots: Iterable[int], max_hops: int) -> dict[int, frozenset[int]]:
        """Breadth-first over the edge items: one Query per issue reached, never a Scan."""
        graph: dict[int, set[int]] = {}
        seen = set(roots)
        frontier = deque((root, 0) for root in seen)
        while frontier:
            node, hops = frontier.popleft()
            if hops > max_hops:
                continue
            items = self._query(
                KeyConditionExpression="PK = :pk AND begins_with(SK, :b)",
                FilterExpression="resolved = :open",
                ExpressionAttributeValues={
                    ":pk": {"S": issue_pk(repo_id, node)},
                    ":b": {"S": "B"},  # BLOCKED_BY# and BLOCKS#
                    ":open": {"BOOL": False},
                },
                ConsistentRead=True,
            )
            for item in items:
                sk: str = item["SK"]
                if sk.startswith("BLOCKED_BY#"):
                    issue, blocker = node, int(sk.removeprefix("BLOCKED_BY#"))
                elif sk.startswith("BLOCKS#"):
                    issue, blocker = int(sk.removeprefix("BLOCKS#")), node
                else:
                    continue
                graph.setdefault(issue, set()).add(blocker)
                for nxt in (issue, blocker):
                    if nxt not in seen:
                        seen.add(nxt)
                        frontier.append((nxt, hops + 1))
        return {issue: frozenset(blockers) for issue, blockers in graph.items()}

    def pending_inbox(self, agent_id: str) -> list[InboxItem]:
        """The agent's inbox, oldest first."""
        items = self._query(
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues={":pk": {"S": f"INBOX#{agent_id}"}},
            ConsistentRead=True,
        )
        return [
            InboxItem.model_validate({k: v for k, v in item.items() if k not in ("PK", "SK", "entity")})
            for item in items
        ]

    def ack_inbox(self, agent_id: str, items: list[InboxItem]) -> None:
        """Remove items the agent has read (deleting an absent item is a no-op)."""
        for item in items:
            self._call(
                "delete_item",
                TableName=self.table_name,
                Key=_dump({"PK": f"INBOX#{agent_id}", "SK": _inbox_sk(item)}),
            )

    def reviews_of(self, repo_id: int, pr_number: int) -> dict[str, RecordReview]:
        """The latest review of each reviewer of a pull request."""
        items = self._query(
            KeyConditionExpression="PK = :pk AND begins_with(SK, :r)",
            ExpressionAttributeValues={":pk": {"S": issue_pk(repo_id, pr_number)}, ":r": {"S": "REVIEW#"}},
            ConsistentRead=True,
        )
        return {
            item["reviewer"]: RecordReview(
                repo_id,
                pr_number,
                item["reviewer"],
                item["state"],
                item.get("commit_id"),
                int(item["review_id"]),
            )
            for item in items
        }

    def history(
        self, repo_id: int, start: datetime, end: datetime, limit: int = MAX_HISTORY_EVENTS
    ) -> list[DomainEvent]:
        """The repository's committed events of ``[start, end)``, oldest first (at most ``limit``).

        One Query on the history index, paged: its sort key is the event's time then its id, so
        the index returns them in order and the bounds are key conditions (an event exactly at
        ``end`` sorts after ``<end>`` and is left out). The index is eventually consistent: an
        event committed a moment ago may be missing. An event past its retention may linger
        until DynamoDB's TTL deletes it (within days of expiry), so a period older than the
        retention is incomplete. ``limit`` events returned may mean more exist after them.
        """
        check_period(start, end)
        if limit < 1:
            raise ValueError(f"history limit must be at least 1, got {limit}")
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": STATUS_INDEX,
            "KeyConditionExpression": "GSI1PK = :pk AND GSI1SK BETWEEN :start AND :end",
            "ExpressionAttributeValues": _dump(
                {":pk": history_pk(repo_id), ":start": history_time(start), ":end": history_time(end)}
            ),
            "ProjectionExpression": "#detail",
            "ExpressionAttributeNames": {"#detail": "detail"},
        }
        found: list[DomainEvent] = []
        while len(found) < limit:
            page = self._call("query", **request, Limit=min(limit - len(found), self.HISTORY_PAGE))
            for item in page.get("Items", []):
                found.append(DomainEvent.from_stored(str(_deserializer.deserialize(item["detail"]))))
            if "LastEvaluatedKey" not in page:
                break
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return found[:limit]

    def agents_with_status(self, status: AgentStatus) -> list[AgentRecord]:
        """Every agent in ``status`` (the reconciler's sweep), oldest update first (finished ones by
        their finish, purged ones last)."""
        items = self._query(
            IndexName=STATUS_INDEX,
            KeyConditionExpression="GSI1PK = :s",
            ExpressionAttributeValues={":s": {"S": f"STATUS#{status}"}},
        )
        return [_agent_from(item) for item in items]

    def finished_agents(self, before: datetime, limit: int) -> list[AgentRecord]:
        """Up to ``limit`` finished agents whose state was not purged, finished before ``before``,
        the longest finished first: one bounded page of the status index per terminal status
        (eventually consistent: a write conditional on the version settles what to do)."""
        found: list[tuple[str, AgentRecord]] = []
        for status in sorted(TERMINAL):
            page = self._call(
                "query",
                TableName=self.table_name,
                IndexName=STATUS_INDEX,
                KeyConditionExpression="GSI1PK = :s AND GSI1SK < :before",
                ExpressionAttributeValues={
                    ":s": {"S": f"STATUS#{status}"},
                    ":before": {"S": _sortable(before)},
                },
                Limit=limit,
            )
            for item in page.get("Items", []):
                loaded = _load(item)
                found.append((str(loaded["GSI1SK"]), _agent_from(loaded)))
        return [record for _, record in sorted(found, key=lambda pair: pair[0])[:limit]]

    def recently_finished(self, limit: int) -> list[AgentRecord]:
        """Up to ``limit`` agents of each terminal status that finished last (their state not
        purged yet), newest first: one bounded page of the status index each (the dashboards'
        "Recently ended"; eventually consistent)."""
        found: list[tuple[str, AgentRecord]] = []
        for status in sorted(TERMINAL):
            page = self._call(
                "query",
                TableName=self.table_name,
                IndexName=STATUS_INDEX,
                KeyConditionExpression="GSI1PK = :s AND GSI1SK < :purged",
                ExpressionAttributeValues={
                    ":s": {"S": f"STATUS#{status}"},
                    ":purged": {"S": PURGED_SORT_PREFIX},
                },
                ScanIndexForward=False,
                Limit=limit,
            )
            for item in page.get("Items", []):
                loaded = _load(item)
                found.append((str(loaded["GSI1SK"]), _agent_from(loaded)))
        return [record for _, record in sorted(found, key=lambda pair: pair[0], reverse=True)]

    # --- writes ------------------------------------------------------------------------------

    def put_agent(self, write: AgentWrite) -> None:
        self._write_agent(write)

    def _set_news(
        self, repo_id: int, number: int, fields: dict[str, Any], at_name: str, at: datetime
    ) -> None:
        names = {f"#{key}": key for key in fields} | {"#at": at_name, "#epoch": f"{at_name}_epoch"}
        values = {f":{key}": value for key, value in fields.items()} | {
            ":at": at.isoformat(),
            ":epoch": _epoch_us(at),
        }
        assignments = ", ".join(f"#{key} = :{key}" for key in fields)
        try:
            self._call(
                "update_item",
                TableName=self.table_name,
                Key=_dump({"PK": issue_pk(repo_id, number), "SK": "STATE"}),
                UpdateExpression=f"SET {assignments}, #at = :at, #epoch = :epoch",
                ConditionExpression="attribute_not_exists(#epoch) OR #epoch <= :epoch",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=_dump(values),
            )
        except ClientError:
            return  # newer news is stored: this older event changes nothing

    def set_issue_state(self, repo_id: int, number: int, state: IssueState, at: datetime) -> None:
        self._set_news(repo_id, number, {"state": str(state)}, "state_at", at)

    def set_issue_assignment(self, repo_id: int, number: int, assigned: bool, at: datetime) -> None:
        self._set_news(repo_id, number, {"app_assigned": assigned}, "assigned_at", at)

    def vouch_issue(self, repo_id: int, number: int, by: str, at: datetime) -> None:
        self._set_news(repo_id, number, {"vouched_by": by}, "vouched_at", at)

    def _edge(
        self, repo_id: int, issue: int, blocker: int, *, resolved: bool
    ) -> list[tuple[str, dict[str, Any], str]]:
        forward = {
            "PK": issue_pk(repo_id, issue),
            "SK": f"BLOCKED_BY#{blocker}",
            "entity": "edge",
            "resolved": resolved,
        }
        reverse = {
            "PK": issue_pk(repo_id, blocker),
            "SK": f"BLOCKS#{issue}",
            "entity": "edge",
            "resolved": resolved,
        }
        return [
            ("Put", {"TableName": self.table_name, "Item": _dump(forward)}, f"edge #{issue} -> #{blocker}"),
            ("Put", {"TableName": self.table_name, "Item": _dump(reverse)}, f"edge #{blocker} <- #{issue}"),
        ]

    def add_blocker(
        self, repo_id: int, issue: int, blocker: int, agent: AgentWrite | None, at: datetime
    ) -> None:
        parts = self._add_blocker_parts(repo_id, issue, blocker)
        if agent is not None:
            self._write_agent(agent, *parts)
        else:
            self._transact(parts)

    def _add_blocker_parts(
        self, repo_id: int, issue: int, blocker: int
    ) -> list[tuple[str, dict[str, Any], str]]:
        open_blocker = (
            "ConditionCheck",
            {
                "TableName": self.table_name,
                "Key": _dump({"PK": issue_pk(repo_id, blocker), "SK": "STATE"}),
                "ConditionExpression": "attribute_not_exists(#state) OR #state <> :closed",
                "ExpressionAttributeNames": {"#state": "state"},
                "ExpressionAttributeValues": {":closed": {"S": str(IssueState.CLOSED)}},
            },
            f"blocker #{blocker}: it is closed",
        )
        return [open_blocker, *self._edge(repo_id, issue, blocker, resolved=False)]

    def remove_blocker(
        self, repo_id: int, issue: int, blocker: int, agent: AgentWrite | None, at: datetime
    ) -> None:
        parts = self._remove_blocker_parts(repo_id, issue, blocker)
        if agent is not None:
            self._write_agent(agent, *parts)
        elif parts:
            self._transact(parts)

    def _remove_blocker_parts(
        self, repo_id: int, issue: int, blocker: int
    ) -> list[tuple[str, dict[str, Any], str]]:
        exists = self._partition_has(repo_id, issue, f"BLOCKED_BY#{blocker}")
        return (
            [
                (
                    "Update",
                    {
                        "TableName": self.table_name,
                        "Key": _dump({"PK": pk, "SK": sk}),
                        "UpdateExpression": "SET resolved = :t",
                        "ExpressionAttributeValues": {":t": {"BOOL": True}},
                    },
                    f"edge {pk}/{sk}",
                )
                for pk, sk in (
                    (issue_pk(repo_id, issue), f"BLOCKED_BY#{blocker}"),
                    (issue_pk(repo_id, blocker), f"BLOCKS#{issue}"),
                )
            ]
            if exists
            else []
        )

    def _partition_has(self, repo_id: int, number: int, sk: str) -> bool:
        response = self._call(
            "get_item",
            TableName=self.table_name,
            Key=_dump({"PK": issue_pk(repo_id, number), "SK": sk}),
            ProjectionExpression="PK",
            ConsistentRead=True,
        )
        return "Item" in response

    def link_pull_request(
        self, repo_id: int, pr_number: int, issue_number: int, agent: AgentWrite | None, at: datetime
    ) -> None:
        parts = self._link_parts(repo_id, pr_number, issue_number)
        if agent is not None:
            self._write_agent(agent, *parts)
        else:
            self._transact(parts)

    def _link_parts(
        self, repo_id: int, pr_number: int, issue_number: int
    ) -> list[tuple[str, dict[str, Any], str]]:
        link = {
            "PK": issue_pk(repo_id, pr_number),
            "SK": "PRLINK",
            "entity": "prlink",
            "issue_number": issue_number,
        }
        back = {
            "PK": issue_pk(repo_id, issue_number),
            "SK": f"PR#{pr_number}",
            "entity": "prlink",
            "pr_number": pr_number,
        }
        return [
            ("Put", {"TableName": self.table_name, "Item": _dump(link)}, f"PR #{pr_number} link"),
            ("Put", {"TableName": self.table_name, "Item": _dump(back)}, f"#{issue_number} PR list"),
        ]

    # --- decisions (the commit point and its outbox) -------------------------------------------

    def commit(self, writes: Sequence[Write], decision: Decision, events: Sequence[DomainEvent] = ()) -> None:
        """Store ``writes``, ``events`` and ``decision`` all or nothing (see :mod:`squadron.domain.effects`).

        One TransactWriteItems: every agent write conditional on its version (an agent written
        twice is written once, expecting the version the decision read), edges and links, the
        blockers' "not closed" checks, the decision's domain events (one item each, which the
        table's stream carries to the bus and which stays as the repository's history for
        :attr:`history_retention`; conditional on not existing, so an event is stored, and
        published, once) and the decision record, conditional on not existing. A lost condition
        raises :class:`ConflictError` and nothing is stored.

        A decision of more than 100 items (a closed issue waking dozens of agents) is staged
        (:mod:`squadron.adapters.staged_decisions`): its record and a plan of every request are
        stored first, its agents held, then one transaction is its commit point and the rest is
        applied in chunks, each once; a lost condition before the commit point releases what
        was held and raises ConflictError, with nothing of the decision left. A crash in between
        leaves the record to whoever reads it next (:meth:`decision`, a held agent's reader,
        the reconciler's sweep), who carries it to the same end. Its outbox can be claimed only
        once it is applied, and its events are stored (so published) once, after its commit point.
        """
        agents = commit_agents(writes)
        parts: dict[tuple[str, str], tuple[str, dict[str, Any], str]] = {}
        checks: list[tuple[str, dict[str, Any], str]] = []
        new_edges: set[tuple[str, str]] = set()

        def add(found: Iterable[tuple[str, dict[str, Any], str]]) -> set[tuple[str, str]]:
            keys: set[tuple[str, str]] = set()
            for kind, request, what in found:
                if kind == "ConditionCheck":
                    checks.append((kind, request, what))
                    continue
                item = request.get("Item") or request.get("Key") or {}
                key = (str(item["PK"]["S"]), str(item["SK"]["S"]))
                parts[key] = (kind, request, what)
                keys.add(key)
            return keys

        for write in agents:
            expected = write.expected_version
            detail = "already exists" if expected is None else f"expected version {expected}"
            add([("Put", self._agent_put(write), f"agent {write.record.agent_id}: {detail}")])
            branch = self._branch_put(write.record)
            if branch is not None:
                add([("Put", branch, f"branch {write.record.branch}: not written")])
        for effect in writes:
            match effect:
                case AddBlocker(repo_id=repo_id, issue=issue, blocker=blocker):
                    new_edges |= add(self._add_blocker_parts(repo_id, issue, blocker))
                case RemoveBlocker(repo_id=repo_id, issue=issue, blocker=blocker):
                    add(self._remove_blocker_parts(repo_id, issue, blocker))
                case LinkPullRequest(repo_id=repo_id, pr_number=pr, issue_number=issue):
                    add(self._link_parts(repo_id, pr, issue))
                case DeliverInbox(item=item):
                    # Unconditional: the commit happens once per decision (its record's condition).
                    add([("Put", {"TableName": self.table_name, "Item": _inbox_item(item)}, "inbox")])
                case PutAgent():
                    pass  # among commit_agents above
        record = ("Put", self._decision_put(decision), f"decision {decision.key}: already committed")
        published = [("Put", self._event_put(event), f"event {event.id}: exists") for event in events]
        if len(checks) + len(parts) + len(published) + 1 <= TRANSACTION_ITEMS:
            self._transact([*checks, *parts.values(), *published, record])
            return
        self._commit_staged(decision, agents, checks, parts, new_edges=new_edges, published=published)

    def _commit_staged(
        self,
        decision: Decision,
        agents: Sequence[AgentWrite],
        checks: Sequence[tuple[str, dict[str, Any], str]],
        parts: Mapping[tuple[str, str], tuple[str, dict[str, Any], str]],
        *,
        new_edges: set[tuple[str, str]],
        published: Sequence[tuple[str, dict[str, Any], str]],
    ) -> None:
        """Plan a decision too big for one transaction and drive it (:mod:`staged_decisions`)."""
        key = decision.key
        agent_keys = {
            (_agent_key(w.record.agent_id)["PK"], _agent_key(w.record.agent_id)["SK"]) for w in agents
        }
        commit = [*checks, *(parts[edge] for edge in sorted(new_edges))]
        if len(commit) >= TRANSACTION_ITEMS:
            raise RegistryError(
                f"decision {key}: {len(new_edges) // 2} new blocker edges and their checks do not fit "
                "the one transaction of its commit point"
            )
        befores = self._agent_images([w.record.agent_id for w in agents if w.expected_version is not None])
        holder = {":key": {"S": key}}
        locks: list[tuple[str, dict[str, Any], str]] = []
        unlocks: list[tuple[str, dict[str, Any], str]] = []
        applies: list[tuple[str, dict[str, Any], str]] = []
        for write in agents:
            agent = write.record.agent_id
            item_key = _dump(_agent_key(agent))
            if write.expected_version is None:
                locks.append(
                    (
                        "Put",
                        {
                            "Item": {**item_key, **_dump({"entity": HELD_ENTITY, HELD_BY: key})},
                            "ConditionExpression": "attribute_not_exists(PK) OR held_by = :key",
                            "ExpressionAttributeValues": holder,
                        },
                        f"agent {agent}: already exists",
                    )
                )
                unlocks.append(
                    (
                        "Delete",
                        {
                            "Key": item_key,
                            "ConditionExpression": "held_by = :key",
                            "ExpressionAttributeValues": holder,
                        },
                        f"agent {agent}: released",
                    )
                )
                applies.append(
                    (
                        "Put",
                        {
                            "Item": _dump(_agent_item(write.record)),
                            "ConditionExpression": "held_by = :key",
                            "ExpressionAttributeValues": holder,
                        },
                        f"agent {agent}: not held by {key}",
                    )
                )
                continue
            before = befores.get(agent)
            stored = int(before["version"]["N"]) if before is not None else None
            if stored != write.expected_version or (before is not None and HELD_BY in before):
                raise ConflictError(f"agent {agent}", f"expected version {write.expected_version}")
            locks.append(
                (
                    "Update",
                    {
                        "Key": item_key,
                        "UpdateExpression": "SET held_by = :key",
                        "ConditionExpression": (
                            "(version = :expected AND attribute_not_exists(held_by)) OR held_by = :key"
                        ),
                        "ExpressionAttributeValues": {
                            **holder,
                            ":expected": {"N": str(write.expected_version)},
                        },
                    },
                    f"agent {agent}: expected version {write.expected_version}",
                )
            )
            unlocks.append(
                (
                    "Update",
                    {
                        "Key": item_key,
                        "UpdateExpression": "REMOVE held_by",
                        "ConditionExpression": "held_by = :key",
                        "ExpressionAttributeValues": holder,
                    },
                    f"agent {agent}: released",
                )
            )
            applies.append(_agent_apply(key, write, before or {}))
        others = [
            part
            for item_key, part in parts.items()
            if item_key not in agent_keys and item_key not in new_edges
        ]
        pending = dict(self._decision_put(decision)["Item"])
        pending.pop("done", None)  # no executor claims its outbox before it is applied
        pending.setdefault("GSI1PK", {"S": _open_decisions(key)})  # the sweep finds it if it is left
        pending.setdefault("GSI1SK", {"S": f"{_iso(decision.decided_at)}#{key}"})
        plan = {
            "locks": [_planned(p) for p in locks],
            "unlocks": [_planned(p) for p in unlocks],
            "commit": [_planned(p) for p in commit],
            "writes": [*(_planned(p) for p in applies), *(_planned(p) for p in others)],
            "events": [_planned(p) for p in published],
            "done": decision.done,
        }
        written = self._store_pending(key, pending, plan)
        lost = self._run(key, LOCKING, written, plan)
        if lost is not None:
            raise ConflictError(f"decision {key}", f"{lost}; nothing of it is stored")

    def _agent_images(self, agent_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored items of ``agent_ids`` (consistent BatchGetItem, 100 keys a call)."""
        found: dict[str, dict[str, Any]] = {}
        by_key = {(_agent_key(a)["PK"], _agent_key(a)["SK"]): a for a in agent_ids}
        ordered = list(by_key)
        for start in range(0, len(ordered), BATCH_GET_KEYS):
            keys: list[Any] = [
                _dump({"PK": pk, "SK": sk}) for pk, sk in ordered[start : start + BATCH_GET_KEYS]
            ]
            while keys:
                answer = self._call(
                    "batch_get_item", RequestItems={self.table_name: {"Keys": keys, "ConsistentRead": True}}
                )
                for item in answer.get("Responses", {}).get(self.table_name, []):
                    found[by_key[(item["PK"]["S"], item["SK"]["S"])]] = item
                keys = answer.get("UnprocessedKeys", {}).get(self.table_name, {}).get("Keys", [])
        return found

    def _event_put(self, event: DomainEvent) -> dict[str, Any]:
        item = {
            "PK": f"EVENT#{event.id}",
            "SK": "EVENT",
            "entity": EVENT_ENTITY,
            "event_id": event.id,
            "detail_type": event.detail_type,
            "detail": event.stored(),
            "repo_full_name": event.repository.full_name,
            # The repository's history (:meth:`history`), by time.
            "GSI1PK": history_pk(event.repository.id),
            "GSI1SK": f"{history_time(event.time)}#{event.id}",
            TTL_ATTRIBUTE: int((utc_instant(event.time) + self.history_retention).timestamp()),
        }
        # Conditional: an event id is stored (and so published) once, whatever retries it.
        return {
            "TableName": self.table_name,
            "Item": _dump(item),
            "ConditionExpression": "attribute_not_exists(PK)",
        }

    def gate_verdict(self, repo_id: int, pr_number: int) -> str | None:
        return self.gate_state(repo_id, pr_number)[0]

    def gate_state(self, repo_id: int, pr_number: int) -> tuple[str | None, str]:
        response = self._call(
            "get_item",
            TableName=self.table_name,
            Key=_dump({"PK": issue_pk(repo_id, pr_number), "SK": "GATE"}),
            ConsistentRead=True,
        )
        item = response.get("Item")
        if item is None:
            return None, ""
        loaded = _load(item)
        return str(loaded.get("verdict") or "") or None, str(loaded.get("description") or "")

    def gate_views(self, repo_id: int, pr_numbers: Iterable[int]) -> dict[int, GateView]:
        """The merge gate's verdict and what it said on each PR judged (BatchGetItem, 100 a call)."""
        numbers = sorted(set(pr_numbers))
        found: dict[int, GateView] = {}
        for start in range(0, len(numbers), BATCH_GET_KEYS):
            keys: list[Any] = [
                _dump({"PK": issue_pk(repo_id, n), "SK": "GATE"})
                for n in numbers[start : start + BATCH_GET_KEYS]
            ]
            while keys:
                answer = self._call(
                    "batch_get_item",
                    RequestItems={self.table_name: {"Keys": keys, "ConsistentRead": True}},
                )
                for item in answer.get("Responses", {}).get(self.table_name, []):
                    loaded = _load(item)
                    verdict = str(loaded.get("verdict") or "")
                    if verdict:
                        number = int(str(loaded["PK"]).rsplit("#", 1)[1])
                        found[number] = GateView(verdict, str(loaded.get("description") or ""))
                keys = answer.get("UnprocessedKeys", {}).get(self.table_name, {}).get("Keys", [])
        return found

    def set_gate_description(self, repo_id: int, pr_number: int, verdict: str, description: str) -> bool:
        try:
            self._call(
                "update_item",
                TableName=self.table_name,
                Key=_dump({"PK": issue_pk(repo_id, pr_number), "SK": "GATE"}),
                UpdateExpression="SET description = :d",
                ConditionExpression="verdict = :v",
                ExpressionAttributeValues=_dump({":d": description[:140], ":v": verdict}),
            )
        except ClientError:
            return False
        return True

    def change_verdict(self, repo_id: int, pr_number: int, previous: str | None, event: DomainEvent) -> bool:
        """The verdict and its event in one transaction, if the verdict is still ``previous``."""
        verdict = str(event.data["verdict"])
        condition = "attribute_not_exists(verdict)" if previous is None else "verdict = :previous"
        values: dict[str, Any] = {
            ":v": verdict,
            ":at": _iso(event.time),
            ":e": "gate",
            ":d": str(event.data.get("description") or "")[:140],
        }
        if previous is not None:
            values[":previous"] = previous
        update = {
            "TableName": self.table_name,
            "Key": _dump({"PK": issue_pk(repo_id, pr_number), "SK": "GATE"}),
            "UpdateExpression": "SET verdict = :v, judged_at = :at, entity = :e, description = :d",
            "ConditionExpression": condition,
            "ExpressionAttributeValues": _dump(values),
        }
        try:
            self._transact(
                [
                    ("Update", update, f"PR #{pr_number} verdict: no longer {previous}"),
                    ("Put", self._event_put(event), f"event {event.id}: exists"),
                ]
            )
        except ConflictError:
            return False
        return True

    def _decision_put(self, decision: Decision) -> dict[str, Any]:
        item: dict[str, Any] = {
            "PK": f"DECISION#{decision.key}",
            "SK": "DECISION",
            "entity": "decision",
            "key": decision.key,
            "decided_at": _iso(decision.decided_at),
            "done": decision.done,
            "installation_id": decision.installation_id,
            "repo_full_name": decision.repo_full_name,
            "repo_id": decision.repo_id,
            TTL_ATTRIBUTE: int((decision.decided_at + DECISION_RETENTION).timestamp()),
        }
        if decision.outside:
            item["outside"] = zlib.compress(decision.dump_outside())
        if not decision.done:
            item["GSI1PK"] = _open_decisions(decision.key)
            item["GSI1SK"] = f"{_iso(decision.decided_at)}#{decision.key}"
        return {
            "TableName": self.table_name,
            "Item": _dump(item),
            "ConditionExpression": "attribute_not_exists(PK)",
        }

    def decision(self, key: str) -> Decision | None:
        """The committed decision ``key``, or None. A staged one not yet applied is carried to its
        end first (:meth:`drive`): applied, it is returned; aborted, nothing of it is left."""
        response = self._call(
            "get_item",
            TableName=self.table_name,
            Key=_dump({"PK": f"DECISION#{key}", "SK": "DECISION"}),
            ConsistentRead=True,
        )
        item = response.get("Item")
        if item is not None and "stage" in item:
            self.drive(key)
            return self.decision(key)
        return None if item is None else _decision_from(item)

    def finish_decision(self, key: str, at: datetime) -> None:
        """Mark the decision carried out: off the open index, its outbox dropped."""
        self._call(
            "update_item",
            TableName=self.table_name,
            Key=_dump({"PK": f"DECISION#{key}", "SK": "DECISION"}),
            UpdateExpression="SET done = :t, finished_at = :at REMOVE GSI1PK, GSI1SK, outside",
            ConditionExpression="attribute_exists(PK)",
            ExpressionAttributeValues=_dump({":t": True, ":at": _iso(at)}),
        )

    def unfinished_decisions(self, decided_before: datetime, limit: int = 100) -> list[Decision]:
        """Decisions not carried out and not tried since ``decided_before``, the longest untouched
        first (each claim moves its decision back: one that keeps failing starves no other)."""
        found: list[tuple[str, Decision]] = []
        for shard in range(DECISION_SHARDS):
            page = self._call(
                "query",
                TableName=self.table_name,
                IndexName=STATUS_INDEX,
                KeyConditionExpression="GSI1PK = :pk AND GSI1SK < :before",
                ExpressionAttributeValues=_dump(
                    {":pk": f"DECISION#OPEN#{shard}", ":before": _iso(decided_before)}
                ),
                Limit=limit,
            )
            found += [(item["GSI1SK"]["S"], _decision_from(item)) for item in page.get("Items", [])]
        return [decision for _, decision in sorted(found, key=lambda pair: pair[0])[:limit]]

    def deliver(self, item: InboxItem) -> None:
        try:
            self._call(
                "put_item",
                TableName=self.table_name,
                Item=_inbox_item(item),
                ConditionExpression="attribute_not_exists(PK)",
            )
        except ClientError:
            return  # delivered before: stored once

    def record_review(self, review: RecordReview, at: datetime) -> None:
        item = {
            "PK": issue_pk(review.repo_id, review.pr_number),
            "SK": f"REVIEW#{review.reviewer}",
            "entity": "review",
            "reviewer": review.reviewer,
            "state": review.state,
            "commit_id": review.commit_id,
            "review_id": review.review_id,
            "recorded_at": at.isoformat(),
        }
        try:
            self._call(
                "put_item",
                TableName=self.table_name,
                Item=_dump(item),
                ConditionExpression="attribute_not_exists(PK) OR review_id <= :id",
                ExpressionAttributeValues={":id": {"N": str(review.review_id)}},
            )
        except ClientError:
            return  # a later review of this reviewer is stored

    def confirm_launch(self, agent_id: str, token: str, task_arn: str, at: datetime) -> None:
        try:
            self._call(
                "update_item",
                TableName=self.table_name,
                Key=_dump(_agent_key(agent_id)),
                UpdateExpression=(
                    "SET pending_launch = :none, task_arn = :arn, version = version + :one, "
                    "updated_at = :at, GSI1SK = :gsi, launch_failures = :zero, launch_error = :none, "
                    "launch_failed_at = :none"
                ),
                ConditionExpression="pending_launch = :token",
                ExpressionAttributeValues=_dump(
                    {
                        ":none": None,
                        ":zero": 0,
                        ":arn": task_arn,
                        ":one": 1,
                        ":at": _iso(at),
                        ":gsi": f"{_iso(at)}#{agent_id}",
                        ":token": token,
                    }
                ),
            )
        except ClientError:
            return  # that launch is no longer pending

    def hold_launch(self, agent_id: str, token: str, error: str, at: datetime) -> bool:
        """Record that RunTask failed for the pending launch ``token`` (it stays pending, to retry)."""
        try:
            self._call(
                "update_item",
                TableName=self.table_name,
                Key=_dump(_agent_key(agent_id)),
                UpdateExpression=(
                    "SET launch_failures = if_not_exists(launch_failures, :zero) + :one, launch_error = :error, "
                    "launch_failed_at = :at, version = version + :one, updated_at = :at, GSI1SK = :gsi"
                ),
                ConditionExpression="pending_launch = :token",
                ExpressionAttributeValues=_dump(
                    {
                        ":zero": 0,
                        ":one": 1,
                        ":error": error[:500],
                        ":at": _iso(at),
                        ":gsi": f"{_iso(at)}#{agent_id}",
                        ":token": token,
                    }
                ),
            )
        except ClientError:
            return False
        return True

    def arm_launch(
        self, agent_id: str, token: str, secret_hash: str, expires_at: datetime, at: datetime
    ) -> bool:
        """Store the secret hash of the pending launch ``token``; False if that launch is not pending.

        Armed again (a retried launch), the new hash replaces the old: a task started by an
        earlier attempt holds a secret that is no longer accepted.
        """
        try:
            self._call(
                "update_item",
                TableName=self.table_name,
                Key=_dump(_agent_key(agent_id)),
                UpdateExpression=(
                    "SET launch_secret_hash = :hash, launch_secret_expires_at = :exp, "
                    "version = version + :one, updated_at = :at, GSI1SK = :gsi"
                ),
                ConditionExpression="pending_launch = :token",
                ExpressionAttributeValues=_dump(
                    {
                        ":hash": secret_hash,
                        ":exp": _iso(expires_at),
                        ":one": 1,
                        ":at": _iso(at),
                        ":gsi": f"{_iso(at)}#{agent_id}",
                        ":token": token,
                    }
                ),
            )
        except ClientError:
            return False
        return True

    #: Candidates an agent tries before giving up on a uid of its own (each a 2^-30 collision).
    # --- an agent task's GitHub writes, each once (the agent gateway) -----------------------

    def claim_write(self, agent_id: str, key: str, now: datetime) -> WriteClaim | None:
        """Claim the write ``key`` of ``agent_id``'s task: None the first time (carry it out),
        else what the earlier claim left (its GitHub answer once recorded, None until then).

        One conditional PutItem (``WRITE#<agent>`` / key, kept a day): a re-sent request (the
        task's transport retried an invocation whose answer it never got) finds the claim.
        """
        item = {
            "PK": f"WRITE#{agent_id}",
            "SK": key,
            "entity": "write",
            "claimed_at": _iso(now),
            TTL_ATTRIBUTE: int((now + WRITE_RETENTION).timestamp()),
        }
        try:
            self._call(
                "put_item",
                TableName=self.table_name,
                Item=_dump(item),
                ConditionExpression="attribute_not_exists(PK)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            held = _load(exc.response.get("Item") or {})  # type: ignore[arg-type]
            answer = held.get("result")
            return WriteClaim(
                claimed_at=datetime.fromisoformat(
                    str(held.get("claimed_at") or _iso(now)).replace("Z", "+00:00")
                ),
                result=json.loads(zlib.decompress(bytes(answer))) if answer is not None else None,
            )
        return None

    def record_write(self, agent_id: str, key: str, result: Any) -> None:
        """Keep GitHub's answer to the claimed write ``key`` (a re-sent request gets it back)."""
        packed = zlib.compress(json.dumps(result, separators=(",", ":")).encode())
        if len(packed) > MAX_WRITE_RESULT_BYTES:
            return  # a re-sent request finds the write on GitHub by its marker instead
        self._call(
            "update_item",
            TableName=self.table_name,
            Key=_dump({"PK": f"WRITE#{agent_id}", "SK": key}),
            UpdateExpression="SET #result = :result",
            ExpressionAttributeNames={"#result": "result"},
            ExpressionAttributeValues=_dump({":result": packed}),
        )

    UID_ATTEMPTS = 16

    def claim_uid(self, agent_id: str, at: datetime) -> int:
        """The agent's POSIX uid, claimed on first use: no other agent ever holds the same one.

        A claim is a ``UID#<n>`` item owned by the agent (put only if absent or already its own),
        then the agent's ``uid`` (set only if unset, so two concurrent claims agree on one).
        """
        agent = self.get_agent(agent_id)
        if agent is None:
            raise ConflictError(f"agent {agent_id}", "does not exist")
        if agent.uid is not None:
            return agent.uid
        for attempt in range(self.UID_ATTEMPTS):
            uid = candidate_uid(agent_id, attempt)
            try:
                self._call(
                    "put_item",
                    TableName=self.table_name,
                    Item=_dump({"PK": f"UID#{uid}", "SK": "UID", "entity": "uid", "owner": agent_id}),
                    ConditionExpression="attribute_not_exists(PK) OR #owner = :agent",
                    ExpressionAttributeNames={"#owner": "owner"},
                    ExpressionAttributeValues=_dump({":agent": agent_id}),
                )
            except ClientError:
                continue  # another agent's uid: try the next candidate
            try:
                self._call(
                    "update_item",
                    TableName=self.table_name,
                    Key=_dump(_agent_key(agent_id)),
                    UpdateExpression="SET #uid = :uid, version = version + :one, updated_at = :at",
                    ConditionExpression="attribute_exists(PK) AND (attribute_not_exists(#uid) OR #uid = :none)",
                    ExpressionAttributeNames={"#uid": "uid"},
                    ExpressionAttributeValues=_dump({":uid": uid, ":one": 1, ":at": _iso(at), ":none": None}),
                )
            except ClientError:
                current = self.get_agent(agent_id)  # a concurrent claim set it first: that one holds
                if current is None or current.uid is None:
                    raise
                return current.uid
            return uid
        raise RegistryError(f"no free uid for {agent_id} after {self.UID_ATTEMPTS} candidates")

    # --- leases (one live task per agent) ----------------------------------------------------

    def acquire_lease(self, agent_id: str, owner: str, now: datetime, ttl: timedelta) -> AgentRecord:
        """Hold the agent's lease until ``now + ttl``; renews it for its holder.

        Raises ConflictError while another owner holds an unexpired lease (or the agent
        does not exist).
        """
        expires = now + ttl
        try:
            response = self._call(
                "update_item",
                TableName=self.table_name,
                Key=_dump(_agent_key(agent_id)),
                UpdateExpression=(
                    "SET lease_owner = :owner, lease_expires_at = :exp, lease_expires_epoch = :exp_epoch, "
                    "heartbeat_at = :now, version = version + :one, updated_at = :now"
                ),
                ConditionExpression=(
                    "attribute_exists(PK) AND (lease_owner = :owner OR attribute_not_exists(lease_owner) "
                    "OR lease_owner = :none OR lease_expires_epoch < :now_epoch)"
                ),
                ExpressionAttributeValues=_dump(
                    {
                        ":owner": owner,
                        ":exp": _iso(expires),
                        ":exp_epoch": _epoch_us(expires),
                        ":now": _iso(now),
                        ":now_epoch": _epoch_us(now),
                        ":one": 1,
                        ":none": None,
                    }
                ),
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            raise ConflictError(f"lease of {agent_id}", "held by another live task") from exc
        return _agent_from(_load(response["Attributes"]))

    def release_lease(self, agent_id: str, owner: str, now: datetime) -> None:
        """Give the lease up; a no-op unless ``owner`` holds it."""
        try:
            self._call(
                "update_item",
                TableName=self.table_name,
                Key=_dump(_agent_key(agent_id)),
                UpdateExpression=(
                    "SET lease_owner = :none, lease_expires_at = :none, lease_expires_epoch = :none, "
                    "version = version + :one, updated_at = :now"
                ),
                ConditionExpression="lease_owner = :owner",
                ExpressionAttributeValues=_dump(
                    {":owner": owner, ":none": None, ":one": 1, ":now": _iso(now)}
                ),
            )
        except ClientError:
            return


def _planned(part: tuple[str, dict[str, Any], str]) -> list[Any]:
    """A request as the plan keeps it (the table is the driver's)."""
    kind, request, what = part
    return [kind, {k: v for k, v in request.items() if k != "TableName"}, what]


def _agent_apply(key: str, write: AgentWrite, before: Mapping[str, Any]) -> tuple[str, dict[str, Any], str]:
    """The update a staged decision applies to an agent it holds: the fields it changed since
    ``before`` (what it read), so a lease or launch confirmation written meanwhile is kept, and
    the version moved on as the decision moved it; the hold released."""
    new = _dump(_agent_item(write.record))
    names: dict[str, str] = {}
    values: dict[str, Any] = {":key": {"S": key}}
    sets: list[str] = []
    for index, (attribute, value) in enumerate(sorted(new.items())):
        if attribute in ("PK", "SK", "version") or before.get(attribute) == value:
            continue
        names[f"#a{index}"] = attribute
        values[f":v{index}"] = value
        sets.append(f"#a{index} = :v{index}")
    delta = max(1, write.record.version - (write.expected_version or 0))
    values[":delta"] = {"N": str(delta)}
    sets.append("version = version + :delta")
    request: dict[str, Any] = {
        "Key": _dump(_agent_key(write.record.agent_id)),
        "UpdateExpression": f"SET {', '.join(sets)} REMOVE held_by",
        "ConditionExpression": "held_by = :key",
        "ExpressionAttributeValues": values,
    }
    if names:
        request["ExpressionAttributeNames"] = names
    return ("Update", request, f"agent {write.record.agent_id}: not held by {key}")


def _open_decisions(key: str) -> str:
    shard = hashlib.sha256(key.encode()).digest()[0] % DECISION_SHARDS
    return f"DECISION#OPEN#{shard}"


def _decision_from(item: Mapping[str, Any]) -> Decision:
    raw = _deserializer.deserialize(item["outside"]) if "outside" in item else None
    data = _load({k: v for k, v in item.items() if k != "outside"})
    outside = Decision.load_outside(zlib.decompress(bytes(raw))) if raw is not None else ()
    installation = data.get("installation_id")
    repo_id = data.get("repo_id")
    return Decision(
        key=str(data["key"]),
        decided_at=datetime.fromisoformat(str(data["decided_at"]).replace("Z", "+00:00")),
        outside=outside,
        done=bool(data.get("done")),
        installation_id=int(installation) if installation is not None else None,
        repo_full_name=str(data.get("repo_full_name") or ""),
        repo_id=int(repo_id) if repo_id is not None else None,
    )


def _inbox_item(item: InboxItem) -> dict[str, Any]:
    parse_agent_id(item.agent_id)
    return _dump(
        {
            **item.model_dump(mode="json"),
            "PK": f"INBOX#{item.agent_id}",
            "SK": _inbox_sk(item),
            "entity": "inbox",
        }
    )


def _inbox_sk(item: InboxItem) -> str:
    return f"{item.received_at.isoformat()}#{item.delivery_id}#{item.kind}"


def _iso(at: datetime) -> str:
    """Datetimes as pydantic writes them in JSON (``Z`` for UTC), so records round-trip."""
    text = at.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text
