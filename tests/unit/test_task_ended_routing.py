"""The router's side of an agent task's end (the host reports it; the router is the only writer),
and its distrust of anything an agent's task sent: it speaks of itself, in its repository, or not at all."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from squadron.domain.agents import AgentStatus
from squadron.domain.commands import SQUADRON_EVENT, RecoverAgent, RegisterBlocker, TaskEnded, TaskUsage
from squadron.domain.effects import AgentWrite
from squadron.domain.events import EventEnvelope
from squadron.domain.routing import agent_envelope_problem
from tests.support.events import agent_did, recover
from tests.support.world import World

A38 = "1-38-feat-dev"
PM = "1-pm"


def ended(world: World, agent_id: str = A38, **fields: Any) -> EventEnvelope:
    """What the gateway puts on the queue for the task of ``agent_id``'s latest launch."""
    agent = world.agent(agent_id)
    command = TaskEnded(
        agent_id=agent_id,
        launch_token=fields.pop("launch_token", agent.launch_token),
        issue_number=agent.issue_number,
        **fields,
    )
    return agent_says(world, agent_id, command.model_dump())


def agent_says(world: World, source: str, command: dict[str, Any], **envelope: Any) -> EventEnvelope:
    return world.events._base(
        SQUADRON_EVENT,
        command["type"],
        sender="squadron[bot]",
        origin="agent",
        source_agent=source,
        command=command,
        **envelope,
    )


def working(world: World) -> None:
    """Assigned, launched, and its task began (ACTIVE, holding its lease), as the gateway does it."""
    world.send(world.events.assigned(38))
    agent = world.agent(A38)
    assert agent.task_arn is not None and agent.launch_secret_hash is not None
    world.registry.put_agent(AgentWrite(agent.transition(AgentStatus.ACTIVE, now=world.now), agent.version))
    world.registry.acquire_lease(A38, agent.launch_token, world.now, timedelta(minutes=15))


def _then(setup: Callable[[World], None], more: Callable[[], object]) -> Callable[[World], None]:
    def both(world: World) -> None:
        setup(world)
        more()

    return both


Case = tuple[str, Callable[[World], None], Callable[[World], EventEnvelope], list[str]]
CASES: list[Case] = [
    (
        "an idle end counts the usage and leaves the agent without a task",
        working,
        lambda w: ended(w, outcome="idle", usage=TaskUsage(tool_calls=5, turns=2, active_seconds=60)),
        [f"put {A38} ACTIVE (v5)"],
    ),
    (
        "news that came as the task ended wakes the agent at once",
        lambda w: _then(working, lambda: w.send(w.events.comment(38, "one more thing")))(w),
        lambda w: ended(w, outcome="idle"),
        [f"put {A38} ACTIVE (v5)", f"launch {A38} wake"],
    ),
    (
        "news its model was told of and left unread waits for its next task: nothing wakes",
        lambda w: _then(working, lambda: w.send(w.events.comment(38, "one more thing")))(w),
        lambda w: ended(w, outcome="idle", told=[i.key for i in w.registry.pending_inbox(A38)]),
        [f"put {A38} ACTIVE (v5)"],
    ),
    (
        "news besides what its model was told of wakes the agent at once",
        lambda w: _then(working, lambda: w.send(w.events.comment(38, "one more thing")))(w),
        lambda w: ended(w, outcome="idle", told=[f"{i.key}-another" for i in w.registry.pending_inbox(A38)]),
        [f"put {A38} ACTIVE (v5)", f"launch {A38} wake"],
    ),
    (
        "an escalated end hands the issue to humans with the agent's summary",
        working,
        lambda w: ended(w, outcome="escalated", reason="turns reached 21 of 20", summary="I looped."),
        [
            f"put {A38} ESCALATED (v5)",
            "label #38 needs-human",
            "comment #38",
            "create issue 'needs-human: #38 (feat-dev-38)'",
        ],
    ),
    (
        "a failed task leaves the agent for the reconciler to relaunch",
        working,
        lambda w: ended(w, outcome="failed", finished=False),
        [f"put {A38} ACTIVE (v5)"],
    ),
    (
        "the end of a replaced task changes nothing",
        lambda w: _then(working, lambda: w.send(recover(w.events, w.agent(A38), "relaunch")))(w),
        lambda w: ended(w, outcome="escalated", launch_token=f"{A38}-g1-l1"),
        ["discard"],
    ),
]


@pytest.mark.parametrize(("setup", "event", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_task_ended(
    setup: Callable[[World], None], event: Callable[[World], EventEnvelope], expected: list[str]
) -> None:
    world = World()
    setup(world)
    assert world.say(event(world)) == expected


def test_an_ended_launch_has_no_secret_and_its_usage_is_counted_once() -> None:
    world = World()
    working(world)
    report = ended(world, outcome="idle", usage=TaskUsage(tool_calls=5, turns=2, active_seconds=60))
    world.send(report)
    agent = world.agent(A38)
    assert (agent.launch_secret_hash, agent.task_arn) == (None, None)
    assert (agent.counters.tool_calls, agent.counters.turns, agent.counters.active_seconds) == (5, 2, 60)
    world.send(report)  # redelivered: the same delivery changes nothing twice
    assert world.agent(A38).counters.tool_calls == 5


def test_an_escalation_comment_carries_the_reason_summary_and_saved_work() -> None:
    world = World()
    working(world)
    world.send(
        ended(
            world,
            outcome="escalated",
            reason="a breaker tripped",
            summary="Half done.",
            saved="pushed abc1234",
        )
    )
    (comment,) = [body for _, number, body, _ in world.github.comments if number == 38]
    assert comment.startswith("feat-dev-38 needs a human: a breaker tripped.")
    assert "Half done." in comment and "Work in progress on `feat/issue-38`: pushed abc1234" in comment
    assert world.agent(A38).status is AgentStatus.ESCALATED


# --- what an agent's task may send at all ----------------------------------------------------------


def blocker(agent_id: str | None, issue: int = 38, sleep: bool = False) -> dict[str, Any]:
    return RegisterBlocker(
        issue_number=issue,
        blocker_number=12,
        agent_id=agent_id,
        launch_token=f"{agent_id}-g1-l1" if agent_id else None,
        sleep=sleep,
    ).model_dump()


def recovery() -> dict[str, Any]:
    return RecoverAgent(
        agent_id=A38, issue_number=38, seen_version=1, action="escalate", reason="x"
    ).model_dump()


ENVELOPES: list[tuple[str, Callable[[World], EventEnvelope], str | None]] = [
    ("its own blocker", lambda w: agent_says(w, A38, blocker(A38, sleep=True)), None),
    ("the PM's blocker for any issue", lambda w: agent_says(w, PM, blocker(None, issue=40)), None),
    ("no verified source", lambda w: agent_says(w, None, blocker(A38)), "without its verified source"),  # type: ignore[arg-type]
    (
        "speaking for another agent",
        lambda w: agent_says(w, "1-39-feat-dev", blocker(A38)),
        "may not speak for",
    ),
    (
        "another repository",
        lambda w: agent_says(w, "2-38-feat-dev", blocker("2-38-feat-dev")),
        "may not speak for repository 1",
    ),
    ("a reconciler command", lambda w: agent_says(w, A38, recovery()), "may not send recover_agent"),
    ("not an agent id", lambda w: agent_says(w, "root", blocker(None)), "is not an agent id"),
]


@pytest.mark.parametrize(("envelope", "problem"), [c[1:] for c in ENVELOPES], ids=[c[0] for c in ENVELOPES])
def test_what_an_agent_task_may_send(envelope: Callable[[World], EventEnvelope], problem: str | None) -> None:
    world = World()
    working(world)
    sent = envelope(world)
    found = agent_envelope_problem(sent)
    if problem is None:
        assert found is None
        return
    assert found is not None and problem in found
    before = world.registry.snapshot_state()
    (effect,) = world.send(sent)
    assert "refused" in getattr(effect, "reason", "")
    assert world.registry.snapshot_state() == before  # nothing changed


@pytest.mark.parametrize(
    ("event", "action"),
    [
        ("pull_request", "opened"),
        ("pull_request", "closed"),
        ("issues", "closed"),
        ("issue_comment", "created"),
        ("pull_request_review", "submitted"),
        ("check_run", "completed"),
    ],
)
def test_a_task_never_sends_a_webhook_shaped_echo(event: str, action: str) -> None:
    """What an agent did reaches the router only as the gateway's typed command (from GitHub's answer)."""
    world = World()
    sent = world.events._base(
        event,
        action,
        sender="squadron[bot]",
        origin="agent",
        source_agent=A38,
        pull_request={
            "number": 7,
            "title": "t",
            "state": "closed",
            "merged": True,
            "head_ref": "feat/issue-38",
            "head_sha": "c" * 40,
            "base_ref": "main",
        },
    )
    assert agent_envelope_problem(sent) == f"an agent may not report {event}.{action}"


def test_the_gateways_report_of_an_agents_pull_request_is_routed() -> None:
    world = World()
    pr = world.events.pr(7, "feat/issue-38", "Closes #38")
    assert agent_envelope_problem(agent_did(pr, A38)) is None
