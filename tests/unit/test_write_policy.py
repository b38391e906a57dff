"""The write policy's rules, as tables: what an agent's write may say and touch."""

from __future__ import annotations

from typing import Any

import pytest

from squadron.domain.permissions import CallerKind
from squadron.domain.repo_config.models import ApprovalFlowsFile
from squadron.domain.write_policy import (
    assignees_refusal,
    base_refusal,
    blocker_refusal,
    bound_commit,
    labels_refusal,
    subject_refusal,
)

TAXONOMY = ("bug", "feature", "needs-human")
PM, DEV, REVIEW = CallerKind.PM, CallerKind.DEV, CallerKind.REVIEW

LABELS: list[tuple[str, CallerKind, str, list[str], bool, str | None]] = [
    # (case, kind, role, labels, opening an issue, refusal's words: None when allowed)
    ("the PM labels from the taxonomy", PM, "pm", ["bug"], False, None),
    ("the PM labels outside it", PM, "pm", ["bug", "lgtm"], False, "lgtm is not in"),
    ("two outside it", PM, "pm", ["lgtm", "ship"], True, "lgtm, ship are not in"),
    ("a dev opens an issue without labels", DEV, "feat-dev", [], True, None),
    ("a dev opens an issue with a label", DEV, "feat-dev", ["bug"], True, "the dev role sets no labels"),
    ("a reviewer labels", REVIEW, "pr-review", ["bug"], False, "the review role sets no labels"),
    ("the retrospective labels its action item", DEV, "retrospective", ["retrospective-action"], True, None),
    (
        "the retrospective labels an issue it did not open",
        DEV,
        "retrospective",
        ["retrospective-action"],
        False,
        "the dev role sets no labels",
    ),
    (
        "the retrospective adds another label",
        DEV,
        "retrospective",
        ["retrospective-action", "bug"],
        True,
        "dev",
    ),
    (
        "another dev role uses the retrospective's label",
        DEV,
        "feat-dev",
        ["retrospective-action"],
        True,
        "dev",
    ),
]


@pytest.mark.parametrize(
    ("kind", "role", "labels", "opening", "refusal"), [c[1:] for c in LABELS], ids=[c[0] for c in LABELS]
)
def test_labels(kind: CallerKind, role: str, labels: list[str], opening: bool, refusal: str | None) -> None:
    said = labels_refusal(kind, labels, TAXONOMY, role=role, opening=opening)
    assert said is None if refusal is None else (said is not None and refusal in said)


FLOWS = ApprovalFlowsFile.model_validate({"version": 1, "branch_rules": [{"pattern": "release/*"}]})
BASES: list[tuple[str, str, str, str | None]] = [
    # (case, base, head, refusal's words)
    ("the default branch", "main", "feat/issue-38", None),
    ("a branch a flow's rule names", "release/2.0", "feat/issue-38", None),
    ("another agent's branch", "feat/issue-39", "feat/issue-38", "allowed: main, release/*"),
    ("a branch nothing governs", "scratch", "feat/issue-38", "is not a branch"),
    ("its own head", "feat/issue-38", "feat/issue-38", "its own head"),
    ("a pattern's look-alike", "release", "feat/issue-38", "is not a branch"),
]


@pytest.mark.parametrize(("base", "head", "refusal"), [c[1:] for c in BASES], ids=[c[0] for c in BASES])
def test_bases(base: str, head: str, refusal: str | None) -> None:
    said = base_refusal(base, head, default_branch="main", flows=FLOWS)
    assert said is None if refusal is None else (said is not None and refusal in said)


HEAD, OLD = "c" * 40, "d" * 40
REVIEWS: list[tuple[str, str, str | None, str | None, str, tuple[str | None, str | None]]] = [
    # (case, event, verdict, commit asked, head now, (commit posted on, refusal's words))
    ("an approval without a commit gets the head", "APPROVE", None, None, HEAD, (HEAD, None)),
    ("an approval of the head", "APPROVE", None, HEAD, HEAD, (HEAD, None)),
    ("an approval of an old commit", "APPROVE", None, OLD, HEAD, (None, "head is now")),
    ("a comment approving an old commit", "COMMENT", "APPROVE", OLD, HEAD, (None, "head is now")),
    ("a comment approving binds too", "COMMENT", "APPROVE", None, HEAD, (HEAD, None)),
    ("changes asked on an old commit stay there", "REQUEST_CHANGES", None, OLD, HEAD, (OLD, None)),
    ("a plain comment", "COMMENT", None, None, HEAD, (None, None)),
    ("no head at all", "APPROVE", None, None, "", (None, "no head")),
]


@pytest.mark.parametrize(
    ("event", "verdict", "commit", "head", "expected"), [c[1:] for c in REVIEWS], ids=[c[0] for c in REVIEWS]
)
def test_an_approval_binds_to_the_head(
    event: str, verdict: str | None, commit: str | None, head: str, expected: tuple[str | None, str | None]
) -> None:
    posted, said = bound_commit(101, event, verdict, commit, head)
    assert posted == expected[0]
    assert said is None if expected[1] is None else (said is not None and expected[1] in said)


BLOCKERS: list[tuple[str, dict[str, Any] | None, str | None]] = [
    ("an open issue", {"number": 7, "state": "open"}, None),
    ("none", None, "#7 does not exist"),
    ("a closed issue", {"number": 7, "state": "closed"}, "#7 is closed"),
    ("a pull request", {"number": 7, "state": "open", "pull_request": {}}, "#7 is a pull request"),
    ("no state", {"number": 7}, "#7 is not open"),
]


@pytest.mark.parametrize(("issue", "refusal"), [c[1:] for c in BLOCKERS], ids=[c[0] for c in BLOCKERS])
def test_blockers(issue: dict[str, Any] | None, refusal: str | None) -> None:
    said = blocker_refusal(7, issue)
    assert said is None if refusal is None else (said is not None and refusal in said)


SUBJECTS: list[tuple[str, CallerKind, str, int, str | None]] = [
    # (case, kind, action, number; the agent works on #38 and its PR #101; refusal's words)
    ("a dev comments on its issue", DEV, "comment", 38, None),
    ("a dev comments on its PR", DEV, "comment", 101, None),
    ("a dev comments elsewhere", DEV, "comment", 12, "its own issue or pull request only"),
    ("the PM comments anywhere", PM, "comment", 12, None),
    ("a reviewer reviews its PR", REVIEW, "create_review", 101, None),
    ("a reviewer reviews another", REVIEW, "create_review", 7, "its own pull request only"),
    ("labels are the labels rule's", PM, "add_labels", 12, None),
]


@pytest.mark.parametrize(
    ("kind", "action", "number", "refusal"), [c[1:] for c in SUBJECTS], ids=[c[0] for c in SUBJECTS]
)
def test_subjects(kind: CallerKind, action: str, number: int, refusal: str | None) -> None:
    said = subject_refusal(kind, "dev-38", action, number, issue=38, pr=101)
    assert said is None if refusal is None else (said is not None and refusal in said)


def test_a_dev_without_a_pull_request_comments_on_its_issue_only() -> None:
    assert subject_refusal(DEV, "dev-38", "comment", 0, issue=38, pr=None) is not None


@pytest.mark.parametrize(
    ("assignees", "allowed"),
    [(["squadron[bot]"], True), (["octo"], False), (["squadron[bot]", "octo"], False)],
)
def test_only_the_app_is_assigned(assignees: list[str], allowed: bool) -> None:
    assert (assignees_refusal(assignees, "squadron[bot]") is None) is allowed
