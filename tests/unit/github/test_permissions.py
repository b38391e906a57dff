"""The permission table as role by action, and the targeted checks (own branch, own status, merge)."""

from __future__ import annotations

import pytest

from squadron.domain.permissions import (
    ALLOWED,
    Action,
    Caller,
    CallerKind,
    MergeConsent,
    PermissionDeniedError,
    check,
    tagged,
)

DEV = Caller(CallerKind.DEV, "feat-dev-38", "feat-dev", "feat/issue-38")
PM = Caller(CallerKind.PM, "pm", "pm")
REVIEW = Caller(CallerKind.REVIEW, "pr-review-101", "pr-review")
FRAMEWORK = Caller.framework()

TABLE = {
    # action:              pm     dev    review framework
    Action.READ: (True, True, True, True),
    Action.CREATE_ISSUE: (True, True, False, True),
    Action.UPDATE_ISSUE: (True, False, False, True),
    Action.CLOSE_ISSUE: (True, False, False, True),
    Action.REOPEN_ISSUE: (True, False, False, True),
    Action.LABEL: (True, False, False, True),
    Action.ASSIGN: (True, False, False, True),
    Action.COMMENT: (True, True, True, True),
    Action.PUSH: (False, True, False, True),
    Action.OPEN_PR: (False, True, False, True),
    Action.UPDATE_PR_BRANCH: (False, True, False, True),
    Action.REVIEW: (False, False, True, True),
    Action.APPROVE: (False, False, True, True),
    Action.REQUEST_CHANGES: (False, False, True, True),
    Action.POST_STATUS: (False, False, True, True),
    Action.CHECK_RUN: (False, False, False, True),
    Action.MERGE: (False, False, False, True),
    Action.ENQUEUE_MERGE: (False, False, False, True),
    Action.DEQUEUE_MERGE: (False, False, False, True),
    Action.DELETE_BRANCH: (False, False, False, True),
    Action.PROTECT_BRANCH: (False, False, False, True),
    Action.APP_ADMIN: (False, False, False, True),
    Action.REGISTER_BLOCKER: (True, True, False, True),
    Action.PROPOSE_CHANGE_SET: (True, False, False, True),
}
CALLERS = (PM, DEV, REVIEW, FRAMEWORK)


def test_the_table_covers_every_action() -> None:
    assert set(TABLE) == set(Action)


@pytest.mark.parametrize(
    ("caller", "action", "allowed"),
    [(caller, action, row[i]) for action, row in TABLE.items() for i, caller in enumerate(CALLERS)],
    ids=[f"{caller.kind}-{action}" for action in TABLE for caller in CALLERS],
)
def test_role_by_action(caller: Caller, action: Action, allowed: bool) -> None:
    assert (action in ALLOWED[caller.kind]) is allowed
    target = {
        Action.PUSH: {"branch": caller.branch},
        Action.OPEN_PR: {"branch": caller.branch},
        Action.UPDATE_PR_BRANCH: {"branch": caller.branch},
        Action.POST_STATUS: {"status_context": f"squadron/{caller.role}"},
        Action.MERGE: {"pr_number": 101, "consent": MergeConsent(101, True, "all reviews approved")},
        Action.ENQUEUE_MERGE: {"pr_number": 101, "consent": MergeConsent(101, True, "all reviews approved")},
    }.get(action, {})
    if allowed:
        check(caller, action, **target)  # type: ignore[arg-type]
    else:
        with pytest.raises(
            PermissionDeniedError, match=f"{caller.name} \\({caller.kind} role\\) may not {action}"
        ):
            check(caller, action, **target)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("caller", "action", "target", "reason"),
    [
        (
            DEV,
            Action.PUSH,
            {"branch": "feat/issue-12"},
            "branch feat/issue-12 is not its own (feat/issue-38)",
        ),
        (DEV, Action.OPEN_PR, {"branch": "main"}, "branch main is not its own"),
        (
            Caller(CallerKind.DEV, "feat-dev-9", "feat-dev"),
            Action.PUSH,
            {"branch": "x"},
            "no branch of its own",
        ),
        (REVIEW, Action.POST_STATUS, {"status_context": "squadron/security-review"}, "is not its own"),
        (REVIEW, Action.POST_STATUS, {"status_context": "ci"}, "status ci is not its own"),
        (FRAMEWORK, Action.MERGE, {"pr_number": 101}, "no approval-flow decision for PR #101"),
        (
            FRAMEWORK,
            Action.MERGE,
            {"pr_number": 102, "consent": MergeConsent(101, True, "ok")},
            "for PR #102",
        ),
        (
            FRAMEWORK,
            Action.MERGE,
            {"pr_number": 101, "consent": MergeConsent(101, False, "ci red")},
            "ci red",
        ),
    ],
    ids=[
        "push elsewhere",
        "PR from main",
        "dev without branch",
        "other's status",
        "CI status",
        "merge without flow",
        "consent for another PR",
        "flow says no",
    ],
)
def test_targeted_checks(caller: Caller, action: Action, target: dict[str, object], reason: str) -> None:
    with pytest.raises(PermissionDeniedError, match=reason.replace("(", "\\(").replace(")", "\\)")):
        check(caller, action, **target)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("Looks good", "[squadron:feat-dev-38] Looks good"),
        ("[squadron:feat-dev-38] already tagged", "[squadron:feat-dev-38] already tagged"),
        ("[squadron:pm] pretending", "[squadron:feat-dev-38] pretending"),
        ("", "[squadron:feat-dev-38] "),
    ],
    ids=["untagged", "own tag kept once", "foreign tag replaced", "empty"],
)
def test_role_tags(body: str, expected: str) -> None:
    assert tagged(DEV, body) == expected
