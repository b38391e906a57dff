"""The :class:`~squadron.registry_ports.ChangeSets` contract: a set stored with its events, each
step on the version read (two routers at once: one wins, the state never goes backwards), the
installation's open sets bounded, and the listing newest first."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any, Protocol

import pytest

from squadron.adapters.registry.change_sets import DynamoChangeSets
from squadron.domain import change_sets as cs
from squadron.domain.agents import ConflictError
from squadron.domain.change_set_events import events_of
from squadron.domain.change_sets import ChangeSet, SetState
from squadron.registry_ports import ChangeSets, History
from tests.unit.registry.support import IMPLEMENTATIONS, T0, implementation

INSTALLED = {"octo/schema": 11, "octo/server": 12, "octo/client": 13}


class Subject(ChangeSets, History, Protocol):
    """The port, and the history its events land in."""


@pytest.fixture(params=IMPLEMENTATIONS)
def registry(request: pytest.FixtureRequest) -> Iterator[Any]:
    with implementation(request.param) as found:
        yield found


def test_the_adapter_alone_is_the_port() -> None:
    with implementation(
        "adapter alone", lambda table, client: DynamoChangeSets(table, client=client)
    ) as found:
        created = proposal()
        found.create_change_set(created, ())
        assert found.get_change_set(created.id) == created


def proposal(n: int = 1, installation: int = 77, at_minutes: int = 0) -> ChangeSet:
    return cs.propose(
        set_id=cs.change_set_id(installation, 11, 5, f"delivery-{n}"),
        installation_id=installation,
        origin="octo/schema",
        issue=5,
        repositories=("octo/server", "octo/client"),
        dependencies=(("octo/server", "octo/schema"),),
        installation_repositories=INSTALLED,
        proposed_by="11-pm",
        open_sets=0,
        at=T0 + timedelta(minutes=at_minutes),
    )


def _history(registry: Subject) -> list[str]:
    return [e.detail_type for e in registry.history(11, T0 - timedelta(days=1), T0 + timedelta(days=1))]


def test_a_set_is_stored_with_its_event_and_read_back_whole(registry: Subject) -> None:
    created = proposal()
    registry.create_change_set(created, events_of(None, created, correlation_id="d1"))
    assert registry.get_change_set(created.id) == created
    assert registry.get_change_set("cs-000000000000") is None
    assert registry.open_change_sets(77) == 1
    assert _history(registry) == ["change_set.created.v1"]
    with pytest.raises(ConflictError, match="already exists"):  # the same proposal again
        registry.create_change_set(created, ())
    assert registry.open_change_sets(77) == 1


def test_two_routers_approving_at_once_one_wins_and_the_state_never_goes_backwards(registry: Subject) -> None:
    created = proposal()
    registry.create_change_set(created, ())
    alice, now_a = cs.approve(created, "alice", {"octo/schema": "write"}, T0)
    bob, now_b = cs.approve(created, "bob", {m.repository: "write" for m in created.members}, T0)
    registry.save_change_set(
        created, bob, events_of(created, bob, correlation_id="d-bob", approved=now_b, by="bob")
    )
    with pytest.raises(ConflictError, match="expected version 1"):
        registry.save_change_set(
            created, alice, events_of(created, alice, correlation_id="d-alice", approved=now_a, by="alice")
        )
    stored = registry.get_change_set(created.id)
    assert stored == bob and stored.state is SetState.APPROVED
    assert [m.approved_by for m in stored.members] == ["bob", "bob", "bob"]
    assert _history(registry) == ["change_set.approved.v1"]  # the loser's event was not stored
    # An older step replayed later is refused too: the stored version moved on.
    working = cs.start_work(bob, T0)
    registry.save_change_set(bob, working, ())
    with pytest.raises(ConflictError):
        registry.save_change_set(created, bob, ())
    assert registry.get_change_set(created.id) == working


def test_a_step_that_is_not_forward_is_refused_before_anything_is_stored(registry: Subject) -> None:
    created = proposal()
    registry.create_change_set(created, ())
    with pytest.raises(ValueError, match="not a step"):
        registry.save_change_set(created, created, ())
    assert registry.get_change_set(created.id) == created


def test_an_installation_holds_at_most_its_bound_of_open_sets_and_one_over_frees_a_place(
    registry: Subject,
) -> None:
    sets = [proposal(n) for n in range(cs.MAX_OPEN_PER_INSTALLATION + 1)]
    for found in sets[:-1]:
        registry.create_change_set(found, ())
    with pytest.raises(ConflictError, match="20 change sets are open"):
        registry.create_change_set(sets[-1], ())
    assert registry.get_change_set(sets[-1].id) is None
    registry.create_change_set(proposal(1, installation=78), ())  # another installation's own bound
    assert (registry.open_change_sets(77), registry.open_change_sets(78)) == (20, 1)
    # One set merges: it is over, and a place opens.
    first = sets[0]
    steps = [
        first,
        cs.start_work(cs.approve(first, "a", {m.repository: "write" for m in first.members}, T0)[0], T0),
    ]
    for number, member in enumerate(first.members, start=1):
        steps.append(cs.record_pull_request(steps[-1], member.repository, number, T0))
        steps.append(cs.record_gate(steps[-1], member.repository, "ready", T0))
    steps.append(cs.begin_merging(steps[-1], T0))
    for name in cs.merge_order(first):
        steps.append(cs.record_merged(steps[-1], name, "sha", T0))
    assert steps[-1].state is SetState.MERGED
    registry.save_change_set(first, steps[-1], events_of(steps[-2], steps[-1], correlation_id="m"))
    assert registry.open_change_sets(77) == 19
    registry.create_change_set(sets[-1], ())
    assert registry.open_change_sets(77) == 20


def test_the_listing_is_newest_first_and_bounded(registry: Subject) -> None:
    for n in range(5):
        registry.create_change_set(proposal(n, at_minutes=n), ())
    listed = registry.change_sets(limit=3)
    assert [c.created_at for c in listed] == [T0 + timedelta(minutes=m) for m in (4, 3, 2)]
    assert len(registry.change_sets()) == 5
