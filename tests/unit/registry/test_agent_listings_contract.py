"""The :class:`~squadron.registry_ports.AgentListings` contract: agents by status, the finished ones in the
janitor's and the dashboards' orders."""

from __future__ import annotations

from datetime import timedelta
from typing import Protocol

from squadron.domain.agents import AgentRecord, AgentStatus
from squadron.domain.effects import AgentWrite
from squadron.registry_ports import AgentListings, AgentRecords
from tests.unit.registry.support import T0, agent, created


class Subject(AgentListings, AgentRecords, Protocol):
    """Listings of the agents the records port wrote."""


def test_agents_by_status(registry: Subject) -> None:
    a = created(registry, agent(38))
    b = created(registry, agent(39, updated_at=T0 + timedelta(seconds=1)))
    registry.put_agent(AgentWrite(b.transition(AgentStatus.ACTIVE, now=T0 + timedelta(seconds=2)), b.version))
    assert [x.agent_id for x in registry.agents_with_status(AgentStatus.CREATED)] == [a.agent_id]
    assert [x.agent_id for x in registry.agents_with_status(AgentStatus.ACTIVE)] == [b.agent_id]


def _finished(registry: Subject, issue: int, status: AgentStatus, hours: float) -> AgentRecord:
    """Agent #``issue`` created at T0, finished ``hours`` later (in ``status``)."""
    record = created(registry, agent(issue))
    ended = record.transition(status, now=T0 + timedelta(hours=hours))
    registry.put_agent(AgentWrite(ended, record.version))
    return ended


def test_finished_agents_are_found_longest_finished_first_until_purged_or_restarted(
    registry: Subject,
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


def test_recently_finished_are_the_last_of_each_terminal_status_newest_first(registry: Subject) -> None:
    for issue, status, hours in [
        (38, AgentStatus.COMPLETED, 1),
        (39, AgentStatus.COMPLETED, 4),
        (40, AgentStatus.CANCELLED, 2),
        (41, AgentStatus.COMPLETED, 3),
        (42, AgentStatus.CANCELLED, 5),
    ]:
        _finished(registry, issue, status, hours)
    created(registry, agent(43))  # working

    def ended(limit: int) -> list[str]:
        return [a.agent_id for a in registry.recently_finished(limit)]

    assert ended(10) == ["1-42-feat-dev", "1-39-feat-dev", "1-41-feat-dev", "1-40-feat-dev", "1-38-feat-dev"]
    # Up to ``limit`` of each status: the two newest completed and the two newest cancelled.
    assert ended(2) == ["1-42-feat-dev", "1-39-feat-dev", "1-41-feat-dev", "1-40-feat-dev"]
    assert ended(1) == ["1-42-feat-dev", "1-39-feat-dev"]
    # A purged agent's state is gone: it is no longer shown.
    newest = registry.get_agent("1-42-feat-dev")
    assert newest is not None
    later = T0 + timedelta(hours=8)
    registry.put_agent(AgentWrite(newest.updated(now=later, purged_at=later), newest.version))
    assert ended(1) == ["1-39-feat-dev", "1-40-feat-dev"]
