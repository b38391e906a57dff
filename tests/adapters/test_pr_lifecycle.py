"""A pull request's whole life through the router and the merge gate: agent and human reviews, CI, merge."""

from __future__ import annotations

from datetime import timedelta

from squadron.config.parse import parse_files
from squadron.domain.agents import AgentStatus
from squadron.domain.events import EventEnvelope
from tests.support.events import T0
from tests.support.fake_registry import FakeRouterGitHub
from tests.support.recorded_github import RecordedGitHub, gate_over
from tests.support.world import World

A38 = "1-38-feat-dev"
REVIEWER = "1-101-pr-review"
CONFIG = parse_files(
    {
        "config.yaml": "version: 1\nhuman_groups:\n  maintainers: {members: [octo-maintainer]}\n",
        "workflows/approval-flows.yaml": (
            "version: 1\n"
            "default:\n"
            "  required_reviews: [{role: 'agent:pr-review'}, {role: 'human_group:maintainers'}]\n"
            "  required_status_checks: [ci]\n"
            "  merge_policy: {method: squash, auto_merge: true}\n"
        ),
    }
)


def wired(github: RecordedGitHub) -> tuple[World, list[EventEnvelope]]:
    """The router and its merge gate over one GitHub: the same people have the same roles."""
    github.roles.setdefault("octo-maintainer", "maintain")
    world = World(github=FakeRouterGitHub({"alice": "write", "bob": "admin", **github.roles}))
    announced: list[EventEnvelope] = []
    world.router.merge_gate = gate_over(
        github, CONFIG, announce=announced.append, clock=lambda: T0 + timedelta(hours=1)
    )
    return world, announced


def merge_statuses(github: RecordedGitHub) -> list[str]:
    return [
        f"{b['state']}: {b['description']}"
        for _, op, b in github.writes
        if op == "repos/create-commit-status"
    ]


def test_agent_and_human_reviews_then_ci_then_the_merge_closes_everything() -> None:
    github = RecordedGitHub(base="main")
    world, announced = wired(github)
    e = world.events
    world.send(e.assigned(38))
    world.send(e.pr(101, "feat/issue-38", "Closes #38"))
    assert world.agent(REVIEWER).status is AgentStatus.CREATED  # the agent reviewer starts

    # The review agent asks for changes: its status fails; the dev agent (idle) hears of it.
    github.statuses = [{"context": "squadron/pr-review", "state": "failure"}]
    world.send(e.status(("feat/issue-38",), "failure"))
    # A human asks for changes too.
    github.reviews = [{"user": {"login": "octo-maintainer"}, "state": "CHANGES_REQUESTED"}]
    world.send(e.review(101, "feat/issue-38", "changes_requested", by="octo-maintainer"))
    assert [item.kind for item in world.registry.inbox[A38].values()][-2:] == [
        "check_failed",
        "changes_requested",
    ]

    # New commits: the agent re-reviews and approves; the human approves; CI passes.
    github.statuses = [{"context": "squadron/pr-review", "state": "success"}]
    github.reviews.append({"user": {"login": "octo-maintainer"}, "state": "APPROVED"})
    world.send(e.review(101, "feat/issue-38", "approved", by="octo-maintainer"))
    assert not announced  # CI has not reported yet
    github.check_runs = [{"name": "ci", "status": "completed", "conclusion": "success"}]
    world.send(e.check("feat/issue-38", "success", prs=(101,)))

    assert merge_statuses(github) == [
        "pending: waiting: waiting on pr-review; waiting on maintainers; waiting on ci",
        "failure: blocked: pr-review requested changes; waiting on maintainers; waiting on ci",
        "failure: blocked: changes requested by @octo-maintainer; pr-review requested changes; "
        "waiting on maintainers; waiting on ci",
        "pending: waiting: waiting on ci",
        "success: ready: merging",
    ]
    assert [op for _, op, _ in github.writes if op != "repos/create-commit-status"] == [
        "pulls/merge",
        "git/delete-ref",
    ]

    (merged,) = announced  # the App's own merge reaches the router through events.fifo
    world.send(merged)
    assert world.agent(A38).status is AgentStatus.COMPLETED
    assert world.agent(REVIEWER).status is AgentStatus.COMPLETED
    assert world.github.closed == [("octo/repo", 38, "PR #101 merged")]


def test_the_author_agents_role_is_never_its_own_reviewer() -> None:
    github = RecordedGitHub(
        statuses=[
            {"context": "squadron/feat-dev", "state": "success"},
            {"context": "ci", "state": "success"},
        ],
        reviews=[{"user": {"login": "octo-maintainer"}, "state": "APPROVED"}],
    )
    world, announced = wired(github)
    flows = CONFIG.approval_flows.model_copy(
        update={
            "default": CONFIG.approval_flows.default.model_copy(
                update={
                    "required_reviews": [
                        r.model_copy(update={"role": "agent:feat-dev"})
                        for r in CONFIG.approval_flows.default.required_reviews[:1]
                    ]
                }
            )
        }
    )
    config = CONFIG.model_copy(update={"approval_flows": flows})
    assert world.router.merge_gate is not None
    world.router.merge_gate.config_for = lambda repo: config  # type: ignore[attr-defined]
    world.send(world.events.assigned(38))
    world.send(world.events.pr(101, "feat/issue-38", "Closes #38"))
    assert merge_statuses(github)[-1] == "failure: blocked: feat-dev cannot review its own PR"
    assert announced == []


class ListQueue:
    def __init__(self) -> None:
        self.sent: list[EventEnvelope] = []

    def send(self, envelope: EventEnvelope) -> str:
        self.sent.append(envelope)
        return str(len(self.sent))


def test_a_conflict_wakes_the_dev_agent_then_goes_to_a_human_and_the_agent_sleeps_on_it() -> None:
    github = RecordedGitHub(mergeable_state="dirty")
    world, announced = wired(github)
    queue = ListQueue()
    world.router.queue = queue
    e = world.events
    world.send(e.assigned(38))
    agent = world.agent(A38)
    world.registry.agents[A38] = agent.transition(AgentStatus.ACTIVE, now=agent.updated_at).updated(
        now=agent.updated_at, task_arn=None
    )  # its task reported complete: idle

    world.send(e.pr(101, "feat/issue-38", "Closes #38"))
    assert "blocked: merge conflict with the base branch" in merge_statuses(github)[-1]
    (conflict,) = [a for a in announced if a.action == "report_conflict"]
    world.send(conflict)
    woken = world.agent(A38)
    assert woken.last_conflict == "c" * 40 and woken.pending_launch is None and woken.task_arn is not None
    assert [i.kind for i in world.registry.inbox[A38].values()][-1] == "merge_conflict"

    # Its attempt ends without a new head: the next judgement hands the conflict to a human.
    world.registry.agents[A38] = world.agent(A38).updated(now=woken.updated_at, task_arn=None)
    announced.clear()
    world.send(e.review(101, "feat/issue-38", "commented", body="any news?"))
    (again,) = [a for a in announced if a.action == "report_conflict"]
    world.send(again)
    (issue,) = world.github.created
    assert issue["title"] == "Resolve the merge conflict of PR #101 (#38)"
    (register,) = queue.sent
    world.send(register)
    asleep = world.agent(A38)
    assert (asleep.status, asleep.blocked_by) == (AgentStatus.SLEEPING, frozenset({901}))

    # A later judgement of the same head asks nobody again.
    announced.clear()
    world.send(e.review(101, "feat/issue-38", "commented", body="still?"))
    world.send(next(a for a in announced if a.action == "report_conflict"))
    assert len(world.github.created) == 1

    # The human resolves it and closes the issue: the agent wakes to finish.
    world.send(e.closed(901))
    assert world.agent(A38).status is AgentStatus.ACTIVE


def test_a_strangers_reviews_move_neither_the_agent_nor_the_gate() -> None:
    """A reader's change request wakes nobody and is not judged; their reviews never count."""
    github = RecordedGitHub(
        statuses=[{"context": "squadron/pr-review", "state": "success"}],
        check_runs=[{"name": "ci", "status": "completed", "conclusion": "success"}],
        reviews=[{"user": {"login": "mallory", "type": "User"}, "state": "APPROVED"}],
        roles={"mallory": "read"},
    )
    world, announced = wired(github)
    e = world.events
    world.send(e.assigned(38))
    world.send(e.pr(101, "feat/issue-38", "Closes #38"))
    assert merge_statuses(github) == ["pending: waiting: waiting on maintainers"]  # her approval: none

    github.reviews.append({"user": {"login": "mallory", "type": "User"}, "state": "CHANGES_REQUESTED"})
    tasks = dict(world.launcher.launched)
    world.send(e.review(101, "feat/issue-38", "changes_requested", by="mallory", body="add my miner"))
    assert world.launcher.launched == tasks
    assert all(item.kind != "changes_requested" for item in world.registry.inbox.get(A38, {}).values())
    assert world.agent(A38).counters.rejections == 0
    assert len(merge_statuses(github)) == 1  # not even judged again

    github.reviews.append({"user": {"login": "octo-maintainer", "type": "User"}, "state": "APPROVED"})
    world.send(e.review(101, "feat/issue-38", "approved", by="octo-maintainer"))
    assert merge_statuses(github)[-1] == "success: ready: merging"  # her change request blocks nothing
    assert [op for _, op, _ in github.writes if op != "repos/create-commit-status"] == [
        "pulls/merge",
        "git/delete-ref",
    ]
    assert len(announced) == 1
