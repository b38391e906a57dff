"""The :class:`~squadron.registry_ports.GateRecords` contract: the latest review per reviewer, the gate's
verdict and what it said."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

import pytest

from squadron.adapters.registry.gate import DynamoGateRecords
from squadron.domain.dashboard import GateView
from squadron.domain.domain_events import (
    DomainEvent,
    MergeGateVerdictChanged,
    Repository,
    gate_event_id,
    make_event,
)
from squadron.domain.effects import RecordReview
from squadron.registry_ports import GateRecords
from tests.unit.registry.support import ALONE, REPO, T0, implementation


class Subject(GateRecords, Protocol):
    """The port alone."""


@pytest.fixture(params=ALONE)
def registry(request: pytest.FixtureRequest) -> Iterator[Any]:
    with implementation(
        request.param, lambda table, client: DynamoGateRecords(table, client=client)
    ) as found:
        yield found


@pytest.mark.parametrize(
    ("ids", "kept"), [([1, 2], 2), ([2, 1], 2), ([3], 3)], ids=["in order", "late older review", "one"]
)
def test_the_latest_review_per_reviewer_wins(registry: Subject, ids: list[int], kept: int) -> None:
    for review_id in ids:
        registry.record_review(RecordReview(REPO, 101, "bob", f"state-{review_id}", "abc", review_id), T0)
    registry.record_review(RecordReview(REPO, 101, "carol", "approved", "abc", 1), T0)
    reviews = registry.reviews_of(REPO, 101)
    assert reviews["bob"].review_id == kept
    assert reviews["bob"].state == f"state-{kept}"
    assert set(reviews) == {"bob", "carol"}


def _verdict(
    pr: int, verdict: str, previous: str | None, description: str, key: str = "effect-1"
) -> DomainEvent:
    return make_event(
        MergeGateVerdictChanged(pr_number=pr, verdict=verdict, previous=previous, description=description),
        event_id=gate_event_id(f"{key}-{pr}", verdict),
        at=T0,
        repository=Repository(id=REPO, full_name="octo/app"),
        correlation_id="gate",
        issue=38,
    )


def test_what_the_gate_waits_for_is_kept_with_its_verdict(registry: Subject) -> None:
    assert not registry.set_gate_description(REPO, 101, "waiting", "waiting: waiting on ci")  # never judged
    assert registry.gate_views(REPO, [101]) == {}
    assert registry.change_verdict(REPO, 101, None, _verdict(101, "waiting", None, "waiting: waiting on ci"))
    assert registry.gate_views(REPO, [101]) == {101: GateView("waiting", "waiting: waiting on ci")}
    # the verdict stands, the reasons move on: stored, and no event
    assert registry.set_gate_description(REPO, 101, "waiting", "waiting: a human approval")
    assert registry.gate_views(REPO, [101, 102]) == {101: GateView("waiting", "waiting: a human approval")}
    assert not registry.set_gate_description(REPO, 101, "ready", "ready: merging")  # not its verdict
    assert registry.change_verdict(REPO, 101, "waiting", _verdict(101, "ready", "waiting", "ready: merging"))
    assert registry.gate_views(REPO, [101]) == {101: GateView("ready", "ready: merging")}
    assert registry.gate_views(REPO + 1, [101]) == {}  # another repository's PR #101


def test_the_gate_views_of_many_pull_requests_are_read_in_batches(registry: Subject) -> None:
    prs = range(1, 131)  # more than one BatchGetItem takes
    for pr in prs:
        if pr % 3:
            assert registry.change_verdict(REPO, pr, None, _verdict(pr, "waiting", None, f"waiting: on {pr}"))
    views = registry.gate_views(REPO, [*prs, *prs])
    assert views == {pr: GateView("waiting", f"waiting: on {pr}") for pr in prs if pr % 3}
