"""Events reach running pipelines (issue 30, item 2: ``on_events``), on moto's Step Functions
interpreter with the real adapter: the router decides (tests.support.world), its outbox steers the
runs recorded on the pull request (squadron.shell.pipeline_steering), and each test asserts on
what Step Functions holds afterwards — the executions, their status, the first task of a
restarted run — and on what was posted.

A run is held at a waiting gate by not answering its task (the router would judge it at once).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from squadron.domain.effects import SteerPipelineRuns, effect_key, split_decision
from squadron.domain.events import EventEnvelope
from squadron.domain.pipeline_wire import PipelineTask, StageSucceeded, parse_task
from squadron.domain.pipelines.models import Pipeline
from squadron.domain.pipelines.work import Where
from squadron.domain.routing import RoutingPolicy
from squadron.shell.pipeline_runs import PipelineRuns
from squadron.shell.pipeline_where import RunRepositories
from tests.support.events import BOT
from tests.support.fake_registry import FakeRouterGitHub
from tests.support.pipeline_tasks import pipeline_tasks
from tests.support.step_functions import Stack, step_functions
from tests.support.world import World

REPO = 1  # tests.support.events: octo/repo
PEOPLE = {"alice": "write", "mallory": "read"}
LIFECYCLE = Pipeline.model_validate(
    {
        "trigger": {"event": "pull_request.opened"},
        "on_events": {
            "pull_request.synchronize": {
                "action": "invalidate_and_restart",
                "invalidate": ["review"],
                "restart_from": "review",
            },
            "pull_request.closed": {"action": "cancel"},
            "issue_comment.created": {
                "action": "notify",
                "notify": {"message": "A comment came while run {{ trigger.number }} waits"},
            },
        },
        "stages": [
            {"id": "say", "type": "action", "action": "comment", "config": {"message": "tests ran"}},
            {"id": "review", "type": "gate", "conditions": [{"check": "label_present", "label": "go"}]},
        ],
    }
)


class NoFacts:
    def facts(
        self, where: Where, number: int, others: tuple[int, ...] = (), paths: tuple[str, ...] = ()
    ) -> Any:
        raise AssertionError("no gate is judged here")


@pytest.fixture
def stack() -> Iterator[Stack]:
    with step_functions() as made:
        yield made


def world(stack: Stack, pipeline: Pipeline = LIFECYCLE) -> World:
    w = World(policy=RoutingPolicy(pipelines={"lifecycle": pipeline}), github=FakeRouterGitHub(dict(PEOPLE)))
    w.router.pipelines = PipelineRuns(stack.pipelines, queue_url=stack.queue_url, index=w.registry)
    return w


def executions(stack: Stack) -> list[dict[str, Any]]:
    arn = stack.pipelines.state_machine_arn(REPO, "lifecycle")
    found: list[dict[str, Any]] = stack.sfn.list_executions(stateMachineArn=arn)["executions"]
    return found


def next_task(stack: Stack) -> PipelineTask:
    (message,) = stack.messages(1)
    task = parse_task(message["Body"])
    assert task is not None
    return task


def at_the_gate(stack: Stack, w: World) -> str:
    """A writer's pull request starts the run; its first stage is carried out (a comment), and it
    waits at the gate (its task left unanswered). The run's ARN."""
    w.send(w.events.pr(7, "feat/x", author="alice"))
    tasks = pipeline_tasks(stack, w, facts=NoFacts())
    say = next_task(stack)
    assert say.stage == "say"
    assert tasks.handle(say)["answered"] is True
    gate = next_task(stack)
    assert gate.stage == "review"
    return gate.execution_arn


def push(w: World, by: str = "alice") -> EventEnvelope:
    event = w.events.pr(7, "feat/x", action="synchronize")
    return event.model_copy(update={"sender": event.sender.model_copy(update={"login": by})})


def ended(stack: Stack, arn: str) -> dict[str, Any]:
    return stack.finished(arn)


def test_a_push_restarts_the_run_from_the_named_stage_once_even_delivered_twice(stack: Stack) -> None:
    w = world(stack)
    first = at_the_gate(stack, w)
    event = push(w)

    effects = w.send(event)
    w.send(event)  # GitHub delivers it again

    assert ended(stack, first)["status"] != "RUNNING"  # the invalidated run is over
    runs = executions(stack)
    assert len(runs) == 2
    (restarted,) = [r for r in runs if r["executionArn"] != first]
    assert restarted["status"] == "RUNNING"
    # the new run begins at the named stage, with what came before it kept and the invalidated dropped
    task = next_task(stack)
    assert (task.execution_arn, task.stage) == (restarted["executionArn"], "review")
    assert set(task.input["stages"]) == {"say"}
    assert len(w.github.comments) == 1  # the stage before it was not run again
    # the restarted run is recorded on the pull request: the next event reaches it
    assert [r.execution_arn for r in w.registry.runs_of(REPO, 7)] == [restarted["executionArn"]]

    # The outbox's retry after a crash that left the old run recorded: the same restart, no third run.
    outside = split_decision(effects).outside
    (effect,) = [e for e in outside if isinstance(e, SteerPipelineRuns)]
    key = effect_key(event.delivery_id, outside.index(effect))
    old = next(r for r in w.registry.pipeline_runs[(REPO, 7)].values())
    w.registry.record_run(old.__class__(**{**old.__dict__, "execution_arn": first}))
    assert w.router.pipelines is not None
    steering = w.router.pipelines.steering
    assert steering is not None
    steering.steer(effect, key, w.github, None)
    assert len(executions(stack)) == 2


def test_a_handlers_context_reaches_the_restarted_runs_stages(stack: Stack) -> None:
    """The reference's handler ``context`` ("additional context to inject"): the restarted run's
    stages read the run's context with the handler's on top, rendered against the run's data."""
    handlers = LIFECYCLE.model_dump(mode="json", by_alias=True, exclude_none=True)
    handlers["context"] = {"env": "prod", "reason": "opened"}
    handlers["on_events"]["pull_request.synchronize"]["context"] = {
        "reason": "a push to #{{ trigger.number }}",
        "next": "{{ trigger.number + 1 }}",
    }
    w = world(stack, Pipeline.model_validate(handlers))
    first = at_the_gate(stack, w)

    w.send(push(w))

    task = next_task(stack)
    assert task.execution_arn != first and task.stage == "review"
    assert task.input["context"] == {"env": "prod", "reason": "a push to #7", "next": 8}


def test_closing_the_pull_request_cancels_the_run(stack: Stack) -> None:
    w = world(stack)
    arn = at_the_gate(stack, w)

    w.send(w.events.pr_closed(7, "feat/x", merged=False, by="alice"))

    held = ended(stack, arn)
    assert held["status"] in ("FAILED", "ABORTED")
    assert held.get("error") == "Squadron.Cancelled"
    assert len(executions(stack)) == 1  # nothing started instead
    assert w.registry.runs_of(REPO, 7) == []  # forgotten: nothing left to steer


@pytest.mark.parametrize("by", ["mallory", BOT], ids=["a stranger's push", "the App's own push"])
def test_an_event_nobody_vouched_for_steers_nothing(stack: Stack, by: str) -> None:
    w = world(stack)
    arn = at_the_gate(stack, w)

    effects = w.send(push(w, by=by))

    assert not [e for e in effects if isinstance(e, SteerPipelineRuns)]
    assert [r["executionArn"] for r in executions(stack)] == [arn]
    assert stack.sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
    # the run still waits at its gate: only its first stage's task was ever answered
    history = stack.sfn.get_execution_history(executionArn=arn)["events"]
    assert len([e for e in history if e["type"] in ("TaskFailed", "TaskSucceeded")]) == 1
    assert [r.execution_arn for r in w.registry.runs_of(REPO, 7)] == [arn]


RESTARTED = Pipeline.model_validate(
    {
        "trigger": {"event": "pull_request.opened"},
        "on_events": {
            "pull_request.synchronize": {"action": "invalidate_and_restart", "restart_from": "say"}
        },
        "stages": [
            {"id": "say", "type": "action", "action": "comment", "config": {"message": "said"}},
            {"id": "then", "type": "action", "action": "comment", "config": {"message": "then"}},
        ],
    }
)


def test_a_restarted_run_is_carried_out_in_the_repository_its_run_was_started_for(stack: Stack) -> None:
    """The router finds a task's repository in its run's input (as deployed: RunRepositories),
    so the restart carries the run's repository and installation over: its first stage is carried
    out again (not refused) and the restarted run goes on to the next stage."""
    w = World(policy=RoutingPolicy(pipelines={"lifecycle": RESTARTED}), github=FakeRouterGitHub(dict(PEOPLE)))
    w.router.pipelines = PipelineRuns(stack.pipelines, queue_url=stack.queue_url, index=w.registry)
    tasks = pipeline_tasks(stack, w, facts=NoFacts(), where_for=RunRepositories(stack.pipelines))
    w.send(w.events.pr(7, "feat/x", author="alice"))
    say = next_task(stack)
    tasks.handle(say)
    held = next_task(stack)
    assert held.stage == "then"  # left unanswered: the run waits here

    w.send(push(w))

    again = next_task(stack)
    assert again.execution_arn != say.execution_arn and again.stage == "say"
    tasks.handle(again)
    assert [body for _, n, body, _ in w.github.comments if n == 7] == ["said", "said"]
    after = next_task(stack)
    assert (after.execution_arn, after.stage) == (again.execution_arn, "then")
    restarted = json.loads(stack.sfn.describe_execution(executionArn=again.execution_arn)["input"])
    where = restarted["squadron"]
    assert (where["repository"], where["installation_id"]) == ("octo/repo", 77)


LOOPING = Pipeline.model_validate(
    {
        "trigger": {"event": "pull_request.opened"},
        "on_events": {"pull_request_review.submitted": {"action": "reevaluate_gates"}},
        "stages": [
            {"id": "fix", "type": "gate", "conditions": [{"check": "label_present", "label": "fixed"}]},
            {
                "id": "approved",
                "type": "gate",
                "conditions": [{"check": "pr_approvals_met", "count": 1}],
                "on_fail": {"goto": "fix", "max_iterations": 3},
            },
        ],
    }
)


def test_a_review_judges_again_the_gate_whose_loop_the_run_is_in(stack: Stack) -> None:
    """The gate failed and sent the run back to ``fix``, which waits; a writer's review restarts
    the run at the gate (judged again now), with ``fix``'s output and the loop's count kept."""
    w = World(policy=RoutingPolicy(pipelines={"lifecycle": LOOPING}), github=FakeRouterGitHub(dict(PEOPLE)))
    w.router.pipelines = PipelineRuns(stack.pipelines, queue_url=stack.queue_url, index=w.registry)
    w.send(w.events.pr(7, "feat/x", author="alice"))
    # the router's judgements, answered as it would: fix passes, the gate fails
    fix = next_task(stack)
    stack.pipelines.answer(fix.task_token, StageSucceeded(output={"passed": True}))
    gate = next_task(stack)
    assert gate.stage == "approved"
    stack.pipelines.answer(gate.task_token, StageSucceeded(output={"passed": False, "failing": ["no"]}))
    again = next_task(stack)
    assert again.stage == "fix"  # round the loop: it waits here

    w.send(w.events.review(7, "feat/x", "approved", by="alice", pr_author="alice"))

    assert ended(stack, gate.execution_arn)["status"] != "RUNNING"
    task = next_task(stack)
    assert task.execution_arn != gate.execution_arn and task.stage == "approved"
    assert task.input["stages"]["fix"] == {"passed": True}
    restarted = json.loads(stack.sfn.describe_execution(executionArn=task.execution_arn)["input"])
    assert restarted["restart"]["counts"] == {"approved_l": {"n": 1}}  # the loop's bound holds across it


def test_a_comment_notifies_on_the_pull_request_once_and_the_run_goes_on(stack: Stack) -> None:
    w = world(stack)
    arn = at_the_gate(stack, w)
    event = w.events.comment(7, "what is left?", by="alice")

    effects = w.send(event)
    w.send(event)  # delivered again
    outside = split_decision(effects).outside
    (effect,) = [e for e in outside if isinstance(e, SteerPipelineRuns)]
    assert w.router.pipelines is not None and w.router.pipelines.steering is not None
    # the outbox's retry after a crash: the comment is looked up by its key, not posted again
    w.router.pipelines.steering.steer(
        effect, effect_key(event.delivery_id, outside.index(effect)), w.github, w.now
    )

    notes = [body for _, n, body, _ in w.github.comments if n == 7 and "A comment came" in body]
    assert notes == ["A comment came while run 7 waits"]
    assert stack.sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"


HEADED = Pipeline.model_validate(
    {
        "trigger": {"event": "pull_request.opened"},
        "on_events": {
            "pull_request.synchronize": {"action": "invalidate_and_restart", "restart_from": "say"}
        },
        "stages": [
            {
                "id": "say",
                "type": "action",
                "action": "comment",
                "config": {
                    "message": "head {{ trigger.head_sha }} ({{ trigger.event }} by {{ trigger.sender }})"
                },
            },
            {"id": "then", "type": "action", "action": "comment", "config": {"message": "then"}},
        ],
    }
)


def test_a_restarted_runs_trigger_is_the_push_that_restarted_it(stack: Stack) -> None:
    """A template reading ``trigger.head_sha`` in the restarted run sees the pushed head (and the
    push's event and sender), not the head the run started on; the repository stays the run's."""
    people = {**PEOPLE, "bob": "write"}
    w = World(policy=RoutingPolicy(pipelines={"lifecycle": HEADED}), github=FakeRouterGitHub(people))
    w.router.pipelines = PipelineRuns(stack.pipelines, queue_url=stack.queue_url, index=w.registry)
    tasks = pipeline_tasks(stack, w, facts=NoFacts(), where_for=RunRepositories(stack.pipelines))
    opened = w.events.pr(7, "feat/x", author="alice")
    assert opened.pull_request is not None
    w.send(opened)
    tasks.handle(next_task(stack))
    assert next_task(stack).stage == "then"  # left unanswered: the run waits here
    event = push(w, by="bob")
    assert event.pull_request is not None
    pushed = event.model_copy(
        update={"pull_request": event.pull_request.model_copy(update={"head_sha": "fedcba98765"})}
    )

    w.send(pushed)

    again = next_task(stack)
    assert again.stage == "say"
    tasks.handle(again)
    said = [body for _, n, body, _ in w.github.comments if n == 7]
    assert said == [
        f"head {opened.pull_request.head_sha} (pull_request.opened by alice)",
        "head fedcba98765 (pull_request.synchronize by bob)",
    ]
    restarted = json.loads(stack.sfn.describe_execution(executionArn=again.execution_arn)["input"])
    assert restarted["data"]["delivery"] == pushed.delivery_id
    assert (restarted["data"]["repository"], restarted["data"]["number"]) == ("octo/repo", 7)
    assert (restarted["squadron"]["repository"], restarted["squadron"]["installation_id"]) == (
        "octo/repo",
        77,
    )


# --- runs found over are forgotten --------------------------------------------------------------


class Reads:
    """Step Functions as the steering sees it, counting its reads (DescribeExecution) by run."""

    def __init__(self, stack: Stack) -> None:
        self.pipelines = stack.pipelines
        self.described: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pipelines, name)

    def describe(self, execution_arn: str) -> Any:
        self.described.append(execution_arn)
        return self.pipelines.describe(execution_arn)


def counted(stack: Stack, w: World) -> Reads:
    reads = Reads(stack)
    assert w.router.pipelines is not None and w.router.pipelines.steering is not None
    w.router.pipelines.steering.pipelines = reads  # type: ignore[assignment]
    return reads


def run_ended(stack: Stack, w: World) -> str:
    """The run reaches its gate, which passes: the run is over (SUCCEEDED). Its ARN."""
    arn = at_the_gate(stack, w)
    gate = next_task_of(stack, arn)
    stack.pipelines.answer(gate.task_token, StageSucceeded(output={"passed": True}))
    assert ended(stack, arn)["status"] == "SUCCEEDED"
    return arn


def next_task_of(stack: Stack, arn: str) -> PipelineTask:
    """The run's task at its gate, from its history (at_the_gate read it off the queue)."""
    history = stack.sfn.get_execution_history(executionArn=arn)["events"]
    for event in sorted(history, key=lambda e: -int(e["id"])):  # the newest first
        if event["type"] == "TaskScheduled":
            body = json.loads(event["taskScheduledEventDetails"]["parameters"])["MessageBody"]
            task = parse_task(json.dumps(body))
            assert task is not None
            return task
    raise AssertionError(f"{arn} scheduled no task")


def never_started(stack: Stack, w: World) -> str:
    """A run recorded on the pull request that Step Functions does not know (yet): its record is
    the registry's, its execution is not described."""
    at_the_gate(stack, w)
    (running,) = w.registry.runs_of(REPO, 7)
    unknown = running.execution_arn[: running.execution_arn.rindex(":") + 1] + "not-yet"
    w.registry.record_run(running.__class__(**{**running.__dict__, "execution_arn": unknown}))
    return unknown


@pytest.mark.parametrize(
    ("make", "forgotten"),
    [(run_ended, True), (never_started, False)],
    ids=["a run seen over: read once, then forgotten", "a run Step Functions does not know: kept"],
)
def test_a_run_is_forgotten_once_it_is_seen_over(stack: Stack, make: Any, forgotten: bool) -> None:
    w = world(stack)
    arn = make(stack, w)
    reads = counted(stack, w)

    w.send(w.events.comment(7, "what is left?", by="alice"))
    assert reads.described.count(arn) == 1
    assert (arn in [r.execution_arn for r in w.registry.runs_of(REPO, 7)]) is not forgotten

    w.send(w.events.comment(7, "and now?", by="alice"))  # a later event
    assert reads.described.count(arn) == (1 if forgotten else 2)


def test_a_run_recorded_again_while_it_is_found_over_is_kept(stack: Stack) -> None:
    """Another writer records the run again between the read that finds it over and the
    forgetting: its record is not lost (the next event reads it, and forgets it then)."""
    w = world(stack)
    arn = run_ended(stack, w)
    runs_of = w.registry.runs_of

    def read_then_rewritten(repo_id: int, number: int | None) -> list[Any]:
        read = runs_of(repo_id, number)
        for run in read:  # the outbox's retry of the run's start, meanwhile
            w.registry.record_run(run.__class__(**{**run.__dict__, "started_at": w.now}))
        return read

    w.registry.runs_of = read_then_rewritten  # type: ignore[method-assign]
    w.send(w.events.comment(7, "what is left?", by="alice"))
    w.registry.runs_of = runs_of  # type: ignore[method-assign]

    assert [r.execution_arn for r in w.registry.runs_of(REPO, 7)] == [arn]
    w.send(w.events.comment(7, "and now?", by="alice"))
    assert w.registry.runs_of(REPO, 7) == []
