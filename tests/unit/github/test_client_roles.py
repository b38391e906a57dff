"""The client enforces the permission table before it sends anything, and tags what it writes.

Every operation is called as every role: an allowed call reaches GitHub, a
refused one raises PermissionDeniedError naming role and action and sends no
request at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.client import GitHubAppClient, GitHubClient
from squadron.adapters.github.http import GitHubHttp
from squadron.domain.permissions import Caller, MergeConsent, PermissionDeniedError
from tests.support import github_fake
from tests.support.github_calls import (
    APP_CALLS,
    CALLERS,
    CLIENT_CALLS,
    DEV,
    FRAMEWORK,
    PM,
    REVIEW,
    AppCall,
    ClientCall,
    public_operations,
)
from tests.support.github_fake import FakeGitHub, app_private_key

Y, N = True, False
# operation:                       pm dev review framework
ALLOWED_BY_ROLE: dict[str, tuple[bool, bool, bool, bool]] = {
    "get_issue": (Y, Y, Y, Y),
    "create_issue": (Y, Y, N, Y),
    "update_issue": (Y, N, N, Y),
    "close_issue": (Y, N, N, Y),
    "reopen_issue": (Y, N, N, Y),
    "add_labels": (Y, N, N, Y),
    "remove_label": (Y, N, N, Y),
    "add_assignees": (Y, N, N, Y),
    "remove_assignees": (Y, N, N, Y),
    "list_comments": (Y, Y, Y, Y),
    "find_comment": (Y, Y, Y, Y),
    "find_issue": (Y, Y, Y, Y),
    "find_pull": (Y, Y, Y, Y),
    "find_review": (Y, Y, Y, Y),
    "comment": (Y, Y, Y, Y),
    "get_pull": (Y, Y, Y, Y),
    "create_pull": (N, Y, N, Y),  # from the dev's own branch
    "list_pull_files": (Y, Y, Y, Y),
    "list_reviews": (Y, Y, Y, Y),
    "create_review": (N, N, Y, Y),
    "merge_pull": (N, N, N, Y),  # with the approval flow's consent
    "branch_requires_merge_queue": (Y, Y, Y, Y),
    "merge_queue_entry": (Y, Y, Y, Y),
    "enqueue_pull": (N, N, N, Y),  # with the approval flow's consent
    "dequeue_pull": (N, N, N, Y),
    "revert_pull": (N, N, N, Y),  # a pull request from GitHub's branch, never the dev's own
    "update_pull_branch": (N, Y, N, Y),
    "create_status": (N, N, Y, Y),  # the reviewer's own squadron/pr-review
    "create_check_run": (N, N, N, Y),
    "update_check_run": (N, N, N, Y),
    "list_check_runs": (Y, Y, Y, Y),
    "get_combined_status": (Y, Y, Y, Y),
    "delete_branch": (N, N, N, Y),
    "protect_branch": (N, N, N, Y),
    "list_branches": (Y, Y, Y, Y),
    "get_repository": (Y, Y, Y, Y),
    "get_branch": (Y, Y, Y, Y),
    "read_file": (Y, Y, Y, Y),
    "list_issues": (Y, Y, Y, Y),
    "list_directory": (Y, Y, Y, Y),
    "collaborator_permission": (Y, Y, Y, Y),
    "get_app": (Y, Y, Y, Y),
    "list_deliveries": (N, N, N, Y),
    "redeliver": (N, N, N, Y),
    "list_installation_repositories": (Y, Y, Y, Y),
}


def test_the_role_table_covers_every_operation() -> None:
    assert set(ALLOWED_BY_ROLE) == public_operations(GitHubClient) | public_operations(GitHubAppClient)


def _http(fake: FakeGitHub) -> GitHubHttp:
    return GitHubHttp(transport=fake.transport(), sleep=lambda s: None)


def _client(fake: FakeGitHub, caller: Caller) -> GitHubClient:
    return GitHubClient(
        http=_http(fake), token=lambda: "ghs_1", installation_id=1, repo="octo/app", caller=caller
    )


def _app_client(fake: FakeGitHub, caller: Caller) -> GitHubAppClient:
    private, _ = app_private_key()
    app = GitHubApp(app_id=42, http=_http(fake), private_key=lambda: private)
    return GitHubAppClient(http=app.http, jwt=app.jwt, app_id=42, caller=caller)


def _cases() -> list[tuple[Caller, ClientCall | AppCall, bool]]:
    calls: list[ClientCall | AppCall] = [case for case in CLIENT_CALLS if not case.files]
    calls += APP_CALLS
    return [
        (caller, case, ALLOWED_BY_ROLE[case.operation][i])
        for case in calls
        for i, caller in enumerate(CALLERS)
    ]


@pytest.mark.parametrize(
    ("caller", "case", "allowed"),
    _cases(),
    ids=[f"{caller.kind}-{case.id}-{'allowed' if ok else 'denied'}" for caller, case, ok in _cases()],
)
def test_role_by_operation(caller: Caller, case: ClientCall | AppCall, allowed: bool) -> None:
    fake = FakeGitHub()

    def call() -> object:
        if isinstance(case, ClientCall):
            return case.call(_client(fake, caller))
        return case.call(_app_client(fake, caller))

    if allowed:
        call()
        assert fake.requests, f"{case.id} as {caller.name} sent nothing"
    else:
        with pytest.raises(PermissionDeniedError, match=rf"^{caller.name} \({caller.kind} role\) may not "):
            call()
        assert fake.requests == [], "a refused call must not reach GitHub"


def _pull_from(ref: str, repo: str) -> httpx.Response:
    return httpx.Response(200, json={"number": 101, "head": {"ref": ref, "repo": {"full_name": repo}}})


@pytest.mark.parametrize(
    ("caller", "call", "answers", "reason", "sent"),
    [
        (
            DEV,
            lambda c: c.create_pull(title="x", head="feat/issue-12", base="main", body="x"),
            [],
            "may not open_pr: branch feat/issue-12 is not its own (feat/issue-38)",
            [],
        ),
        (
            Caller(DEV.kind, "dev-9", "feat-dev"),
            lambda c: c.create_pull(title="x", head="feat/issue-9", base="main", body="x"),
            [],
            "it has no branch of its own",
            [],
        ),
        (
            DEV,
            lambda c: c.update_pull_branch(101, head="feat/issue-12"),
            [],
            "branch feat/issue-12 is not its own",
            [],
        ),
        (
            DEV,
            lambda c: c.update_pull_branch(101, head="feat/issue-38"),
            [_pull_from("feat/issue-12", "octo/app")],
            "branch feat/issue-12 is not its own (feat/issue-38)",
            ["GET /repos/octo/app/pulls/101"],
        ),
        (
            DEV,
            lambda c: c.update_pull_branch(101, head="feat/issue-38"),
            [_pull_from("feat/issue-38", "fork/app")],
            "branch fork/app:feat/issue-38 is not its own",
            ["GET /repos/octo/app/pulls/101"],
        ),
        (
            REVIEW,
            lambda c: c.create_status("a" * 40, state="success", context="squadron/security-review"),
            [],
            "status squadron/security-review is not its own (squadron/pr-review)",
            [],
        ),
        (
            REVIEW,
            lambda c: c.create_status("a" * 40, state="success", context="ci/build"),
            [],
            "status ci/build is not its own",
            [],
        ),
        (
            FRAMEWORK,
            lambda c: c.merge_pull(101, consent=MergeConsent(102, True, "approved")),
            [],
            "no approval-flow decision for PR #101",
            [],
        ),
        (
            FRAMEWORK,
            lambda c: c.merge_pull(
                101, consent=MergeConsent(101, False, "security-review requested changes")
            ),
            [],
            "the approval flow says no: security-review requested changes",
            [],
        ),
        (
            PM,
            lambda c: c.create_review(101, "APPROVE", "lgtm"),
            [],
            "pm (pm role) may not approve: the pm role never does",
            [],
        ),
        (
            DEV,
            lambda c: c.create_review(101, "COMMENT", "a thought"),
            [],
            "dev-38 (dev role) may not review",
            [],
        ),
    ],
    ids=[
        "dev opens a PR from another branch",
        "dev without a branch",
        "dev names another branch",
        "dev's claim does not match the PR",
        "PR from a fork with the same branch name",
        "reviewer posts another reviewer's status",
        "reviewer posts a CI status",
        "merge with consent for another PR",
        "merge the flow refuses",
        "pm approves",
        "dev comment-reviews",
    ],
)
def test_targeted_refusals(
    caller: Caller,
    call: Callable[[GitHubClient], object],
    answers: list[httpx.Response],
    reason: str,
    sent: list[str],
) -> None:
    fake = FakeGitHub(script=list(answers))
    with pytest.raises(PermissionDeniedError) as refused:
        call(_client(fake, caller))
    assert reason in str(refused.value)
    assert [f"{r.method} {r.url.path}" for r in fake.requests] == sent


def test_a_dev_updates_its_own_pull_request_after_checking_its_head() -> None:
    fake = FakeGitHub()
    _client(fake, DEV).update_pull_branch(101, head="feat/issue-38")
    assert [f"{r.method} {r.url.path}" for r in fake.requests] == [
        "GET /repos/octo/app/pulls/101",
        "PUT /repos/octo/app/pulls/101/update-branch",
    ]


WRITES: dict[str, tuple[Caller, Callable[[GitHubClient, str], object]]] = {
    "create_issue": (PM, lambda c, body: c.create_issue("Title", body)),
    "update_issue": (PM, lambda c, body: c.update_issue(38, body=body)),
    "comment": (DEV, lambda c, body: c.comment(38, body)),
    "create_pull": (
        DEV,
        lambda c, body: c.create_pull(title="t", head="feat/issue-38", base="main", body=body),
    ),
    "create_review": (REVIEW, lambda c, body: c.create_review(101, "APPROVE", body)),
}
BODIES = [
    ("Done.", "{tag} Done."),
    ("{tag} Done.", "{tag} Done."),
    ("  [squadron:framework] Done.", "{tag} Done."),
    ("Done.\n\n[squadron:pm] quoted later", "{tag} Done.\n\n[squadron:pm] quoted later"),
]


@pytest.mark.parametrize(
    ("operation", "body", "expected"),
    [(operation, body, expected) for operation in WRITES for body, expected in BODIES],
    ids=[
        f"{operation}-{label}"
        for operation in WRITES
        for label in ("untagged", "own tag once", "foreign tag replaced", "later tag kept")
    ],
)
def test_everything_written_carries_the_role_tag(operation: str, body: str, expected: str) -> None:
    caller, write = WRITES[operation]
    fake = FakeGitHub()
    write(_client(fake, caller), body.format(tag=caller.tag))
    (request,) = fake.requests
    assert json.loads(request.content)["body"] == expected.format(tag=caller.tag)


def test_the_large_file_case_is_readable(monkeypatch: pytest.MonkeyPatch) -> None:
    (case,) = [case for case in CLIENT_CALLS if case.files]
    for path, text in case.files.items():
        monkeypatch.setitem(github_fake.FILES, path, text)
    fake = FakeGitHub()
    assert case.call(_client(fake, PM)) == next(iter(case.files.values())).encode()
    assert [r.url.path.split("/")[4] for r in fake.requests] == ["contents", "git"]
