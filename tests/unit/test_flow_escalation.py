"""The approval flow's escalation rules, executed by the router: CI rounds and change requests."""

from __future__ import annotations

from pathlib import Path

from squadron.domain.agents import AgentStatus
from tests.support.orchestration import fixed_policy
from tests.support.world import World

ROOT = Path(__file__).resolve().parents[2]
A38 = "1-38-feat-dev"


def world() -> World:
    # This repository's own flows: on_ci_failure and on_review_rejection allow 3 retries; a CI
    # escalation notifies the maintainers. The fixed routing's rules: its agent starts on the
    # assignment (under the default pipelines a run's stage would start it).
    w = World(policy=fixed_policy(ROOT / ".squadron"))
    w.send(w.events.assigned(38))
    w.send(w.events.pr(101, "feat/issue-38", "Closes #38"))
    return w


def test_a_fourth_failing_commit_hands_the_issue_to_humans() -> None:
    w = world()
    for n in range(3):
        said = w.say(w.events.check("feat/issue-38", "failure", prs=(101,), sha=f"sha{n}"))
        assert "create issue 'needs-human: #38 (feat-dev-38)'" not in said
        w.send(
            w.events.check("feat/issue-38", "failure", prs=(101,), sha=f"sha{n}")
        )  # another check, same round
    assert w.agent(A38).counters.ci_failures == 3
    said = w.say(w.events.check("feat/issue-38", "failure", prs=(101,), sha="sha3"))
    assert said[:5] == [
        f"inbox {A38} check_failed",
        f"put {A38} ESCALATED (v7)",
        "label #38 needs-human",
        "comment #38",
        "create issue 'needs-human: #38 (feat-dev-38)'",
    ]
    agent = w.agent(A38)
    assert agent.status is AgentStatus.ESCALATED
    assert agent.escalation_reason == "CI failed 4 times, over on_ci_failure.max_retries 3"
    body = w.github.comments[-1][2]
    assert "@octo-maintainer @hubot-admin" in body  # the rule's notify: human_group:maintainers


def test_change_requests_count_once_each_and_escalate_past_the_limit() -> None:
    w = world()
    reviews = [w.events.review(101, "feat/issue-38", "changes_requested", by="bob") for _ in range(4)]
    for review in reviews[:3]:
        w.send(review)
        w.send(review)  # a replayed delivery is not another round
    assert w.agent(A38).counters.rejections == 3
    assert w.agent(A38).status is not AgentStatus.ESCALATED
    w.send(reviews[3])
    agent = w.agent(A38)
    assert agent.status is AgentStatus.ESCALATED
    assert agent.escalation_reason == "changes were requested 4 times, over on_review_rejection.max_retries 3"
