"""The router over the DynamoDB registry (moto): DynamoDB calls per event, and conflict retries."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from moto import mock_aws

from squadron.adapters.dynamo_registry import TABLE_DEFINITION, DynamoRegistry
from squadron.domain.agents import AgentStatus
from squadron.domain.domain_events import DomainEvent
from squadron.domain.effects import Decision, Write, agent_writes
from squadron.domain.events import EventEnvelope
from squadron.domain.routing import RoutingPolicy
from squadron.shell.router import RouterService
from tests.support.events import T0, Events
from tests.support.fake_registry import FakeLauncher, FakeRouterGitHub
from tests.support.router_stack import router_over

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

A38 = "1-38-feat-dev"


@dataclass
class Router:
    client: DynamoDBClient
    registry: DynamoRegistry
    launcher: FakeLauncher = field(default_factory=FakeLauncher)
    events: Events = field(default_factory=Events)
    calls: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.service = router_over(
            self.registry, self.launcher, writers=("alice", "bob"), clock=lambda: T0 + timedelta(hours=1)
        )
        self.client.meta.events.register("before-call.dynamodb", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.calls[model.name] += 1

    def send(self, event: EventEnvelope) -> None:
        self.service.process(event, first_receive=True)  # as the queue hands a record over first

    def count(self, event: EventEnvelope) -> int:
        self.calls.clear()
        self.send(event)
        return sum(self.calls.values())


@pytest.fixture
def router() -> Iterator[Router]:
    with mock_aws():
        client = boto3.client("dynamodb")
        client.create_table(TableName="registry", **TABLE_DEFINITION)
        yield Router(client, DynamoRegistry("registry", client=client))


Step = Callable[[Events], list[EventEnvelope]]
Under = Callable[[Events], EventEnvelope]

# (event type, setup, event under test, the most DynamoDB calls it may take)
BOUNDS: list[tuple[str, Step, Under, int]] = [
    ("issues.opened (PM batch)", lambda e: [], lambda e: e.opened(38), 7),  # + arming the launch
    # + arming the launch, + the writer's vouch for the issue (domain.vouching)
    ("issues.assigned (new agent)", lambda e: [], lambda e: e.assigned(38), 7),
    ("issue_comment.created (inbox)", lambda e: [e.assigned(38)], lambda e: e.comment(38), 2),
    (
        "register_blocker (sleep)",
        lambda e: [e.assigned(38)],
        lambda e: e.register_blocker(38, 42, agent_id=A38, sleep=True),
        5,
    ),
    (
        "issues.closed (wake the blocked)",
        lambda e: [e.assigned(38), e.register_blocker(38, 42, agent_id=A38, sleep=True)],
        lambda e: e.closed(42),
        8,  # + arming the launch with its secret
    ),
    (
        "pull_request.opened",
        lambda e: [e.assigned(38)],
        lambda e: e.pr(101, "feat/issue-38", "Fixes #38"),
        10,  # + arming the launch with its secret; + the claim, and each of 2 effects recorded done
    ),
    (
        "pull_request_review.submitted",
        lambda e: [e.assigned(38), e.pr(101, "feat/issue-38", "Fixes #38")],
        lambda e: e.review(101, "feat/issue-38", "changes_requested"),
        8,  # + the review round counted on the dev agent; + the claim, its 1 effect recorded done
    ),
    (
        "pull_request.closed (merged)",
        lambda e: [e.assigned(38), e.pr(101, "feat/issue-38", "Fixes #38")],
        lambda e: e.pr_closed(101, "feat/issue-38", merged=True, body="Fixes #38"),
        9,  # + the claim, and each of 3 effects recorded done (so a resume never repeats one)
    ),
    (
        "check_run.completed (failure)",
        lambda e: [e.assigned(38), e.pr(101, "feat/issue-38")],
        lambda e: e.check("feat/issue-38", "failure", prs=(101,)),
        6,  # + the CI round counted on the dev agent; + the claim, its 1 effect recorded done
    ),
    ("status (unknown branch)", lambda e: [], lambda e: e.status(("nobody",), "failure"), 1),
]


@pytest.mark.parametrize(("setup", "event", "bound"), [c[1:] for c in BOUNDS], ids=[c[0] for c in BOUNDS])
def test_dynamodb_calls_per_event_are_bounded(router: Router, setup: Step, event: Under, bound: int) -> None:
    for prior in setup(router.events):
        router.send(prior)
    calls = router.count(event(router.events))
    assert calls <= bound, f"{calls} DynamoDB calls ({dict(router.calls)}), bound {bound}"
    assert "Scan" not in router.calls


def test_a_lifecycle_on_dynamodb(router: Router) -> None:
    e = router.events
    for event in [
        e.assigned(38),
        e.register_blocker(38, 42, agent_id=A38, sleep=True),
        e.closed(42),
        e.pr(101, "feat/issue-38", "Fixes #38"),
        e.review(101, "feat/issue-38", "changes_requested"),
        e.pr_closed(101, "feat/issue-38", merged=True, body="Fixes #38"),
    ]:
        router.send(event)
    agent = router.registry.get_agent(A38)
    assert agent is not None
    assert agent.status is AgentStatus.COMPLETED
    assert [i.kind for i in router.registry.pending_inbox(A38)] == ["blocker_closed", "changes_requested"]
    assert router.registry.issue_view(1, 101).linked_issue == 38
    assert len(router.launcher.tasks_for(A38)) == 2  # start, then wake


class HeartbeatOnce(DynamoRegistry):
    """A task renews its lease between the router's read and its commit, once."""

    beat = False

    def commit(self, writes: Sequence[Write], decision: Decision, events: Sequence[DomainEvent] = ()) -> None:
        updated = [w for w in agent_writes(writes) if w.expected_version is not None]
        if not self.beat and updated:
            self.beat = True
            self.acquire_lease(updated[0].record.agent_id, "task-1", T0, timedelta(minutes=5))
        super().commit(writes, decision, events)


def test_a_conflict_is_re_read_and_re_decided(router: Router) -> None:
    registry = HeartbeatOnce("registry", client=router.client)
    service = RouterService(
        registry=registry,
        launcher=router.launcher,
        github=FakeRouterGitHub({"alice": "write", "bob": "write"}),
        policies=lambda _event: RoutingPolicy(),
    )
    e = router.events
    service.process(e.assigned(38))
    service.process(e.register_blocker(38, 42, agent_id=A38, sleep=True))
    agent = registry.get_agent(A38)
    assert agent is not None
    assert agent.status is AgentStatus.SLEEPING
    assert agent.lease_owner == "task-1"  # the task's concurrent write survived
    assert registry.beat


def test_a_replay_reads_and_writes_nothing_new(router: Router) -> None:
    assigned = router.events.assigned(38)
    router.send(assigned)
    calls = router.count(assigned)
    writes = {name for name in router.calls if name not in ("Query", "GetItem")}
    assert calls <= 4, dict(router.calls)
    assert writes <= {"UpdateItem"}, dict(router.calls)  # only the time-guarded assignment no-op
