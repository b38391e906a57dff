"""Stage events for answers sent later (issue 30, "a domain event per stage transition"): an agent
stage is answered when its agent's task ends, a human stage when people approve, not when the
router handles their task. Each such answer is one ``pipeline.stage_changed.v1``, keyed by the
stage's entry as the router's own answers are: the same end or approval delivered again, or a kept
answer sent by a later attempt, stores no second event.

Runs go on moto's interpreter; the routers are those of tests/adapters/test_pipeline_agent_stages.py
and tests/adapters/test_pipeline_human_stages.py with the registry's ``record_event`` wired.
"""

from __future__ import annotations

from collections.abc import Iterator

import jsonschema
import pytest

from squadron.domain.domain_events import DomainEvent
from squadron.domain.pipeline_events import stage_changed
from squadron.domain.pipeline_wire import PipelineTask, StageSucceeded, parse_task
from squadron.shell.pipeline_where import carrying_out
from tests.adapters.test_pipeline_agent_stages import (
    REVIEW_THEN_COMMENT,
    REVIEWER,
    LosesTheFirstAnswer,
)
from tests.adapters.test_pipeline_agent_stages import Router as AgentRouter
from tests.adapters.test_pipeline_events import SCHEMA
from tests.adapters.test_pipeline_human_stages import (
    APPROVAL,
    EVENTS,
    deliver,
    handle,
    next_task,
    pipeline,
    waiting_router,
)
from tests.adapters.test_pipeline_stage_work import REPO, drive, started
from tests.support.fake_registry import FakeRegistry
from tests.support.step_functions import Stack, step_functions


@pytest.fixture
def stack() -> Iterator[Stack]:
    with step_functions() as made:
        yield made


def transitions(events: dict[str, DomainEvent], stage: str) -> list[DomainEvent]:
    return [
        e
        for e in events.values()
        if e.detail_type == "pipeline.stage_changed.v1" and e.data["stage"] == stage
    ]


def agent_router(stack: Stack) -> AgentRouter:
    r = AgentRouter(stack)
    assert r.tasks.agents is not None
    r.tasks.events = r.tasks.agents.events = r.world.registry.record_event
    return r


def the_review_task(r: AgentRouter) -> PipelineTask:
    body, summary = r.task()
    assert summary["waiting"] == REVIEWER
    task = parse_task(body)
    assert task is not None and task.stage == "review"
    return task


def test_an_agent_stage_answered_when_its_task_ends_is_one_transition(stack: Stack) -> None:
    r = agent_router(stack)
    arn = started(stack, REVIEW_THEN_COMMENT)
    task = the_review_task(r)
    assert transitions(r.world.registry.events, "review") == []  # waiting is no transition

    r.begun()
    envelope, routed = r.ended(outcome="idle", outputs={"verdict": "fine"})
    assert routed["pipeline_stage"]["answered"] is True
    r.dispatch.handle(envelope.to_message())  # the same end delivered again
    r.task()  # "say", the router's own answer
    assert stack.finished(arn)["status"] == "SUCCEEDED"

    (event,) = transitions(r.world.registry.events, "review")
    assert (event.data["stage_type"], event.data["step"], event.data["outcome"]) == (
        "agent",
        "stage",
        "succeeded",
    )
    assert (event.data["execution_arn"], event.data["pipeline"], event.issue) == (arn, "p", 7)
    assert (event.repository.id, event.repository.full_name, event.installation) == (42, REPO, 77)
    # the entry as the router's own answer would report it, and keyed the same: one transition
    own = stage_changed(task, StageSucceeded(), repository=REPO, installation=77, at=r.world.now)
    assert (event.id, event.correlation_id, event.data) == (own.id, own.correlation_id, own.data)
    jsonschema.Draft4Validator(SCHEMA).validate(event.published("ci").detail())
    assert len(transitions(r.world.registry.events, "say")) == 1


def test_a_failed_agent_stage_is_a_failed_transition_with_its_error(stack: Stack) -> None:
    r = agent_router(stack)
    arn = started(stack, REVIEW_THEN_COMMENT)
    the_review_task(r)
    r.begun()
    r.ended(outcome="escalated", reason="it cannot decide")
    r.task()  # "tell", the stage's on_error
    assert stack.finished(arn)["status"] == "SUCCEEDED"
    (event,) = transitions(r.world.registry.events, "review")
    assert (event.data["outcome"], event.data["error"]) == ("failed", "Squadron.StageFailed")


def test_an_agent_answer_kept_and_delivered_by_a_later_attempt_is_one_transition(stack: Stack) -> None:
    r = agent_router(stack)
    assert r.tasks.agents is not None
    r.tasks.agents.answers = LosesTheFirstAnswer(stack)
    arn = started(stack, REVIEW_THEN_COMMENT)
    the_review_task(r)
    r.begun()
    ended = r.end_of(REVIEWER, outcome="idle", outputs={"verdict": "kept"})
    with pytest.raises(RuntimeError):
        r.dispatch.handle(ended.to_message())
    # nothing was delivered: no transition yet (the run still waits at the stage)
    assert transitions(r.world.registry.events, "review") == []
    assert r.dispatch.handle(ended.to_message())["pipeline_stage"]["answered"] is True
    r.task()
    assert stack.finished(arn)["status"] == "SUCCEEDED"
    (event,) = transitions(r.world.registry.events, "review")
    assert event.data["outcome"] == "succeeded"


def test_a_human_stage_answered_by_an_approval_is_one_transition(stack: Stack) -> None:
    r = waiting_router(stack)
    assert r.tasks.humans is not None
    r.tasks.events = r.tasks.humans.events = r.world.registry.record_event
    arn = started(stack, pipeline(APPROVAL.replace("from: maintainers", "from: maintainers, count: 2")))
    task, message = next_task(stack)
    handle(r, message)
    events = r.world.registry.events
    assert transitions(events, "ask") == []

    deliver(r, EVENTS.review(7, "feat/x", "approved", by="alice"))
    assert transitions(events, "ask") == []  # one of two: still waiting
    approval = EVENTS.review(7, "feat/x", "approved", by="bob")
    assert deliver(r, approval)["waiting"]["waits"][0]["answered"] is True
    deliver(r, approval)  # the same approval delivered again
    deliver(r, EVENTS.review(7, "feat/x", "approved", by="dave"))  # a later one
    drive(stack, r, arn)
    assert stack.finished(arn)["status"] == "SUCCEEDED"

    (event,) = transitions(events, "ask")
    assert (event.data["stage_type"], event.data["outcome"], event.data["passed"]) == (
        "human",
        "succeeded",
        None,
    )
    assert (event.repository.full_name, event.installation, event.issue) == (REPO, 77, 7)
    own = stage_changed(task, StageSucceeded(), repository=REPO, installation=77, at=r.world.now)
    assert (event.id, event.data) == (own.id, own.data)
    jsonschema.Draft4Validator(SCHEMA).validate(event.published("ci").detail())
    assert len(transitions(events, "said")) == 1


def test_the_router_wires_its_event_store_to_the_stages_answered_later(stack: Stack) -> None:
    store = FakeRegistry()
    tasks = carrying_out(
        stack.pipelines,
        outbox=lambda: None,  # type: ignore[arg-type,return-value]
        store=store,
        github=lambda _where: None,  # type: ignore[arg-type]
        events=store.record_event,
        groups=lambda _where: {},
        permission=lambda _i, _r, _l: "write",
        registry=store,
        policy=lambda _t, _w: None,  # type: ignore[arg-type,return-value]
    )
    assert tasks.humans is not None and tasks.agents is not None
    assert tasks.events == tasks.humans.events == tasks.agents.events == store.record_event


def test_an_approval_after_the_stage_timed_out_reports_no_transition(stack: Stack) -> None:
    """The late approval answers a task that is over: the run escalated, the stage never succeeded."""
    r = waiting_router(stack)
    assert r.tasks.humans is not None
    r.tasks.events = r.tasks.humans.events = r.world.registry.record_event
    arn = started(
        stack,
        pipeline(
            APPROVAL,
            more="        timeout: 1s\n        on_timeout: {notify: {target: maintainers}, then: escalate}\n",
        ),
    )
    _, message = next_task(stack)
    handle(r, message)
    drive(stack, r, arn)
    assert stack.finished(arn)["status"] == "FAILED"

    late = deliver(r, EVENTS.review(7, "feat/x", "approved", by="alice"))

    assert late["waiting"]["waits"][0]["answered"] is False
    assert transitions(r.world.registry.events, "ask") == []
    stages = [
        e.data["stage"]
        for e in r.world.registry.events.values()
        if e.detail_type == "pipeline.stage_changed.v1"
    ]
    assert stages == ["ask.notify-end", "__escalate__"]  # the timeout's steps: the router's answers
