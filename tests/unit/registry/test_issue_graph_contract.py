"""The :class:`~squadron.registry_ports.IssueGraph` contract: an issue's view, state news in GitHub's time
order, blocker edges and pull-request links (with an agent's write in the same change)."""

from __future__ import annotations

from datetime import timedelta
from typing import Protocol

import pytest

from squadron.domain.agents import AgentStatus, ConflictError, IssueState
from squadron.domain.effects import AgentWrite
from squadron.domain.issue_budget import LiveSpend
from squadron.domain.usage import ModelTokens
from squadron.registry_ports import AgentRecords, IssueGraph
from tests.unit.registry.support import REPO, T0, agent, created


class Subject(IssueGraph, AgentRecords, Protocol):
    """The graph, and the agents written in the same change."""


def test_an_issues_view_holds_its_agents(registry: Subject) -> None:
    record = created(registry, agent(blocked_by=frozenset({5, 7}), pending_launch="tok"))
    review = created(registry, agent(38, "pr-review"))
    assert registry.issue_view(REPO, 38).agents == (record, review)  # by id
    assert registry.issue_view(REPO, 39).agents == ()


def test_a_running_tasks_spend_is_kept_in_its_costed_issue_and_replaced_by_its_next_report(
    registry: Subject,
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


def test_a_dev_agent_links_its_branch(registry: Subject) -> None:
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
    registry: Subject, writes: list[tuple[IssueState, int]], expected: IssueState
) -> None:
    for state, second in writes:
        registry.set_issue_state(REPO, 38, state, T0 + timedelta(seconds=second))
    view = registry.issue_view(REPO, 38)
    assert view.state is expected
    assert view.state_at == T0 + timedelta(seconds=max(s for _, s in writes))


def test_assignment_and_state_are_independent_news(registry: Subject) -> None:
    registry.set_issue_assignment(REPO, 38, True, T0 + timedelta(seconds=5))
    registry.set_issue_state(REPO, 38, IssueState.OPEN, T0 + timedelta(seconds=1))
    registry.set_issue_assignment(REPO, 38, False, T0 + timedelta(seconds=3))  # older: ignored
    view = registry.issue_view(REPO, 38)
    assert (view.app_assigned, view.assigned_at) == (True, T0 + timedelta(seconds=5))
    assert view.state is IssueState.OPEN


def test_a_vouch_is_kept_beside_state_and_assignment(registry: Subject) -> None:
    assert registry.issue_view(REPO, 38).vouched_by is None
    registry.set_issue_state(REPO, 38, IssueState.OPEN, T0 + timedelta(seconds=1))
    registry.vouch_issue(REPO, 38, "alice", T0 + timedelta(seconds=2))
    registry.set_issue_assignment(REPO, 38, True, T0 + timedelta(seconds=3))
    registry.vouch_issue(REPO, 38, "bob", T0 + timedelta(seconds=1))  # older: it stays vouched
    view = registry.issue_view(REPO, 38)
    assert (view.vouched_by, view.state, view.app_assigned) == ("alice", IssueState.OPEN, True)
    assert registry.issue_view(REPO, 39).vouched_by is None


# --- blockers ----------------------------------------------------------------------------------


def test_a_blocker_edge_is_readable_from_both_ends(registry: Subject) -> None:
    registry.add_blocker(REPO, 38, 42, None, T0)
    registry.add_blocker(REPO, 39, 42, None, T0)
    assert registry.issue_view(REPO, 38).blockers == {42}
    assert registry.issue_view(REPO, 42).blocks == {38, 39}


def test_adding_a_blocker_and_sleeping_is_one_change(registry: Subject) -> None:
    record = created(registry, agent())
    asleep = record.transition(AgentStatus.SLEEPING, now=T0, blocked_by=frozenset({42}))
    registry.add_blocker(REPO, 38, 42, AgentWrite(asleep, record.version), T0)
    assert registry.get_agent(record.agent_id) == asleep
    assert registry.issue_view(REPO, 38).blockers == {42}


@pytest.mark.parametrize("failure", ["stale agent", "closed blocker"])
def test_a_failed_blocker_transaction_writes_nothing(registry: Subject, failure: str) -> None:
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


def test_removing_a_blocker_resolves_it_and_wakes_in_one_change(registry: Subject) -> None:
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
    registry: Subject, roots: list[int], hops: int, expected: dict[int, set[int]]
) -> None:
    for issue, blocker in [(1, 2), (2, 3), (3, 4), (10, 3), (50, 51)]:
        registry.add_blocker(REPO, issue, blocker, None, T0)
    registry.remove_blocker(REPO, 50, 51, None, T0)
    assert registry.blocker_graph(REPO, roots, hops) == {k: frozenset(v) for k, v in expected.items()}


def test_a_pull_request_links_to_its_issue_with_its_agent(registry: Subject) -> None:
    record = created(registry, agent())
    with_pr = record.updated(now=T0, pr_number=101)
    registry.link_pull_request(REPO, 101, 38, AgentWrite(with_pr, record.version), T0)
    assert registry.issue_view(REPO, 101).linked_issue == 38
    assert registry.issue_view(REPO, 38).pull_requests == {101}
    assert registry.get_agent(record.agent_id) == with_pr
