"""The :class:`~squadron.registry_ports.AgentRecords` contract: agents by id, written on their version, each
with a uid of its own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

import pytest

from squadron.adapters.registry.agents import DynamoAgentRecords
from squadron.domain.agents import AgentStatus, ConflictError, IllegalTransitionError, RegistryError
from squadron.domain.effects import AgentWrite
from squadron.registry_ports import AgentRecords
from tests.unit.registry.support import ALONE, REPO, T0, agent, created, implementation


class Subject(AgentRecords, Protocol):
    """The port alone: its suite needs no other."""


@pytest.fixture(params=ALONE)
def registry(request: pytest.FixtureRequest) -> Iterator[Any]:
    with implementation(
        request.param, lambda table, client: DynamoAgentRecords(table, client=client)
    ) as found:
        yield found


def test_an_agent_round_trips_exactly(registry: Subject) -> None:
    record = agent(blocked_by=frozenset({5, 7}), pending_launch="tok", wake_reason="because")
    assert created(registry, record) == record
    assert registry.get_agent("1-39-feat-dev") is None


def test_pm_lives_at_the_repository(registry: Subject) -> None:
    pm = created(registry, agent(None))
    assert registry.pm_agent(REPO) == pm
    assert registry.pm_agent(2) is None


@pytest.mark.parametrize(
    ("expected_version", "message"),
    [(None, "already exists"), (7, "expected version 7"), (0, "expected version 0")],
    ids=["create twice", "stale version", "wrong version"],
)
def test_agent_writes_are_conditional(registry: Subject, expected_version: int | None, message: str) -> None:
    record = created(registry, agent())
    newer = record.transition(AgentStatus.ACTIVE, now=T0)
    with pytest.raises(ConflictError, match=message):
        registry.put_agent(AgentWrite(newer, expected_version))
    assert registry.get_agent(record.agent_id) == record


def test_a_versioned_update_wins_once(registry: Subject) -> None:
    record = created(registry, agent())
    active = record.transition(AgentStatus.ACTIVE, now=T0)
    registry.put_agent(AgentWrite(active, record.version))
    with pytest.raises(ConflictError):
        registry.put_agent(AgentWrite(active, record.version))  # the same decision replayed
    assert registry.get_agent(record.agent_id) == active


def test_illegal_transitions_are_named_errors() -> None:
    done = agent(status=AgentStatus.COMPLETED)
    with pytest.raises(IllegalTransitionError, match="cannot go from COMPLETED to ACTIVE"):
        done.transition(AgentStatus.ACTIVE, now=T0)
    assert issubclass(IllegalTransitionError, RegistryError)


def test_every_agent_claims_a_uid_of_its_own_and_keeps_it(registry: Subject) -> None:
    first = created(registry, agent(38))
    second = created(registry, agent(39))
    uid = registry.claim_uid(first.agent_id, T0)
    assert uid >= 1 << 24
    assert registry.claim_uid(first.agent_id, T0) == uid
    assert registry.claim_uid(second.agent_id, T0) not in (uid, None)
    stored = registry.get_agent(first.agent_id)
    assert stored is not None and (stored.uid, stored.version) == (uid, first.version + 1)
    with pytest.raises(ConflictError):
        registry.claim_uid("1-99-feat-dev", T0)


def test_a_uid_another_agent_holds_is_never_handed_out(
    registry: Subject, monkeypatch: pytest.MonkeyPatch
) -> None:
    import squadron.adapters.registry.agents as dynamo  # noqa: PLC0415
    import tests.support.fake_registry as fake  # noqa: PLC0415

    # Two agents whose first candidates collide: the second takes its next one.
    def colliding(agent_id: str, attempt: int) -> int:
        return (1 << 24) + attempt

    monkeypatch.setattr(dynamo, "candidate_uid", colliding)
    monkeypatch.setattr(fake, "candidate_uid", colliding)
    first = created(registry, agent(38))
    second = created(registry, agent(39))
    assert registry.claim_uid(first.agent_id, T0) == 1 << 24
    assert registry.claim_uid(second.agent_id, T0) == (1 << 24) + 1
