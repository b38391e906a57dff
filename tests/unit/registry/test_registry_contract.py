"""One contract, two registries: the in-memory fake and the DynamoDB adapter (under moto).

Every case runs against both, so the fake the routing tests use cannot drift
from what DynamoDB does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Protocol

import boto3
import pytest
from moto import mock_aws

from squadron.adapters.dynamo_registry import HISTORY_RETENTION, TABLE_DEFINITION, DynamoRegistry
from squadron.domain.agents import (
    AgentRecord,
    AgentStatus,
    ConflictError,
    IllegalTransitionError,
    InboxItem,
    IssueState,
    RegistryError,
    RoleKind,
)
from squadron.domain.dashboard import GateView
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
from squadron.domain.effects import (
    AddBlocker,
    AddLabels,
    AgentWrite,
    CreateIssue,
    Decision,
    DeliverInbox,
    LaunchAgent,
    LinkPullRequest,
    PostComment,
    PutAgent,
    RecordReview,
    Write,
)
from squadron.domain.history import PeriodError
from squadron.domain.issue_budget import LiveSpend
from squadron.domain.routing import IssueView
from squadron.domain.usage import ModelTokens
from squadron.domain.writes import WriteClaim
from tests.support.fake_registry import FakeRegistry

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
REPO = 1


class ContractRegistry(Protocol):
    def issue_view(self, repo_id: int, number: int) -> IssueView: ...
    def branch_links(self, repo_id: int, branches: Any) -> dict[str, int]: ...
    def get_agent(self, agent_id: str) -> AgentRecord | None: ...
    def pm_agent(self, repo_id: int) -> AgentRecord | None: ...
    def blocker_graph(self, repo_id: int, roots: Any, max_hops: int) -> dict[int, frozenset[int]]: ...
    def put_agent(self, write: AgentWrite) -> None: ...
    def set_issue_state(self, repo_id: int, number: int, state: IssueState, at: datetime) -> None: ...
    def set_issue_assignment(self, repo_id: int, number: int, assigned: bool, at: datetime) -> None: ...
    def vouch_issue(self, repo_id: int, number: int, by: str, at: datetime) -> None: ...
    def add_blocker(
        self, repo_id: int, issue: int, blocker: int, agent: AgentWrite | None, at: datetime
    ) -> None: ...
    def remove_blocker(
        self, repo_id: int, issue: int, blocker: int, agent: AgentWrite | None, at: datetime
    ) -> None: ...
    def link_pull_request(
        self, repo_id: int, pr_number: int, issue_number: int, agent: AgentWrite | None, at: datetime
    ) -> None: ...
    def deliver(self, item: InboxItem) -> None: ...
    def record_review(self, review: RecordReview, at: datetime) -> None: ...
    def confirm_launch(self, agent_id: str, token: str, task_arn: str, at: datetime) -> None: ...
    def arm_launch(
        self, agent_id: str, token: str, secret_hash: str, expires_at: datetime, at: datetime
    ) -> bool: ...
    def claim_uid(self, agent_id: str, at: datetime) -> int: ...
    def record_live_spend(self, repo_id: int, issue: int, spend: LiveSpend) -> None: ...
    def claim_write(self, agent_id: str, key: str, now: datetime) -> WriteClaim | None: ...
    def record_write(self, agent_id: str, key: str, result: Any) -> None: ...
    def hold_launch(self, agent_id: str, token: str, error: str, at: datetime) -> bool: ...
    def pending_inbox(self, agent_id: str) -> list[InboxItem]: ...
    def reviews_of(self, repo_id: int, pr_number: int) -> dict[str, RecordReview]: ...
    def ack_inbox(self, agent_id: str, items: list[InboxItem]) -> None: ...
    def agents_with_status(self, status: AgentStatus) -> list[AgentRecord]: ...
    def finished_agents(self, before: datetime, limit: int) -> list[AgentRecord]: ...
    def acquire_lease(self, agent_id: str, owner: str, now: datetime, ttl: timedelta) -> AgentRecord: ...
    def release_lease(self, agent_id: str, owner: str, now: datetime) -> None: ...
    def commit(
        self, writes: Sequence[Write], decision: Decision, events: Sequence[DomainEvent] = ()
    ) -> None: ...
    def decision(self, key: str) -> Decision | None: ...
    def finish_decision(self, key: str, at: datetime) -> None: ...
    def unfinished_decisions(self, decided_before: datetime, limit: int = 100) -> list[Decision]: ...
    def change_verdict(
        self, repo_id: int, pr_number: int, previous: str | None, event: DomainEvent
    ) -> bool: ...
    def set_gate_description(self, repo_id: int, pr_number: int, verdict: str, description: str) -> bool: ...
    def gate_views(self, repo_id: int, pr_numbers: Iterable[int]) -> dict[int, GateView]: ...
    def history(
        self, repo_id: int, start: datetime, end: datetime, limit: int = 5000
    ) -> list[DomainEvent]: ...


@pytest.fixture(params=["fake", "dynamodb"])
def registry(request: pytest.FixtureRequest) -> Iterator[ContractRegistry]:
    if request.param == "fake":
        yield FakeRegistry()
        return
    with mock_aws():
        client = boto3.client("dynamodb")
        client.create_table(TableName="registry", **TABLE_DEFINITION)
        yield DynamoRegistry("registry", client=client)


def agent(issue: int | None = 38, role: str = "feat-dev", **changes: Any) -> AgentRecord:
    kind = RoleKind.PM if issue is None else RoleKind.REVIEW if "review" in role else RoleKind.DEV
    agent_id = f"{REPO}-pm" if issue is None else f"{REPO}-{issue}-{role}"
    base = AgentRecord(
        agent_id=agent_id,
        role="pm" if issue is None else role,
        kind=kind,
        repo_id=REPO,
        repo_full_name="octo/app",
        installation_id=77,
        issue_number=issue,
        branch=f"feat/issue-{issue}" if kind is RoleKind.DEV else None,
        created_at=T0,
        updated_at=T0,
        generation_started_at=T0,
    )
    return base.model_copy(update=changes)


def created(registry: ContractRegistry, record: AgentRecord) -> AgentRecord:
    registry.put_agent(AgentWrite(record, None))
    stored = registry.get_agent(record.agent_id)
    assert stored is not None
    return stored


# --- agents -----------------------------------------------------------------------------------


def test_an_agent_round_trips_exactly(registry: ContractRegistry) -> None:
    record = agent(blocked_by=frozenset({5, 7}), pending_launch="tok", wake_reason="because")
    assert created(registry, record) == record
    assert registry.issue_view(REPO, 38).agents == (record,)
    assert registry.get_agent("1-39-feat-dev") is None


def test_a_running_tasks_spend_is_kept_in_its_costed_issue_and_replaced_by_its_next_report(
    registry: ContractRegistry,
) -> None:
    dev = created(registry, agent())
    reviewer = created(registry, agent(101, "pr-review", serves_issue=38))
    first = LiveSpend(
        dev.agent_id, "launch-1", (ModelTokens(model="m", input_tokens=5, output_tokens=1),), 3, T0
    )
    later = LiveSpend(
        dev.agent_id, "launch-1", (ModelTokens(model="m", input_tokens=9, output_tokens=2),), 7, T0
    )
    theirs = LiveSpend(reviewer.agent_id, "launch-r", (ModelTokens(model="n", output_tokens=4),), 0, T0)
    registry.record_live_spend(REPO, 38, first)
    registry.record_live_spend(REPO, 38, theirs)  # a reviewer's, in the issue its PR serves
    registry.record_live_spend(REPO, 38, later)
    view = registry.issue_view(REPO, 38)
    assert view.live == {dev.agent_id: later, reviewer.agent_id: theirs}
    assert view.agents == (dev,)  # not an agent of the issue
    assert registry.issue_view(REPO, 101).live == {}


def test_pm_lives_at_the_repository(registry: ContractRegistry) -> None:
    pm = created(registry, agent(None))
    assert registry.pm_agent(REPO) == pm
    assert registry.pm_agent(2) is None


@pytest.mark.parametrize(
    ("expected_version", "message"),
    [(None, "already exists"), (7, "expected version 7"), (0, "expected version 0")],
    ids=["create twice", "stale version", "wrong version"],
)
def test_agent_writes_are_conditional(
    registry: ContractRegistry, expected_version: int | None, message: str
) -> None:
    record = created(registry, agent())
    newer = record.transition(AgentStatus.ACTIVE, now=T0)
    with pytest.raises(ConflictError, match=message):
        registry.put_agent(AgentWrite(newer, expected_version))
    assert registry.get_agent(record.agent_id) == record


def test_a_versioned_update_wins_once(registry: ContractRegistry) -> None:
    record = created(registry, agent())
    active = record.transition(AgentStatus.ACTIVE, now=T0)
    registry.put_agent(AgentWrite(active, record.version))
    with pytest.raises(ConflictError):
        registry.put_agent(AgentWrite(active, record.version))  # the same decision replayed
    assert registry.get_agent(record.agent_id) == active


def test_illegal_transitions_are_named_errors() -> None:
    done = agent(status=AgentStatus.COMPLETED)
    with pytest.raises(IllegalTransitionError, match="cannot go from COMPLETED to ACTIVE"):
        done.transition(AgentStatus.ACTIVE, now=T0)
    assert issubclass(IllegalTransitionError, RegistryError)


def test_a_dev_agent_links_its_branch(registry: ContractRegistry) -> None:
    created(registry, agent(38))
    created(registry, agent(101, "pr-review"))
    links = registry.branch_links(REPO, ["feat/issue-38", "feat/issue-101", "main"])
    assert links == {"feat/issue-38": 38}


# --- state and assignment: older news never overwrites newer ----------------------------------


@pytest.mark.parametrize(
    ("writes", "expected"),
    [
        ([(IssueState.OPEN, 1)], IssueState.OPEN),
        ([(IssueState.CLOSED, 2), (IssueState.OPEN, 1)], IssueState.CLOSED),
        ([(IssueState.OPEN, 1), (IssueState.CLOSED, 2)], IssueState.CLOSED),
        ([(IssueState.CLOSED, 2), (IssueState.OPEN, 2)], IssueState.OPEN),
    ],
    ids=["first", "older arrives late", "newer arrives late", "same time: last write"],
)
def test_issue_state_follows_github_time(
    registry: ContractRegistry, writes: list[tuple[IssueState, int]], expected: IssueState
) -> None:
    for state, second in writes:
        registry.set_issue_state(REPO, 38, state, T0 + timedelta(seconds=second))
    view = registry.issue_view(REPO, 38)
    assert view.state is expected
    assert view.state_at == T0 + timedelta(seconds=max(s for _, s in writes))


def test_assignment_and_state_are_independent_news(registry: ContractRegistry) -> None:
    registry.set_issue_assignment(REPO, 38, True, T0 + timedelta(seconds=5))
    registry.set_issue_state(REPO, 38, IssueState.OPEN, T0 + timedelta(seconds=1))
    registry.set_issue_assignment(REPO, 38, False, T0 + timedelta(seconds=3))  # older: ignored
    view = registry.issue_view(REPO, 38)
    assert (view.app_assigned, view.assigned_at) == (True, T0 + timedelta(seconds=5))
    assert view.state is IssueState.OPEN


def test_a_vouch_is_kept_beside_state_and_assignment(registry: ContractRegistry) -> None:
    assert registry.issue_view(REPO, 38).vouched_by is None
    registry.set_issue_state(REPO, 38, IssueState.OPEN, T0 + timedelta(seconds=1))
    registry.vouch_issue(REPO, 38, "alice", T0 + timedelta(seconds=2))
    registry.set_issue_assignment(REPO, 38, True, T0 + timedelta(seconds=3))
    registry.vouch_issue(REPO, 38, "bob", T0 + timedelta(seconds=1))  # older: it stays vouched
    view = registry.issue_view(REPO, 38)
    assert (view.vouched_by, view.state, view.app_assigned) == ("alice", IssueState.OPEN, True)
    assert registry.issue_view(REPO, 39).vouched_by is None


# --- blockers ----------------------------------------------------------------------------------


def test_a_blocker_edge_is_readable_from_both_ends(registry: ContractRegistry) -> None:
    registry.add_blocker(REPO, 38, 42, None, T0)
    registry.add_blocker(REPO, 39, 42, None, T0)
    assert registry.issue_view(REPO, 38).blockers == {42}
    assert registry.issue_view(REPO, 42).blocks == {38, 39}


def test_adding_a_blocker_and_sleeping_is_one_change(registry: ContractRegistry) -> None:
    record = created(registry, agent())
    asleep = record.transition(AgentStatus.SLEEPING, now=T0, blocked_by=frozenset({42}))
    registry.add_blocker(REPO, 38, 42, AgentWrite(asleep, record.version), T0)
    assert registry.get_agent(record.agent_id) == asleep
    assert registry.issue_view(REPO, 38).blockers == {42}


@pytest.mark.parametrize("failure", ["stale agent", "closed blocker"])
def test_a_failed_blocker_transaction_writes_nothing(registry: ContractRegistry, failure: str) -> None:
    record = created(registry, agent())
    asleep = record.transition(AgentStatus.SLEEPING, now=T0, blocked_by=frozenset({42}))
    expected = record.version
    if failure == "stale agent":
        expected += 5
    else:
        registry.set_issue_state(REPO, 42, IssueState.CLOSED, T0)
    with pytest.raises(ConflictError):
        registry.add_blocker(REPO, 38, 42, AgentWrite(asleep, expected), T0)
    assert registry.get_agent(record.agent_id) == record
    assert registry.issue_view(REPO, 38).blockers == frozenset()
    assert registry.issue_view(REPO, 42).blocks == frozenset()


def test_removing_a_blocker_resolves_it_and_wakes_in_one_change(registry: ContractRegistry) -> None:
    record = created(registry, agent())
    asleep = record.transition(AgentStatus.SLEEPING, now=T0, blocked_by=frozenset({42}))
    registry.add_blocker(REPO, 38, 42, AgentWrite(asleep, record.version), T0)
    awake = asleep.transition(AgentStatus.ACTIVE, now=T0, blocked_by=frozenset())
    registry.remove_blocker(REPO, 38, 42, AgentWrite(awake, asleep.version), T0)
    assert registry.get_agent(record.agent_id) == awake
    assert registry.issue_view(REPO, 38).blockers == frozenset()
    assert registry.issue_view(REPO, 42).blocks == {38}  # resolved edges stay known
    registry.remove_blocker(REPO, 38, 43, None, T0)  # an edge that never existed: nothing
    assert registry.issue_view(REPO, 38).blockers == frozenset()


@pytest.mark.parametrize(
    ("roots", "hops", "expected"),
    [
        ([1], 5, {1: {2}, 2: {3}, 3: {4}, 10: {3}}),
        ([3], 5, {1: {2}, 2: {3}, 3: {4}, 10: {3}}),
        ([1], 0, {1: {2}}),
        ([1], 1, {1: {2}, 2: {3}}),
        ([99], 5, {}),
    ],
    ids=["from a leaf", "from the middle", "no hop", "one hop", "unconnected"],
)
def test_blocker_graph_is_bounded_by_hops(
    registry: ContractRegistry, roots: list[int], hops: int, expected: dict[int, set[int]]
) -> None:
    for issue, blocker in [(1, 2), (2, 3), (3, 4), (10, 3), (50, 51)]:
        registry.add_blocker(REPO, issue, blocker, None, T0)
    registry.remove_blocker(REPO, 50, 51, None, T0)
    assert registry.blocker_graph(REPO, roots, hops) == {k: frozenset(v) for k, v in expected.items()}


# --- pull requests, inbox, reviews, launches ---------------------------------------------------


def test_a_pull_request_links_to_its_issue_with_its_agent(registry: ContractRegistry) -> None:
    record = created(registry, agent())
    with_pr = record.updated(now=T0, pr_number=101)
    registry.link_pull_request(REPO, 101, 38, AgentWrite(with_pr, record.version), T0)
    assert registry.issue_view(REPO, 101).linked_issue == 38
    assert registry.issue_view(REPO, 38).pull_requests == {101}
    assert registry.get_agent(record.agent_id) == with_pr


def _item(delivery: str, second: int, kind: str = "comment") -> InboxItem:
    return InboxItem(
        agent_id="1-38-feat-dev",
        delivery_id=delivery,
        received_at=T0 + timedelta(seconds=second),
        kind=kind,
        summary=f"{kind} {delivery}",
    )


def test_inbox_items_are_stored_once_and_read_oldest_first(registry: ContractRegistry) -> None:
    for item in [_item("d3", 3), _item("d1", 1), _item("d1", 1), _item("d1", 1, "review"), _item("d2", 2)]:
        registry.deliver(item)
    assert [(i.delivery_id, i.kind) for i in registry.pending_inbox("1-38-feat-dev")] == [
        ("d1", "comment"),
        ("d1", "review"),
        ("d2", "comment"),
        ("d3", "comment"),
    ]


def test_read_items_leave_the_inbox(registry: ContractRegistry) -> None:
    for item in [_item("d1", 1), _item("d2", 2), _item("d3", 3)]:
        registry.deliver(item)
    registry.ack_inbox("1-38-feat-dev", [_item("d1", 1), _item("d2", 2), _item("d9", 9)])
    assert [i.delivery_id for i in registry.pending_inbox("1-38-feat-dev")] == ["d3"]


def test_inbox_needs_an_agent_id(registry: ContractRegistry) -> None:
    with pytest.raises(RegistryError, match="not an agent id"):
        registry.deliver(_item("d1", 1).model_copy(update={"agent_id": "nobody"}))


@pytest.mark.parametrize(
    ("ids", "kept"), [([1, 2], 2), ([2, 1], 2), ([3], 3)], ids=["in order", "late older review", "one"]
)
def test_the_latest_review_per_reviewer_wins(registry: ContractRegistry, ids: list[int], kept: int) -> None:
    for review_id in ids:
        registry.record_review(RecordReview(REPO, 101, "bob", f"state-{review_id}", "abc", review_id), T0)
    registry.record_review(RecordReview(REPO, 101, "carol", "approved", "abc", 1), T0)
    reviews = registry.reviews_of(REPO, 101)
    assert reviews["bob"].review_id == kept
    assert reviews["bob"].state == f"state-{kept}"
    assert set(reviews) == {"bob", "carol"}


@pytest.mark.parametrize(("token", "confirmed"), [("tok-2", True), ("tok-1", False)])
def test_a_launch_is_confirmed_only_while_pending(
    registry: ContractRegistry, token: str, confirmed: bool
) -> None:
    record = created(registry, agent(pending_launch="tok-2"))
    registry.confirm_launch(record.agent_id, token, "arn:task/1", T0 + timedelta(seconds=1))
    stored = registry.get_agent(record.agent_id)
    assert stored is not None
    if confirmed:
        assert (stored.pending_launch, stored.task_arn, stored.version) == (
            None,
            "arn:task/1",
            record.version + 1,
        )
    else:
        assert stored == record
    registry.confirm_launch("1-99-feat-dev", token, "arn:task/2", T0)  # unknown agent: nothing


@pytest.mark.parametrize(("token", "armed"), [("tok-2", True), ("tok-1", False)], ids=["pending", "stale"])
def test_a_launch_is_armed_with_its_secret_hash_only_while_pending(
    registry: ContractRegistry, token: str, armed: bool
) -> None:
    record = created(registry, agent(pending_launch="tok-2"))
    expires = T0 + timedelta(hours=12)
    assert registry.arm_launch(record.agent_id, token, "ab" * 32, expires, T0) is armed
    stored = registry.get_agent(record.agent_id)
    assert stored is not None
    if armed:
        assert (stored.launch_secret_hash, stored.launch_secret_expires_at, stored.version) == (
            "ab" * 32,
            expires,
            record.version + 1,  # a router decision made before it loses its write
        )
        assert registry.arm_launch(record.agent_id, token, "cd" * 32, expires, T0)  # re-armed: replaced
        rearmed = registry.get_agent(record.agent_id)
        assert rearmed is not None and rearmed.launch_secret_hash == "cd" * 32
    else:
        assert stored == record
    assert registry.arm_launch("1-99-feat-dev", token, "ab" * 32, expires, T0) is False


def test_a_refused_launch_is_held_counted_and_cleared_when_it_starts(registry: ContractRegistry) -> None:
    record = created(registry, agent(pending_launch="tok-2"))
    assert registry.hold_launch(record.agent_id, "tok-1", "stale", T0) is False  # not the pending one
    assert registry.hold_launch(record.agent_id, "tok-2", "vCPU limit", T0) is True
    assert registry.hold_launch(record.agent_id, "tok-2", "still the vCPU limit", T0 + timedelta(minutes=5))
    held = registry.get_agent(record.agent_id)
    assert held is not None
    assert (held.launch_failures, held.launch_error, held.launch_failed_at, held.pending_launch) == (
        2,
        "still the vCPU limit",
        T0 + timedelta(minutes=5),
        "tok-2",
    )
    registry.confirm_launch(record.agent_id, "tok-2", "arn:task/1", T0 + timedelta(minutes=15))
    started = registry.get_agent(record.agent_id)
    assert started is not None
    assert (started.launch_failures, started.launch_error, started.launch_failed_at) == (0, None, None)


def test_every_agent_claims_a_uid_of_its_own_and_keeps_it(registry: ContractRegistry) -> None:
    first = created(registry, agent(38))
    second = created(registry, agent(39))
    uid = registry.claim_uid(first.agent_id, T0)
    assert uid >= 1 << 24
    assert registry.claim_uid(first.agent_id, T0) == uid
    assert registry.claim_uid(second.agent_id, T0) not in (uid, None)
    stored = registry.get_agent(first.agent_id)
    assert stored is not None and (stored.uid, stored.version) == (uid, first.version + 1)
    with pytest.raises(ConflictError):
        registry.claim_uid("1-99-feat-dev", T0)


def test_a_uid_another_agent_holds_is_never_handed_out(
    registry: ContractRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    import squadron.adapters.dynamo_registry as dynamo  # noqa: PLC0415
    import tests.support.fake_registry as fake  # noqa: PLC0415

    # Two agents whose first candidates collide: the second takes its next one.
    def colliding(agent_id: str, attempt: int) -> int:
        return (1 << 24) + attempt

    monkeypatch.setattr(dynamo, "candidate_uid", colliding)
    monkeypatch.setattr(fake, "candidate_uid", colliding)
    first = created(registry, agent(38))
    second = created(registry, agent(39))
    assert registry.claim_uid(first.agent_id, T0) == 1 << 24
    assert registry.claim_uid(second.agent_id, T0) == (1 << 24) + 1


def test_agents_by_status(registry: ContractRegistry) -> None:
    a = created(registry, agent(38))
    b = created(registry, agent(39, updated_at=T0 + timedelta(seconds=1)))
    registry.put_agent(AgentWrite(b.transition(AgentStatus.ACTIVE, now=T0 + timedelta(seconds=2)), b.version))
    assert [x.agent_id for x in registry.agents_with_status(AgentStatus.CREATED)] == [a.agent_id]
    assert [x.agent_id for x in registry.agents_with_status(AgentStatus.ACTIVE)] == [b.agent_id]


def _finished(registry: ContractRegistry, issue: int, status: AgentStatus, hours: float) -> AgentRecord:
    """Agent #``issue`` created at T0, finished ``hours`` later (in ``status``)."""
    record = created(registry, agent(issue))
    ended = record.transition(status, now=T0 + timedelta(hours=hours))
    registry.put_agent(AgentWrite(ended, record.version))
    return ended


def test_finished_agents_are_found_longest_finished_first_until_purged_or_restarted(
    registry: ContractRegistry,
) -> None:
    _finished(registry, 40, AgentStatus.COMPLETED, 3)
    _finished(registry, 38, AgentStatus.CANCELLED, 1)
    late = _finished(registry, 41, AgentStatus.COMPLETED, 9)  # after the cutoff
    early = _finished(registry, 39, AgentStatus.COMPLETED, 2)
    created(registry, agent(42))  # working
    cutoff = T0 + timedelta(hours=5)

    def found(limit: int = 10) -> list[str]:
        return [a.agent_id for a in registry.finished_agents(cutoff, limit)]

    assert found() == ["1-38-feat-dev", "1-39-feat-dev", "1-40-feat-dev"]
    assert found(limit=2) == ["1-38-feat-dev", "1-39-feat-dev"]  # a bounded page
    assert [a.agent_id for a in registry.finished_agents(T0 + timedelta(hours=10), 10)][-1] == late.agent_id
    # Later writes to a finished agent (a claim, its task's last report) do not move its finish.
    stored = registry.get_agent(early.agent_id)
    assert stored is not None
    later = T0 + timedelta(hours=8)
    claimed = stored.updated(now=later, lease_owner="purge:t", lease_expires_at=later)
    registry.put_agent(AgentWrite(claimed, stored.version))
    assert found() == ["1-38-feat-dev", "1-39-feat-dev", "1-40-feat-dev"]
    # Purged: never listed again. Restarted: working again, so not listed.
    registry.put_agent(AgentWrite(claimed.updated(now=later, purged_at=later), claimed.version))
    first = registry.get_agent("1-38-feat-dev")
    assert first is not None
    registry.put_agent(
        AgentWrite(first.transition(AgentStatus.CREATED, now=later, generation=2), first.version)
    )
    assert found() == ["1-40-feat-dev"]
    purged = registry.get_agent(early.agent_id)
    assert purged is not None and purged.purged_at == later and purged.finished_at == T0 + timedelta(hours=2)
    # Purged agents are still finished agents for everyone else (squadron status, the reconciler).
    assert [a.agent_id for a in registry.agents_with_status(AgentStatus.COMPLETED)] == [
        "1-40-feat-dev",
        "1-41-feat-dev",
        "1-39-feat-dev",  # purged: last
    ]


# --- leases ------------------------------------------------------------------------------------


LeaseStep = Callable[[ContractRegistry], object]


def test_one_live_lease_per_agent(registry: ContractRegistry) -> None:
    record = created(registry, agent())
    ttl = timedelta(minutes=5)
    held = registry.acquire_lease(record.agent_id, "task-1", T0, ttl)
    assert (held.lease_owner, held.lease_expires_at) == ("task-1", T0 + ttl)
    renewed = registry.acquire_lease(record.agent_id, "task-1", T0 + timedelta(minutes=4), ttl)
    assert renewed.lease_expires_at == T0 + timedelta(minutes=9)
    with pytest.raises(ConflictError, match="held by another live task"):
        registry.acquire_lease(record.agent_id, "task-2", T0 + timedelta(minutes=8), ttl)
    taken = registry.acquire_lease(record.agent_id, "task-2", T0 + timedelta(minutes=10), ttl)  # expired
    assert taken.lease_owner == "task-2"
    registry.release_lease(record.agent_id, "task-1", T0)  # not the holder: nothing
    assert registry.get_agent(record.agent_id) == taken
    registry.release_lease(record.agent_id, "task-2", T0 + timedelta(minutes=11))
    stored = registry.get_agent(record.agent_id)
    assert stored is not None
    assert stored.lease_owner is None
    assert (
        registry.acquire_lease(record.agent_id, "task-3", T0 + timedelta(minutes=12), ttl).lease_owner
        == "task-3"
    )


def test_a_lease_bumps_the_version_so_stale_router_writes_lose(registry: ContractRegistry) -> None:
    record = created(registry, agent())
    registry.acquire_lease(record.agent_id, "task-1", T0, timedelta(minutes=5))
    with pytest.raises(ConflictError):
        registry.put_agent(AgentWrite(record.transition(AgentStatus.ACTIVE, now=T0), record.version))


def test_no_lease_for_an_unknown_agent(registry: ContractRegistry) -> None:
    with pytest.raises(ConflictError):
        registry.acquire_lease("1-99-feat-dev", "task-1", T0, timedelta(minutes=5))


# --- decisions (the commit point) ---------------------------------------------------------------


def decision(key: str = "d-1", *, at: datetime = T0, outside: tuple[Any, ...] | None = None) -> Decision:
    effects = (
        outside
        if outside is not None
        else (
            AddLabels("octo/app", 77, 38, ("needs-human",)),
            PostComment("octo/app", 77, 38, "handed to humans " + "x" * 5000, "framework"),
            CreateIssue("octo/app", 77, "needs-human: #38", "body", ("needs-human",), ("ada",)),
            LaunchAgent("1-38-feat-dev", "wake", "because", "tok-2"),
        )
    )
    return Decision(key, at, effects, done=False, installation_id=77, repo_full_name="octo/app", repo_id=REPO)


def test_a_decision_commits_with_its_writes_and_round_trips(registry: ContractRegistry) -> None:
    stored = created(registry, agent())
    woken = stored.updated(now=T0, wake_reason="news")
    item = InboxItem(
        agent_id=stored.agent_id, delivery_id="d-1", received_at=T0, kind="comment", summary="hi"
    )
    registry.commit(
        [
            PutAgent(AgentWrite(woken, stored.version)),
            AddBlocker(REPO, 38, 42),
            LinkPullRequest(REPO, 101, 38),
            DeliverInbox(item),
        ],
        decision(),
    )
    assert registry.decision("d-1") == decision()
    assert registry.get_agent(stored.agent_id) == woken
    view = registry.issue_view(REPO, 38)
    assert view.blockers == frozenset({42}) and view.pull_requests == frozenset({101})
    assert registry.pending_inbox(stored.agent_id) == [item]
    assert registry.decision("d-2") is None


def test_an_agent_written_twice_in_one_decision_is_committed_once(registry: ContractRegistry) -> None:
    stored = created(registry, agent())
    first = stored.updated(now=T0, wake_reason="one")
    second = first.updated(now=T0, wake_reason="two")
    registry.commit(
        [PutAgent(AgentWrite(first, stored.version)), PutAgent(AgentWrite(second, first.version))],
        decision(outside=()),
    )
    assert registry.get_agent(stored.agent_id) == second


@pytest.mark.parametrize("lost", ["agent version", "decision exists", "blocker closed"])
def test_a_commit_that_loses_a_condition_stores_nothing(registry: ContractRegistry, lost: str) -> None:
    stored = created(registry, agent())
    if lost == "decision exists":
        registry.commit([], decision())
    if lost == "blocker closed":
        registry.set_issue_state(REPO, 42, IssueState.CLOSED, T0)
    expected = stored.version + (1 if lost == "agent version" else 0)
    if lost == "agent version":
        registry.put_agent(AgentWrite(stored.updated(now=T0), stored.version))  # a heartbeat
    before = registry.get_agent(stored.agent_id)
    item = InboxItem(
        agent_id=stored.agent_id, delivery_id="d-2", received_at=T0, kind="comment", summary="hi"
    )
    with pytest.raises(ConflictError):
        registry.commit(
            [
                PutAgent(AgentWrite(stored.updated(now=T0, wake_reason="x"), stored.version)),
                AddBlocker(REPO, 38, 42),
                DeliverInbox(item),
            ],
            decision("d-1" if lost == "decision exists" else "d-2"),
        )
    assert registry.get_agent(stored.agent_id) == before
    assert registry.get_agent(stored.agent_id).version == expected  # type: ignore[union-attr]
    assert registry.issue_view(REPO, 38).blockers == frozenset()
    assert registry.pending_inbox(stored.agent_id) == []
    assert registry.decision("d-2") is None


def test_unfinished_decisions_are_found_until_they_are_finished(registry: ContractRegistry) -> None:
    for n in range(12):
        registry.commit([], decision(f"d-{n:02}", at=T0 + timedelta(minutes=n)))
    registry.commit([], decision("late", at=T0 + timedelta(minutes=30)))
    done_at_once = Decision("quiet", T0, (), done=True)
    registry.commit([], done_at_once)
    found = registry.unfinished_decisions(T0 + timedelta(minutes=10), limit=5)
    assert [d.key for d in found] == ["d-00", "d-01", "d-02", "d-03", "d-04"]
    registry.finish_decision("d-00", T0 + timedelta(hours=1))
    finished = registry.decision("d-00")
    assert finished is not None and finished.done and finished.outside == ()
    assert [d.key for d in registry.unfinished_decisions(T0 + timedelta(minutes=10))] == [
        "d-01",
        "d-02",
        "d-03",
        "d-04",
        "d-05",
        "d-06",
        "d-07",
        "d-08",
        "d-09",
    ]
    assert registry.decision("quiet") == done_at_once


# --- history (committed events, per repository, by time) ----------------------------------------


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
    registry: ContractRegistry, key: str, at: datetime, count: int, *, repo: int = REPO
) -> list[DomainEvent]:
    events = [domain_event(key, i, at, repo=repo) for i in range(count)]
    registry.commit([], Decision(key, at, (), done=True), events)
    return events


def ordered(events: list[DomainEvent]) -> list[DomainEvent]:
    return sorted(events, key=lambda e: (e.time, e.id))


def test_history_is_a_repositorys_committed_events_of_a_period_in_time_order(
    registry: ContractRegistry,
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


def test_history_bounds_in_any_time_zone_name_the_same_instants(registry: ContractRegistry) -> None:
    events = committed(registry, "d-1", T0 + timedelta(hours=1), 2)
    paris = timezone(timedelta(hours=1))
    start = (T0 + timedelta(hours=1)).astimezone(paris)  # 14:00 in Paris is 13:00 UTC
    assert registry.history(REPO, start, start + timedelta(seconds=1)) == ordered(events)
    assert registry.history(REPO, start + timedelta(microseconds=1), start + timedelta(seconds=1)) == []


def test_history_returns_the_oldest_events_up_to_its_limit_across_pages(registry: ContractRegistry) -> None:
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
    registry: ContractRegistry, start: datetime, end: datetime, problem: str
) -> None:
    committed(registry, "d-1", T0, 1)
    with pytest.raises(PeriodError, match=problem):
        registry.history(REPO, start, end)
    with pytest.raises(ValueError, match="limit must be at least 1"):
        registry.history(REPO, T0, T0 + timedelta(days=1), limit=0)


def test_a_decision_that_loses_a_condition_leaves_no_history(registry: ContractRegistry) -> None:
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


def _verdict(
    pr: int, verdict: str, previous: str | None, description: str, key: str = "effect-1"
) -> DomainEvent:
    return make_event(
        MergeGateVerdictChanged(pr_number=pr, verdict=verdict, previous=previous, description=description),
        event_id=gate_event_id(f"{key}-{pr}", verdict),
        at=T0,
        repository=Repository(id=REPO, full_name="octo/app"),
        correlation_id="gate",
        issue=38,
    )


def test_what_the_gate_waits_for_is_kept_with_its_verdict(registry: ContractRegistry) -> None:
    assert not registry.set_gate_description(REPO, 101, "waiting", "waiting: waiting on ci")  # never judged
    assert registry.gate_views(REPO, [101]) == {}
    assert registry.change_verdict(REPO, 101, None, _verdict(101, "waiting", None, "waiting: waiting on ci"))
    assert registry.gate_views(REPO, [101]) == {101: GateView("waiting", "waiting: waiting on ci")}
    # the verdict stands, the reasons move on: stored, and no event
    assert registry.set_gate_description(REPO, 101, "waiting", "waiting: a human approval")
    assert registry.gate_views(REPO, [101, 102]) == {101: GateView("waiting", "waiting: a human approval")}
    assert not registry.set_gate_description(REPO, 101, "ready", "ready: merging")  # not its verdict
    assert registry.change_verdict(REPO, 101, "waiting", _verdict(101, "ready", "waiting", "ready: merging"))
    assert registry.gate_views(REPO, [101]) == {101: GateView("ready", "ready: merging")}
    assert registry.gate_views(REPO + 1, [101]) == {}  # another repository's PR #101


def test_the_gate_views_of_many_pull_requests_are_read_in_batches(registry: ContractRegistry) -> None:
    prs = range(1, 131)  # more than one BatchGetItem takes
    for pr in prs:
        if pr % 3:
            assert registry.change_verdict(REPO, pr, None, _verdict(pr, "waiting", None, f"waiting: on {pr}"))
    views = registry.gate_views(REPO, [*prs, *prs])
    assert views == {pr: GateView("waiting", f"waiting: on {pr}") for pr in prs if pr % 3}


def test_a_write_is_claimed_once_and_its_answer_kept_for_whoever_asks_again(
    registry: ContractRegistry,
) -> None:
    key = "1-38-feat-dev-g1-l1.w1"
    assert registry.claim_write("1-38-feat-dev", key, T0) is None  # the first: carry it out
    again = registry.claim_write("1-38-feat-dev", key, T0 + timedelta(seconds=40))
    assert again == WriteClaim(claimed_at=T0, result=None)  # claimed, no answer yet
    answer = {"id": 7, "body": "progress", "user": {"login": "squadron[bot]"}, "labels": ["a", "b"]}
    registry.record_write("1-38-feat-dev", key, answer)
    assert registry.claim_write("1-38-feat-dev", key, T0 + timedelta(minutes=1)) == WriteClaim(T0, answer)
    assert registry.claim_write("1-38-feat-dev", "1-38-feat-dev-g1-l1.w2", T0) is None  # its own key
    assert registry.claim_write("1-39-feat-dev", key, T0) is None  # another agent's is another write
