"""How a running pipeline reacts to events (squadron.domain.pipelines.reactions,
squadron.domain.routing.steering): who may steer a run, as a table of senders and origins, and
what each handler does to a run Step Functions describes, as a table of runs.

The runs themselves, on moto's interpreter: tests/adapters/test_pipeline_reactions.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from squadron.domain.agents import AgentStatus
from squadron.domain.effects import DeliverInbox, Discard, Effect, LaunchAgent, PutAgent, SteerPipelineRuns
from squadron.domain.events import EventEnvelope
from squadron.domain.pipeline_wire import RUN_CANCELLED, execution_name
from squadron.domain.pipelines.models import Pipeline
from squadron.domain.pipelines.reactions import (
    CommentOnRun,
    Leave,
    RunRecord,
    RunState,
    StartRestart,
    StopRun,
    reaction,
    restart_name,
    run_state,
    stop_cause,
    to_steer,
)
from squadron.domain.routing import RoutingPolicy
from tests.support.events import BOT, Events
from tests.support.fake_registry import FakeRouterGitHub
from tests.support.world import World

STAGES: list[dict[str, Any]] = [
    {"id": "test-coverage", "type": "agent", "agent": "pr-review"},
    {"id": "security-review", "type": "agent", "agent": "pr-review"},
    {"id": "code-review", "type": "agent", "agent": "pr-review"},
    {
        "id": "approval-gate",
        "type": "gate",
        "conditions": [{"check": "no_changes_requested"}],
        "on_fail": {"goto": "code-review", "max_iterations": 3},
    },
]
ON_EVENTS: dict[str, Any] = {
    "pull_request.synchronize": {
        "action": "invalidate_and_restart",
        "invalidate": ["security-review", "code-review"],
        "restart_from": "test-coverage",
    },
    "pull_request_review.submitted": {"action": "reevaluate_gates"},
    "pull_request.closed": {"action": "cancel"},
    "issue_comment.created": {"action": "notify", "notify": {"message": "run at {{ trigger.n }}"}},
    "pull_request.edited": {"action": "invalidate_and_restart", "restart_from": "current"},
}
LIFECYCLE = Pipeline.model_validate(
    {"trigger": {"event": "pull_request.opened"}, "on_events": ON_EVENTS, "stages": STAGES}
)
PEOPLE = {"alice": "write"}
E = Events()


def world(**pipelines: Pipeline) -> World:
    return World(
        policy=RoutingPolicy(pipelines=pipelines or {"lifecycle": LIFECYCLE}),
        github=FakeRouterGitHub(dict(PEOPLE)),
    )


def steered(effects: list[Effect]) -> list[SteerPipelineRuns]:
    return [e for e in effects if isinstance(e, SteerPipelineRuns)]


def push(by: str) -> EventEnvelope:
    event = E.pr(7, "feat/x", action="synchronize")
    return event.model_copy(update={"sender": event.sender.model_copy(update={"login": by})})


# --- who steers a run ---------------------------------------------------------------------------

WHO: list[tuple[str, EventEnvelope, str | None]] = [
    ("a writer's push", push("alice"), None),
    ("a stranger's push to a pull request nobody vouched for", push("mallory"), "no one with write access vouched for #7"),
    ("the App's own push", push(BOT), "the App's own acts steer no pipeline run"),
    ("the reconciler's replay of a writer's push", push("alice").model_copy(update={"origin": "reconciler"}),
     "only GitHub's webhooks steer"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "event", "refused"), WHO, ids=[w[0] for w in WHO])
def test_only_what_a_writer_vouched_for_steers_a_run(
    case: str, event: EventEnvelope, refused: str | None
) -> None:
    effects = world().send(event)
    if refused is None:
        (steer,) = steered(effects)
        assert (steer.event, steer.number, steer.delivery, steer.by) == (
            "pull_request.synchronize",
            7,
            event.delivery_id,
            "alice",
        ), case
        # the webhook's facts, which a run it restarts gets as its trigger (its new head)
        assert event.pull_request is not None
        assert {
            k: steer.trigger.get(k) for k in ("event", "delivery", "sender", "head_sha", "head_branch")
        } == {
            "event": "pull_request.synchronize",
            "delivery": event.delivery_id,
            "sender": "alice",
            "head_sha": event.pull_request.head_sha,
            "head_branch": "feat/x",
        }, case
    else:
        assert steered(effects) == [], case
        assert any(isinstance(e, Discard) and refused in e.reason for e in effects), [
            e for e in effects if isinstance(e, Discard)
        ]


def test_an_event_no_pipeline_handles_steers_nothing_and_says_nothing() -> None:
    effects = world().send(E.pr(7, "feat/x", action="ready_for_review"))
    assert steered(effects) == []
    assert not any(isinstance(e, Discard) and "steer" in e.reason for e in effects)


def test_wake_agent_wakes_the_issues_sleeping_agent_of_a_role_the_pipeline_runs() -> None:
    waking = Pipeline.model_validate(
        {
            "trigger": {"event": "issues.labeled"},
            "on_events": {
                "issue_comment.created": {
                    "action": "wake_agent",
                    "context": {"focus": "the design", "round": 2},
                }
            },
            "stages": [{"id": "work", "type": "agent", "agent": "feat-dev"}],
        }
    )
    w = world(waking=waking)
    w.send(w.events.opened(40, by="alice"))
    w.send(w.events.assigned(40))
    (agent,) = [a for a in w.registry.agents.values() if a.role == "feat-dev"]
    w.registry.agents[agent.agent_id] = agent.model_copy(
        update={"status": AgentStatus.SLEEPING, "task_arn": None, "pending_launch": None}
    )

    effects = w.send(w.events.comment(40, "the design changed", by="alice"))

    assert steered(effects) and steered(effects)[0].number == 40
    assert any(isinstance(e, LaunchAgent) and e.agent_id == agent.agent_id for e in effects)
    assert any(isinstance(e, PutAgent) and e.write.record.agent_id == agent.agent_id for e in effects)
    # the handler's context is told to the agent, in the framework's words (not the comment's)
    told = [
        e.item.summary for e in effects if isinstance(e, DeliverInbox) and e.item.agent_id == agent.agent_id
    ]
    assert [s for s in told if s.endswith('(wake_agent); context: {"focus": "the design", "round": 2}')]


# --- what a handler does to a run --------------------------------------------------------------

ARN = "arn:aws:states:us-east-1:123456789012:execution:sq_1-lifecycle:run-1"
VERSION = "arn:aws:states:us-east-1:123456789012:stateMachine:sq_1-lifecycle:3"
RUN = RunRecord(
    repo_id=1,
    number=7,
    pipeline="lifecycle",
    execution_arn=ARN,
    version_arn=VERSION,
    started_at=datetime(2026, 11, 28, tzinfo=UTC),
    on_events=ON_EVENTS,
    stages=tuple(s["id"] for s in STAGES),
)
IDS = [s["id"] for s in STAGES]
KEY = "effect-key-1"
STAGE_OUTPUTS: dict[str, Any] = {
    "test_1coverage": {"ok": 1},
    "security_1review": {"ok": 2},
    "code_1review": {"ok": 3},
}
STATE: dict[str, Any] = {
    "squadron": {"repository_id": 1, "issue_number": 7, "message_group": "1#7"},
    "data": {
        "trigger": {"n": 7},
        "context": {},
        "stages": STAGE_OUTPUTS,
    },
    "counts": {"approval_1gate_l": {"n": 1}},
    "timeouts": {},
}
#: The router's words when it started the run: where its tasks (and its restart's) are carried out.
WHERE = {"repository": "octo/repo", "installation_id": 77}
#: The run's trigger, as the event that started it gave it.
STARTED = {
    "n": 7,
    "event": "pull_request.opened",
    "repository": "octo/repo",
    "number": 7,
    "head_sha": "old0sha",
}
INPUT = {"squadron": {**STATE["squadron"], **WHERE}, "data": STARTED}


def facts(event: str) -> dict[str, Any]:
    """What the steering effect carries of the restarting webhook (``trigger_data``): a repository
    and subject other than the run's, which the restarted run must not take."""
    return {"event": event, "delivery": "d-1", "sender": "alice", "head_sha": "new1sha",
            "repository": "octo/other", "number": 8}  # fmt: skip


def seen(status: str = "RUNNING", **changes: Any) -> RunState:
    values: dict[str, Any] = {
        "status": status,
        "error": None,
        "cause": None,
        "input": INPUT,
        "current": "code-review",
        "state": STATE,
        "looping_gate": None,
        "tokens": ("tok-1",),
    }
    values.update(changes)
    return RunState(**values)


def restart(start: str, kept: dict[str, Any], event: str | None = None) -> StartRestart:
    """The restart ``event`` starts: the run's trigger with the event's facts laid over (its new
    head, its event, delivery and sender), the repository and the subject the run's own; with no
    event (an effect committed before it carried the facts), the run's trigger unchanged."""
    data = dict(STARTED)
    if event is not None:
        data.update({"event": event, "delivery": "d-1", "sender": "alice", "head_sha": "new1sha"})
    return StartRestart(
        VERSION,
        restart_name("d-1", RUN),
        {
            **INPUT,
            "data": data,
            "restart": {
                "from": start,
                "stages": kept,
                "counts": STATE["counts"],
                "timeouts": {},
                "context": {},
            },
        },
        "lifecycle",
        start,
    )


def cause(event: str) -> str:
    return stop_cause(KEY, event, RUN)


SYNC = "pull_request.synchronize"
REACTIONS: list[tuple[str, str, RunState | None, list[Any]]] = [
    ("cancel a running run: its waiting tasks answered cancelled, then stopped", "pull_request.closed", seen(),
     [StopRun(ARN, ("tok-1",), cause("pull_request.closed"))]),
    ("cancel a run that ended by itself", "pull_request.closed", seen("SUCCEEDED"), [Leave]),
    ("a run that does not exist", "pull_request.closed", None, [Leave]),
    ("an event the run's version does not handle", "pull_request.reopened", seen(), [Leave]),
    ("invalidate and restart: stop, then the same version from restart_from, invalidated outputs dropped", SYNC,
     seen(), [StopRun(ARN, ("tok-1",), cause(SYNC)), restart("test-coverage", {}, SYNC)]),
    ("restart from current keeps what came before it", "pull_request.edited", seen(),
     [StopRun(ARN, ("tok-1",), cause("pull_request.edited")),
      restart("code-review", {"test_1coverage": {"ok": 1}, "security_1review": {"ok": 2}}, "pull_request.edited")]),
    ("a retry after the stop (moto: ended through its cancelled tasks) starts the same restart", SYNC,
     seen("FAILED", error="Squadron.Cancelled", cause="the pipeline was cancelled", cancelled=(cause(SYNC),)),
     [restart("test-coverage", {}, SYNC)]),
    ("a retry after StopExecution (its cause is ours) starts the same restart", SYNC,
     seen("ABORTED", cause=cause(SYNC)), [restart("test-coverage", {}, SYNC)]),
    ("a run stopped by another delivery is left", SYNC,
     seen("ABORTED", cause=stop_cause("another-key", SYNC, RUN)), [Leave]),
    ("re-evaluate a gate whose on_fail loop runs: restarted at the gate", "pull_request_review.submitted",
     seen(looping_gate="approval-gate"),
     [StopRun(ARN, ("tok-1",), cause("pull_request_review.submitted")),
      restart("approval-gate", STAGE_OUTPUTS, "pull_request_review.submitted")]),
    ("re-evaluate with no gate waiting in a loop: left", "pull_request_review.submitted", seen(), [Leave]),
    ("notify: a comment on the run's pull request, rendered against the run's data", "issue_comment.created",
     seen(), [CommentOnRun(7, "run at 7")]),
]  # fmt: skip


@pytest.mark.parametrize(("case", "event", "state", "expected"), REACTIONS, ids=[r[0] for r in REACTIONS])
def test_a_handler_reaches_a_run(case: str, event: str, state: RunState | None, expected: list[Any]) -> None:
    steps = reaction(RUN, state, event=event, delivery="d-1", key=KEY, trigger=facts(event))
    if expected == [Leave]:
        assert [type(s) for s in steps] == [Leave], (case, steps)
    else:
        assert steps == expected, case


CONTEXT_HANDLERS: dict[str, Any] = {
    SYNC: {
        "action": "invalidate_and_restart",
        "restart_from": "test-coverage",
        "context": {"reason": "pushed", "round": "{{ stages.test_1coverage.ok + 1 }}"},
    },
    "pull_request_review.submitted": {"action": "reevaluate_gates", "context": {"env": "review"}},
    "issue_comment.created": {
        "action": "notify",
        "notify": {"message": "{{ context.env }}: {{ context.why }} at {{ trigger.n }}"},
        "context": {"why": "a comment"},
    },
    "pull_request.edited": {
        "action": "invalidate_and_restart",
        "restart_from": "current",
        "context": {"bad": "{{ stages.nowhere.x }}"},
    },
}
WITH_CONTEXT = {**STATE, "data": {**STATE["data"], "context": {"env": "prod", "reason": "opened"}}}


@pytest.mark.parametrize(
    ("event", "state", "expected"),
    [
        # the run's context, with the handler's on top, rendered against the run's data
        (SYNC, seen(state=WITH_CONTEXT), {"env": "prod", "reason": "pushed", "round": 2}),
        (
            "pull_request_review.submitted",
            seen(state=WITH_CONTEXT, looping_gate="approval-gate"),
            {
                "env": "review",
                "reason": "opened",
            },
        ),
        ("issue_comment.created", seen(state=WITH_CONTEXT), "prod: a comment at 7"),
        ("pull_request.edited", seen(state=WITH_CONTEXT), "its handler's context cannot be rendered"),
    ],
    ids=["invalidate_and_restart", "reevaluate_gates", "notify", "a context that cannot render"],
)
def test_a_handlers_context_reaches_the_restarted_run_and_its_message(
    event: str, state: RunState, expected: Any
) -> None:
    run = RunRecord(**{**RUN.__dict__, "on_events": CONTEXT_HANDLERS})

    steps = reaction(run, state, event=event, delivery="d-1", key=KEY)

    if isinstance(expected, dict):
        (restarted,) = [step for step in steps if isinstance(step, StartRestart)]
        assert restarted.input["restart"]["context"] == expected
    elif event == "issue_comment.created":
        assert steps == [CommentOnRun(7, expected)]
    else:
        (left,) = steps
        assert isinstance(left, Leave) and expected in left.why


def test_an_effect_committed_without_the_events_facts_restarts_with_the_runs_own_trigger() -> None:
    """An outbox entry written before the effect carried the facts is still carried out."""
    steps = reaction(RUN, seen(), event=SYNC, delivery="d-1", key=KEY)
    assert steps == [StopRun(ARN, ("tok-1",), cause(SYNC)), restart("test-coverage", {})]


def test_a_restart_is_named_by_the_delivery_and_the_run() -> None:
    assert restart_name("d-1", RUN) == restart_name("d-1", RUN)
    assert restart_name("d-2", RUN) != restart_name("d-1", RUN)
    other = RunRecord(**{**RUN.__dict__, "execution_arn": ARN + "x"})
    assert restart_name("d-1", other) != restart_name("d-1", RUN)


def _entered(event_id: int, name: str, value: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": event_id,
        "type": "TaskStateEntered",
        "stateEnteredEventDetails": {
            "name": name,
            "input": json.dumps(value if value is not None else STATE),
        },
    }


def _scheduled(event_id: int, token: str) -> dict[str, Any]:
    return {
        "id": event_id,
        "type": "TaskScheduled",
        "taskScheduledEventDetails": {"parameters": json.dumps({"MessageBody": {"task_token": token}})},
    }


HISTORIES: list[tuple[str, list[dict[str, Any]], str | None, str | None, tuple[str, ...]]] = [
    ("in a stage", [_entered(1, "test-coverage"), _scheduled(2, "a")], "test-coverage", None, ("a",)),
    ("in a failed gate's loop", [_entered(1, "approval-gate"), _scheduled(2, "g"),
     _entered(3, "approval-gate.ran", {}), _entered(4, "approval-gate.again", {}), _entered(5, "code-review"),
     _scheduled(6, "c")], "code-review", "approval-gate", ("g", "c")),
    ("judged again since", [_entered(1, "approval-gate.again", {}), _entered(2, "code-review"),
     _entered(3, "approval-gate")], "approval-gate", None, ()),
    ("the run's own states are not stages", [_entered(1, "test-coverage"), _entered(2, "__fail__")],
     "test-coverage", None, ()),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "events", "current", "looping", "tokens"), HISTORIES, ids=[h[0] for h in HISTORIES]
)
def test_where_a_run_is_comes_from_its_history_in_any_order(
    case: str, events: list[dict[str, Any]], current: str | None, looping: str | None, tokens: tuple[str, ...]
) -> None:
    description = {"status": "RUNNING", "input": json.dumps(INPUT)}
    for order in (events, list(reversed(events))):  # moto gives the oldest first, reverseOrder the newest
        state = run_state(description, order, IDS)
        assert (state.current, state.looping_gate, state.tokens) == (current, looping, tokens), case
        assert state.input == INPUT


def test_a_cancelled_task_is_remembered_by_its_cause() -> None:
    failed = {
        "id": 9,
        "type": "TaskFailed",
        "taskFailedEventDetails": {"error": RUN_CANCELLED, "cause": "why (k)"},
    }
    assert run_state({"status": "FAILED"}, [failed], IDS).cancelled == ("why (k)",)


def test_a_retry_never_steers_the_run_its_own_restart_started() -> None:
    restarted = RunRecord(
        **{**RUN.__dict__, "execution_arn": ARN.rsplit(":", 1)[0] + ":" + restart_name("d-1", RUN)}
    )
    unhandled = RunRecord(**{**RUN.__dict__, "execution_arn": ARN + "-other", "on_events": {}})
    assert to_steer([restarted, RUN, unhandled], SYNC, "d-1") == [RUN]
    assert to_steer([restarted, RUN], SYNC, "d-2") == [restarted, RUN]  # a later push reaches both
    started_now = RunRecord(
        **{
            **RUN.__dict__,
            "execution_arn": ARN.rsplit(":", 1)[0] + ":" + execution_name("d-3", "lifecycle", "7"),
        }
    )
    assert to_steer([started_now, RUN], SYNC, "d-3") == [RUN]  # the run this very event started
