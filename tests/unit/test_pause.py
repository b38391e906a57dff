"""A paused repository (invalid configuration): its events are recorded, nothing new starts.

Each case routes some events normally, then one while paused, and says what was
carried out (the effects in the order the shell applies them) and what the registry
and the launcher hold afterwards.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from squadron.domain.agents import AgentStatus
from squadron.domain.effects import Discard, apply_order
from squadron.domain.events import EventEnvelope
from tests.support.events import Events, summarize
from tests.support.world import World

A38 = "1-38-feat-dev"
REASON = "the configuration on main at abc1234 is invalid (1 problem)"

Setup = Callable[[Events], list[EventEnvelope]]
Under = Callable[[Events], EventEnvelope]


def _asleep_on_42(e: Events) -> list[EventEnvelope]:
    return [e.assigned(38), e.register_blocker(38, 42, agent_id=A38, sleep=True)]


# (case, routed before, routed while paused, what is carried out, the agent's status after)
CASES: list[tuple[str, Setup, Under, list[str], AgentStatus | None]] = [
    (
        "an opened issue waits in the PM's inbox; no PM starts",
        lambda e: [],
        lambda e: e.opened(38),
        ["state #38 open", "inbox 1-pm issue_opened", "discard"],
        None,
    ),
    (
        "an assignment is recorded; no agent is created",
        lambda e: [],
        lambda e: e.assigned(38),
        ["assigned #38", "discard"],
        None,
    ),
    (
        "a comment reaches a sleeper's inbox without waking it",
        _asleep_on_42,
        lambda e: e.comment(38),
        ["inbox 1-38-feat-dev comment", "discard"],
        AgentStatus.SLEEPING,
    ),
    (
        "a closed blocker is recorded; the sleeper is not woken (the reconciler replays it later)",
        _asleep_on_42,
        lambda e: e.closed(42),
        ["state #42 closed", "inbox 1-38-feat-dev blocker_closed", "discard"],
        AgentStatus.SLEEPING,
    ),
    (
        "a closed issue still ends its agent and stops its task",
        lambda e: [e.assigned(38)],
        lambda e: e.closed(38),
        ["state #38 closed", "put 1-38-feat-dev COMPLETED (v3)", "stop 1-38-feat-dev"],
        AgentStatus.COMPLETED,
    ),
    (
        "an unassignment still cancels the agent",
        lambda e: [e.assigned(38)],
        lambda e: e.unassigned(38),
        ["unassigned #38", "put 1-38-feat-dev CANCELLED (v3)", "stop 1-38-feat-dev"],
        AgentStatus.CANCELLED,
    ),
    (
        "a pull request gets no reviewer and no judgement",
        lambda e: [e.assigned(38)],
        lambda e: e.pr(101, "feat/issue-38"),
        ["link PR #101 to #38", "discard"],
        AgentStatus.CREATED,
    ),
]


@pytest.mark.parametrize(
    ("setup", "under", "carried_out", "status"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_paused_repository_starts_nothing(
    setup: Setup, under: Under, carried_out: list[str], status: AgentStatus | None
) -> None:
    world = World()
    for event in setup(world.events):
        world.send(event)
    launched = dict(world.launcher.launched)

    effects = list(world.router.process(under(world.events), pause=REASON).effects)

    assert summarize(apply_order(effects)) == carried_out
    assert world.launcher.launched == launched  # nothing started or woken
    held = [effect.reason for effect in effects if isinstance(effect, Discard)]
    assert all(reason.startswith(f"paused: {REASON}; withheld ") for reason in held)
    agent = world.registry.get_agent(A38)
    assert (agent.status if agent is not None else None) is status


def test_what_was_withheld_is_named() -> None:
    world = World()
    effects = world.router.process(world.events.opened(38), pause=REASON).effects
    (discard,) = [effect for effect in effects if isinstance(effect, Discard)]
    assert discard.reason == f"paused: {REASON}; withheld LaunchAgent, PutAgent"


def test_once_resumed_the_same_events_route_in_full() -> None:
    world = World()
    assigned = world.events.assigned(38)
    world.router.process(assigned, pause=REASON)
    assert world.registry.get_agent(A38) is None

    world.send(assigned)  # the same delivery, replayed after the fix

    assert world.agent(A38).status is AgentStatus.CREATED
    assert [agent for agent, _, _ in world.launcher.launched.values()] == [A38]
