"""A pipeline's gate, carried out by the router on moto's Step Functions through the real GitHub
client, counts only whom the merge gate trusts (issue 30; docs/pipelines.md, "Gate checks"): the
attacker approves, posts a status or runs a fork's job, and what they are after — the gate's
action, a comment the App posts — does not happen; a writer's approval lets it happen."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from squadron.domain.merge_gate import MAX_REVIEWERS_CHECKED
from squadron.shell.pipeline_facts import GitHubFacts
from tests.adapters.test_pipeline_stage_work import ClientFor, PullRequestOnGitHub, drive, router, started
from tests.support.step_functions import Stack, step_functions

APP = "squadron[bot]"


@pytest.fixture
def stack() -> Iterator[Stack]:
    with step_functions() as made:
        yield made


def gated(check: str) -> str:
    return f"""pipelines:
  p:
    trigger: {{event: pull_request.opened}}
    stages:
      - id: gate
        type: gate
        conditions: [{check}]
      - {{id: ship, type: action, action: comment, config: {{message: "shipping"}}}}
"""


HUMAN = "{check: human_approved}"
AGENT = "{check: pr_approvals_met, count: 1, scope: agents}"
CI = "{check: ci_status, workflows: [ci/test]}"
#: How a migrated approval flow waits for the review agent (docs/pipelines.md).
AGENT_STATUS = "{check: ci_status, workflows: [squadron/pr-review]}"


def approval(login: str, kind: str = "User") -> dict[str, Any]:
    return {"user": {"login": login, "type": kind}, "state": "APPROVED"}


def stranger_approves(github: PullRequestOnGitHub) -> None:
    github.reviews = [approval("mallory")]  # GitHub: 404 on mallory's permission (no access)


def reader_approves(github: PullRequestOnGitHub) -> None:
    github.permissions["reed"] = "read"
    github.reviews = [approval("reed")]


def bot_named_like_the_agent_approves(github: PullRequestOnGitHub) -> None:
    github.reviews = [approval("pr-review", kind="Bot")]


def stranger_posts_the_agents_status(github: PullRequestOnGitHub) -> None:
    github.statuses = [{"context": "squadron/pr-review", "state": "success", "creator": {"login": "mallory"}}]


def forks_job_named_like_the_required_check(github: PullRequestOnGitHub) -> None:
    github.head_repo = "mallory/app"
    github.checks = [
        {"name": "ci/test", "status": "completed", "conclusion": "success", "app": {"slug": "github-actions"}}
    ]


def writer_approves(github: PullRequestOnGitHub) -> None:
    github.permissions["wendy"] = "write"
    github.reviews = [approval("wendy")]


def the_app_posts_the_agents_status(github: PullRequestOnGitHub) -> None:
    github.statuses = [{"context": "squadron/pr-review", "state": "success", "creator": {"login": APP}}]


def the_repositorys_own_job_passes(github: PullRequestOnGitHub) -> None:
    github.checks = [
        {"name": "ci/test", "status": "completed", "conclusion": "success", "app": {"slug": "github-actions"}}
    ]


@pytest.mark.parametrize(
    ("check", "world", "ships"),
    [
        (HUMAN, stranger_approves, False),
        (HUMAN, reader_approves, False),
        (AGENT, bot_named_like_the_agent_approves, False),
        (AGENT, stranger_posts_the_agents_status, False),
        (AGENT_STATUS, stranger_posts_the_agents_status, False),
        (CI, forks_job_named_like_the_required_check, False),
        (HUMAN, writer_approves, True),
        (AGENT, the_app_posts_the_agents_status, True),
        (AGENT_STATUS, the_app_posts_the_agents_status, True),
        (CI, the_repositorys_own_job_passes, True),
    ],
)
def test_only_those_with_authority_open_a_gate(
    stack: Stack, check: str, world: Callable[[PullRequestOnGitHub], None], ships: bool
) -> None:
    r = router(stack)
    r.tasks.facts = GitHubFacts(ClientFor(r.github), bot_login=APP)
    world(r.github)
    arn = started(stack, gated(check))

    handled = drive(stack, r, arn)

    comments = [body for _, _, body, _ in r.world.github.comments]
    if ships:
        assert stack.finished(arn)["status"] == "SUCCEEDED"
        assert [stage for stage, _ in handled] == ["gate", "ship"]
        assert any(body.startswith("shipping") for body in comments)
    else:
        assert stack.finished(arn)["status"] == "FAILED"
        assert [stage for stage, _ in handled][:1] == ["gate"]
        assert "ship" not in [stage for stage, _ in handled]
        assert not any(body.startswith("shipping") for body in comments)
    assert all(read.startswith("GET ") for read in r.github.reads)


def test_permissions_are_read_for_at_most_the_merge_gates_bound(stack: Stack) -> None:
    """More reviewers than MAX_REVIEWERS_CHECKED approve: the gate asks GitHub about that many
    (change requests first, then by login); a writer past the bound is not counted, and the run's
    history says the access of the rest was not checked."""
    r = router(stack)
    r.tasks.facts = GitHubFacts(ClientFor(r.github), bot_login=APP)
    strangers = [f"s{n:02d}" for n in range(MAX_REVIEWERS_CHECKED)]
    r.github.permissions["zz-writer"] = "write"
    r.github.reviews = [approval(login) for login in [*strangers, "zz-writer"]]
    arn = started(stack, gated(HUMAN))

    drive(stack, r, arn)

    asked = [read for read in r.github.reads if "/collaborators/" in read]
    assert len(asked) == MAX_REVIEWERS_CHECKED
    assert not any("zz-writer" in read for read in asked)
    assert stack.finished(arn)["status"] == "FAILED"
    assert not any(body.startswith("shipping") for _, _, body, _ in r.world.github.comments)
    outputs = [
        json.loads(e["taskSucceededEventDetails"]["output"])
        for e in stack.sfn.get_execution_history(executionArn=arn)["events"]
        if e["type"] == "TaskSucceeded"
    ]
    assert outputs[0]["passed"] is False
    assert "access of 1 reviewer(s) unchecked" in outputs[0]["failing"][0]
