"""The local stack's feed: deliveries and agents' changes of status, each said once."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from squadron.domain.agents import AgentRecord, AgentStatus, RoleKind
from squadron.local.feed import Feed, describe_agent, describe_delivery

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def agent(status: AgentStatus, *, seconds: int = 0, **changes: Any) -> AgentRecord:
    return AgentRecord(
        agent_id=changes.pop("agent_id", "1-1-feat-dev"),
        role="feat-dev",
        kind=RoleKind.DEV,
        repo_id=1,
        repo_full_name="octo/demo",
        issue_number=1,
        status=status,
        created_at=T0,
        updated_at=T0 + timedelta(seconds=seconds),
        **changes,
    )


@dataclass
class Delivery:
    event: str
    action: str | None
    payload: dict[str, Any]


@pytest.mark.parametrize(
    ("event", "action", "payload", "said"),
    [
        (
            "issues",
            "opened",
            {"issue": {"number": 1}, "sender": {"login": "alice"}},
            "issues.opened #1 by alice",
        ),
        (
            "pull_request",
            "closed",
            {"pull_request": {"number": 3}, "sender": {"login": "squadron[bot]"}},
            "pull_request.closed #3 by squadron[bot]",
        ),
        ("status", None, {"sha": "abc", "sender": {"login": "ci"}}, "status by ci"),
        ("check_run", "completed", {"check_run": {}}, "check_run.completed by None"),
    ],
)
def test_a_delivery_in_words(event: str, action: str | None, payload: dict[str, Any], said: str) -> None:
    assert describe_delivery(event, action, payload) == said


@pytest.mark.parametrize(
    ("record", "before", "said"),
    [
        (agent(AgentStatus.CREATED), None, "agent 1-1-feat-dev: CREATED"),
        (agent(AgentStatus.ACTIVE), AgentStatus.CREATED, "agent 1-1-feat-dev: CREATED -> ACTIVE"),
        (
            agent(AgentStatus.SLEEPING, blocked_by=frozenset({9, 2})),
            AgentStatus.ACTIVE,
            "agent 1-1-feat-dev: ACTIVE -> SLEEPING (blocked by #2, #9)",
        ),
        (
            agent(AgentStatus.COMPLETED, pr_number=3),
            AgentStatus.ACTIVE,
            "agent 1-1-feat-dev: ACTIVE -> COMPLETED (PR #3)",
        ),
        (agent(AgentStatus.CREATED, pr_number=3), None, "agent 1-1-feat-dev: CREATED"),
    ],
)
def test_an_agent_change_in_words(record: AgentRecord, before: AgentStatus | None, said: str) -> None:
    assert describe_agent(record, before) == said


def test_each_delivery_and_each_change_of_status_is_said_once() -> None:
    deliveries: list[Delivery] = []
    agents: list[AgentRecord] = []
    feed = Feed(deliveries=lambda: deliveries, agents=lambda: agents)
    assert feed.poll() == []

    deliveries.append(Delivery("issues", "opened", {"issue": {"number": 1}, "sender": {"login": "alice"}}))
    agents.append(agent(AgentStatus.CREATED, agent_id="1-pm"))
    assert feed.poll() == ["github: issues.opened #1 by alice", "agent 1-pm: CREATED"]
    assert feed.poll() == []  # nothing new

    agents[0] = agent(AgentStatus.ACTIVE, agent_id="1-pm", seconds=2)
    agents.append(agent(AgentStatus.CREATED, seconds=1))
    # Ordered by when the record changed, whatever order the registry lists them in.
    assert feed.poll() == ["agent 1-1-feat-dev: CREATED", "agent 1-pm: CREATED -> ACTIVE"]
    agents[1] = agent(AgentStatus.CREATED, seconds=4)  # rewritten with the same status: nothing said
    assert feed.poll() == []
    agents[1] = agent(AgentStatus.ACTIVE, seconds=5)
    assert feed.poll() == ["agent 1-1-feat-dev: CREATED -> ACTIVE"]
