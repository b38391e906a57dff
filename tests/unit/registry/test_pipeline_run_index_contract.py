"""The :class:`~squadron.registry_ports.PipelineRunIndex` contract: the runs started on an issue
or pull request, found by the subject, newest first, bounded, forgotten once over."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any, Protocol

import pytest

from squadron.adapters.registry.pipeline_run_index import DynamoPipelineRunIndex
from squadron.domain.pipelines.reactions import MAX_RUNS_PER_SUBJECT, RunRecord
from squadron.registry_ports import PipelineRunIndex
from tests.unit.registry.support import ALONE, REPO, T0, implementation


class Subject(PipelineRunIndex, Protocol):
    """The port alone."""


@pytest.fixture(params=ALONE)
def registry(request: pytest.FixtureRequest) -> Iterator[Any]:
    with implementation(
        request.param, lambda table, client: DynamoPipelineRunIndex(table, client=client)
    ) as found:
        yield found


HANDLERS = {
    "pull_request.synchronize": {
        "action": "invalidate_and_restart",
        "invalidate": ["code-review"],
        "restart_from": "tests",
        "context": {"why": "a push"},
    }
}


def run(name: str, number: int | None = 7, minutes: int = 0, repo: int = REPO) -> RunRecord:
    return RunRecord(
        repo_id=repo,
        number=number,
        pipeline="lifecycle",
        execution_arn=f"arn:aws:states:us-east-1:123456789012:execution:sq-{repo}-lifecycle:{name}",
        version_arn=f"arn:aws:states:us-east-1:123456789012:stateMachine:sq-{repo}-lifecycle:2",
        started_at=T0 + timedelta(minutes=minutes),
        on_events=HANDLERS,
        stages=("tests", "code-review"),
    )


def test_a_subjects_runs_come_back_as_recorded_newest_first(registry: Subject) -> None:
    first, second = run("a"), run("b", minutes=5)
    registry.record_run(first)
    registry.record_run(second)
    registry.record_run(first)  # the outbox's retry records it again: the same record

    assert registry.runs_of(REPO, 7) == [second, first]
    assert registry.runs_of(REPO, 7)[0].handler("pull_request.synchronize") is not None


def test_runs_are_kept_apart_by_repository_and_subject(registry: Subject) -> None:
    registry.record_run(run("a"))
    registry.record_run(run("b", number=8))
    registry.record_run(run("c", number=None))
    registry.record_run(run("d", repo=REPO + 1))

    assert [r.execution_arn[-1] for r in registry.runs_of(REPO, 7)] == ["a"]
    assert [r.execution_arn[-1] for r in registry.runs_of(REPO, 8)] == ["b"]
    assert registry.runs_of(REPO, None) == [run("c", number=None)]
    assert registry.runs_of(REPO, 9) == []


def test_a_run_that_is_over_is_forgotten(registry: Subject) -> None:
    registry.record_run(run("a"))
    registry.record_run(run("b", minutes=1))
    (_, read) = registry.runs_of(REPO, 7)

    assert registry.forget_run(read) is True
    assert registry.forget_run(read) is False  # forgotten already: nothing happens
    assert registry.forget_run(run("zzz")) is False  # never recorded: nothing happens
    assert [r.execution_arn[-1] for r in registry.runs_of(REPO, 7)] == ["b"]


def test_a_run_recorded_again_after_it_was_read_is_kept(registry: Subject) -> None:
    """Another writer recorded the run between the read that found it over and the forgetting
    (the outbox's retry of its start records it again): its record is not lost."""
    registry.record_run(run("a"))
    (read,) = registry.runs_of(REPO, 7)
    registry.record_run(run("a", minutes=5))  # written again meanwhile

    assert registry.forget_run(read) is False
    (kept,) = registry.runs_of(REPO, 7)
    assert kept == run("a", minutes=5)
    assert registry.forget_run(kept) is True  # as read now, it goes
    assert registry.runs_of(REPO, 7) == []


def test_at_most_the_newest_runs_are_read(registry: Subject) -> None:
    for minute in range(MAX_RUNS_PER_SUBJECT + 3):
        registry.record_run(run(f"r{minute:02d}", minutes=minute))

    runs = registry.runs_of(REPO, 7)
    assert len(runs) == MAX_RUNS_PER_SUBJECT
    assert runs[0].execution_arn.endswith(f"r{MAX_RUNS_PER_SUBJECT + 2:02d}")
