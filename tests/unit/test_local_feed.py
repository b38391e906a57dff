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
    agent_id = changes.pop("agent_id", "1-1-feat-dev")
    pm = agent_id.endswith("-pm")
    return AgentRecord(
        agent_id=agent_id,
        role="pm" if pm else "feat-dev",
        kind=RoleKind.PM if pm else RoleKind.DEV,
        repo_id=1,
        repo_full_name="octo/demo",
        issue_number=None if pm else 1,
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
        (agent(AgentStatus.CREATED), None, "agent feat-dev-1: CREATED"),
        (agent(AgentStatus.ACTIVE), AgentStatus.CREATED, "agent feat-dev-1: CREATED -> ACTIVE"),
        (
            agent(AgentStatus.SLEEPING, blocked_by=frozenset({9, 2})),
            AgentStatus.ACTIVE,
            "agent feat-dev-1: ACTIVE -> SLEEPING (blocked by #2, #9)",
        ),
        (
            agent(AgentStatus.COMPLETED, pr_number=3),
            AgentStatus.ACTIVE,
            "agent feat-dev-1: ACTIVE -> COMPLETED (PR #3)",
        ),
        (agent(AgentStatus.CREATED, pr_number=3), None, "agent feat-dev-1: CREATED"),
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
    assert feed.poll() == ["github: issues.opened #1 by alice", "agent pm: CREATED"]
    assert feed.poll() == []  # nothing new

    agents[0] = agent(AgentStatus.ACTIVE, agent_id="1-pm", seconds=2)
    agents.append(agent(AgentStatus.CREATED, seconds=1))
    # Ordered by when the record changed, whatever order the registry lists them in.
    assert feed.poll() == ["agent feat-dev-1: CREATED", "agent pm: CREATED -> ACTIVE"]
    agents[1] = agent(AgentStatus.CREATED, seconds=4)  # rewritten with the same status: nothing said
    assert feed.poll() == []
    agents[1] = agent(AgentStatus.ACTIVE, seconds=5)
    assert feed.poll() == ["agent feat-dev-1: CREATED -> ACTIVE"]


def _before_the_restart() -> tuple[list[Delivery], list[AgentRecord], list[str]]:
    deliveries = [Delivery("issues", "opened", {"issue": {"number": 1}, "sender": {"login": "alice"}})]
    agents = [agent(AgentStatus.SLEEPING), agent(AgentStatus.ACTIVE, agent_id="1-pm")]
    events = [f"12:00:{n:02d} agent.slept.v1 octo/demo#1 feat-dev-1" for n in range(13)]
    return deliveries, agents, events


Restored = tuple[list[Delivery], list[AgentRecord], list[str]]

HISTORY: list[tuple[str, Restored, list[str], list[str]]] = [
    # (what a restart put back, the history lines, what the first poll says)
    ("nothing (a first start)", ([], [], []), [], []),
    (
        "deliveries, agents and events of earlier runs",
        _before_the_restart(),
        [
            "history: before this start: 1 webhook deliveries, 13 domain events; agents now: 1 active, 1 sleeping",
            "history: ... 3 earlier events (`squadron events tail --local --since 1w`)",
            *[f"history: event: 12:00:{n:02d} agent.slept.v1 octo/demo#1 feat-dev-1" for n in range(3, 13)],
            "history: end; what follows is new",
        ],
        [],
    ),
]


@pytest.mark.parametrize(
    ("restored", "history", "first_poll"), [h[1:] for h in HISTORY], ids=[h[0] for h in HISTORY]
)
def test_a_restart_says_its_history_once_as_history_and_never_as_news(
    restored: tuple[list[Delivery], list[AgentRecord], list[str]], history: list[str], first_poll: list[str]
) -> None:
    deliveries, agents, logged = list(restored[0]), list(restored[1]), list(restored[2])
    unread = list(logged)

    def events() -> list[str]:
        taken = list(unread)
        unread.clear()
        return taken

    feed = Feed(deliveries=lambda: deliveries, agents=lambda: agents, events=events)
    assert feed.history() == history
    assert feed.poll() == first_poll  # nothing old comes back as if it were new
    deliveries.append(
        Delivery("issue_comment", "created", {"issue": {"number": 1}, "sender": {"login": "bob"}})
    )
    unread.append("12:05:00 agent.woke.v1 octo/demo#1 feat-dev-1")
    agents[:1] = [agent(AgentStatus.ACTIVE, seconds=300)]
    assert feed.poll() == [
        "github: issue_comment.created #1 by bob",
        *(["agent feat-dev-1: SLEEPING -> ACTIVE"] if restored[1] else ["agent feat-dev-1: ACTIVE"]),
        "event: 12:05:00 agent.woke.v1 octo/demo#1 feat-dev-1",
    ]
