"""The :class:`~squadron.registry_ports.Leases` contract: one live task per agent."""

from __future__ import annotations

from datetime import timedelta
from typing import Protocol

import pytest

from squadron.domain.agents import AgentStatus, ConflictError
from squadron.domain.effects import AgentWrite
from squadron.registry_ports import AgentRecords, Leases
from tests.unit.registry.support import T0, agent, created


class Subject(Leases, AgentRecords, Protocol):
    """Leases of the agents the records port wrote."""


def test_one_live_lease_per_agent(registry: Subject) -> None:
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


def test_a_lease_bumps_the_version_so_stale_router_writes_lose(registry: Subject) -> None:
    record = created(registry, agent())
    registry.acquire_lease(record.agent_id, "task-1", T0, timedelta(minutes=5))
    with pytest.raises(ConflictError):
        registry.put_agent(AgentWrite(record.transition(AgentStatus.ACTIVE, now=T0), record.version))


def test_no_lease_for_an_unknown_agent(registry: Subject) -> None:
    with pytest.raises(ConflictError):
        registry.acquire_lease("1-99-feat-dev", "task-1", T0, timedelta(minutes=5))
