"""The :class:`~squadron.registry_ports.Decisions` contract: a decision's writes and record all or nothing,
found until finished."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Protocol

import pytest

from squadron.domain.agents import ConflictError, InboxItem, IssueState
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
)
from squadron.registry_ports import AgentRecords, Decisions, Inboxes, IssueGraph
from tests.unit.registry.support import REPO, T0, agent, created


class Subject(Decisions, AgentRecords, IssueGraph, Inboxes, Protocol):
    """The commit point, and the ports whose writes it commits."""


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


def test_a_decision_commits_with_its_writes_and_round_trips(registry: Subject) -> None:
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


def test_an_agent_written_twice_in_one_decision_is_committed_once(registry: Subject) -> None:
    stored = created(registry, agent())
    first = stored.updated(now=T0, wake_reason="one")
    second = first.updated(now=T0, wake_reason="two")
    registry.commit(
        [PutAgent(AgentWrite(first, stored.version)), PutAgent(AgentWrite(second, first.version))],
        decision(outside=()),
    )
    assert registry.get_agent(stored.agent_id) == second


@pytest.mark.parametrize("lost", ["agent version", "decision exists", "blocker closed"])
def test_a_commit_that_loses_a_condition_stores_nothing(registry: Subject, lost: str) -> None:
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


def test_unfinished_decisions_are_found_until_they_are_finished(registry: Subject) -> None:
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
