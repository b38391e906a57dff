"""Publishing a repository's pipelines and starting their runs, on moto's Step Functions with the
real adapter (squadron.shell.pipeline_runs) and the router deciding (tests.support.world).

Each test asserts on what Step Functions holds afterwards: the state machines and their versions,
the executions, and the first stage's task on events.fifo.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from squadron.domain.effects import StartPipelineRun
from squadron.domain.pipeline_wire import parse_task
from squadron.domain.pipelines.compile import compile_pipeline
from squadron.domain.pipelines.models import Pipeline
from squadron.domain.routing import RoutingPolicy
from squadron.shell.pipeline_runs import PipelineRuns
from tests.support.fake_registry import FakeRouterGitHub
from tests.support.step_functions import Stack, step_functions
from tests.support.world import World

REPO = 1  # tests.support.events: octo/repo
PEOPLE = {"alice": "write", "mallory": "read"}


def pipeline(stages: list[dict[str, Any]], *, trigger: dict[str, Any] | None = None, **more: Any) -> Pipeline:
    return Pipeline.model_validate({"stages": stages, **({"trigger": trigger} if trigger else {}), **more})


AGENT = [{"id": "work", "type": "agent", "agent": "feat-dev", "action": "do it"}]
LABELLED = {"event": "issues.labeled", "conditions": {"label": "pipeline"}}


def config(action: str = "do it") -> dict[str, Pipeline]:
    return {
        "lifecycle": pipeline(
            [{"id": "work", "type": "agent", "agent": "feat-dev", "action": action}, {"id": "sub", "type": "pipeline", "pipeline": "checks"}],
            trigger=LABELLED,
        ),
        "checks": pipeline(AGENT),
    }  # fmt: skip


@pytest.fixture
def stack() -> Iterator[Stack]:
    with step_functions() as made:
        yield made


def runs_of(stack: Stack) -> PipelineRuns:
    return PipelineRuns(stack.pipelines, queue_url=stack.queue_url)


def versions(stack: Stack, name: str) -> list[str]:
    """The published versions' ARNs (moto lists none: each is described, 1, 2, ... until one is not)."""
    arn = stack.pipelines.state_machine_arn(REPO, name)
    found: list[str] = []
    while True:
        try:
            stack.sfn.describe_state_machine(stateMachineArn=f"{arn}:{len(found) + 1}")
        except stack.sfn.exceptions.StateMachineDoesNotExist:
            return found
        found.append(f"{arn}:{len(found) + 1}")


def executions(stack: Stack, name: str) -> list[dict[str, Any]]:
    arn = stack.pipelines.state_machine_arn(REPO, name)
    found: list[dict[str, Any]] = stack.sfn.list_executions(stateMachineArn=arn)["executions"]
    return found


def test_publishing_creates_sub_pipelines_first_then_only_what_changed(stack: Stack) -> None:
    runs = runs_of(stack)
    first = runs.publish(REPO, "octo/repo", config())
    assert first.problems == []
    assert [line.split("'")[1] for line in first.lines] == ["checks", "lifecycle"]
    assert all(" created " in line for line in first.lines)
    assert runs.publish(REPO, "octo/repo", config()).lines == []  # nothing changed, nothing published
    assert len(versions(stack, "lifecycle")) == 1
    changed = runs.publish(REPO, "octo/repo", config("do it better"))
    assert [line.split("'")[1] for line in changed.lines] == ["lifecycle"]
    assert len(versions(stack, "lifecycle")) == 2 and len(versions(stack, "checks")) == 1
    assert changed.versions["lifecycle"].endswith(":2")


def test_a_pipeline_that_does_not_compile_is_a_problem_naming_it_and_the_rest_is_published(
    stack: Stack,
) -> None:
    huge = {f"k{i}": "x" * 1000 for i in range(300)}  # a context past Step Functions' definition size
    pipelines = {**config(), "huge": pipeline(AGENT, trigger={"event": "issues.opened"}, context=huge)}
    done = runs_of(stack).publish(REPO, "octo/repo", pipelines)
    (problem,) = done.problems
    assert problem.startswith("octo/repo: pipeline 'huge' not published:") and "bytes" in problem
    assert sorted(done.versions) == ["checks", "lifecycle"]
    assert stack.pipelines.machines(REPO) == sorted(stack.pipelines.machines(REPO))
    assert not any(arn.endswith("-huge") for arn in stack.pipelines.machines(REPO))


def test_a_removed_pipeline_keeps_its_state_machine_and_is_reported_left(stack: Stack) -> None:
    runs = runs_of(stack)
    runs.publish(REPO, "octo/repo", config())
    remaining = {"checks": config()["checks"]}
    assert runs.left(REPO, remaining) == [stack.pipelines.state_machine_arn(REPO, "lifecycle")]


def world(stack: Stack, pipelines: dict[str, Pipeline]) -> World:
    w = World(policy=RoutingPolicy(pipelines=pipelines), github=FakeRouterGitHub(dict(PEOPLE)))
    w.router.pipelines = runs_of(stack)
    return w


def test_a_writers_label_publishes_on_first_need_and_starts_one_run_for_a_delivery_handled_twice(
    stack: Stack,
) -> None:
    w = world(stack, config())
    event = w.events.labeled(40, "pipeline", by="alice")
    (start,) = [e for e in w.send(event) if isinstance(e, StartPipelineRun)]
    # The same delivery again, as a second router that never saw it would (its own registry).
    again = world(stack, config())
    assert [e for e in again.send(event) if isinstance(e, StartPipelineRun)] == [start]
    (run,) = executions(stack, "lifecycle")
    assert run["name"] == start.name
    (message,) = stack.messages(1)
    task = parse_task(message["Body"])
    assert task is not None
    assert (task.repository_id, task.issue_number, task.pipeline, task.stage) == (
        REPO,
        40,
        "lifecycle",
        "work",
    )
    assert task.input["trigger"]["label"] == "pipeline"


def test_a_run_stays_on_the_version_it_started_with_when_the_configuration_changes(stack: Stack) -> None:
    w = world(stack, config())
    w.send(w.events.labeled(40, "pipeline", by="alice"))
    (first,) = [parse_task(m["Body"]) for m in stack.messages(1)]
    assert first is not None
    old = compile_pipeline(
        "lifecycle", config(), queue_url=stack.queue_url, repository_id=REPO,
        children={"checks": versions(stack, "checks")[0]},
    )  # fmt: skip
    assert first.definition == old.digest
    # The configuration changes mid-run: the next trigger publishes version 2 and runs it.
    w.policy = RoutingPolicy(pipelines=config("do it better"))
    w.send(w.events.labeled(41, "pipeline", by="alice"))
    (second,) = [parse_task(m["Body"]) for m in stack.messages(1)]
    assert second is not None and second.definition != old.digest
    assert len(versions(stack, "lifecycle")) == 2
    held = {r["name"]: r["status"] for r in executions(stack, "lifecycle")}
    assert sorted(held.values()) == ["RUNNING", "RUNNING"]  # the first run goes on, on version 1
    described = stack.sfn.describe_execution(executionArn=first.execution_arn)
    assert described["status"] == "RUNNING"


def test_a_strangers_label_or_the_apps_own_starts_nothing(stack: Stack) -> None:
    w = world(stack, config())
    w.send(w.events.opened(40, by="mallory"))
    w.send(w.events.labeled(40, "pipeline", by="mallory"))
    w.send(w.events.labeled(40, "pipeline", by="squadron[bot]"))
    assert stack.pipelines.machines(REPO) == []  # not even published: nothing asked for a run
