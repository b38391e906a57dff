"""A pipeline's gate counts reviews, agent verdicts and CI only from whom the merge gate trusts
(issue 30; docs/pipelines.md, "Gate checks"): the attacker is a stranger, a read-only
collaborator, a bot or user named like a review agent, a fork's Actions job named like the
required check — each leaves the gate failing; a writer's approval passes it."""

from __future__ import annotations

from typing import Any

import pytest

from squadron.domain.pipelines.judge import CheckResult, Facts, Review
from tests.unit.pipelines.test_stage_work import gate_output

APP = "squadron[bot]"
HUMANS = "          - {check: human_approved}\n"
HUMANS_SCOPE = "          - {check: pr_approvals_met, count: 1, scope: humans}\n"
AGENTS = "          - {check: pr_approvals_met, count: 1, scope: agents}\n"
ALL = "          - {check: pr_approvals_met, count: 1}\n"
NO_CHANGES = "          - {check: no_changes_requested}\n"
CI = "          - {check: ci_status, workflows: [ci/test]}\n"


def pr(
    *reviews: Review,
    permissions: dict[str, str] | None = None,
    checks: tuple[CheckResult, ...] = (),
    fork: bool = False,
) -> Facts:
    return Facts(
        number=7,
        is_pull=True,
        reviews=reviews,
        author="dev-bot",
        permissions=permissions or {},
        app_login=APP,
        fork=fork,
        checks=checks,
        head_sha="a" * 40,
    )


def review(login: str, state: str = "APPROVED", *, bot: bool = False) -> Review:
    return Review(login, state, bot)


def run(name: str, conclusion: str = "success", app: str = "github-actions") -> CheckResult:
    return CheckResult(name, conclusion, kind="check_run", app=app)


def status(name: str, state: str = "success", creator: str = "") -> CheckResult:
    return CheckResult(name, state, kind="status", creator=creator)


CASES: list[tuple[str, str, Facts, bool, str]] = [
    # (case, gate, facts, passed, a failing reason contains)
    ("a writer's approval", HUMANS, pr(review("wendy"), permissions={"wendy": "write"}), True, ""),
    ("a maintainer's approval", ALL, pr(review("max"), permissions={"max": "maintain"}), True, ""),
    ("an admin's approval", HUMANS_SCOPE, pr(review("ada"), permissions={"ada": "admin"}), True, ""),
    (
        "a stranger's approval",
        HUMANS,
        pr(review("mallory"), permissions={"mallory": "none"}),
        False,
        "not counted: mallory (no-write-access)",
    ),
    (
        "a read-only collaborator's approval",
        ALL,
        pr(review("reed"), permissions={"reed": "read"}),
        False,
        "has 0 approval(s)",
    ),
    (
        "a triager's approval",
        HUMANS_SCOPE,
        pr(review("tia"), permissions={"tia": "triage"}),
        False,
        "has 0 approval(s)",
    ),
    (
        "an approval whose access was not read (past MAX_REVIEWERS_CHECKED)",
        HUMANS,
        pr(review("late")),
        False,
        "access of 1 reviewer(s) unchecked",
    ),
    (
        "the author's own approval",
        HUMANS,
        pr(review("dev-bot"), permissions={"dev-bot": "admin"}),
        False,
        "0 human approval(s)",
    ),
    (
        "a bot named pr-review approves as a human",
        HUMANS,
        pr(review("pr-review", bot=True)),
        False,
        "0 human",
    ),
    (
        "a bot named pr-review approves as an agent",
        AGENTS,
        pr(review("pr-review", bot=True)),
        False,
        "0 approval",
    ),
    (
        "a writer named pr-review approves as an agent",
        AGENTS,
        pr(review("pr-review"), permissions={"pr-review": "write"}),
        False,
        "0 approval(s) from agents",
    ),
    ("the App's own review is no agent verdict", AGENTS, pr(review(APP, bot=True)), False, "0 approval"),
    (
        "a stranger's status named like the review agent's",
        AGENTS,
        pr(checks=(status("squadron/pr-review", creator="mallory"),)),
        False,
        "0 approval",
    ),
    (
        "a check run named like the review agent's status",
        AGENTS,
        pr(checks=(run("squadron/pr-review"),)),
        False,
        "0 approval",
    ),
    (
        "the App's squadron/merge is no review",
        AGENTS,
        pr(checks=(status("squadron/merge", creator=APP),)),
        False,
        "0 approval",
    ),
    (
        "the review agent's status, by the App",
        AGENTS,
        pr(checks=(status("squadron/pr-review", creator=APP),)),
        True,
        "",
    ),
    (
        "the review agent's status in the combined status",
        ALL,
        pr(checks=(status("squadron/pr-review"),)),
        True,
        "",
    ),
    (
        "a stranger's change request blocks nothing",
        NO_CHANGES,
        pr(review("mallory", "CHANGES_REQUESTED"), permissions={"mallory": "none"}),
        True,
        "",
    ),
    (
        "a read-only collaborator's change request blocks nothing",
        NO_CHANGES,
        pr(review("reed", "CHANGES_REQUESTED"), permissions={"reed": "read"}),
        True,
        "",
    ),
    (
        "a writer's change request blocks",
        NO_CHANGES,
        pr(review("wendy", "CHANGES_REQUESTED"), permissions={"wendy": "write"}),
        False,
        "changes requested on #7 by wendy",
    ),
    (
        "a change request whose author's access was not read blocks (fail closed)",
        NO_CHANGES,
        pr(review("late", "CHANGES_REQUESTED")),
        False,
        "whose access is unchecked",
    ),
    (
        "a writer's approval stands though a stranger requests changes later",
        HUMANS + NO_CHANGES,
        pr(
            review("wendy"),
            review("mallory", "CHANGES_REQUESTED"),
            permissions={"wendy": "write", "mallory": "none"},
        ),
        True,
        "",
    ),
    (
        "a fork's Actions job named like the required check",
        CI,
        pr(checks=(run("ci/test"),), fork=True),
        False,
        "not reported: ci/test (not counted: ci/test (a fork's GitHub Actions job",
    ),
    ("the repository's own Actions job", CI, pr(checks=(run("ci/test"),)), True, ""),
    ("another App's check on a fork", CI, pr(checks=(run("ci/test", app="circleci"),), fork=True), True, ""),
    (
        "a status on a fork's head (posting one needs push access)",
        CI,
        pr(checks=(status("ci/test"),), fork=True),
        True,
        "",
    ),
    (
        "a check run named squadron/merge",
        "          - {check: ci_status, workflows: [squadron/merge]}\n",
        pr(checks=(run("squadron/merge", app="evil-app"),)),
        False,
        "only the App's own status carries a squadron/ name",
    ),
]


@pytest.mark.parametrize(("case", "gate", "facts", "passed", "reason"), CASES, ids=[c[0] for c in CASES])
def test_a_gate_counts_only_whom_the_merge_gate_trusts(
    case: str, gate: str, facts: Facts, passed: bool, reason: str
) -> None:
    output: dict[str, Any] = gate_output(gate, facts)
    assert output["passed"] is passed, (case, output)
    if reason:
        assert any(reason in failing for failing in output["failing"]), output["failing"]
