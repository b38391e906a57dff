"""The routing table: (registry state, event) -> effects, one row per rule of the seed's table."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pydantic import ValidationError

from squadron.domain.agents import AgentStatus
from squadron.domain.commands import SQUADRON_EVENT, RegisterBlocker
from squadron.domain.events import EventEnvelope
from squadron.domain.launches import ARMING_HELD
from squadron.domain.routed import ROUTED_EVENTS
from squadron.domain.routing import ROUTES, RoutingPolicy, routed_pairs
from squadron.domain.routing.ci import CI_ROUTES
from squadron.domain.routing.commands import COMMAND_ROUTES
from squadron.domain.routing.comments import COMMENT_ROUTES
from squadron.domain.routing.issues import ISSUE_ROUTES
from squadron.domain.routing.merge_queue import MERGE_QUEUE_ROUTES
from squadron.domain.routing.pull_requests import PULL_REQUEST_ROUTES
from squadron.domain.routing.table import compose
from tests.support.events import BOT, Events
from tests.support.world import World

Setup = Callable[[Events], list[EventEnvelope]]


def _older(events: Events, first: EventEnvelope, later: EventEnvelope) -> EventEnvelope:
    """Route ``later`` now (through a world hook) and return the older ``first`` to route after it."""
    events.pending.append(later)
    return first


A38 = "1-38-feat-dev"
B38 = "1-38-bug-fix"
PM = "1-pm"

# (id, setup events, event under test, expected effects in apply order)
CASES: list[tuple[str, Setup, Callable[[Events], object], list[str]]] = [
    (
        "issue opened goes to a new PM",
        lambda e: [],
        lambda e: e.opened(38),
        ["state #38 open", "put 1-pm CREATED (new)", "inbox 1-pm issue_opened", "launch 1-pm start"],
    ),
    (
        "issue opened while the PM runs: inbox only",
        lambda e: [e.opened(37)],
        lambda e: e.opened(38),
        ["state #38 open", "inbox 1-pm issue_opened"],
    ),
    (
        "issue reopened goes to the PM",
        lambda e: [e.opened(38), e.closed(38)],
        lambda e: e.reopened(38),
        ["state #38 open", "inbox 1-pm issue_reopened"],
    ),
    (
        "issue labeled goes to the PM",
        lambda e: [e.opened(38)],
        lambda e: e.labeled(38, "bug"),
        ["inbox 1-pm issue_labeled"],
    ),
    (
        "assigned to the App creates and launches a dev agent",
        lambda e: [],
        lambda e: e.assigned(38),
        ["assigned #38", f"put {A38} CREATED (new)", f"launch {A38} start"],
    ),
    (
        "the bug label picks the bug-fix role",
        lambda e: [],
        lambda e: e.assigned(38, labels=("bug",)),
        ["assigned #38", f"put {B38} CREATED (new)", f"launch {B38} start"],
    ),
    ("assigned to a human is not ours", lambda e: [], lambda e: e.assigned(38, to="carol"), ["discard"]),
    (
        "assigned twice keeps one agent",
        lambda e: [e.assigned(38)],
        lambda e: e.assigned(38),
        ["assigned #38", "discard"],
    ),
    (
        "assigned with open blockers starts asleep",
        lambda e: [e.register_blocker(38, 42)],
        lambda e: e.assigned(38),
        ["assigned #38", f"put {A38} SLEEPING (new)"],
    ),
    (
        "re-assigned after cancel restarts as a new generation",
        lambda e: [e.assigned(38), e.unassigned(38)],
        lambda e: e.assigned(38),
        ["assigned #38", f"put {A38} CREATED (v4)", f"launch {A38} start"],
    ),
    (
        "unassigned from the App cancels the agent and stops its task",
        lambda e: [e.assigned(38)],
        lambda e: e.unassigned(38),
        ["unassigned #38", f"put {A38} CANCELLED (v3)", f"stop {A38}"],
    ),
    ("unassigned with no agent is remembered", lambda e: [], lambda e: e.unassigned(38), ["unassigned #38"]),
    (
        "an assignment older than a processed unassignment is stale",
        lambda e: [],
        lambda e: _older(e, e.assigned(38), e.unassigned(38)),
        ["discard"],
    ),
    (
        "issue closed completes its agent",
        lambda e: [e.assigned(38)],
        lambda e: e.closed(38),
        ["state #38 closed", f"put {A38} COMPLETED (v3)", f"stop {A38}"],
    ),
    (
        "issue closed as not planned cancels its agent",
        lambda e: [e.assigned(38)],
        lambda e: e.closed(38, reason="not_planned"),
        ["state #38 closed", f"put {A38} CANCELLED (v3)", f"stop {A38}"],
    ),
    (
        "last blocker closed wakes the sleeper",
        lambda e: [e.assigned(38), e.register_blocker(38, 42, agent_id=A38, sleep=True)],
        lambda e: e.closed(42),
        [
            "state #42 closed",
            f"unblock #38 from #42 {A38} ACTIVE",
            f"inbox {A38} blocker_closed",
            f"launch {A38} wake",
        ],
    ),
    (
        "one of two blockers closed: still asleep",
        lambda e: [
            e.assigned(38),
            e.register_blocker(38, 42, agent_id=A38, sleep=True),
            e.register_blocker(38, 43, agent_id=A38, sleep=True),
        ],
        lambda e: e.closed(42),
        ["state #42 closed", f"unblock #38 from #42 {A38} SLEEPING", f"inbox {A38} blocker_closed"],
    ),
    (
        "blocker registered puts the reporting agent to sleep",
        lambda e: [e.assigned(38)],
        lambda e: e.register_blocker(38, 42, agent_id=A38, sleep=True),
        [f"block #38 by #42 {A38} SLEEPING"],
    ),
    (
        "blocker between issues without agents (PM)",
        lambda e: [],
        lambda e: e.register_blocker(38, 42),
        ["block #38 by #42"],
    ),
    (
        "cycle is rejected and the agent told why, relaunched",
        lambda e: [e.assigned(38), e.register_blocker(42, 38)],
        lambda e: e.register_blocker(38, 42, agent_id=A38, sleep=True),
        [f"inbox {A38} blocker_rejected", f"put {A38} CREATED (v3)", f"launch {A38} start"],
    ),
    (
        "a command from a generation since restarted is discarded",
        lambda e: [e.assigned(38), e.unassigned(38), e.assigned(38)],
        lambda e: e.register_blocker(38, 42, agent_id=A38, token=f"{A38}-g1-l1", sleep=True),
        ["discard"],
    ),
    (
        "the current generation's command is honoured",
        lambda e: [e.assigned(38), e.unassigned(38), e.assigned(38)],
        lambda e: e.register_blocker(38, 42, agent_id=A38, token=f"{A38}-g2-l1", sleep=True),
        [f"block #38 by #42 {A38} SLEEPING"],
    ),
    (
        "only the sending agent is put to sleep (the PM registers, the dev works on)",
        lambda e: [e.assigned(38)],
        lambda e: e.register_blocker(38, 42, agent_id=PM, sleep=True),
        [f"block #38 by #42 {A38} CREATED", f"inbox {A38} blocker_registered"],
    ),
    (
        "a closed issue cannot block",
        lambda e: [e.closed(42)],
        lambda e: e.register_blocker(38, 42),
        ["discard"],
    ),
    (
        "too deep a blocker chain is rejected",
        lambda e: [e.register_blocker(1, 2), e.register_blocker(2, 3), e.register_blocker(3, 4)],
        lambda e: e.register_blocker(4, 5),
        ["discard"],
    ),
    (
        "writer's comment reaches the issue's agent",
        lambda e: [e.assigned(38)],
        lambda e: e.comment(38),
        [f"inbox {A38} comment"],
    ),
    (
        "writer's comment wakes a sleeping agent",
        lambda e: [e.assigned(38), e.register_blocker(38, 42, agent_id=A38, sleep=True)],
        lambda e: e.comment(38),
        [f"inbox {A38} comment", f"put {A38} ACTIVE (v4)", f"launch {A38} wake"],
    ),
    (
        "comment mentioning the PM goes to the PM",
        lambda e: [e.assigned(38)],
        lambda e: e.comment(38, "@squadron-pm this needs a blocker issue"),
        ["put 1-pm CREATED (new)", "inbox 1-pm comment", "launch 1-pm start"],
    ),
    (
        "comment from a reader is ignored",
        lambda e: [e.assigned(38)],
        lambda e: e.comment(38, by="mallory", association="NONE"),
        ["discard"],
    ),
    (
        "comment from another bot is ignored",
        lambda e: [e.assigned(38)],
        lambda e: e.comment(38, by="dependabot[bot]"),
        ["discard"],
    ),
    (
        "changes requested by a reader are ignored (no wake, no round, no judgement)",
        lambda e: [e.assigned(38), e.pr(50, "feat/issue-38")],
        lambda e: e.review(50, "feat/issue-38", "changes_requested", by="mallory", body="do this"),
        ["discard"],
    ),
    (
        "an approval by another bot is ignored",
        lambda e: [e.assigned(38), e.pr(50, "feat/issue-38")],
        lambda e: e.review(50, "feat/issue-38", "approved", by="helper[bot]"),
        ["discard"],
    ),
    (
        "a line comment by a reader is ignored",
        lambda e: [e.assigned(38), e.pr(50, "feat/issue-38")],
        lambda e: e.review_comment(50, "feat/issue-38", by="mallory"),
        ["discard"],
    ),
    (
        "an issue edit by a reader does not reach the agent",
        lambda e: [e.assigned(38)],
        lambda e: e.edited(38, by="mallory"),
        ["discard"],
    ),
    (
        "a label by a reader does not reach the PM",
        lambda e: [e.opened(38)],
        lambda e: e.labeled(38, "bug", by="mallory"),
        ["discard"],
    ),
    (
        "the App assigned by a reader starts no agent",
        lambda e: [],
        lambda e: e.assigned(38, by="mallory"),
        ["discard"],
    ),
    ("comment on an issue without agent", lambda e: [], lambda e: e.comment(38), ["discard"]),
    (
        "comment for a completed agent is stale",
        lambda e: [e.assigned(38), e.closed(38)],
        lambda e: e.comment(38),
        ["discard"],
    ),
    (
        "PR opened from the agent's branch links and requests reviews",
        lambda e: [e.assigned(38)],
        lambda e: e.pr(50, "feat/issue-38"),
        [
            "link PR #50 to #38",
            "put 1-50-pr-review CREATED (new)",
            "launch 1-50-pr-review start",
            "gate PR #50",
        ],
    ),
    (
        "closing keywords link nothing: the App's PR from a branch that is no agent's serves no issue",
        lambda e: [e.assigned(38)],
        lambda e: e.pr(50, "some-branch", "This fixes #38."),
        [
            "put 1-50-pr-review CREATED (new)",
            "launch 1-50-pr-review start",
            "gate PR #50",
        ],
    ),
    (
        "draft PR: linked, no reviews yet (the gate says it waits)",
        lambda e: [e.assigned(38)],
        lambda e: e.pr(50, "feat/issue-38", draft=True),
        ["link PR #50 to #38", "gate PR #50", "discard"],
    ),
    (
        "synchronize re-runs a finished review",
        lambda e: [e.assigned(38), e.pr(50, "feat/issue-38"), e.review(50, "feat/issue-38", "approved")],
        lambda e: e.pr(50, "feat/issue-38", action="synchronize"),
        ["inbox 1-50-pr-review pull_request_updated", "gate PR #50"],
    ),
    (
        "PR merged completes agents and closes the issue",
        lambda e: [e.assigned(38), e.pr(50, "feat/issue-38")],
        lambda e: e.pr_closed(50, "feat/issue-38", merged=True),
        [
            "put 1-50-pr-review COMPLETED (v3)",
            f"put {A38} COMPLETED (v4)",
            "close #38",
            "stop 1-50-pr-review",
            f"stop {A38}",
        ],
    ),
    (
        "PR closed unmerged: reviewers cancelled, dev told",
        lambda e: [e.assigned(38), e.pr(50, "feat/issue-38")],
        lambda e: e.pr_closed(50, "feat/issue-38", merged=False),
        ["put 1-50-pr-review CANCELLED (v3)", f"inbox {A38} pull_request_closed", "stop 1-50-pr-review"],
    ),
    (
        "changes requested wakes the dev agent",
        lambda e: [
            e.assigned(38),
            e.pr(50, "feat/issue-38"),
            e.register_blocker(38, 42, agent_id=A38, sleep=True),
        ],
        lambda e: e.review(50, "feat/issue-38", "changes_requested", body="rename this"),
        [
            "review PR #50 bob changes_requested",
            f"inbox {A38} changes_requested",
            f"put {A38} ACTIVE (v5)",
            f"launch {A38} wake",
            "gate PR #50",
        ],
    ),
    (
        "approval is recorded",
        lambda e: [e.assigned(38), e.pr(50, "feat/issue-38")],
        lambda e: e.review(50, "feat/issue-38", "approved"),
        ["review PR #50 bob approved", "gate PR #50"],
    ),
    (
        "a failed check naming only the agent's branch reaches nobody (a fork's branch has any name)",
        lambda e: [e.assigned(38)],
        lambda e: e.check("feat/issue-38", "failure"),
        ["discard"],
    ),
    (
        "failed check mapped through its pull request",
        lambda e: [e.assigned(38), e.pr(50, "feat/issue-38")],
        lambda e: e.check(None, "timed_out", prs=(50,)),
        [f"inbox {A38} check_failed", f"put {A38} CREATED (v4)", "gate PR #50"],
    ),
    (
        "a passing check on a pull request re-judges it",
        lambda e: [e.assigned(38), e.pr(50, "feat/issue-38")],
        lambda e: e.check("feat/issue-38", "success", prs=(50,)),
        ["gate PR #50"],
    ),
    (
        "passing check is informational",
        lambda e: [e.assigned(38)],
        lambda e: e.check("feat/issue-38", "success"),
        ["discard"],
    ),
    (
        "failed status on the agent's branch reaches it",
        lambda e: [e.assigned(38)],
        lambda e: e.status(("main", "feat/issue-38"), "failure"),
        [f"inbox {A38} check_failed", f"put {A38} CREATED (v3)"],
    ),
    ("status on an unknown branch", lambda e: [], lambda e: e.status(("main",), "error"), ["discard"]),
    (
        "a passing status on an agent PR's branch re-judges the PR",
        lambda e: [e.assigned(38), e.pr(50, "feat/issue-38")],
        lambda e: e.status(("feat/issue-38",), "success"),
        ["gate PR #50"],
    ),
    (
        "a failing status on an agent PR's branch tells the agent and re-judges the PR",
        lambda e: [e.assigned(38), e.pr(50, "feat/issue-38")],
        lambda e: e.status(("feat/issue-38",), "failure"),
        [f"inbox {A38} check_failed", f"put {A38} CREATED (v4)", "gate PR #50"],
    ),
    (
        "edited issue informs its agent without waking it; the writer's version is the vouched one now",
        lambda e: [e.assigned(38)],
        lambda e: e.edited(38),
        [f"inbox {A38} issue_edited", f"put {A38} CREATED (v3)"],
    ),
]


@pytest.mark.parametrize(("setup", "event", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_routing_table(setup: Setup, event: Callable[[Events], EventEnvelope], expected: list[str]) -> None:
    world = World()
    for prior in setup(world.events):
        world.send(prior)
    under_test = event(world.events)
    for later in world.events.pending:  # events that GitHub emitted later but that arrived first
        world.send(later)
    assert world.say(under_test) == expected


def test_routes_cover_exactly_what_the_ingress_forwards() -> None:
    handled = {pair for pair in ROUTES if pair[0] != SQUADRON_EVENT}
    assert handled == routed_pairs()
    assert SQUADRON_EVENT not in ROUTED_EVENTS


def test_pm_receives_own_bot_free_events_only_once_per_delivery() -> None:
    world = World()
    event = world.events.opened(38)
    world.send(event)
    state = world.registry.snapshot_state()
    world.send(event)
    assert world.registry.snapshot_state() == state
    assert len(world.launcher.launched) == 1


def test_bot_sender_is_used_for_pr_events() -> None:
    assert Events().pr(1, "b").sender.login == BOT


def test_assignment_past_max_issue_depth_is_refused_in_a_comment() -> None:
    # Chains are bounded when edges are stored; an over-deep one exists only if the
    # limit was lowered later. Seed it directly: 4 blocks 3 blocks 2 blocks 1 blocks 9.
    world = World()
    for issue, blocker in [(3, 4), (2, 3), (1, 2), (9, 1)]:
        world.registry.edges[(1, issue, blocker)] = False
    assert world.say(world.events.assigned(4)) == ["assigned #4", "comment #4"]
    (_, number, body, author) = world.github.comments[0]
    assert number == 4
    assert "max_issue_depth" in body
    assert author == "framework"
    assert world.registry.get_agent(A38) is None


def test_a_retried_refusal_relaunches_once() -> None:
    """A refused sleep whose relaunch failed is retried: the retry resumes the same launch."""
    world = World()
    e = world.events
    world.send(e.assigned(38))
    world.send(e.register_blocker(42, 38))
    command = e.register_blocker(38, 42, agent_id=A38, sleep=True)  # a cycle: refused
    world.launcher.fail_next = 1
    with pytest.raises(RuntimeError):
        world.send(command)
    pending = world.agent(A38).pending_launch
    assert pending is not None
    world.now += ARMING_HELD  # the executor that armed it is gone (squadron.shell.launching)
    world.send(e.comment(38))  # another event finishes the unconfirmed launch first
    assert world.agent(A38).pending_launch is None
    world.send(command)  # the queue retries the command
    tokens = [token for token, (agent, _, _) in world.launcher.launched.items() if agent == A38]
    assert tokens == [f"{A38}-g1-l1", pending]


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"agent_id": A38}, "agent_id and launch_token come together"),
        ({"launch_token": "t"}, "agent_id and launch_token come together"),
        ({"sleep": True}, "sleep needs the sending task"),
        ({"agent_id": A38, "launch_token": ""}, "at least 1 character"),
    ],
    ids=["agent without token", "token without agent", "sleep without sender", "empty token"],
)
def test_register_blocker_commands_name_their_sender(fields: dict[str, object], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        RegisterBlocker.model_validate({"issue_number": 38, "blocker_number": 42, **fields})


@pytest.mark.parametrize(
    ("base", "reviewers"),
    [("main", ["1-101-pr-review"]), ("release/2.0", ["1-101-pr-review", "1-101-security-review"])],
)
def test_reviewers_follow_the_base_branch(base: str, reviewers: list[str]) -> None:
    world = World(policy=RoutingPolicy(branch_review_roles=(("release/*", ("security-review",)),)))
    world.send(world.events.assigned(38))
    world.send(world.events.pr(101, "feat/issue-38", "Fixes #38", base=base))
    started = sorted(agent for agent, purpose, _ in world.launcher.launched.values() if "review" in agent)
    assert started == reviewers


def _idle(world: World, agent_id: str) -> None:
    """The agent's task ends its turn without blocking (report_complete)."""
    record = world.agent(agent_id)
    if record.status is AgentStatus.CREATED:
        record = record.transition(AgentStatus.ACTIVE, now=record.updated_at)
    world.registry.agents[agent_id] = record.updated(now=record.updated_at, task_arn=None)


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (lambda e: e.comment(38), [f"inbox {A38} comment", f"put {A38} ACTIVE (v5)", f"launch {A38} wake"]),
        (
            lambda e: e.review(101, "feat/issue-38", "changes_requested"),
            [
                "review PR #101 bob changes_requested",
                f"inbox {A38} changes_requested",
                f"put {A38} ACTIVE (v5)",
                f"launch {A38} wake",
                "gate PR #101",
            ],
        ),
        (
            lambda e: e.review(101, "feat/issue-38", "approved"),
            ["review PR #101 bob approved", "gate PR #101"],
        ),
    ],
    ids=["comment", "changes requested", "approval does not wake"],
)
def test_an_idle_agent_is_woken_by_news(
    event: Callable[[Events], EventEnvelope], expected: list[str]
) -> None:
    world = World()
    world.send(world.events.assigned(38))
    _idle(world, A38)
    assert world.say(event(world.events)) == expected


def test_an_idle_pm_starts_a_new_batch() -> None:
    world = World()
    world.send(world.events.opened(37))
    _idle(world, PM)
    assert world.say(world.events.opened(38)) == [
        "state #38 open",
        "inbox 1-pm issue_opened",
        "put 1-pm ACTIVE (v5)",
        "launch 1-pm wake",
    ]


def test_a_delivery_never_wakes_the_same_agent_twice() -> None:
    world = World()
    world.send(world.events.assigned(38))
    _idle(world, A38)
    comment = world.events.comment(38)
    world.send(comment)  # wakes the idle agent
    _idle(world, A38)  # ...which handles it and goes idle again
    # A redelivery: its decision was carried out already, so nothing is decided or done again.
    assert world.say(comment) == []
    assert len(world.launcher.tasks_for(A38)) == 2


def test_the_topics_tables_compose_into_one_without_overlap() -> None:
    topics = [
        ISSUE_ROUTES,
        COMMENT_ROUTES,
        PULL_REQUEST_ROUTES,
        CI_ROUTES,
        COMMAND_ROUTES,
        MERGE_QUEUE_ROUTES,
    ]
    assert sum(len(table) for table in topics) == len(ROUTES)
    with pytest.raises(ValueError, match="routed twice"):
        compose(ISSUE_ROUTES, {("issues", "opened"): ISSUE_ROUTES[("issues", "opened")]})
