"""When a finished agent's working copy and session may leave the volume (pure rules), and how the
lifecycle keeps what the rules read: when it finished, whether it was purged, a janitor's claim."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from squadron.domain.agents import AgentRecord, AgentStatus, RoleKind
from squadron.domain.retention import (
    PURGE_CLAIM_TTL,
    claim,
    finished_at,
    purge_claimed,
    purge_due,
    purge_owner,
    purged,
    why_kept,
)
from tests.support.events import T0
from tests.support.world import World

A38 = "1-38-feat-dev"
WEEK = timedelta(days=7)
NOW = T0 + timedelta(days=30)
FINISHED = NOW - WEEK - timedelta(minutes=1)


def record(**changes: Any) -> AgentRecord:
    base = AgentRecord(
        agent_id=A38,
        role="feat-dev",
        kind=RoleKind.DEV,
        repo_id=1,
        repo_full_name="octo/repo",
        issue_number=38,
        created_at=T0,
        updated_at=FINISHED,
        status=AgentStatus.COMPLETED,
        finished_at=FINISHED,
    )
    return base.model_copy(update=changes)


KEPT: list[tuple[str, dict[str, Any], str | None]] = [
    ("completed past the retention", {}, None),
    ("cancelled past the retention", {"status": AgentStatus.CANCELLED}, None),
    ("active", {"status": AgentStatus.ACTIVE, "finished_at": None}, "it is ACTIVE"),
    ("sleeping", {"status": AgentStatus.SLEEPING, "finished_at": None}, "it is SLEEPING"),
    ("escalated: humans may still hand it back", {"status": AgentStatus.ESCALATED}, "it is ESCALATED"),
    ("finished within the retention", {"finished_at": NOW - WEEK + timedelta(minutes=1)}, "within"),
    ("finished exactly a retention ago", {"finished_at": NOW - WEEK}, "within"),
    ("purged already", {"purged_at": NOW - timedelta(days=1)}, "purged already"),
    (
        "a live lease (a janitor's claim)",
        {"lease_owner": "purge:x", "lease_expires_at": NOW + timedelta(minutes=1)},
        "lease is held",
    ),
    ("a lapsed lease", {"lease_owner": "purge:x", "lease_expires_at": NOW - timedelta(minutes=1)}, None),
    (
        "its last task never reported its end and its secret is valid",
        {"launch_secret_hash": "h", "launch_secret_expires_at": NOW + timedelta(hours=1)},
        "may still run",
    ),
    (
        "its last task's secret expired",
        {"launch_secret_hash": "h", "launch_secret_expires_at": NOW - timedelta(hours=1)},
        None,
    ),
    (
        "finished before finished_at was kept: counted from its last update",
        {"finished_at": None, "updated_at": FINISHED},
        None,
    ),
    (
        "finished before finished_at was kept, updated lately",
        {"finished_at": None, "updated_at": NOW - timedelta(days=1)},
        "within",
    ),
]


@pytest.mark.parametrize(("changes", "kept"), [c[1:] for c in KEPT], ids=[c[0] for c in KEPT])
def test_what_keeps_a_finished_agents_state(changes: dict[str, Any], kept: str | None) -> None:
    agent = record(**changes)
    reason = why_kept(agent, now=NOW, retention=WEEK)
    assert (reason is None) is (kept is None), reason
    assert kept is None or (reason is not None and kept in reason)
    assert purge_due(agent, now=NOW, retention=WEEK) is (kept is None)


def test_a_zero_retention_purges_once_no_task_may_run() -> None:
    agent = record(finished_at=NOW - timedelta(seconds=1))
    assert purge_due(agent, now=NOW, retention=timedelta(0))
    running = agent.model_copy(
        update={"launch_secret_hash": "h", "launch_secret_expires_at": NOW + timedelta(hours=12)}
    )
    assert not purge_due(running, now=NOW, retention=timedelta(0))


def test_a_claim_is_the_lease_of_one_janitor_and_pins_the_finish() -> None:
    legacy = record(finished_at=None)  # finished before the field existed: its last update counts
    claimed = claim(legacy, purge_owner("1-39-feat-dev-g1-l1"), NOW)
    assert (claimed.lease_owner, claimed.lease_expires_at) == (
        "purge:1-39-feat-dev-g1-l1",
        NOW + PURGE_CLAIM_TTL,
    )
    assert claimed.finished_at == FINISHED and finished_at(claimed) == FINISHED  # no new finish
    assert claimed.version == legacy.version + 1
    assert purge_claimed(claimed, NOW) and not purge_claimed(claimed, NOW + PURGE_CLAIM_TTL)
    assert not purge_due(claimed, now=NOW, retention=WEEK)  # one janitor at a time
    done = purged(claimed, NOW)
    assert (done.purged_at, done.lease_owner, done.lease_expires_at) == (NOW, None, None)
    assert not purge_due(done, now=NOW + WEEK, retention=WEEK)  # recorded once


def test_an_ordinary_lease_is_no_claim() -> None:
    agent = record(lease_owner="1-38-feat-dev-g1-l3", lease_expires_at=NOW + timedelta(minutes=5))
    assert not purge_claimed(agent, NOW)


def test_finishing_stamps_the_time_and_a_restart_clears_it_and_the_purge() -> None:
    world = World()
    world.send(world.events.assigned(38))
    assert world.agent(A38).finished_at is None
    world.send(world.events.unassigned(38))
    cancelled = world.agent(A38)
    assert cancelled.status is AgentStatus.CANCELLED and cancelled.finished_at == cancelled.updated_at
    world.registry.agents[A38] = purged(cancelled, world.now)
    world.send(world.events.assigned(38))
    restarted = world.agent(A38)
    assert (restarted.status, restarted.generation) == (AgentStatus.CREATED, 2)
    assert (restarted.finished_at, restarted.purged_at) == (None, None)


@pytest.mark.parametrize(
    ("owner", "expires_in", "kept"),
    [
        ("purge:1-39-feat-dev-g1-l1", timedelta(minutes=4), True),
        ("purge:1-39-feat-dev-g1-l1", -timedelta(seconds=30), False),
        ("1-38-feat-dev-g1-l1", timedelta(minutes=4), False),
    ],
    ids=["a live claim stays", "a lapsed claim goes", "the old generation's lease goes"],
)
def test_a_restart_keeps_a_live_janitors_claim_and_nothing_else(
    owner: str, expires_in: timedelta, kept: bool
) -> None:
    world = World()
    world.send(world.events.assigned(38))
    world.send(world.events.unassigned(38))
    cancelled = world.agent(A38)
    held = cancelled.model_copy(update={"lease_owner": owner, "lease_expires_at": world.now + expires_in})
    world.registry.agents[A38] = held
    world.send(world.events.assigned(38))
    restarted = world.agent(A38)
    assert restarted.generation == 2
    assert (restarted.lease_owner, restarted.lease_expires_at) == (
        (owner, held.lease_expires_at) if kept else (None, None)
    )
