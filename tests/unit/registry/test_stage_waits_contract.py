"""The :class:`~squadron.registry_ports.StageWaits` contract: one pipeline stage's wait per agent,
its answer kept once (the first), a wait taken over only when its answer was sent or it is named."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any, Protocol

import pytest

from squadron.adapters.registry.stage_waits import DynamoStageWaits
from squadron.domain.pipelines.agent_stage import StageWait
from squadron.registry_ports import StageWaits
from tests.unit.registry.support import ALONE, T0, implementation


class Subject(StageWaits, Protocol):
    """The port alone."""


@pytest.fixture(params=ALONE)
def registry(request: pytest.FixtureRequest) -> Iterator[Any]:
    with implementation(request.param, lambda table, client: DynamoStageWaits(table, client=client)) as found:
        yield found


def wait(entry: str = "e1", agent: str = "1-7-pr-review", **changes: Any) -> StageWait:
    base = StageWait(
        agent_id=agent,
        entry=entry,
        token=f"token-of-{entry}",
        repository_id=1,
        issue_number=7,
        pipeline="p",
        stage="review",
        execution_arn="arn:aws:states:us-east-1:123456789012:execution:sq_1-p:run-1",
        expected_outputs=("verdict",),
        generation=1,
        since_launch=1,
        created_at=T0,
    )
    return base.model_copy(update=changes)


def test_a_wait_is_kept_once_and_another_stage_finds_it_held(registry: Subject) -> None:
    first = wait("e1")
    assert registry.hold_stage_wait(first) == first
    assert registry.stage_wait(first.agent_id) == first
    # another stage's wait does not replace it: the held one comes back, unchanged
    other = wait("e2", stage="tests", created_at=T0 + timedelta(minutes=1))
    assert registry.hold_stage_wait(other) == first
    assert registry.stage_wait(first.agent_id) == first
    # the same entry again (a redelivery) is not rewritten either: it gets what is held
    assert registry.hold_stage_wait(first.model_copy(update={"since_launch": 9})) == first
    assert registry.stage_wait("1-8-pr-review") is None  # another agent has none


def test_the_first_answer_is_kept_and_a_second_changes_nothing(registry: Subject) -> None:
    held = registry.hold_stage_wait(wait("e1"))
    passed = {"output": {"outputs": {"verdict": "ok"}}}
    answered = registry.answer_stage_wait(held.agent_id, "e1", passed)
    assert answered is not None and answered.answer == passed and not answered.sent
    again = registry.answer_stage_wait(
        held.agent_id, "e1", {"error": "Squadron.StageFailed", "cause": "late"}
    )
    assert again is not None and again.answer == passed  # the first answer stands
    assert registry.answer_stage_wait(held.agent_id, "e2", passed) is None  # not that entry's wait
    registry.mark_stage_wait_sent(held.agent_id, "e2")  # another entry: nothing
    found = registry.stage_wait(held.agent_id)
    assert found is not None and not found.sent
    registry.mark_stage_wait_sent(held.agent_id, "e1")
    found = registry.stage_wait(held.agent_id)
    assert found is not None and found.sent and found.answer == passed


def test_a_sent_wait_or_a_named_one_is_taken_over(registry: Subject) -> None:
    held = registry.hold_stage_wait(wait("e1"))
    # named (its task is over): replaced, with no answer
    replacing = wait("e2", since_launch=2)
    assert registry.hold_stage_wait(replacing, replacing="e1") == replacing
    assert registry.hold_stage_wait(wait("e3"), replacing="e1") == replacing  # e1 is no longer held
    registry.answer_stage_wait(held.agent_id, "e2", {"output": {}})
    registry.mark_stage_wait_sent(held.agent_id, "e2")
    # sent: the next stage takes the agent, and starts unanswered
    nxt = wait("e3", since_launch=3)
    assert registry.hold_stage_wait(nxt) == nxt
    found = registry.stage_wait(held.agent_id)
    assert found == nxt and found.answer is None and not found.sent
