"""The :class:`~squadron.registry_ports.Launches` contract: a launch confirmed, armed or held only while
pending."""

from __future__ import annotations

from datetime import timedelta
from typing import Protocol

import pytest

from squadron.registry_ports import AgentRecords, Launches
from tests.unit.registry.support import T0, agent, created


class Subject(Launches, AgentRecords, Protocol):
    """Launches of the agents the records port wrote."""


@pytest.mark.parametrize(("token", "confirmed"), [("tok-2", True), ("tok-1", False)])
def test_a_launch_is_confirmed_only_while_pending(registry: Subject, token: str, confirmed: bool) -> None:
    record = created(registry, agent(pending_launch="tok-2"))
    registry.confirm_launch(record.agent_id, token, "arn:task/1", T0 + timedelta(seconds=1))
    stored = registry.get_agent(record.agent_id)
    assert stored is not None
    if confirmed:
        assert (stored.pending_launch, stored.task_arn, stored.version) == (
            None,
            "arn:task/1",
            record.version + 1,
        )
    else:
        assert stored == record
    registry.confirm_launch("1-99-feat-dev", token, "arn:task/2", T0)  # unknown agent: nothing


@pytest.mark.parametrize(("token", "armed"), [("tok-2", True), ("tok-1", False)], ids=["pending", "stale"])
def test_a_launch_is_armed_with_its_secret_hash_only_while_pending(
    registry: Subject, token: str, armed: bool
) -> None:
    record = created(registry, agent(pending_launch="tok-2"))
    expires = T0 + timedelta(hours=12)
    assert registry.arm_launch(record.agent_id, token, "ab" * 32, expires, T0) is armed
    stored = registry.get_agent(record.agent_id)
    assert stored is not None
    if armed:
        assert (stored.launch_secret_hash, stored.launch_secret_expires_at, stored.version) == (
            "ab" * 32,
            expires,
            record.version + 1,  # a router decision made before it loses its write
        )
    else:
        assert stored == record
    assert registry.arm_launch("1-99-feat-dev", token, "ab" * 32, expires, T0) is False


# (replacing: the hash the executor saw; whether it arms again) once armed with "ab"...
REARMINGS = [
    (None, False),  # a second first arming: another executor armed it, it is theirs
    ("ef" * 32, False),  # an arming that is no longer the one that stands
    ("ab" * 32, True),  # the arming seen (abandoned): replaced by the new one
]


@pytest.mark.parametrize(("replacing", "armed"), REARMINGS, ids=["first again", "stale view", "replacing"])
def test_an_armed_launch_is_armed_again_only_over_the_arming_seen(
    registry: Subject, replacing: str | None, armed: bool
) -> None:
    record = created(registry, agent(pending_launch="tok-2"))
    expires = T0 + timedelta(hours=12)
    assert registry.arm_launch(record.agent_id, "tok-2", "ab" * 32, expires, T0)
    again = registry.arm_launch(
        record.agent_id, "tok-2", "cd" * 32, expires + timedelta(minutes=3), T0, replacing=replacing
    )
    assert again is armed
    stored = registry.get_agent(record.agent_id)
    assert stored is not None and stored.launch_secret_hash == ("cd" if armed else "ab") * 32
    # No longer pending: not armed whatever it replaces.
    assert not registry.arm_launch(record.agent_id, "tok-1", "ef" * 32, expires, T0, replacing="cd" * 32)


def test_a_refused_launch_is_held_counted_and_cleared_when_it_starts(registry: Subject) -> None:
    record = created(registry, agent(pending_launch="tok-2"))
    assert registry.hold_launch(record.agent_id, "tok-1", "stale", T0) is False  # not the pending one
    assert registry.hold_launch(record.agent_id, "tok-2", "vCPU limit", T0) is True
    assert registry.hold_launch(record.agent_id, "tok-2", "still the vCPU limit", T0 + timedelta(minutes=5))
    held = registry.get_agent(record.agent_id)
    assert held is not None
    assert (held.launch_failures, held.launch_error, held.launch_failed_at, held.pending_launch) == (
        2,
        "still the vCPU limit",
        T0 + timedelta(minutes=5),
        "tok-2",
    )
    registry.confirm_launch(record.agent_id, "tok-2", "arn:task/1", T0 + timedelta(minutes=15))
    started = registry.get_agent(record.agent_id)
    assert started is not None
    assert (started.launch_failures, started.launch_error, started.launch_failed_at) == (0, None, None)
