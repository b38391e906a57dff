"""One call of every GitHub client operation, shared by the contract and permission tests.

The contract test sends each call through a recording GitHub and validates the
requests against GitHub's OpenAPI description; the permission test makes the
same calls as each role. Both check that every public operation has a case here,
so a new operation without one fails.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from squadron.adapters.github.client import GitHubAppClient, GitHubClient
from squadron.domain.permissions import Caller, CallerKind, MergeConsent

SHA = "0123456789abcdef0123456789abcdef01234567"
#: Where a lookup of a keyed write starts.
_SINCE = datetime(2026, 11, 23, 11, 55, tzinfo=UTC)

PM = Caller(CallerKind.PM, "pm", "pm")
DEV = Caller(CallerKind.DEV, "dev-38", "feat-dev", "feat/issue-38")
REVIEW = Caller(CallerKind.REVIEW, "pr-review-101", "pr-review")
FRAMEWORK = Caller.framework()
CALLERS = (PM, DEV, REVIEW, FRAMEWORK)

#: A file over the contents API's 1 MB limit, read through the git blobs API.
LARGE_FILE = {".squadron/large.md": "x" * (1024 * 1024 + 1)}


@dataclass(frozen=True)
class ClientCall:
    operation: str  # the GitHubClient method this case calls
    call: Callable[[GitHubClient], object]
    case: str = ""
    files: Mapping[str, str] = field(default_factory=dict)  # extra files the recording GitHub serves

    @property
    def id(self) -> str:
        return f"{self.operation} ({self.case})" if self.case else self.operation


@dataclass(frozen=True)
class AppCall:
    operation: str  # the GitHubAppClient method this case calls
    call: Callable[[GitHubAppClient], object]

    @property
    def id(self) -> str:
        return self.operation


CLIENT_CALLS: tuple[ClientCall, ...] = (
    ClientCall("get_issue", lambda c: c.get_issue(38)),
    ClientCall("find_comment", lambda c: c.find_comment(38, "k" * 24, "squadron[bot]", _SINCE)),
    ClientCall("find_issue", lambda c: c.find_issue("k" * 24, "squadron[bot]", _SINCE)),
    ClientCall("find_pull", lambda c: c.find_pull("feat/issue-38", "k" * 24, "squadron[bot]", _SINCE)),
    ClientCall("find_review", lambda c: c.find_review(101, "k" * 24, "squadron[bot]")),
    ClientCall(
        "create_issue",
        lambda c: c.create_issue("Blocker", "Needs an API", labels=["bug"], assignees=["octocat"]),
    ),
    ClientCall("list_issues", lambda c: c.list_issues(labels=["squadron-config"], state="all")),
    ClientCall("update_issue", lambda c: c.update_issue(38, title="New title", body="New body")),
    ClientCall("close_issue", lambda c: c.close_issue(38, "not_planned")),
    ClientCall("reopen_issue", lambda c: c.reopen_issue(38)),
    ClientCall("add_labels", lambda c: c.add_labels(38, ["bug", "blocked"])),
    ClientCall("remove_label", lambda c: c.remove_label(38, "needs human")),
    ClientCall("add_assignees", lambda c: c.add_assignees(38, ["squadron[bot]"])),
    ClientCall("remove_assignees", lambda c: c.remove_assignees(38, ["squadron[bot]"])),
    ClientCall("list_comments", lambda c: c.list_comments(38)),
    ClientCall("comment", lambda c: c.comment(38, "On it")),
    ClientCall("get_pull", lambda c: c.get_pull(101)),
    ClientCall(
        "create_pull",
        lambda c: c.create_pull(title="Fix", head="feat/issue-38", base="main", body="Fixes #38"),
    ),
    ClientCall("list_pull_files", lambda c: c.list_pull_files(101)),
    ClientCall("list_reviews", lambda c: c.list_reviews(101)),
    ClientCall(
        "create_review", lambda c: c.create_review(101, "REQUEST_CHANGES", "Add a test", commit_id=SHA)
    ),
    ClientCall(
        "merge_pull", lambda c: c.merge_pull(101, consent=MergeConsent(101, True, "approved"), sha=SHA)
    ),
    ClientCall("branch_requires_merge_queue", lambda c: c.branch_requires_merge_queue("main")),
    ClientCall("merge_queue_entry", lambda c: c.merge_queue_entry(101)),
    ClientCall(
        "enqueue_pull",
        lambda c: c.enqueue_pull(
            101, node_id="PR_1", consent=MergeConsent(101, True, "approved"), expected_head=SHA
        ),
    ),
    ClientCall("dequeue_pull", lambda c: c.dequeue_pull(101, node_id="PR_1")),
    ClientCall(
        "revert_pull",
        lambda c: c.revert_pull(101, node_id="PR_1", title="Revert #101", body="The set failed"),
    ),
    ClientCall(
        "update_pull_branch", lambda c: c.update_pull_branch(101, head="feat/issue-38", expected_head_sha=SHA)
    ),
    ClientCall(
        "create_status",
        lambda c: c.create_status(
            SHA,
            state="success",
            context="squadron/pr-review",
            description="ok",
            target_url="https://x.example",
        ),
    ),
    ClientCall("get_combined_status", lambda c: c.get_combined_status(SHA)),
    ClientCall("delete_branch", lambda c: c.delete_branch("feat/issue-38")),
    ClientCall("list_branches", lambda c: c.list_branches()),
    ClientCall(
        "protect_branch",
        lambda c: c.protect_branch(
            "main",
            {
                "required_status_checks": {
                    "strict": True,
                    "contexts": [],
                    "checks": [{"context": "squadron/merge", "app_id": 123456}, {"context": "ci"}],
                },
                "enforce_admins": False,
                "required_pull_request_reviews": {
                    "dismiss_stale_reviews": True,
                    "required_approving_review_count": 1,
                },
                "restrictions": None,
            },
        ),
    ),
    ClientCall(
        "create_check_run",
        lambda c: c.create_check_run(
            name="squadron", head_sha=SHA, status="completed", conclusion="success", summary="All good"
        ),
    ),
    ClientCall(
        "update_check_run",
        lambda c: c.update_check_run(4, status="completed", conclusion="failure", summary="No"),
    ),
    ClientCall("list_check_runs", lambda c: c.list_check_runs("feat/issue-38")),
    ClientCall("get_repository", lambda c: c.get_repository()),
    ClientCall("get_branch", lambda c: c.get_branch("feat/issue-38")),
    ClientCall("read_file", lambda c: c.read_file(".squadron/config.yaml", "main")),
    ClientCall(
        "read_file", lambda c: c.read_file(".squadron/large.md", "main"), case="over 1 MB", files=LARGE_FILE
    ),
    ClientCall("list_directory", lambda c: c.list_directory(".squadron", "main")),
    ClientCall("collaborator_permission", lambda c: c.collaborator_permission("octocat")),
)

APP_CALLS: tuple[AppCall, ...] = (
    AppCall("get_app", lambda a: a.get_app()),
    AppCall("list_deliveries", lambda a: a.list_deliveries()),
    AppCall("redeliver", lambda a: a.redeliver(12345)),
    AppCall("list_installation_repositories", lambda a: a.list_installation_repositories("ghs_1")),
)


def public_operations(cls: type) -> set[str]:
    """The public methods of a client class: what the tables above must cover."""
    return {name for name, _ in inspect.getmembers(cls, inspect.isfunction) if not name.startswith("_")}
