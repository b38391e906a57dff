"""A pipeline run's transitions as domain events (issue 30, "a domain event per stage
transition"): each entry of a stage the router answers is one ``pipeline.stage_changed.v1``,
stored once however often its task is delivered, and a loop back is a new transition. Runs go on
moto's interpreter; the router's side is :class:`~squadron.shell.pipelines.PipelineTasks` with the
registry's ``record_event`` (tests/support/fake_registry.py, the contract of
tests/unit/registry/test_history_contract.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from squadron.domain.domain_events import DomainEvent
from tests.adapters.test_pipeline_stage_work import FAILING_GATE, REPO, Router, drive, router, started
from tests.support.step_functions import Stack, step_functions

SCHEMA = json.loads(
    (
        Path(__file__).resolve().parents[2] / "schemas" / "events" / "pipeline.stage_changed.v1.json"
    ).read_text()
)


@pytest.fixture
def stack() -> Iterator[Stack]:
    with step_functions() as made:
        yield made


def with_events(stack: Stack) -> Router:
    r = router(stack)
    r.tasks.events = r.world.registry.record_event
    return r


def transitions(r: Router) -> list[DomainEvent]:
    found = [e for e in r.world.registry.events.values() if e.detail_type == "pipeline.stage_changed.v1"]
    return sorted(found, key=lambda e: (e.data["entered_at"], e.data["stage"]))


def drive_twice(stack: Stack, r: Router, arn: str, *, most: int = 20) -> list[str]:
    """Hand each task to the router twice (SQS delivers it again) until the run ends."""
    return [stage for stage, _ in drive(stack, r, arn, most=most, deliveries=2)]


def test_each_entry_of_a_stage_is_one_transition_event_however_often_it_is_delivered(stack: Stack) -> None:
    r = with_events(stack)
    r.github.reviews = [{"user": {"login": "alice", "type": "User"}, "state": "CHANGES_REQUESTED"}]
    arn = started(stack, FAILING_GATE)

    handled = drive_twice(stack, r, arn)

    assert stack.finished(arn)["error"] == "Squadron.Escalated"
    events = transitions(r)
    # every task was handled twice; each entry is reported once, the loop's entries each
    assert len(handled) == 7
    assert [(e.data["stage"], e.data["outcome"], e.data["passed"]) for e in events] == [
        ("fix", "succeeded", None),
        ("approved", "succeeded", False),
        ("fix", "succeeded", None),
        ("approved", "succeeded", False),
        ("fix", "succeeded", None),
        ("approved", "succeeded", False),
        ("__escalate__", "succeeded", None),
    ]
    validator = jsonschema.Draft4Validator(SCHEMA)
    for event in events:
        assert (event.repository.id, event.repository.full_name, event.issue) == (42, REPO, 7)
        assert event.data["execution_arn"] == arn and event.data["pipeline"] == "p"
        validator.validate(event.published("ci").detail())
    assert [e.data["step"] for e in events][-1] == "escalate"
    assert len({e.id for e in events}) == len(events) == len({e.correlation_id for e in events})


def test_a_stage_the_router_does_not_carry_out_is_a_failed_transition(stack: Stack) -> None:
    """An agent stage is answered Squadron.StageRejected today: the run's failure is reported too."""
    r = with_events(stack)
    arn = started(
        stack,
        "pipelines:\n  p:\n    trigger: {event: pull_request.opened}\n    stages:\n"
        "      - {id: work, type: agent, agent: test-coverage}\n",
    )
    drive_twice(stack, r, arn)

    assert stack.finished(arn)["status"] == "FAILED"
    (event,) = [e for e in transitions(r) if e.data["stage"] == "work"]
    assert (event.data["outcome"], event.data["error"], event.data["stage_type"]) == (
        "failed",
        "Squadron.StageRejected",
        "agent",
    )
