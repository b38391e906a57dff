"""The :class:`~squadron.registry_ports.Inboxes` contract: each item once, oldest first, gone once read."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any, Protocol

import pytest

from squadron.adapters.registry.inbox import DynamoInboxes
from squadron.domain.agents import InboxItem, RegistryError
from squadron.registry_ports import Inboxes
from tests.unit.registry.support import ALONE, T0, implementation


class Subject(Inboxes, Protocol):
    """The port alone."""


@pytest.fixture(params=ALONE)
def registry(request: pytest.FixtureRequest) -> Iterator[Any]:
    with implementation(request.param, lambda table, client: DynamoInboxes(table, client=client)) as found:
        yield found


def _item(delivery: str, second: int, kind: str = "comment") -> InboxItem:
    return InboxItem(
        agent_id="1-38-feat-dev",
        delivery_id=delivery,
        received_at=T0 + timedelta(seconds=second),
        kind=kind,
        summary=f"{kind} {delivery}",
    )


def test_inbox_items_are_stored_once_and_read_oldest_first(registry: Subject) -> None:
    for item in [_item("d3", 3), _item("d1", 1), _item("d1", 1), _item("d1", 1, "review"), _item("d2", 2)]:
        registry.deliver(item)
    assert [(i.delivery_id, i.kind) for i in registry.pending_inbox("1-38-feat-dev")] == [
        ("d1", "comment"),
        ("d1", "review"),
        ("d2", "comment"),
        ("d3", "comment"),
    ]


def test_read_items_leave_the_inbox(registry: Subject) -> None:
    for item in [_item("d1", 1), _item("d2", 2), _item("d3", 3)]:
        registry.deliver(item)
    registry.ack_inbox("1-38-feat-dev", [_item("d1", 1), _item("d2", 2), _item("d9", 9)])
    assert [i.delivery_id for i in registry.pending_inbox("1-38-feat-dev")] == ["d3"]


def test_inbox_needs_an_agent_id(registry: Subject) -> None:
    with pytest.raises(RegistryError, match="not an agent id"):
        registry.deliver(_item("d1", 1).model_copy(update={"agent_id": "nobody"}))
