"""The :class:`~squadron.registry_ports.WriteClaims` contract: an agent task's write claimed once, its answer
kept."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any, Protocol

import pytest

from squadron.adapters.registry.write_claims import DynamoWriteClaims
from squadron.domain.writes import WriteClaim
from squadron.registry_ports import WriteClaims
from tests.unit.registry.support import ALONE, T0, implementation


class Subject(WriteClaims, Protocol):
    """The port alone."""


@pytest.fixture(params=ALONE)
def registry(request: pytest.FixtureRequest) -> Iterator[Any]:
    with implementation(
        request.param, lambda table, client: DynamoWriteClaims(table, client=client)
    ) as found:
        yield found


def test_a_write_is_claimed_once_and_its_answer_kept_for_whoever_asks_again(
    registry: Subject,
) -> None:
    key = "1-38-feat-dev-g1-l1.w1"
    assert registry.claim_write("1-38-feat-dev", key, T0) is None  # the first: carry it out
    again = registry.claim_write("1-38-feat-dev", key, T0 + timedelta(seconds=40))
    assert again == WriteClaim(claimed_at=T0, result=None)  # claimed, no answer yet
    answer = {"id": 7, "body": "progress", "user": {"login": "squadron[bot]"}, "labels": ["a", "b"]}
    registry.record_write("1-38-feat-dev", key, answer)
    assert registry.claim_write("1-38-feat-dev", key, T0 + timedelta(minutes=1)) == WriteClaim(T0, answer)
    assert registry.claim_write("1-38-feat-dev", "1-38-feat-dev-g1-l1.w2", T0) is None  # its own key
    assert registry.claim_write("1-39-feat-dev", key, T0) is None  # another agent's is another write
