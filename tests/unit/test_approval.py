"""The merge gate as tables: the effective flow of a PR, and the verdict over what GitHub says."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from squadron.config import load_directory
from squadron.domain.approval import (
    PullRequestState,
    effective_flow,
    evaluate,
    held_for_people,
    reads_changed_files,
)
from squadron.domain.repo_config.limits import MAX_CHANGED_FILES
from squadron.domain.repo_config.models import ApprovalFlowsFile

ROOT = Path(__file__).resolve().parents[2]
FLOWS = load_directory(ROOT / ".squadron").approval_flows  # the repository's own flows (the example)
GROUPS = {"maintainers": ["octo-maintainer", "hubot-admin"], "infra-owners": ["octo-infra"]}
BOT = "squadron[bot]"


def roles(flow: Any) -> list[str]:
    return [f"{r.role}>={r.min_approvals}" for r in flow.required_reviews]


EFFECTIVE = [
    # base, changed files, reviews required, require_human, added by
    ("develop", ["app.py"], ["agent:pr-review>=1"], False, 0),
    ("main", ["app.py"], ["agent:pr-review>=1", "human_group:maintainers>=1"], True, 0),
    (
        "main",
        ["infra/stack.py", "app.py"],
        [
            "agent:pr-review>=1",
            "human_group:maintainers>=1",
            "agent:security-review>=1",
            "human_group:infra-owners>=1",
        ],
        True,
        1,
    ),
    (
        "main",
        ["package-lock.json", "functions/ingress/handler.py"],
        ["agent:pr-review>=1", "human_group:maintainers>=1", "agent:security-review>=1"],
        True,
        2,
    ),
    ("develop", ["infra/stack.py"], ["agent:pr-review>=1"], False, 0),  # protected paths are main's only
]


@pytest.mark.parametrize(("base", "files", "reviews", "human", "added"), EFFECTIVE)
def test_effective_flow(base: str, files: list[str], reviews: list[str], human: bool, added: int) -> None:
    effective = effective_flow(FLOWS, base, files)
    assert roles(effective.flow) == reviews
    assert effective.require_human is human
    assert len(effective.added_by) == added


READS_FILES = [
    # (case, base, GitHub's count of changed files, whether the gate reads the list)
    ("main protects paths: read", "main", 3, True),
    ("main protects paths, count unknown: read", "main", None, True),
    ("main at the cap: read", "main", MAX_CHANGED_FILES, True),
    ("main past the cap: every protected path applies unread", "main", MAX_CHANGED_FILES + 1, False),
    ("develop protects no path: no file can change the verdict", "develop", 3, False),
    ("a branch no rule names: the default protects none", "feature/x", None, False),
]


@pytest.mark.parametrize(
    ("base", "count", "reads"), [c[1:] for c in READS_FILES], ids=[c[0] for c in READS_FILES]
)
def test_the_changed_files_are_read_only_when_they_can_change_the_flow(
    base: str, count: int | None, reads: bool
) -> None:
    assert reads_changed_files(FLOWS, base, count) is reads
    if not reads and (count or 0) <= MAX_CHANGED_FILES:  # unread, the files would have added nothing
        touched = ["infra/stack.py", "cdk.json", "package-lock.json"]
        assert effective_flow(FLOWS, base, touched) == effective_flow(FLOWS, base, [])


AUTO = ApprovalFlowsFile.model_validate(
    {
        "version": 1,
        "default": {
            "required_reviews": [{"role": "agent:pr-review"}],
            "required_status_checks": ["ci"],
            "merge_policy": {"method": "squash", "auto_merge": True},
        },
        "branch_rules": [
            {
                "pattern": "release/*",
                "required_reviews": [{"role": "human_group:maintainers", "min_approvals": 2}],
            }
        ],
    }
)
#: What GitHub's permission endpoint says of the reviewers below (anyone else: not asked).
ROLES = {
    "bob": "write",
    "octo-maintainer": "admin",
    "hubot-admin": "maintain",
    "octo-infra": "write",
    "stranger": "write",
    "reader": "read",
    "triager": "triage",
    "outsider": "none",
}
GREEN = PullRequestState(
    number=101,
    head_sha="c" * 40,
    author=BOT,
    author_role="feat-dev",
    mergeable_state="clean",
    checks={"squadron/pr-review": "success", "ci": "success"},
    permissions=ROLES,
)

VERDICTS: list[tuple[str, str, PullRequestState, str, bool, str]] = [  # one row per rule
    # name, base, state, verdict, merge, status description
    ("everything met, auto_merge: merge", "develop", GREEN, "ready", True, "ready: merging"),
    (
        "waiting on the review agent and CI",
        "develop",
        replace(GREEN, checks={}),
        "waiting",
        False,
        "waiting: waiting on pr-review; waiting on ci",
    ),
    (
        "CI failing blocks",
        "develop",
        replace(GREEN, checks={"squadron/pr-review": "success", "ci": "failure"}),
        "blocked",
        False,
        "blocked: ci failing",
    ),
    (
        "the review agent requested changes",
        "develop",
        replace(GREEN, checks={"squadron/pr-review": "failure", "ci": "success"}),
        "blocked",
        False,
        "blocked: pr-review requested changes",
    ),
    (
        "a human requesting changes blocks even when not required",
        "develop",
        replace(GREEN, reviews={"bob": "CHANGES_REQUESTED"}),
        "blocked",
        False,
        "blocked: changes requested by @bob",
    ),
    (
        "a conflict blocks",
        "develop",
        replace(GREEN, mergeable_state="dirty"),
        "blocked",
        False,
        "blocked: merge conflict with the base branch",
    ),
    ("a draft waits", "develop", replace(GREEN, draft=True), "waiting", False, "waiting: draft"),
    (
        "more reviews than the gate reads: an unread change request might hide there",
        "develop",
        replace(GREEN, reviews={"octo-maintainer": "APPROVED"}, reviews_cut=True),
        "blocked",
        False,
        "blocked: over 3000 reviews, more than the gate reads (MAX_LISTED)",
    ),
    (
        "the author's own role never counts as its reviewer",
        "develop",
        replace(GREEN, author_role="pr-review"),
        "blocked",
        False,
        "blocked: pr-review cannot review its own PR",
    ),
    (
        "a group needing two approvals has one",
        "release/1.0",
        replace(GREEN, reviews={"octo-maintainer": "APPROVED", "stranger": "APPROVED"}),
        "waiting",
        False,
        "waiting: waiting on maintainers (1/2)",
    ),
    (
        "two members approved: ready",
        "release/1.0",
        replace(GREEN, reviews={"octo-maintainer": "APPROVED", "hubot-admin": "APPROVED"}),
        "ready",
        True,
        "ready: merging",
    ),
    (
        "the PR author's own approval does not count",
        "release/1.0",
        replace(
            GREEN,
            author="octo-maintainer",
            reviews={"octo-maintainer": "APPROVED", "hubot-admin": "APPROVED"},
        ),
        "waiting",
        False,
        "waiting: waiting on maintainers (1/2)",
    ),
]


@pytest.mark.parametrize("case", VERDICTS, ids=[v[0] for v in VERDICTS])
def test_verdict(case: tuple[str, str, PullRequestState, str, bool, str]) -> None:
    _, base, state, verdict, merge, description = case
    result = evaluate(effective_flow(AUTO, base, ["app.py"]), state, GROUPS, bot_login=BOT)
    assert (result.verdict, result.merge, result.description) == (verdict, merge, description)
    assert result.status_state == {"ready": "success", "waiting": "pending", "blocked": "failure"}[verdict]


def test_main_is_left_for_a_human_even_when_everything_passed() -> None:
    state = replace(
        GREEN,
        checks={"squadron/pr-review": "success", "ci": "success", "cdk-synth": "success"},
        reviews={"octo-maintainer": "APPROVED"},
    )
    result = evaluate(effective_flow(FLOWS, "main", ["app.py"]), state, GROUPS, bot_login=BOT)
    assert (result.verdict, result.merge) == ("ready", False)
    assert result.description == "ready: a human merges (require_human)"


def test_an_infra_change_on_main_waits_for_security_review_and_infra_owners() -> None:
    state = replace(
        GREEN,
        checks={"squadron/pr-review": "success", "ci": "success", "cdk-synth": "success"},
        reviews={"octo-maintainer": "APPROVED"},
    )
    result = evaluate(effective_flow(FLOWS, "main", ["infra/stack.py"]), state, GROUPS, bot_login=BOT)
    assert result.verdict == "waiting"
    assert result.reasons == ("waiting on security-review", "waiting on infra-owners")


def test_a_long_explanation_fits_a_status() -> None:
    many = replace(
        GREEN,
        checks={},
        reviews={f"user{i}": "CHANGES_REQUESTED" for i in range(30)},
        permissions={f"user{i}": "write" for i in range(30)},
    )
    result = evaluate(effective_flow(AUTO, "develop", []), many, GROUPS, bot_login=BOT)
    assert len(result.description) == 140 and result.description.endswith("…")


# --- the authority rule: whose review counts ---------------------------------------------------

GATED = ApprovalFlowsFile.model_validate(
    {
        "version": 1,
        "default": {"required_reviews": [{"role": "agent:pr-review"}], "merge_policy": {"auto_merge": True}},
        "branch_rules": [
            # develop: a maintainer's approval is required, then the framework merges
            {"pattern": "develop", "required_reviews": [{"role": "human_group:maintainers"}]},
            # main: no group, but a human must approve (and merge)
            {"pattern": "main", "merge_policy": {"require_human": True}},
        ],
    }
)
#: (reviewer kind, login, GitHub's permission or None for a bot / the App / unknown, authorised?)
REVIEWERS: list[tuple[str, str, str | None, bool]] = [
    ("admin", "m-admin", "admin", True),
    ("maintain", "m-maintain", "maintain", True),
    ("write", "m-write", "write", True),
    ("triage", "m-triage", "triage", False),
    ("read", "m-read", "read", False),
    ("none", "m-none", "none", False),
    ("other bot", "m-bot[bot]", None, False),
    ("the App", BOT, None, False),  # the App's reviews are its agents': they count as statuses
    ("unknown", "m-unknown", None, False),
]
#: Every one of them is listed as a maintainer: the configuration grants no authority.
MAINTAINERS = {"maintainers": [login for _, login, _, _ in REVIEWERS]}
#: (gate, base, review state, verdict when the reviewer has authority, verdict otherwise)
GATES = [
    ("min_approvals", "develop", "APPROVED", "ready: merging", "waiting: waiting on maintainers"),
    (
        "require_human",
        "main",
        "APPROVED",
        "ready: a human merges (require_human)",
        "waiting: a human approval",
    ),
    ("blocking", "hotfix/1", "CHANGES_REQUESTED", "blocked: changes requested by @{login}", "ready: merging"),
]


def _authority_rows() -> list[tuple[str, str, PullRequestState, str]]:
    rows = []
    for gate, base, state, allowed, refused in GATES:
        for kind, login, permission, authorised in REVIEWERS:
            expected = (allowed if authorised else refused).format(login=login)
            if kind == "unknown":  # fail closed: nothing merges past a reviewer nobody checked
                expected = (
                    "waiting: access of 1 reviewer unchecked"
                    if expected == "ready: merging"
                    else f"{expected}; access of 1 reviewer unchecked"
                )
            pr = replace(
                GREEN,
                reviews={login: state},
                permissions={login: permission} if permission else {},
                bots=frozenset({login}) if kind == "other bot" else frozenset(),
            )
            rows.append((f"{gate}: {kind}", base, pr, expected))
    return rows


AUTHORITY = _authority_rows()


@pytest.mark.parametrize(
    ("base", "pr", "description"), [r[1:] for r in AUTHORITY], ids=[r[0] for r in AUTHORITY]
)
def test_a_review_counts_only_with_write_access(base: str, pr: PullRequestState, description: str) -> None:
    result = evaluate(effective_flow(GATED, base, ["app.py"]), pr, MAINTAINERS, bot_login=BOT)
    assert result.description == description


def test_ignored_reviews_are_named_with_their_rule() -> None:
    pr = replace(
        GREEN,
        reviews={
            "reader": "CHANGES_REQUESTED",
            "dependabot[bot]": "APPROVED",
            "bob": "APPROVED",
            "x": "COMMENTED",
        },
        bots=frozenset({"dependabot[bot]"}),
    )
    result = evaluate(effective_flow(GATED, "hotfix/1", []), pr, {}, bot_login=BOT)
    assert result.ignored == ("dependabot[bot] (other-bot)", "reader (no-write-access)")
    assert (result.verdict, result.merge) == ("ready", True)


def test_a_strangers_approval_does_not_replace_a_maintainers() -> None:
    """Readers approving in numbers leave a two-approval group waiting on its members."""
    pr = replace(
        GREEN,
        reviews={"octo-maintainer": "APPROVED", **{f"sock{i}": "APPROVED" for i in range(5)}},
        permissions={**ROLES, **{f"sock{i}": "read" for i in range(5)}},
    )
    groups = {"maintainers": ["octo-maintainer", *[f"sock{i}" for i in range(5)]]}
    result = evaluate(effective_flow(AUTO, "release/1.0", []), pr, groups, bot_login=BOT)
    assert result.description == "waiting: waiting on maintainers (1/2)"


HELD = [
    # (id, the PR's agent role, merged by the gate?)
    ("a feature agent's green PR merges", "feat-dev", True),
    ("a retrospective's green PR waits for a person", "retrospective", False),
    ("no agent role: the flow decides", None, True),
]


@pytest.mark.parametrize(("role", "merges"), [h[1:] for h in HELD], ids=[h[0] for h in HELD])
def test_a_retrospectives_pull_request_is_always_held_for_a_person(role: str | None, merges: bool) -> None:
    """Even a flow that auto-merges a green PR leaves a retrospective's (it changes .squadron/)."""
    state = GREEN
    base = effective_flow(AUTO, "develop", [".squadron/agents/feat-dev.md"])
    result = evaluate(held_for_people(base, role), state, GROUPS, bot_login=BOT)
    assert result.merge is merges
    if not merges:
        assert result.verdict != "blocked" and "human" in result.description
