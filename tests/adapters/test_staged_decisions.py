"""A decision bigger than one DynamoDB transaction, committed whole, on moto (the real registry).

A closed issue wakes dozens of agents: each woken agent is an agent write, its branch link,
its blocker edges (both directions), an inbox item and an event: six items, so 42 agents are
252. The decision must commit whole or not at all for every reader, whatever fails between
its calls, and each of its events must reach the table's stream (what the bus publishes)
once. A moto server, because the in-process mock serves no stream reads.
"""

from __future__ import annotations

import hashlib
import itertools
import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from squadron.adapters import moto_server
from squadron.adapters.dynamo_registry import (
    EVENT_ENTITY,
    EVENT_STREAM,
    TABLE_DEFINITION,
    DynamoRegistry,
)
from squadron.adapters.event_bus import StreamReader
from squadron.domain.agents import AgentRecord, AgentStatus, ConflictError, InboxItem, IssueState, RoleKind
from squadron.domain.domain_events import AgentWoke, DomainEvent, Repository, event_id, make_event
from squadron.domain.effects import (
    AddBlocker,
    AddLabels,
    AgentWrite,
    Decision,
    DeliverInbox,
    LaunchAgent,
    Outside,
    PutAgent,
    RemoveBlocker,
    Write,
)

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
KEY = "d-close-42"
REPO = Repository(id=1, full_name="octo/shop")
CLOSED = 42
#: The fault table's decision: 17 woken agents (102 items) and a new one, just over the limit.
SMALL_BIG = 17
_tables = itertools.count()


class Crash(Exception):
    """The executor dies here (a Lambda timeout, a lost connection)."""


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    moto_server.patch()  # as the local stack's server: requests one at a time, roll-backs by item
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def _client(endpoint: str, service: str = "dynamodb") -> Any:
    return boto3.client(
        service,  # type: ignore[call-overload]
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


class Registry(DynamoRegistry):
    """The real registry; ``hook(n, when, operation)`` runs before and after its n-th DynamoDB call."""

    def __init__(self, table: str, client: Any, hook: Callable[[int, str, str], None] | None = None) -> None:
        super().__init__(table, client=client)
        self.hook = hook
        self.calls: list[str] = []

    def _call(self, operation: str, **kwargs: Any) -> Any:
        self.calls.append(operation)
        n = len(self.calls)
        if self.hook is not None:
            self.hook(n, "before", operation)
        answer = super()._call(operation, **kwargs)
        if self.hook is not None:
            self.hook(n, "after", operation)
        return answer


def _crash_at(n: int, when: str) -> Callable[[int, str, str], None]:
    def hook(call: int, moment: str, _operation: str) -> None:
        if (call, moment) == (n, when):
            raise Crash(f"call {n}, {when}")

    return hook


def _agent(number: int) -> AgentRecord:
    return AgentRecord(
        agent_id=f"1-{number}-feat-dev",
        role="feat-dev",
        kind=RoleKind.DEV,
        repo_id=1,
        repo_full_name=REPO.full_name,
        issue_number=number,
        status=AgentStatus.SLEEPING,
        branch=f"feat/issue-{number}",
        blocked_by=frozenset({CLOSED}),
        created_at=NOW - timedelta(days=1),
        updated_at=NOW - timedelta(days=1),
        generation_started_at=NOW - timedelta(days=1),
    )


def _body(number: int, size: int) -> str:
    """``size`` characters that do not compress away (a plan of them spans several items)."""
    digest, text = f"{number}".encode(), ""
    while len(text) < size:
        digest = hashlib.sha256(digest).digest()
        text += digest.hex()
    return text[:size]


@dataclass
class World:
    """A table where ``woken`` agents sleep on #42, and the decision of #42's closing."""

    endpoint: str
    woken: int
    body: int = 0
    table: str = field(default_factory=lambda: f"registry-{next(_tables)}")

    def __post_init__(self) -> None:
        self.client = _client(self.endpoint)
        self.client.create_table(TableName=self.table, StreamSpecification=EVENT_STREAM, **TABLE_DEFINITION)
        setup = DynamoRegistry(self.table, client=self.client)
        self.issues = list(range(100, 100 + self.woken))
        for number in self.issues:
            setup.put_agent(AgentWrite(_agent(number), None))
            setup.add_blocker(1, number, CLOSED, None, NOW)
        setup.set_issue_state(1, 44, IssueState.OPEN, NOW)
        stream = self.client.describe_table(TableName=self.table)["Table"]["LatestStreamArn"]
        self.stream = StreamReader(stream, _client(self.endpoint, "dynamodbstreams"))
        self.inserted()  # the setup's records are read: only the decision's are counted after

    def registry(self, hook: Callable[[int, str, str], None] | None = None) -> Registry:
        return Registry(self.table, self.client, hook)

    def decision(self) -> tuple[list[Write], Decision, list[DomainEvent]]:
        writes: list[Write] = []
        events: list[DomainEvent] = []
        launches: list[LaunchAgent] = []
        for index, number in enumerate(self.issues):
            agent = _agent(number)
            woken = agent.transition(
                AgentStatus.ACTIVE,
                now=NOW,
                blocked_by=frozenset(),
                pending_launch=f"tok-{number}",
                wake_reason=f"#{CLOSED} closed",
            )
            writes += [
                PutAgent(AgentWrite(woken, agent.version)),
                RemoveBlocker(1, number, CLOSED),
                DeliverInbox(
                    InboxItem(
                        agent_id=agent.agent_id,
                        delivery_id=KEY,
                        received_at=NOW,
                        kind="blocker_closed",
                        summary=f"#{CLOSED} was closed",
                        body=_body(number, self.body),
                        subject=CLOSED,
                    )
                ),
            ]
            launches.append(LaunchAgent(agent.agent_id, "wake", f"#{CLOSED} closed", f"tok-{number}"))
            events.append(
                make_event(
                    AgentWoke(role="feat-dev", generation=1, previous_status="SLEEPING", reason="blocker"),
                    event_id=event_id(KEY, index),
                    at=NOW,
                    repository=REPO,
                    correlation_id=KEY,
                    issue=number,
                    agent=agent.agent_id,
                )
            )
        # A new agent, created sleeping on #44 (still open): a placeholder until applied.
        newcomer = _agent(43).model_copy(update={"blocked_by": frozenset({44})})
        writes += [PutAgent(AgentWrite(newcomer, None)), AddBlocker(1, 43, 44)]
        outside: tuple[Outside, ...] = (AddLabels(REPO.full_name, 77, CLOSED, ("done",)), *launches)
        decision = Decision(KEY, NOW, outside, installation_id=77, repo_full_name=REPO.full_name, repo_id=1)
        return writes, decision, events

    def commit(self, registry: DynamoRegistry) -> None:
        registry.commit(*self.decision())

    def resume(self) -> None:
        """What the delivery's retry does: carry out the committed decision, else decide again."""
        registry = self.registry()
        if registry.decision(KEY) is None:
            self.commit(registry)

    def state(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        request: dict[str, Any] = {"TableName": self.table}
        while True:
            page = self.client.scan(**request)
            items += page["Items"]
            if "LastEvaluatedKey" not in page:
                break
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return sorted(items, key=lambda item: (item["PK"]["S"], item["SK"]["S"]))

    def inserted(self) -> Counter[str]:
        """Event items inserted since the last look (what the publisher puts on the bus), by id."""
        found: Counter[str] = Counter()
        while records := self.stream.poll():
            for record in records:
                image = record["dynamodb"].get("NewImage", {})
                if record["eventName"] == "INSERT" and image.get("entity", {}).get("S") == EVENT_ENTITY:
                    found[image["event_id"]["S"]] += 1
        return found

    def looks_whole(self) -> None:
        """A reader: every woken agent is asleep with no inbox, or all are awake with their
        inbox (and then the decision is there)."""
        reader = DynamoRegistry(self.table, client=self.client)
        seen: set[tuple[AgentStatus | None, int, frozenset[int]]] = set()
        for number in self.issues:
            view = reader.issue_view(1, number)
            (agent,) = view.agents
            inbox = reader.pending_inbox(agent.agent_id)
            seen.add((agent.status, len(inbox), frozenset(view.blockers)))
        newcomer = reader.get_agent("1-43-feat-dev")
        seen.add((newcomer.status if newcomer else None, -1, frozenset()))
        asleep: set[tuple[AgentStatus | None, int, frozenset[int]]] = {
            (AgentStatus.SLEEPING, 0, frozenset({CLOSED})),
            (None, -1, frozenset()),
        }
        awake: set[tuple[AgentStatus | None, int, frozenset[int]]] = {
            (AgentStatus.ACTIVE, 1, frozenset()),
            (AgentStatus.SLEEPING, -1, frozenset()),
        }
        assert seen in (asleep, awake), seen
        if seen == awake:
            assert reader.decision(KEY) is not None


def _expected(endpoint: str, woken: int) -> tuple[list[dict[str, Any]], Counter[str], list[str]]:
    world = World(endpoint, woken)
    registry = world.registry()
    world.commit(registry)
    return world.state(), world.inserted(), registry.calls


@pytest.fixture(scope="module")
def fault_free(endpoint: str) -> tuple[list[dict[str, Any]], Counter[str], list[str]]:
    return _expected(endpoint, SMALL_BIG)


# --- a big decision commits whole ----------------------------------------------------------------


def test_a_decision_of_250_items_commits_whole_and_every_reader_sees_all_or_nothing(endpoint: str) -> None:
    world = World(endpoint, 42, body=20_000)  # a plan of about 800 KB: several plan items
    looks: list[str] = []

    def reader(call: int, moment: str, operation: str) -> None:
        if moment == "before" and operation == "transact_write_items":
            looks.append(operation)
            world.looks_whole()

    registry = world.registry(reader)
    world.commit(registry)
    world.looks_whole()
    assert len(looks) >= 3  # staged: several transactions, a reader looked before each
    writes, decision, events = world.decision()
    assert world.inserted() == Counter({event.id: 1 for event in events})
    stored = world.registry().decision(KEY)
    assert stored == decision  # its outbox, whole, not done: now an executor may claim it
    assert world.registry().claim_decision(KEY, "executor", NOW) is not None
    leftovers = [
        i for i in world.state() if "held_by" in i or "stage" in i or i["SK"]["S"].startswith("PLAN#")
    ]
    assert leftovers == []
    assert len(writes) == 42 * 3 + 2


# --- a fault between any two calls, then a retry -------------------------------------------------

#: DynamoDB calls of the fault table's commit: a read per blocker edge removed, the agents'
#: images, the record with its plan, the holds, the commit point, two chunks, the end.
CALLS = SMALL_BIG + 1 + 1 + 1 + 1 + 2 + 1


def test_the_fault_table_covers_every_call_of_the_commit(
    fault_free: tuple[list[dict[str, Any]], Counter[str], list[str]],
) -> None:
    assert len(fault_free[2]) == CALLS, fault_free[2]


#: The points played: every call that writes (the last seven), both ways, and three of the reads
#: before them (a crash there leaves nothing written to resume; every read is played with
#: ``SQUADRON_STAGED_FULL=1``).
POINTS = [
    (n, when)
    for n in range(1, CALLS + 1)
    for when in ("before", "after")
    if os.environ.get("SQUADRON_STAGED_FULL") == "1"
    or n > SMALL_BIG
    or (n in (1, 9, SMALL_BIG) and when == "before")
]


@pytest.mark.parametrize(("n", "when"), POINTS, ids=[f"{n}-{when}" for n, when in POINTS])
def test_a_crash_at_any_call_then_a_retry_ends_as_the_fault_free_commit(
    endpoint: str, fault_free: tuple[list[dict[str, Any]], Counter[str], list[str]], n: int, when: str
) -> None:
    """Before: the call did not happen; after: it happened and its answer was lost. A reader in
    between sees all of the decision or nothing; the retry ends with the same table and each
    event inserted once."""
    state, inserted, _ = fault_free
    world = World(endpoint, SMALL_BIG)
    with pytest.raises(Crash):
        world.commit(world.registry(_crash_at(n, when)))
    world.looks_whole()
    world.resume()
    assert world.state() == state
    assert world.inserted() == inserted


# --- two executors resume the same decision at once -------------------------------------------


def _crash_after_write(k: int) -> Callable[[int, str, str], None]:
    """The committer dies once its ``k``-th transaction took effect (its answer lost)."""
    writes: list[int] = []

    def hook(call: int, moment: str, operation: str) -> None:
        if moment == "after" and operation == "transact_write_items":
            writes.append(call)
            if len(writes) == k:
                raise Crash(f"after write {k}")

    return hook


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("n", [2, 5] if os.environ.get("SQUADRON_STAGED_FULL") != "1" else range(1, 7))
@pytest.mark.parametrize("crashed_after", [1, 3], ids=["stored", "committed"])
def test_two_executors_resuming_at_once_write_each_item_and_event_once(
    endpoint: str,
    fault_free: tuple[list[dict[str, Any]], Counter[str], list[str]],
    crashed_after: int,
    n: int,
    when: str,
) -> None:
    """The committer dies after its first write (the record and plan stored) or its third (the
    commit point); executor A resumes, and at its n-th call executor B resumes it whole (the
    delivery's retry and the reconciler's sweep at once)."""
    state, inserted, _ = fault_free
    world = World(endpoint, SMALL_BIG)
    with pytest.raises(Crash):
        world.commit(world.registry(_crash_after_write(crashed_after)))

    def second(call: int, moment: str, _operation: str) -> None:
        if (call, moment) == (n, when):
            world.resume()

    first = world.registry(second)
    assert first.decision(KEY) is not None
    assert world.state() == state
    assert world.inserted() == inserted


# --- a conflicting write discovered at the commit leaves nothing ------------------------------


def _lease(world: World) -> None:
    """The last woken agent's task renews its lease (its version moves)."""
    world.registry().acquire_lease(f"1-{world.issues[-1]}-feat-dev", "task-9", NOW, timedelta(minutes=5))


def _create(world: World) -> None:
    """Another decision creates the agent this one creates."""
    world.registry().put_agent(AgentWrite(_agent(43), None))


def _close(world: World) -> None:
    """#44, which the decision's new agent is to wait on, is closed."""
    world.registry().set_issue_state(1, 44, IssueState.CLOSED, NOW)


CONFLICTS: list[tuple[str, Callable[[World], None], str]] = [
    ("an agent moved on", _lease, "expected version 1"),
    ("the new agent exists", _create, "already exists"),
    ("the blocker was closed", _close, "it is closed"),
]


@pytest.mark.parametrize(("name", "concurrent", "lost"), CONFLICTS, ids=[c[0] for c in CONFLICTS])
@pytest.mark.parametrize("at", ["read", "store"])
def test_a_conflict_at_the_commit_leaves_nothing_of_the_decision(
    endpoint: str, name: str, concurrent: Callable[[World], None], lost: str, at: str
) -> None:
    """The agent that moves is among the last the decision writes: with 60 woken agents (360
    items) its write is past the first hundred (where the blockers' checks come first)."""
    world = World(endpoint, 60)
    expected: list[dict[str, Any]] = []

    def meanwhile(call: int, moment: str, operation: str) -> None:
        first_write = operation == "transact_write_items" and not expected
        if moment == "before" and ((at == "read" and call == 1) or (at == "store" and first_write)):
            concurrent(world)
            expected.extend(world.state())

    with pytest.raises(ConflictError, match=lost):
        world.commit(world.registry(meanwhile))
    assert world.state() == expected  # the concurrent write, and nothing of the decision
    assert world.registry().decision(KEY) is None
    assert world.inserted() == Counter()
