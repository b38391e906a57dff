"""The router's side of recovery: relaunch a dead task once, then hand the issue to humans."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Literal

import pytest

from squadron.domain.agents import AgentStatus, ConflictError
from squadron.domain.routing import RoutingPolicy
from tests.support.events import recover
from tests.support.world import World

A38 = "1-38-feat-dev"
PM = "1-pm"


def running(world: World) -> None:
    world.send(world.events.assigned(38))


def asleep(world: World) -> None:
    running(world)
    world.send(world.events.register_blocker(38, 42, agent_id=A38, sleep=True))


def with_a_pm(world: World) -> None:
    world.send(world.events.opened(38))


def relaunched_once(world: World) -> None:
    running(world)
    world.send(recover(world.events, world.agent(A38), "relaunch"))


Action = Literal["relaunch", "escalate"]
CASES: list[tuple[str, Callable[[World], None], str, Action, list[str]]] = [
    (
        "a dead task is relaunched (resume) and the old one stopped",
        running,
        A38,
        "relaunch",
        [f"put {A38} CREATED (v3)", f"stop {A38}", f"launch {A38} start"],
    ),
    (
        "a second death escalates: humans get the issue, a needs-human issue names the agent",
        relaunched_once,
        A38,
        "relaunch",
        [
            f"put {A38} ESCALATED (v6)",
            "label #38 needs-human",
            "comment #38",
            "create issue 'needs-human: #38 (feat-dev-38)'",
            f"stop {A38}",
        ],
    ),
    (
        "a sleeper past its max sleep is escalated",
        asleep,
        A38,
        "escalate",
        [
            f"put {A38} ESCALATED (v4)",
            "label #38 needs-human",
            "comment #38",
            "create issue 'needs-human: #38 (feat-dev-38)'",
        ],
    ),
    (
        "a dead PM task is relaunched like any other",
        with_a_pm,
        PM,
        "relaunch",
        [f"put {PM} CREATED (v3)", f"stop {PM}", f"launch {PM} start"],
    ),
    (
        "an escalated PM has no issue of its own: only the needs-human issue",
        with_a_pm,
        PM,
        "escalate",
        [f"put {PM} ESCALATED (v3)", "create issue 'needs-human: the PM (pm)'", f"stop {PM}"],
    ),
]


@pytest.mark.parametrize(
    ("name", "setup", "agent_id", "action", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_recovery(
    name: str, setup: Callable[[World], None], agent_id: str, action: Action, expected: list[str]
) -> None:
    world = World()
    setup(world)
    assert world.say(recover(world.events, world.agent(agent_id), action)) == expected


def test_a_command_about_an_agent_that_changed_since_changes_nothing() -> None:
    world = World()
    running(world)
    seen = world.agent(A38)
    world.send(world.events.register_blocker(38, 42, agent_id=A38, sleep=True))
    assert world.say(recover(world.events, seen, "relaunch")) == ["discard"]
    assert world.agent(A38).status is AgentStatus.SLEEPING


def test_a_replayed_command_relaunches_once() -> None:
    world = World()
    running(world)
    command = recover(world.events, world.agent(A38), "relaunch")
    world.send(command)
    assert world.say(command) == []  # the same delivery: its decision was carried out already
    assert len(world.launcher.tasks_for(A38)) == 2


def test_the_escalation_explains_and_notifies() -> None:
    world = World(
        policy=RoutingPolicy(
            escalation_mentions=("@octo-maintainer",), escalation_assignees=("octo-maintainer",)
        )
    )
    asleep(world)
    world.send(
        recover(
            world.events, world.agent(A38), "escalate", "asleep for 90000 s, over max_sleep_duration 86400 s"
        )
    )
    ((_, number, body, author),) = world.github.comments
    assert (number, author) == (38, "framework")
    assert body == (
        "feat-dev-38 needs a human: asleep for 90000 s, over max_sleep_duration 86400 s. "
        "It waits for #42. @octo-maintainer"
    )
    (issue,) = world.github.created
    assert issue["assignees"] == ("octo-maintainer",) and issue["labels"] == ("needs-human",)
    agent = world.agent(A38)
    assert agent.status is AgentStatus.ESCALATED and agent.blocked_by == frozenset({42})


def test_a_relaunch_takes_the_lease_from_the_dead_task_so_its_successor_can_hold_it() -> None:
    world = World()
    running(world)
    lease = timedelta(minutes=15)
    world.registry.acquire_lease(A38, "the-dead-task", world.now, lease)
    with pytest.raises(ConflictError):
        world.registry.acquire_lease(A38, "the-successor", world.now, lease)
    world.send(recover(world.events, world.agent(A38), "relaunch"))
    assert (world.agent(A38).lease_owner, world.agent(A38).lease_expires_at) == (None, None)
    assert world.registry.acquire_lease(A38, "the-successor", world.now, lease).lease_owner == "the-successor"
