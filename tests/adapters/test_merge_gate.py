"""The merge gate against a recorded GitHub whose every request is checked against GitHub's OpenAPI."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from squadron.adapters.github.errors import GitHubUnavailableError
from squadron.config.parse import parse_files
from squadron.domain.events import EventEnvelope
from squadron.domain.merge_gate import MAX_REVIEWERS_CHECKED
from squadron.domain.repo_config.limits import MAX_LISTED
from squadron.shell.merge_gate import MergeGate
from tests.support.recorded_github import SHA, RecordedGitHub, gate_over

FLOWS = """\
version: 1
default:
  required_reviews: [{role: "agent:pr-review"}]
  required_status_checks: [ci]
  merge_policy: {method: rebase, auto_merge: true, delete_branch: true}
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


def gate(github: RecordedGitHub, announced: list[EventEnvelope] | None = None) -> MergeGate:
    return gate_over(github, CONFIG, announce=announced.append if announced is not None else None)


def merge_status(github: RecordedGitHub) -> dict[str, Any]:
    (status,) = [body for _, op, body in github.writes if op == "repos/create-commit-status"]
    return dict(status)


def test_a_pr_waiting_on_its_reviewer_and_ci_says_so_and_does_not_merge() -> None:
    github = RecordedGitHub()
    outcome = gate(github).evaluate(77, "octo/repo", 101, "feat-dev")
    assert not outcome.merged
    assert merge_status(github) == {
        "state": "pending",
        "context": "squadron/merge",
        "description": "waiting: waiting on pr-review; waiting on ci",
    }
    assert [op for _, op, _ in github.writes] == ["repos/create-commit-status"]


def test_a_pr_that_meets_its_flow_is_merged_pinned_to_its_head_and_its_branch_deleted() -> None:
    github = RecordedGitHub(
        statuses=[{"context": "squadron/pr-review", "state": "success"}],
        check_runs=[{"name": "ci", "status": "completed", "conclusion": "success"}],
        reviews=[
            {"user": {"login": "bob"}, "state": "CHANGES_REQUESTED"},
            {"user": {"login": "bob"}, "state": "APPROVED"},  # bob changed his mind: his latest stands
            {"user": {"login": "bob"}, "state": "COMMENTED"},  # a later comment does not revoke it
        ],
        roles={"bob": "write"},
    )
    announced: list[EventEnvelope] = []
    outcome = gate(github, announced).evaluate(77, "octo/repo", 101, "feat-dev")
    assert outcome.merged and outcome.detail == "merged with rebase"
    assert merge_status(github)["state"] == "success"
    assert [(op, body) for _, op, body in github.writes if op != "repos/create-commit-status"] == [
        ("pulls/merge", {"merge_method": "rebase", "sha": SHA}),
        ("git/delete-ref", None),
    ]
    (closed,) = announced  # the App's own merge, told to the router
    assert (closed.event, closed.action, closed.origin) == ("pull_request", "closed", "squadron")
    assert closed.pull_request is not None and closed.pull_request.merged
    assert closed.message_group_id == "1#101"


def test_main_is_ready_but_left_to_a_human() -> None:
    github = RecordedGitHub(
        base="main",
        statuses=[
            {"context": "ci", "state": "success"},
            {"context": "squadron/pr-review", "state": "success"},
        ],
        reviews=[{"user": {"login": "octo-maintainer"}, "state": "APPROVED"}],
        roles={"octo-maintainer": "admin"},
    )
    outcome = gate(github).evaluate(77, "octo/repo", 101, "feat-dev")
    assert not outcome.merged
    assert merge_status(github)["description"] == "ready: a human merges (require_human)"
    assert github.asked == ["octo-maintainer"]


APP_REVIEWS = [
    # (case id, the App's review, what the gate must still say): the App's own reviews (its
    # review agents act as the App) are never a human's, whatever the App's slug.
    ("approval-is-not-human", "APPROVED", "waiting: waiting on maintainers; a human approval"),
    (
        "change-request-does-not-block",
        "CHANGES_REQUESTED",
        "waiting: waiting on maintainers; a human approval",
    ),
]


@pytest.mark.parametrize(
    ("state", "description"), [row[1:] for row in APP_REVIEWS], ids=[row[0] for row in APP_REVIEWS]
)
def test_an_app_with_another_slug_is_not_counted_as_a_human_reviewer(state: str, description: str) -> None:
    github = RecordedGitHub(
        base="main",
        author="octo-dev",  # a human's pull request, reviewed by the App's agents
        statuses=[
            {"context": "ci", "state": "success"},
            {"context": "squadron/pr-review", "state": "success"},
        ],
        reviews=[
            {"user": {"login": "octo-maintainer"}, "state": "COMMENTED"},
            {"user": {"login": "acme-bot[bot]"}, "state": state},
        ],
    )
    outcome = gate_over(github, CONFIG, bot_login="acme-bot[bot]").evaluate(77, "octo/repo", 101, None)
    assert not outcome.merged
    assert merge_status(github)["description"] == description


def test_a_refused_merge_is_reported_and_an_outage_goes_back_to_the_queue() -> None:
    ready = {
        "statuses": [
            {"context": "squadron/pr-review", "state": "success"},
            {"context": "ci", "state": "success"},
        ]
    }
    refused = RecordedGitHub(
        **ready,  # type: ignore[arg-type]
        merge_answer=httpx.Response(405, json={"message": "Pull Request is not mergeable"}),
    )
    outcome = gate(refused).evaluate(77, "octo/repo", 101, None)
    assert not outcome.merged and "not mergeable" in outcome.detail
    down = RecordedGitHub(**ready, merge_answer=httpx.Response(502, json={"message": "bad gateway"}))  # type: ignore[arg-type]
    with pytest.raises(GitHubUnavailableError):
        gate(down).evaluate(77, "octo/repo", 101, None)


def test_a_closed_pr_is_not_judged() -> None:
    github = RecordedGitHub(state="closed")
    outcome = gate(github).evaluate(77, "octo/repo", 101, None)
    assert outcome.result is None and github.writes == []


GREEN_MAIN = {
    "base": "main",
    "statuses": [
        {"context": "ci", "state": "success"},
        {"context": "squadron/pr-review", "state": "success"},
    ],
}
STRANGERS = [
    # (case id, reviews GitHub lists, roles, what the gate must still say, logins asked)
    (
        "a maintainer-listed reader's approval is no approval",
        [{"user": {"login": "octo-maintainer", "type": "User"}, "state": "APPROVED"}],
        {"octo-maintainer": "read"},
        "waiting: waiting on maintainers; a human approval",
        ["octo-maintainer"],
    ),
    (
        "a triager's approval is no approval",
        [{"user": {"login": "octo-maintainer", "type": "User"}, "state": "APPROVED"}],
        {"octo-maintainer": "triage"},
        "waiting: waiting on maintainers; a human approval",
        ["octo-maintainer"],
    ),
    (
        "another bot's approval is no approval, and costs no call",
        [{"user": {"login": "octo-maintainer", "type": "Bot"}, "state": "APPROVED"}],
        {"octo-maintainer": "admin"},
        "waiting: waiting on maintainers; a human approval",
        [],
    ),
    (
        "a reader's change request does not block a maintainer's approval",
        [
            {"user": {"login": "mallory", "type": "User"}, "state": "CHANGES_REQUESTED"},
            {"user": {"login": "octo-maintainer", "type": "User"}, "state": "APPROVED"},
        ],
        {"octo-maintainer": "maintain"},
        "ready: a human merges (require_human)",
        ["mallory", "octo-maintainer"],
    ),
    (
        "another bot's change request does not block",
        [
            {"user": {"login": "renovate[bot]", "type": "Bot"}, "state": "CHANGES_REQUESTED"},
            {"user": {"login": "octo-maintainer", "type": "User"}, "state": "APPROVED"},
        ],
        {"octo-maintainer": "admin"},
        "ready: a human merges (require_human)",
        ["octo-maintainer"],
    ),
    (
        "a writer's change request blocks",
        [
            {"user": {"login": "carol", "type": "User"}, "state": "CHANGES_REQUESTED"},
            {"user": {"login": "octo-maintainer", "type": "User"}, "state": "APPROVED"},
        ],
        {"octo-maintainer": "admin", "carol": "write"},
        "blocked: changes requested by @carol",
        ["carol", "octo-maintainer"],
    ),
]


@pytest.mark.parametrize(
    ("reviews", "roles", "description", "asked"),
    [row[1:] for row in STRANGERS],
    ids=[row[0] for row in STRANGERS],
)
def test_only_reviews_with_write_access_move_the_gate(
    reviews: list[dict[str, Any]], roles: dict[str, str], description: str, asked: list[str]
) -> None:
    github = RecordedGitHub(**GREEN_MAIN, reviews=reviews, roles=roles)  # type: ignore[arg-type]
    outcome = gate(github).evaluate(77, "octo/repo", 101, "feat-dev")
    assert not outcome.merged
    assert merge_status(github)["description"] == description
    assert github.asked == asked


def test_a_readers_change_request_does_not_stop_an_auto_merge() -> None:
    github = RecordedGitHub(
        statuses=[
            {"context": "squadron/pr-review", "state": "success"},
            {"context": "ci", "state": "success"},
        ],
        reviews=[{"user": {"login": "mallory", "type": "User"}, "state": "CHANGES_REQUESTED"}],
    )
    outcome = gate(github).evaluate(77, "octo/repo", 101, "feat-dev")
    assert outcome.merged


def test_a_judgement_asks_a_bounded_number_of_permissions_and_fails_closed_past_it() -> None:
    """Sock puppets in numbers cost at most MAX_REVIEWERS_CHECKED calls, and merge nothing."""
    puppets = [
        {"user": {"login": f"sock{i:02d}", "type": "User"}, "state": "APPROVED"}
        for i in range(MAX_REVIEWERS_CHECKED + 5)
    ]
    blocker = {"user": {"login": "carol", "type": "User"}, "state": "CHANGES_REQUESTED"}
    github = RecordedGitHub(
        statuses=[
            {"context": "squadron/pr-review", "state": "success"},
            {"context": "ci", "state": "success"},
        ],
        reviews=[*puppets, blocker, *puppets],  # each reviewer asked once, whatever they repeat
        roles={"carol": "write"},
    )
    outcome = gate(github).evaluate(77, "octo/repo", 101, "feat-dev")
    assert not outcome.merged
    assert github.asked[0] == "carol"  # change requests are checked first
    assert len(github.asked) == MAX_REVIEWERS_CHECKED == len(set(github.asked))
    assert merge_status(github)["description"] == (
        "blocked: changes requested by @carol; access of 6 reviewers unchecked"
    )


def test_a_pr_with_more_reviews_than_the_gate_reads_never_merges() -> None:
    """GitHub lists reviews oldest first: past MAX_LISTED, a maintainer's latest change request
    would be unread, so the gate blocks instead of trusting an old approval."""
    spam = [{"user": {"login": "mallory", "type": "User"}, "state": "COMMENTED"}] * MAX_LISTED
    github = RecordedGitHub(
        statuses=[
            {"context": "squadron/pr-review", "state": "success"},
            {"context": "ci", "state": "success"},
        ],
        reviews=[
            {"user": {"login": "bob", "type": "User"}, "state": "APPROVED"},
            *spam,
            {"user": {"login": "bob", "type": "User"}, "state": "CHANGES_REQUESTED"},  # never read
        ],
        roles={"bob": "write"},
    )
    outcome = gate(github).evaluate(77, "octo/repo", 101, "feat-dev")
    assert not outcome.merged
    assert "pulls/merge" not in [op for _, op, _ in github.writes]
    assert merge_status(github)["state"] == "failure"
    assert "MAX_LISTED" in merge_status(github)["description"]


def test_the_routers_cached_permissions_are_used_when_wired() -> None:
    github = RecordedGitHub(
        **GREEN_MAIN,  # type: ignore[arg-type]
        reviews=[{"user": {"login": "octo-maintainer", "type": "User"}, "state": "APPROVED"}],
    )
    asked: list[tuple[int | None, str, str]] = []

    def permission(installation_id: int | None, repo: str, login: str) -> str:
        asked.append((installation_id, repo, login))
        return "admin"

    base = gate(github)
    wired = MergeGate(
        client=base.client, config_for=base.config_for, bot_login=base.bot_login, permission=permission
    )
    wired.evaluate(77, "octo/repo", 101, "feat-dev")
    assert asked == [(77, "octo/repo", "octo-maintainer")]
    assert github.asked == []  # not through the judgement's own client
    assert merge_status(github)["description"] == "ready: a human merges (require_human)"


PROTECTED = FLOWS.replace(
    "branch_rules:",
    "  protected_paths:\n    - {paths: ['infra/**'], require_human: true}\nbranch_rules:",
)
WAITING = "waiting: waiting on pr-review; waiting on ci"
FILE_READS = [
    # (case id, approval flows, files changed, whether the gate lists them, its verdict)
    ("no protected path: the files cannot matter", FLOWS, ["infra/x.py"], False, WAITING),
    ("a protected path: the files are read", PROTECTED, ["app.py"], True, WAITING),
    (
        "a protected path touched: a human too",
        PROTECTED,
        ["infra/x.py"],
        True,
        f"{WAITING}; a human approval",
    ),
]


@pytest.mark.parametrize(
    ("flows", "files", "listed", "said"), [c[1:] for c in FILE_READS], ids=[c[0] for c in FILE_READS]
)
def test_the_changed_files_are_read_only_when_a_protected_path_could_use_them(
    flows: str, files: list[str], listed: bool, said: str
) -> None:
    groups = "version: 1\nhuman_groups:\n  maintainers: {members: [octo-maintainer]}\n"
    config = parse_files({"config.yaml": groups, "workflows/approval-flows.yaml": flows})
    github = RecordedGitHub(files=files)
    gate_over(github, config).evaluate(77, "octo/repo", 101, "feat-dev")
    assert ("pulls/list-files" in github.reads) is listed
    assert merge_status(github)["description"] == said
    assert github.reads.count("pulls/get") == 1
