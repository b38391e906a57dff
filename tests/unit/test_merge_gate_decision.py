"""The merge gate's choices, pure (squadron.domain.merge_gate): tables of what GitHub says -> what the gate does.

The cases are the shell's (tests/adapters/test_merge_gate.py and test_merge_queue.py, which keep
checking the reads and the writes against GitHub's OpenAPI), asked of the judgement alone.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from squadron.config.parse import parse_files
from squadron.domain.commands import ReportConflict
from squadron.domain.merge_gate import (
    MAX_REVIEWERS_CHECKED,
    GateReads,
    PostStatus,
    branch_after_queue_merge,
    conflict_envelope,
    judge,
    merged_event,
    not_gated,
    permissions_wanted,
    reads_files,
)
from squadron.domain.repo_config.limits import MAX_LISTED

BOT = "squadron[bot]"
SHA = "a" * 40
GROUP_SHA = "b" * 40
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
FLOWS = """\
version: 1
default:
  required_reviews: [{role: "agent:pr-review"}]
  required_status_checks: [ci]
  merge_policy: {method: rebase, auto_merge: true, delete_branch: true}
  protected_paths:
    - {paths: ['infra/**'], require_human: true}
branch_rules:
  - pattern: main
    required_reviews: [{role: "human_group:maintainers"}]
    merge_policy: {require_human: true}
"""
CONFIG = parse_files(
    {
        "config.yaml": "version: 1\nhuman_groups:\n  maintainers: {members: [octo-maintainer]}\n",
        "workflows/approval-flows.yaml": FLOWS,
    }
)
GROUPS = {name: group.members for name, group in CONFIG.config.human_groups.items()}


def pull(**over: Any) -> dict[str, Any]:
    pr: dict[str, Any] = {
        "number": 101,
        "state": "open",
        "merged": False,
        "draft": False,
        "mergeable_state": "clean",
        "changed_files": 1,
        "user": {"login": BOT, "type": "Bot"},
        "head": {"sha": SHA, "ref": "feat/issue-38", "repo": {"full_name": "octo/repo"}},
        "base": {"ref": "develop", "repo": {"id": 1, "full_name": "octo/repo"}},
    }
    return {**pr, **over}


def user(login: str, kind: str = "User") -> dict[str, str]:
    return {"login": login, "type": kind}


GREEN = [{"context": "squadron/pr-review", "state": "success"}, {"context": "ci", "state": "success"}]
MAIN = {"ref": "main", "repo": {"id": 1, "full_name": "octo/repo"}}
FORK = {"sha": SHA, "ref": "feat/issue-38", "repo": {"full_name": "mallory/repo"}}
WAITING = "waiting: waiting on pr-review; waiting on ci"
ACTIONS_RUN = {
    "name": "ci",
    "status": "completed",
    "conclusion": "success",
    "app": {"slug": "github-actions"},
}

JUDGEMENTS: list[tuple[str, dict[str, Any], dict[str, Any], str, str, bool, str | None]] = [
    # (case id, the PR's fields, the reads, squadron/merge's state and description, merges, branch deleted)
    ("waiting on its reviewer and ci", {}, {}, "pending", WAITING, False, None),
    (
        "meets its flow: merged, its branch deleted",
        {},
        {
            "statuses": GREEN[:1],
            "runs": [{"name": "ci", "status": "completed", "conclusion": "success"}],
            "reviews": [
                {"user": user("bob"), "state": "CHANGES_REQUESTED"},
                {"user": user("bob"), "state": "APPROVED"},  # his latest stands
                {"user": user("bob"), "state": "COMMENTED"},  # a later comment does not revoke it
            ],
            "permissions": {"bob": "write"},
        },
        "success",
        "ready: merging",
        True,
        "feat/issue-38",
    ),
    (
        "a fork's head: merged, no branch of ours deleted",
        {"head": FORK},
        {"statuses": GREEN},
        "success",
        "ready: merging",
        True,
        None,
    ),
    (
        "main is ready but left to a human",
        {"base": MAIN},
        {
            "statuses": GREEN,
            "reviews": [{"user": user("octo-maintainer"), "state": "APPROVED"}],
            "permissions": {"octo-maintainer": "admin"},
        },
        "success",
        "ready: a human merges (require_human)",
        False,
        None,
    ),
    (
        "the App's approval is no human's",
        {"base": MAIN, "user": user("octo-dev")},
        {"statuses": GREEN, "reviews": [{"user": user(BOT, "Bot"), "state": "APPROVED"}]},
        "pending",
        "waiting: waiting on maintainers; a human approval",
        False,
        None,
    ),
    (
        "a reader's approval is no approval",
        {"base": MAIN},
        {
            "statuses": GREEN,
            "reviews": [{"user": user("octo-maintainer"), "state": "APPROVED"}],
            "permissions": {"octo-maintainer": "read"},
        },
        "pending",
        "waiting: waiting on maintainers; a human approval",
        False,
        None,
    ),
    (
        "a reader's change request does not stop an auto-merge",
        {},
        {
            "statuses": GREEN,
            "reviews": [{"user": user("mallory"), "state": "CHANGES_REQUESTED"}],
            "permissions": {"mallory": "read"},
        },
        "success",
        "ready: merging",
        True,
        "feat/issue-38",
    ),
    (
        "a writer's change request blocks",
        {},
        {
            "statuses": GREEN,
            "reviews": [{"user": user("carol"), "state": "CHANGES_REQUESTED"}],
            "permissions": {"carol": "write"},
        },
        "failure",
        "blocked: changes requested by @carol",
        False,
        None,
    ),
    (
        "a reviewer whose access is unknown keeps it from merging",
        {},
        {"statuses": GREEN, "reviews": [{"user": user("carol"), "state": "CHANGES_REQUESTED"}]},
        "pending",
        "waiting: access of 1 reviewer unchecked",
        False,
        None,
    ),
    (
        "more reviews than the gate reads never merge",
        {},
        {
            "statuses": GREEN,
            "reviews": [{"user": user("bob"), "state": "APPROVED"}]
            + [{"user": user("mallory"), "state": "COMMENTED"}] * MAX_LISTED,
            "permissions": {"bob": "write"},
        },
        "failure",
        "",
        False,
        None,
    ),
    (
        "a protected path touched: a human too",
        {},
        {"files": ["infra/x.py"]},
        "pending",
        f"{WAITING}; a human approval",
        False,
        None,
    ),
    ("a draft waits", {"draft": True}, {"statuses": GREEN}, "pending", "waiting: draft", False, None),
    # Check runs that may not speak for their name (the App's verdicts are statuses; a fork's
    # Actions job ran the fork author's workflow): each leaves the gate as if it were not there.
    (
        "a check run named like the App's verdict does not outvote it",
        {},
        {
            "statuses": [{"context": "squadron/pr-review", "state": "failure"}, GREEN[1]],
            "runs": [ACTIONS_RUN | {"name": "squadron/pr-review"}],
        },
        "failure",
        "pr-review",
        False,
        None,
    ),
    (
        "a check run named like the App's verdict stands in for none",
        {},
        {"statuses": GREEN[1:], "runs": [ACTIONS_RUN | {"name": "squadron/pr-review"}]},
        "pending",
        "waiting on pr-review",
        False,
        None,
    ),
    (
        "a fork's Actions job does not pass a required check",
        {"head": FORK},
        {"statuses": GREEN[:1], "runs": [ACTIONS_RUN]},
        "pending",
        "waiting on ci",
        False,
        None,
    ),
    (
        "the repository's own Actions job passes it",
        {},
        {"statuses": GREEN[:1], "runs": [ACTIONS_RUN]},
        "success",
        "ready: merging",
        True,
        "feat/issue-38",
    ),
]


def reads(pr: dict[str, Any], given: dict[str, Any]) -> GateReads:
    return GateReads(
        number=101,
        pr=pr,
        files=given.get("files", ["app.py"]),
        reviews=given.get("reviews", []),
        permissions=given.get("permissions", {}),
        combined={"statuses": given.get("statuses", [])},
        runs=given.get("runs", []),
    )


def decide(pr: dict[str, Any], given: dict[str, Any], **over: Any) -> Any:
    return judge(
        reads(pr, given),
        repo="octo/repo",
        flows=CONFIG.approval_flows,
        groups=GROUPS,
        bot_login=BOT,
        author_role=over.pop("author_role", "feat-dev"),
        **over,
    )


@pytest.mark.parametrize(
    ("fields", "given", "expected"),
    [(case[1], case[2], case[3:]) for case in JUDGEMENTS],
    ids=[case[0] for case in JUDGEMENTS],
)
def test_the_gate_posts_its_verdict_and_merges_only_what_the_flow_allows(
    fields: dict[str, Any], given: dict[str, Any], expected: tuple[str, str, bool, str | None]
) -> None:
    state, description, merges, deleted = expected
    decision = decide(pull(**fields), given)
    (posted,) = decision.statuses
    assert (posted.sha, posted.context, posted.state) == (SHA, "squadron/merge", state)
    assert description in posted.description
    assert (decision.consent is not None) is merges
    if decision.consent is not None:
        assert (decision.consent.pr_number, decision.consent.allowed) == (101, True)
        assert decision.result.method == "rebase"
    assert decision.delete_branch == deleted
    assert decision.conflict is None and not decision.reads_queue_rules


def test_a_merge_group_gets_the_prs_squadron_statuses_with_the_fresh_verdict() -> None:
    statuses = [*GREEN, {"context": "squadron/merge", "state": "pending", "description": "old"}]
    decision = decide(pull(), {"statuses": statuses}, merge_group=GROUP_SHA)
    assert decision.statuses == (
        PostStatus(SHA, "success", "squadron/merge", "ready: merging"),
        PostStatus(GROUP_SHA, "success", "squadron/merge", "ready: merging"),
        PostStatus(GROUP_SHA, "success", "squadron/pr-review", ""),
    )


@pytest.mark.parametrize(
    ("head_statuses", "reads_rules"),
    [
        (GREEN, False),
        ([*GREEN, {"context": "squadron/merge", "state": "pending"}], False),
        ([*GREEN, {"context": "squadron/merge", "state": "success"}], True),
    ],
    ids=["never-judged", "judged-waiting", "judged-ready-before"],
)
def test_the_queue_rules_are_read_only_for_a_head_judged_ready_before(
    head_statuses: list[dict[str, str]], reads_rules: bool
) -> None:
    assert decide(pull(), {"statuses": head_statuses}).reads_queue_rules is reads_rules


@pytest.mark.parametrize(
    ("mergeable", "issue", "conflict"),
    [
        ("dirty", 38, ReportConflict(issue_number=38, pr_number=101, head_sha=SHA, base="develop")),
        ("dirty", None, None),  # no issue: no dev agent to resolve it
        ("clean", 38, None),
    ],
    ids=["dirty-linked", "dirty-unlinked", "clean"],
)
def test_a_conflict_is_reported_to_the_linked_issues_dev_agent(
    mergeable: str, issue: int | None, conflict: ReportConflict | None
) -> None:
    decision = decide(pull(mergeable_state=mergeable), {"statuses": GREEN}, issue_number=issue)
    assert decision.conflict == conflict


def test_the_conflict_goes_out_once_per_head_and_cause() -> None:
    conflict = ReportConflict(issue_number=38, pr_number=101, head_sha=SHA, base="develop")
    envelope = conflict_envelope(
        conflict, pull(), repo="octo/repo", installation_id=77, cause="push", now=NOW
    )
    assert envelope.delivery_id == f"conflict-101-{SHA[:12]}-push"
    assert (envelope.origin, envelope.repository.full_name) == ("squadron", "octo/repo")
    again = conflict_envelope(conflict, pull(), repo="octo/repo", installation_id=77, cause="", now=NOW)
    assert again.delivery_id == f"conflict-101-{SHA[:12]}-gate"


PERMISSIONS = [
    # (case id, reviews GitHub lists, the PR's author, whose permission is asked)
    ("comments and dismissals ask nothing", [{"user": user("bob"), "state": "COMMENTED"}], "octo-dev", []),
    (
        "change requests first, then by login",
        [
            {"user": user("zed"), "state": "APPROVED"},
            {"user": user("carol"), "state": "CHANGES_REQUESTED"},
            {"user": user("amy"), "state": "APPROVED"},
        ],
        "octo-dev",
        ["carol", "amy", "zed"],
    ),
    (
        "bots, the author and the App are never asked",
        [
            {"user": user("renovate[bot]", "Bot"), "state": "APPROVED"},
            {"user": user("octo-maintainer", "Bot"), "state": "APPROVED"},
            {"user": user("Octo-Dev"), "state": "APPROVED"},
            {"user": user("SQUADRON[bot]"), "state": "CHANGES_REQUESTED"},
        ],
        "octo-dev",
        [],
    ),
    (
        "each reviewer once, at most the cap",
        [{"user": user(f"sock{i:02d}"), "state": "APPROVED"} for i in range(MAX_REVIEWERS_CHECKED + 5)] * 2,
        "octo-dev",
        [f"sock{i:02d}" for i in range(MAX_REVIEWERS_CHECKED)],
    ),
]


@pytest.mark.parametrize(
    ("listed", "author", "asked"), [c[1:] for c in PERMISSIONS], ids=[c[0] for c in PERMISSIONS]
)
def test_the_judgement_asks_the_permission_of_human_verdicts_only(
    listed: list[dict[str, Any]], author: str, asked: list[str]
) -> None:
    assert permissions_wanted(pull(user=user(author)), listed, BOT) == asked


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({}, None),
        ({"state": "closed"}, "PR #101 is closed; nothing to gate"),
        ({"state": "closed", "merged": True}, "PR #101 is closed; nothing to gate"),
    ],
    ids=["open", "closed", "merged"],
)
def test_only_an_open_pull_request_is_judged(fields: dict[str, Any], why: str | None) -> None:
    assert not_gated(pull(**fields), 101) == why


def test_the_changed_files_are_read_only_when_a_protected_path_could_use_them() -> None:
    plain = parse_files(
        {
            "config.yaml": "version: 1\nhuman_groups:\n  maintainers: {members: [octo-maintainer]}\n",
            "workflows/approval-flows.yaml": FLOWS.replace(
                "  protected_paths:\n    - {paths: ['infra/**'], require_human: true}\n", ""
            ),
        }
    )
    assert reads_files(pull(), CONFIG.approval_flows)
    assert not reads_files(pull(), plain.approval_flows)


@pytest.mark.parametrize(
    ("head", "deleted"),
    [
        (pull()["head"], "feat/issue-38"),
        (FORK, None),
        ({"sha": SHA, "repo": {"full_name": "octo/repo"}}, None),
    ],
    ids=["own-branch", "fork", "no-ref"],
)
def test_after_the_queue_merges_the_branch_goes_as_after_the_gates_own_merge(
    head: dict[str, Any], deleted: str | None
) -> None:
    pr = pull(head=head, merged=True, state="closed")
    assert (
        branch_after_queue_merge(pr, [], repo="octo/repo", flows=CONFIG.approval_flows, author_role=None)
        == deleted
    )


def test_the_apps_merge_is_told_to_the_router_as_githubs_closed_webhook() -> None:
    event = merged_event(pull(), {"sha": "c" * 40}, installation_id=77, bot_login=BOT, now=NOW)
    assert (event.event, event.action, event.origin) == ("pull_request", "closed", "squadron")
    assert event.pull_request is not None and event.pull_request.merged
    assert event.delivery_id == f"echo-merge-1-101-{'c' * 12}"
    assert event.sender.login == BOT
