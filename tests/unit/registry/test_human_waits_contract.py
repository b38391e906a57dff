"""The :class:`~squadron.registry_ports.HumanWaits` contract: a pipeline's human stage waiting for
people, kept once per entry, counted toward by each person once, its answer kept before it is
sent (the first answer stays), closed after."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any, Protocol

import pytest

from squadron.adapters.registry.human_waits import DynamoHumanWaits
from squadron.domain.agents import ConflictError
from squadron.domain.pipelines.humans import HumanWait
from squadron.registry_ports import HumanWaits
from tests.unit.registry.support import ALONE, REPO, T0, implementation


class Subject(HumanWaits, Protocol):
    """The port alone."""


@pytest.fixture(params=ALONE)
def registry(request: pytest.FixtureRequest) -> Iterator[Any]:
    with implementation(request.param, lambda table, client: DynamoHumanWaits(table, client=client)) as found:
        yield found


def wait(entry: str = "e1", number: int = 7, **changes: Any) -> HumanWait:
    base = HumanWait(
        repo_id=REPO,
        number=number,
        entry=entry,
        execution_arn="arn:aws:states:us-east-1:123456789012:execution:sq_1-p:run-1",
        pipeline="p",
        stage="ask",
        task_token="token-" + entry,
        wait_for="approval",
        group="maintainers",
        members=("alice", "bob"),
        count=2,
        opened_at=T0,
    )
    return base.model_copy(update=changes)


def test_a_wait_is_kept_once_per_entry_and_listed_by_its_issue_until_closed(registry: Subject) -> None:
    first = registry.open_wait(wait())
    assert first == wait()
    # A retry of the task's arrival keeps what the first one kept (its token, its time).
    assert registry.open_wait(wait(task_token="another", opened_at=T0 + timedelta(hours=1))) == wait()
    registry.open_wait(wait("e2", opened_at=T0 + timedelta(minutes=1)))
    registry.open_wait(wait("e3", number=8))
    assert [w.entry for w in registry.open_waits(REPO, 7)] == ["e1", "e2"]
    assert [w.entry for w in registry.open_waits(REPO, 8)] == ["e3"]
    assert registry.open_waits(REPO, 9) == [] and registry.open_waits(REPO + 1, 7) == []
    registry.close_wait(REPO, 7, "e1")
    assert [w.entry for w in registry.open_waits(REPO, 7)] == ["e2"]
    registry.close_wait(REPO, 7, "nothing")  # no such wait: nothing happens


def test_each_person_counts_once(registry: Subject) -> None:
    registry.open_wait(wait())
    once = registry.count_toward(REPO, 7, "e1", "alice")
    again = registry.count_toward(REPO, 7, "e1", "alice")  # a redelivered approval
    assert once is not None and again is not None
    assert once.counted == again.counted == ("alice",)
    both = registry.count_toward(REPO, 7, "e1", "bob")
    assert both is not None and both.counted == ("alice", "bob")
    assert registry.open_waits(REPO, 7)[0].counted == ("alice", "bob")
    assert registry.count_toward(REPO, 7, "missing", "alice") is None
    assert registry.count_toward(REPO, 8, "e1", "alice") is None  # another issue's wait is another


def test_the_first_answer_kept_stays(registry: Subject) -> None:
    registry.open_wait(wait())
    kept = registry.keep_answer(REPO, 7, "e1", {"by": ["alice", "bob"]})
    later = registry.keep_answer(REPO, 7, "e1", {"by": ["carol"]})
    assert kept.answer == later.answer == {"by": ["alice", "bob"]}
    assert not later.sent and registry.open_waits(REPO, 7)[0].answer == {"by": ["alice", "bob"]}
    registry.close_wait(REPO, 7, "e1")
    assert registry.open_waits(REPO, 7) == []
    with pytest.raises(ConflictError):
        registry.keep_answer(REPO, 7, "missing", {})


def test_an_answer_whose_task_was_over_keeps_the_wait_open_as_gone(registry: Subject) -> None:
    registry.open_wait(wait())
    registry.keep_answer(REPO, 7, "e1", {"by": ["alice", "bob"]})
    registry.mark_gone(REPO, 7, "e1")
    (held,) = registry.open_waits(REPO, 7)
    assert held.gone and held.answer == {"by": ["alice", "bob"]} and not held.sent
    # a retry of the task's arrival keeps what is kept
    assert registry.open_wait(wait()).gone
    registry.close_wait(REPO, 7, "e1")
    assert registry.open_waits(REPO, 7) == []
    registry.mark_gone(REPO, 7, "nothing")  # no such wait: nothing happens
    assert registry.open_waits(REPO, 7) == []
