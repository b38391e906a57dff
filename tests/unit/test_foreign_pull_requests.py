"""Only the App's own pull requests belong to agents: the attacker's view.

#38 has a dev agent (branch ``feat/issue-38``) asleep on #42, and the App's own PR #50 from
that branch. A stranger opens pull requests that claim #38 every way the payload allows —
``Fixes #38`` in the body, a branch of this repository named like an agent's (``fix/issue-38``:
the bug-fix template's), a fork's branch named exactly like the agent's (GitHub sends check
results of forks with no pull request numbers) — and then pushes failing and passing checks
and statuses, gets it reviewed, closes it and has it merged. What the stranger got is read
from the registry and the launcher: no link, no inbox item, no wake, no counted CI round, no
escalation, no ending of the agent, no closing of #38. The App's own PR still gets all of it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from squadron.domain.agents import AgentStatus
from squadron.domain.effects import CloseIssue, DeliverInbox, Effect, LaunchAgent, LinkPullRequest, PutAgent
from squadron.domain.events import EventEnvelope
from squadron.domain.routing import RoutingPolicy
from tests.support.events import BOT, Events, agent_did
from tests.support.world import World

A38 = "1-38-feat-dev"
BRANCH = "feat/issue-38"
STRANGER = "mallory"
FORK = "mallory/repo"

#: One failed CI round is retried; the second goes to humans (so counted rounds would escalate).
STRICT = RoutingPolicy(
    flows=RoutingPolicy().flows.model_copy(
        update={
            "default": RoutingPolicy().flows.default.model_copy(
                update={
                    "escalation": RoutingPolicy().flows.default.escalation.model_copy(
                        update={
                            "on_ci_failure": RoutingPolicy().flows.default.escalation.on_ci_failure.model_copy(
                                update={"max_retries": 1}
                            )
                        }
                    )
                }
            )
        }
    )
)


def world() -> World:
    w = World(policy=STRICT)
    e = w.events
    w.send(e.assigned(38))
    w.send(agent_did(e.pr(50, BRANCH, "Implements #38."), A38))
    w.send(e.register_blocker(38, 42, agent_id=A38, sleep=True))
    assert w.agent(A38).status is AgentStatus.SLEEPING
    assert w.agent(A38).pr_number == 50
    return w


def touches(effects: list[Effect], agent_id: str) -> list[Effect]:
    """The effects that reach ``agent_id``: its record, its inbox, its task."""
    return [
        e
        for e in effects
        if (isinstance(e, PutAgent) and e.write.record.agent_id == agent_id)
        or (isinstance(e, DeliverInbox) and e.item.agent_id == agent_id)
        or (isinstance(e, LaunchAgent) and e.agent_id == agent_id)
        or (isinstance(e, LinkPullRequest) and e.issue_number == 38)
        or (isinstance(e, CloseIssue) and e.number == 38)
    ]


# (the stranger's pull request: (number, head branch, head repository))
STRANGERS_PRS = [
    pytest.param((60, BRANCH, FORK), id="from a fork, its branch named exactly like the agent's"),
    pytest.param((60, "fix/issue-38", "octo/repo"), id="same repository, a branch named like an agent's"),
    pytest.param((60, "patch-1", FORK), id="from a fork, any branch"),
]

Attack = Callable[[Events, tuple[int, str, str]], list[EventEnvelope]]
ATTACKS: list[tuple[str, Attack]] = [
    (
        "opened, 'Fixes #38'",
        lambda e, p: [e.pr(p[0], p[1], "Fixes #38", author=STRANGER, head_repo=p[2])],
    ),
    (
        "pushed again, 'Closes #38'",
        lambda e, p: [e.pr(p[0], p[1], "Closes #38", author=STRANGER, head_repo=p[2], action="synchronize")],
    ),
    (
        "failing checks on its branch, no PR numbers (as GitHub sends a fork's)",
        lambda e, p: [e.check(p[1], "failure", sha=f"bad{i}") for i in range(3)],
    ),
    (
        "failing checks naming its pull request",
        lambda e, p: [
            e.pr(p[0], p[1], "Fixes #38", author=STRANGER, head_repo=p[2]),
            *[e.check(p[1], "failure", prs=(p[0],), sha=f"bad{i}") for i in range(3)],
        ],
    ),
    (
        "a passing check naming its pull request",
        lambda e, p: [
            e.pr(p[0], p[1], "Fixes #38", author=STRANGER, head_repo=p[2]),
            e.check(p[1], "success", prs=(p[0],)),
        ],
    ),
    (
        "a writer requests changes on it",
        lambda e, p: [
            e.pr(p[0], p[1], "Fixes #38", author=STRANGER, head_repo=p[2]),
            e.review(
                p[0],
                p[1],
                "changes_requested",
                by="bob",
                body="rename it",
                pr_author=STRANGER,
                head_repo=p[2],
            ),
        ],
    ),
    (
        "closed without merging",
        lambda e, p: [
            e.pr(p[0], p[1], "Fixes #38", author=STRANGER, head_repo=p[2]),
            e.pr_closed(p[0], p[1], merged=False, body="Fixes #38", author=STRANGER, head_repo=p[2]),
        ],
    ),
    (
        "merged by a writer",
        lambda e, p: [
            e.pr(p[0], p[1], "Fixes #38", author=STRANGER, head_repo=p[2]),
            e.pr_closed(p[0], p[1], merged=True, body="Fixes #38", author=STRANGER, head_repo=p[2]),
        ],
    ),
]


@pytest.mark.parametrize(
    ("attack", "pr"),
    [
        pytest.param(attack, pr.values[0], id=f"{name}, {pr.id}")
        for name, attack in ATTACKS
        for pr in STRANGERS_PRS
        # A check with neither pull request numbers nor an agent-like branch names no issue at all.
        if not (name.startswith("failing checks on its branch") and pr.id == "from a fork, any branch")
    ],
)
def test_a_strangers_pull_request_never_reaches_the_agent_of_the_issue_it_names(
    attack: Attack, pr: tuple[int, str, str]
) -> None:
    w = world()
    before = w.agent(A38)
    launched = w.launcher.tasks_for(A38)

    reached = [effect for event in attack(w.events, pr) for effect in touches(w.send(event), A38)]

    assert reached == []
    assert w.agent(A38) == before  # not woken, no round counted, not escalated, not ended
    assert w.launcher.tasks_for(A38) == launched  # (the PR's own reviewers do start)
    assert w.registry.issue_view(1, pr[0]).linked_issue is None
    assert w.github.closed == []


def test_a_failing_status_on_a_branch_named_like_an_agents_is_not_the_agents() -> None:
    """A status names this repository's branches: ``fix/issue-38`` is not the agent's ``feat/issue-38``."""
    w = world()
    before = w.agent(A38)
    effects = [
        x for sha in ("bad1", "bad2") for x in w.send(w.events.status(("fix/issue-38",), "failure", sha=sha))
    ]
    assert touches(effects, A38) == []
    assert w.agent(A38) == before


def test_the_apps_own_pull_request_from_the_agents_branch_still_links_wakes_and_escalates() -> None:
    w = world()
    e = w.events
    # Its own PR was linked when the agent opened it (world); a failing check on it wakes the
    # agent and counts a round; the next one is over the limit of 1 retry: humans are asked.
    first = w.send(e.check(BRANCH, "failure", prs=(50,), sha="bad1"))
    assert any(isinstance(x, LaunchAgent) and x.agent_id == A38 for x in first)
    assert w.agent(A38).counters.ci_failures == 1
    w.send(e.check(BRANCH, "failure", prs=(50,), sha="bad2"))
    assert w.agent(A38).status is AgentStatus.ESCALATED
    # Merged by a writer: the agent completes and #38 is closed.
    w.send(e.pr_closed(50, BRANCH, merged=True, by="bob"))
    assert w.agent(A38).status is AgentStatus.COMPLETED
    assert [n for _, n, _ in w.github.closed] == [38]


def test_the_apps_pull_request_from_a_branch_that_is_not_the_agents_links_nothing() -> None:
    """A bug-fix branch name on a feat-dev agent's issue, even from the App: not the agent's branch."""
    w = world()
    effects = w.send(agent_did(w.events.pr(61, "fix/issue-38", "Fixes #38"), A38))
    assert touches(effects, A38) == []
    assert w.registry.issue_view(1, 61).linked_issue is None


def test_the_app_login_is_case_insensitive_and_the_head_repository_must_be_this_one() -> None:
    w = world()
    e = w.events
    own = w.send(e.pr(62, "squadron/issue-39", author=BOT.upper()))
    assert w.registry.issue_view(1, 62).linked_issue == 39, own
    w.send(e.pr(63, "squadron/issue-40", author=BOT, head_repo="octo/fork-of-repo"))
    assert w.registry.issue_view(1, 63).linked_issue is None
