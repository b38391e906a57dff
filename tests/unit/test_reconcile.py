"""The reconciler's decisions as tables over snapshots: what GitHub says vs what the registry believes."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from squadron.config import load_directory
from squadron.config.policy import routing_policy
from squadron.domain.agents import AgentRecord, AgentStatus, RoleKind
from squadron.domain.commands import RecoverAgent, ReportConflict
from squadron.domain.effects import AddLabels, Decision
from squadron.domain.events import EventEnvelope
from squadron.domain.reconcile import (
    Liveness,
    RepoState,
    conflicts,
    finish_commands,
    numbers_to_read,
    plan_reads,
    redeliveries,
    replays,
    rescues,
    timeouts,
)
from squadron.domain.repo_config.models import BreakerLimits
from tests.support.events import T0

BOT = "squadron[bot]"
NOW = T0 + timedelta(days=1)
ROOT = Path(__file__).resolve().parents[2]
REPO = {"id": 1, "full_name": "octo/repo", "default_branch": "main"}


def agent(number: int, status: AgentStatus = AgentStatus.ACTIVE, **changes: Any) -> AgentRecord:
    role = changes.pop("role", "feat-dev")
    kind = changes.pop("kind", RoleKind.DEV)
    changes.setdefault("generation_started_at", T0)
    changes.setdefault("updated_at", T0)
    return AgentRecord(
        agent_id=f"1-{number}-{role}",
        role=role,
        kind=kind,
        repo_id=1,
        repo_full_name="octo/repo",
        installation_id=77,
        issue_number=number,
        status=status,
        created_at=T0,
        **changes,
    )


def issue(
    number: int,
    state: str = "open",
    *,
    assignees: tuple[str, ...] = (BOT,),
    at: str = "2026-11-23T12:00:00Z",
    **extra: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "number": number,
        "title": f"Issue {number}",
        "state": state,
        "labels": [],
        "assignees": [{"login": login, "id": 1, "type": "User"} for login in assignees],
        "updated_at": at,
        "closed_at": at if state == "closed" else None,
        **extra,
    }
    return body


def pull(number: int, *, merged: bool, at: str = "2026-11-23T12:00:00Z") -> dict[str, Any]:
    return {
        "number": number,
        "title": f"PR {number}",
        "state": "closed",
        "merged": merged,
        "merged_at": at if merged else None,
        "closed_at": at,
        "updated_at": at,
        "head": {"ref": "feat/issue-38", "sha": "c" * 40},
        "base": {"ref": "main", "sha": "d" * 40},
    }


CASES = [
    # name, agents, github, expected replays as "event.action #number"
    ("nothing contradicts", [agent(38)], {38: issue(38)}, []),
    (
        "a sleeper's closed blocker is replayed",
        [agent(38, AgentStatus.SLEEPING, blocked_by=frozenset({42, 43}))],
        {38: issue(38), 42: issue(42, "closed"), 43: issue(43)},
        ["issues.closed #42"],
    ),
    (
        "one closed blocker of two sleepers is replayed once",
        [
            agent(38, AgentStatus.SLEEPING, blocked_by=frozenset({42})),
            agent(39, AgentStatus.SLEEPING, blocked_by=frozenset({42})),
        ],
        {38: issue(38), 39: issue(39), 42: issue(42, "closed")},
        ["issues.closed #42"],
    ),
    (
        "an agent's own issue closed is replayed",
        [agent(38)],
        {38: issue(38, "closed")},
        ["issues.closed #38"],
    ),
    (
        "an issue reassigned to a human after the agent started is replayed as unassigned",
        [agent(38)],
        {38: issue(38, assignees=("octo-human",))},
        ["issues.unassigned #38"],
    ),
    (
        "no App assignee but nothing changed since the agent started: no evidence, no replay",
        [agent(38, generation_started_at=T0 + timedelta(days=2))],
        {38: issue(38, assignees=())},
        [],
    ),
    (
        "a merged PR of a review agent is replayed",
        [agent(101, role="pr-review", kind=RoleKind.REVIEW, pr_number=101)],
        {101: pull(101, merged=True)},
        ["pull_request.closed #101"],
    ),
    (
        "a PR read through the issues API is left to its PR record",
        [agent(38, AgentStatus.SLEEPING, blocked_by=frozenset({101}))],
        {38: issue(38), 101: issue(101, "closed", pull_request={"url": "x"})},
        [],
    ),
    (
        "terminal agents are left alone",
        [agent(38, AgentStatus.COMPLETED)],
        {38: issue(38, "closed")},
        [],
    ),
    (
        "a number GitHub did not answer for is skipped",
        [agent(38, AgentStatus.SLEEPING, blocked_by=frozenset({42}))],
        {38: issue(38)},
        [],
    ),
]


def _number(envelope: EventEnvelope) -> int:
    if envelope.issue is not None:
        return envelope.issue.number
    assert envelope.pull_request is not None
    return envelope.pull_request.number


@pytest.mark.parametrize(("name", "agents", "github", "expected"), CASES, ids=[c[0] for c in CASES])
def test_replays(name: str, agents: list[AgentRecord], github: dict[int, Any], expected: list[str]) -> None:
    state = RepoState(REPO, 77, agents, github, NOW)
    found = replays(state, bot_login=BOT)
    assert [f"{e.event}.{e.action} #{_number(e)}" for e in found] == expected
    for envelope in found:
        assert envelope.origin == "reconciler"
        assert envelope.delivery_id.startswith("reconcile-1-")
        assert replays(state, bot_login=BOT) == found  # deterministic: the same ids every run


def test_a_replayed_unassignment_names_the_app_and_keeps_githubs_time() -> None:
    (envelope,) = replays(
        RepoState(REPO, 77, [agent(38)], {38: issue(38, assignees=("h",))}, NOW), bot_login=BOT
    )
    assert envelope.assignee is not None and envelope.assignee.login == BOT
    assert (
        envelope.occurred_at is not None and envelope.occurred_at.isoformat() == "2026-11-23T12:00:00+00:00"
    )
    assert envelope.installation_id == 77


def test_the_numbers_to_read_cover_issues_prs_and_blockers() -> None:
    agents = [
        agent(38, AgentStatus.SLEEPING, blocked_by=frozenset({42})),
        agent(101, role="pr-review", kind=RoleKind.REVIEW, pr_number=101),
        agent(50, AgentStatus.CANCELLED, blocked_by=frozenset({51})),
    ]
    assert numbers_to_read(agents) == [38, 42, 101]


def delivery(id: int, guid: str, code: int, hours_ago: float) -> dict[str, Any]:
    at = (NOW - timedelta(hours=hours_ago)).isoformat().replace("+00:00", "Z")
    return {"id": id, "guid": guid, "status_code": code, "delivered_at": at, "redelivery": False}


REDELIVERY_CASES = [
    ("a 5xx is redelivered", [delivery(1, "a", 502, 1)], set(), [1]),
    ("no answer (status 0) is redelivered", [delivery(1, "a", 0, 1)], set(), [1]),
    ("a 4xx would fail again", [delivery(1, "a", 400, 1), delivery(2, "b", 401, 1)], set(), []),
    ("a later success settles it", [delivery(1, "a", 502, 2), delivery(2, "a", 202, 1)], set(), []),
    (
        "the newest failed attempt is the one redelivered",
        [delivery(1, "a", 502, 2), delivery(2, "a", 504, 1)],
        set(),
        [2],
    ),
    ("older than three days: GitHub refuses", [delivery(1, "a", 502, 73)], set(), []),
    ("processed by the router already (GitHub timed out)", [delivery(1, "a", 0, 1)], {"a"}, []),
    ("oldest first", [delivery(5, "b", 502, 1), delivery(3, "a", 500, 5)], set(), [3, 5]),
]


@pytest.mark.parametrize(
    ("name", "deliveries", "processed", "expected"), REDELIVERY_CASES, ids=[c[0] for c in REDELIVERY_CASES]
)
def test_redeliveries(
    name: str, deliveries: list[dict[str, Any]], processed: set[str], expected: list[int]
) -> None:
    assert redeliveries(deliveries, processed=processed, now=NOW) == expected


def test_redeliveries_are_bounded_per_run() -> None:
    many = [delivery(i, f"g{i}", 502, 1 + i / 100) for i in range(1, 80)]
    assert len(redeliveries(many, processed=(), now=NOW, limit=50)) == 50


LIMITS = BreakerLimits(max_sleep_duration=24 * 3600)
LIVENESS = Liveness(LIMITS, timedelta(minutes=10))
ARN = "arn:aws:ecs:us-east-1:123456789012:task/squadron/abc123"

RESCUE_CASES: list[tuple[str, AgentRecord, frozenset[str] | None, str | None]] = [
    # name, agent, running tasks (None: ECS not asked), expected "action: reason start"
    (
        "a working agent with a fresh heartbeat",
        agent(38, task_arn=ARN, heartbeat_at=NOW - timedelta(minutes=2)),
        frozenset({ARN}),
        None,
    ),
    (
        "an idle agent (no task) is not dead",
        agent(38, heartbeat_at=NOW - timedelta(days=1)),
        frozenset(),
        None,
    ),
    (
        "ECS says the task is gone",
        agent(38, task_arn=ARN, heartbeat_at=NOW),
        frozenset(),
        "relaunch: its ECS task abc123 is gone",
    ),
    (
        "a stopped heartbeat and an expired lease",
        agent(38, task_arn=ARN, heartbeat_at=NOW - timedelta(minutes=30)),
        None,
        "relaunch: no heartbeat since",
    ),
    (
        "an old heartbeat under a live lease is a slow task, not a dead one",
        agent(
            38,
            task_arn=ARN,
            heartbeat_at=NOW - timedelta(minutes=30),
            lease_owner="t",
            lease_expires_at=NOW + timedelta(minutes=1),
        ),
        None,
        None,
    ),
    (
        "a launch never confirmed",
        agent(
            38, AgentStatus.CREATED, pending_launch="1-38-feat-dev-g1-l1", updated_at=NOW - timedelta(hours=1)
        ),
        None,
        "relaunch: its launch (1-38-feat-dev-g1-l1) was never confirmed",
    ),
    (
        "a held launch within its back-off waits",
        agent(
            38,
            AgentStatus.CREATED,
            pending_launch="1-38-feat-dev-g1-l1",
            launch_failures=2,
            launch_error="You've reached the limit on the number of vCPUs",
            launch_failed_at=NOW - timedelta(minutes=9),
            updated_at=NOW - timedelta(hours=1),
        ),
        None,
        None,
    ),
    (
        "a held launch past its back-off is tried again (not counted as a death)",
        agent(
            38,
            AgentStatus.CREATED,
            pending_launch="1-38-feat-dev-g1-l1",
            launch_failures=2,
            launch_error="You've reached the limit on the number of vCPUs",
            launch_failed_at=NOW - timedelta(minutes=11),
        ),
        None,
        "launch: its launch was refused 2 time(s): You've reached the limit",
    ),
    (
        "a sleeper within its limit",
        agent(38, AgentStatus.SLEEPING, blocked_by=frozenset({42}), updated_at=NOW - timedelta(hours=3)),
        None,
        None,
    ),
    (
        "a sleeper past max_sleep_duration is escalated, naming what it waits for",
        agent(38, AgentStatus.SLEEPING, blocked_by=frozenset({42}), updated_at=NOW - timedelta(hours=25)),
        None,
        "escalate: asleep for 90000 s, over max_sleep_duration 86400 s waiting for #42",
    ),
    (
        "escalated and finished agents are left alone",
        agent(38, AgentStatus.ESCALATED, task_arn=ARN),
        frozenset(),
        None,
    ),
]


@pytest.mark.parametrize(
    ("name", "record", "running", "expected"), RESCUE_CASES, ids=[c[0] for c in RESCUE_CASES]
)
def test_rescues(
    name: str, record: AgentRecord, running: frozenset[str] | None, expected: str | None
) -> None:
    found = rescues([record], now=NOW, liveness=lambda a: LIVENESS, running=running)
    if expected is None:
        assert found == []
        return
    (envelope,) = found
    command = envelope.command
    assert isinstance(command, RecoverAgent)
    assert f"{command.action}: {command.reason}".startswith(expected)
    assert (command.agent_id, command.seen_version, envelope.message_group_id) == (
        record.agent_id,
        record.version,
        "1#38",
    )
    assert envelope.delivery_id == f"recover-{record.agent_id}-v{record.version}-{command.action}"


def test_a_timeout_follows_the_flow_of_the_prs_base() -> None:
    policy = routing_policy(load_directory(ROOT / ".squadron"))  # main: 24 h, notify maintainers, assign
    dev = agent(38, pr_number=101)
    opened = (NOW - timedelta(hours=30)).isoformat().replace("+00:00", "Z")
    pulls = {
        base: {
            "number": 101,
            "state": "open",
            "created_at": opened,
            "labels": [],
            "head": {"ref": "feat/issue-38"},
            "base": {"ref": base},
        }
        for base in ("main", "develop")
    }
    (notice,) = timeouts(RepoState(REPO, 77, [dev], {101: pulls["main"]}, NOW), policy, fallback_label="x")
    assert (notice.label, notice.assignees) == ("needs-human", ("octo-maintainer",))
    assert notice.body == (
        "PR #101 has waited 30 h, over the approval flow's on_timeout of 24 h; its squadron/merge status "
        "says what it waits for. @octo-maintainer @hubot-admin"
    )
    # develop follows the default flow (48 h): not yet.
    assert (
        timeouts(RepoState(REPO, 77, [dev], {101: pulls["develop"]}, NOW), policy, fallback_label="x") == []
    )


def _dirty(number: int = 101, sha: str = "c" * 40, state: str = "open") -> dict[str, Any]:
    return {
        "number": number,
        "state": state,
        "mergeable_state": "dirty",
        "head": {"ref": "feat/issue-38", "sha": sha},
        "base": {"ref": "main"},
    }


CONFLICT_CASES: list[tuple[str, AgentRecord, dict[str, Any], bool]] = [
    ("an idle agent's conflicting PR is reported", agent(38, pr_number=101), _dirty(), True),
    ("a working agent is left to work", agent(38, pr_number=101, task_arn=ARN), _dirty(), False),
    (
        "a conflict already handed to humans is not reported again",
        agent(38, pr_number=101, last_conflict="c" * 40 + ":escalated"),
        _dirty(),
        False,
    ),
    ("a clean PR is fine", agent(38, pr_number=101), {**_dirty(), "mergeable_state": "clean"}, False),
    ("a closed PR is not judged", agent(38, pr_number=101), _dirty(state="closed"), False),
]


@pytest.mark.parametrize(
    ("name", "record", "pr", "reported"), CONFLICT_CASES, ids=[c[0] for c in CONFLICT_CASES]
)
def test_conflicts(name: str, record: AgentRecord, pr: dict[str, Any], reported: bool) -> None:
    found = conflicts(RepoState(REPO, 77, [record], {101: pr}, NOW))
    assert bool(found) is reported
    for envelope in found:
        assert isinstance(envelope.command, ReportConflict)
        assert (envelope.command.issue_number, envelope.command.head_sha) == (38, "c" * 40)


def test_reads_are_bounded_per_installation_and_rotate_over_runs() -> None:
    agents = {1: [agent(n, AgentStatus.SLEEPING, blocked_by=frozenset({1000 + n})) for n in range(1, 501)]}
    total = {(1, n) for a in agents[1] for n in (a.issue_number, *a.blocked_by)}
    assert len(total) == 1000
    seen: set[tuple[int, int]] = set()
    for run in range(5):  # five runs of 200 reads cover all 1,000
        plan = plan_reads(agents, 200, NOW + run * timedelta(minutes=5))
        window = {(repo, n) for repo, numbers in plan.items() for n in numbers}
        assert len(window) == 200
        seen |= window
    assert seen == total
    small = {1: [agent(38)]}
    assert plan_reads(small, 200, NOW) == {1: [38]}


# --- the finish sweep's commands -------------------------------------------------------------

# (runs of the sweep, minutes after T0: whether their commands are one command)
FINISH_WINDOWS = [
    ("the next run of the same window", 0, 5, True),
    ("a run a window later", 0, 15, False),
    ("a run an hour later", 0, 60, False),
]


@pytest.mark.parametrize(
    ("first", "second", "same"), [w[1:] for w in FINISH_WINDOWS], ids=[w[0] for w in FINISH_WINDOWS]
)
def test_a_later_sweep_sends_a_new_finish_command(first: int, second: int, same: bool) -> None:
    """A FinishDecision that found the decision held by another executor succeeds, and its id is
    done for good: a later window's sweep must send one with another id, or the decision could
    never be finished by the sweep should that executor fail."""
    decision = Decision(
        "delivery-1", T0, (AddLabels("octo/repo", 77, 1, ("x",)),), repo_full_name="octo/repo", repo_id=1
    )
    [a] = finish_commands([decision], T0 + timedelta(minutes=first))
    [b] = finish_commands([decision], T0 + timedelta(minutes=second))
    assert (a.delivery_id == b.delivery_id) is same
    assert a.command == b.command
