"""The agent lifecycle's transitions as tables: what each does to a record in each status, and the
effects it implies (its conditional write first, then the task launched or stopped). The router's
and the gateway's uses are covered by their own tests; these pin the one place they come from."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from squadron.domain import lifecycle
from squadron.domain.agents import AgentRecord, AgentStatus, IllegalTransitionError, RoleKind
from squadron.domain.effects import LaunchAgent, StopAgentTask

T0 = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)
NOW = T0 + timedelta(hours=1)


def agent(status: AgentStatus = AgentStatus.ACTIVE, **changes: object) -> AgentRecord:
    base = AgentRecord(
        agent_id="1-7-feat-dev",
        role="feat-dev",
        kind=RoleKind.DEV,
        repo_id=1,
        repo_full_name="octo/app",
        issue_number=7,
        status=status,
        created_at=T0,
        updated_at=T0,
        version=4,
        generation_started_at=T0,
    )
    return base.model_copy(update=changes)


def kinds(step: lifecycle.Step) -> list[str]:
    return [type(effect).__name__ for effect in step.effects]


WAKES = [
    ("a sleeper wakes ACTIVE with a task", AgentStatus.SLEEPING, None),
    ("an escalated agent wakes ACTIVE with a task", AgentStatus.ESCALATED, None),
    ("an idle agent (ACTIVE, no task) gets a task", AgentStatus.ACTIVE, None),
    (
        "a wake while a launch is pending keeps that launch's token",
        AgentStatus.SLEEPING,
        "1-7-feat-dev-g1-l3",
    ),
]


@pytest.mark.parametrize(("status", "pending"), [(s, p) for _, s, p in WAKES], ids=[i for i, _, _ in WAKES])
def test_a_wake_is_active_counted_and_launched_once(status: AgentStatus, pending: str | None) -> None:
    before = agent(status, pending_launch=pending, task_arn=None)
    step = lifecycle.wake(
        before, now=NOW, cause="delivery-9", reason="blocker #8 closed", blocked_by=frozenset()
    )
    assert kinds(step) == ["PutAgent", "LaunchAgent"]
    assert step.write.expected_version == before.version
    woken = step.agent
    assert (woken.status, woken.wake_reason, woken.launch_cause) == (
        AgentStatus.ACTIVE,
        "blocker #8 closed",
        "delivery-9",
    )
    assert woken.counters.wakes == before.counters.wakes + 1
    assert woken.version == before.version + 1
    (launch,) = [e for e in step.effects if isinstance(e, LaunchAgent)]
    assert launch.purpose == "wake"
    assert woken.pending_launch == launch.token
    if pending is not None:
        assert launch.token == pending  # the launch may be starting: never a second task
        assert woken.counters.launches == before.counters.launches
    else:
        assert woken.counters.launches == before.counters.launches + 1


def test_a_finished_agent_cannot_be_woken() -> None:
    with pytest.raises(IllegalTransitionError):
        lifecycle.wake(agent(AgentStatus.COMPLETED), now=NOW, cause="d", reason="r")


def test_a_new_agent_starts_created_with_a_start_launch_written_only_if_none_exists() -> None:
    step = lifecycle.start(agent(AgentStatus.CREATED, version=0), cause="d1", reason="assigned")
    assert kinds(step) == ["PutAgent", "LaunchAgent"]
    assert step.write.expected_version is None
    (launch,) = [e for e in step.effects if isinstance(e, LaunchAgent)]
    assert (launch.purpose, step.agent.status) == ("start", AgentStatus.CREATED)


def test_a_restart_is_a_new_generation_with_nothing_carried_over() -> None:
    old = agent(
        AgentStatus.COMPLETED,
        generation=2,
        blocked_by=frozenset({3}),
        escalation_reason="was stuck",
        lease_owner="old-task",
        lease_expires_at=NOW + timedelta(minutes=5),
        launch_secret_hash="ab" * 32,
        finished_at=T0,
    )
    fresh = agent(AgentStatus.CREATED, generation_started_at=NOW, last_event_at=NOW, branch="feat/7")
    step = lifecycle.restart(old, fresh, now=NOW, cause="d2", reason="reopened")
    new = step.agent
    assert (new.status, new.generation, new.blocked_by, new.escalation_reason) == (
        AgentStatus.CREATED,
        3,
        frozenset(),
        None,
    )
    assert (new.lease_owner, new.launch_secret_hash, new.finished_at, new.branch) == (
        None,
        None,
        None,
        "feat/7",
    )
    assert step.write.expected_version == old.version
    assert kinds(step) == ["PutAgent", "LaunchAgent"]


BEGINS = [
    ("a first task moves CREATED to ACTIVE", AgentStatus.CREATED, AgentStatus.ACTIVE),
    ("a later task changes nothing", AgentStatus.ACTIVE, None),
    ("a task of a sleeper (woken since) changes nothing", AgentStatus.SLEEPING, None),
]


@pytest.mark.parametrize(("status", "becomes"), [(s, b) for _, s, b in BEGINS], ids=[i for i, _, _ in BEGINS])
def test_begin(status: AgentStatus, becomes: AgentStatus | None) -> None:
    begun = lifecycle.begin(agent(status), now=NOW)
    assert (begun.status if begun is not None else None) == becomes


RELAUNCHES = [
    (
        "a task believed dead is stopped first",
        "arn:task/1",
        True,
        ["PutAgent", "StopAgentTask", "LaunchAgent"],
    ),
    ("no task to stop", None, True, ["PutAgent", "LaunchAgent"]),
    ("a task that ended by itself is not stopped", "arn:task/1", False, ["PutAgent", "LaunchAgent"]),
]


@pytest.mark.parametrize(
    ("task_arn", "stop_running", "effects"),
    [(a, s, e) for _, a, s, e in RELAUNCHES],
    ids=[i for i, *_ in RELAUNCHES],
)
def test_a_relaunch_keeps_the_status_and_runs_the_task_again(
    task_arn: str | None, stop_running: bool, effects: list[str]
) -> None:
    before = agent(AgentStatus.ACTIVE, task_arn=task_arn)
    step = lifecycle.relaunch(
        before, now=NOW, cause="d3", reason="the task died", stop_running=stop_running, task_arn=None
    )
    assert kinds(step) == effects
    assert (step.agent.status, step.agent.wake_reason, step.agent.task_arn) == (
        AgentStatus.ACTIVE,
        "the task died",
        None,
    )


def test_sleep_clears_the_task_and_keeps_the_blockers() -> None:
    asleep = lifecycle.sleep(agent(task_arn="arn:task/1", pending_launch="x"), now=NOW, blocked_by=[8, 9])
    assert (asleep.status, asleep.blocked_by, asleep.task_arn, asleep.pending_launch) == (
        AgentStatus.SLEEPING,
        frozenset({8, 9}),
        None,
        None,
    )


ESCALATIONS = [
    ("a working agent's task is stopped", AgentStatus.ACTIVE, "arn:task/1", ["PutAgent", "StopAgentTask"]),
    ("a sleeper has no task to stop", AgentStatus.SLEEPING, None, ["PutAgent"]),
]


@pytest.mark.parametrize(
    ("status", "task_arn", "effects"),
    [(s, a, e) for _, s, a, e in ESCALATIONS],
    ids=[i for i, *_ in ESCALATIONS],
)
def test_escalate(status: AgentStatus, task_arn: str | None, effects: list[str]) -> None:
    step = lifecycle.escalate(agent(status, task_arn=task_arn), now=NOW, reason="x" * 5000)
    assert kinds(step) == effects
    assert step.agent.status is AgentStatus.ESCALATED
    assert step.agent.escalation_reason == "x" * 1000  # bounded: it is shown on GitHub
    ended = lifecycle.escalate(agent(status, task_arn=task_arn), now=NOW, reason="x", task_ended=True)
    assert kinds(ended) == ["PutAgent"]  # a task that ended by itself is not stopped


FINISHES = [
    (
        "done while working: its task is stopped",
        AgentStatus.ACTIVE,
        "arn:t",
        False,
        AgentStatus.COMPLETED,
        True,
    ),
    ("called off while working", AgentStatus.ACTIVE, "arn:t", False, AgentStatus.CANCELLED, True),
    ("done when its task ended by itself", AgentStatus.ACTIVE, "arn:t", True, AgentStatus.COMPLETED, False),
    (
        "an escalated agent's old task is not stopped",
        AgentStatus.ESCALATED,
        "arn:t",
        False,
        AgentStatus.COMPLETED,
        False,
    ),
    ("a sleeper is cancelled", AgentStatus.SLEEPING, None, False, AgentStatus.CANCELLED, False),
]


@pytest.mark.parametrize(
    ("status", "task_arn", "task_ended", "becomes", "stops"),
    [row[1:] for row in FINISHES],
    ids=[row[0] for row in FINISHES],
)
def test_finish(
    status: AgentStatus, task_arn: str | None, task_ended: bool, becomes: lifecycle.Finished, stops: bool
) -> None:
    before = agent(status, task_arn=task_arn, blocked_by=frozenset({4}), pending_launch="p")
    step = lifecycle.finish(before, now=NOW, reason="closed", status=becomes, task_ended=task_ended)
    assert (step.agent.status, step.agent.blocked_by, step.agent.pending_launch) == (
        becomes,
        frozenset(),
        None,
    )
    assert step.agent.finished_at == NOW
    assert any(isinstance(e, StopAgentTask) for e in step.effects) is stops
    assert step.write.expected_version == before.version


def test_a_finished_agent_does_not_finish_again() -> None:
    with pytest.raises(ValueError, match="already"):
        lifecycle.finish(agent(AgentStatus.CANCELLED), now=NOW, reason="closed")


def test_born_asleep_only_for_a_new_agent() -> None:
    asleep = lifecycle.born_asleep(agent(AgentStatus.CREATED, version=0), blocked_by=[5])
    assert (asleep.status, asleep.blocked_by) == (AgentStatus.SLEEPING, frozenset({5}))
    with pytest.raises(ValueError, match="not a new agent"):
        lifecycle.born_asleep(agent(AgentStatus.ACTIVE), blocked_by=[5])


def test_a_launch_needs_a_pending_launch() -> None:
    with pytest.raises(ValueError, match="no pending launch"):
        lifecycle.launch(agent(AgentStatus.ACTIVE, pending_launch=None), "why")
