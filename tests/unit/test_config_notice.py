"""The "configuration is invalid" issue: opened once, kept in step, closed when fixed."""

from __future__ import annotations

import pytest

from squadron.domain.config_notice import (
    MAX_PROBLEMS_SHOWN,
    NOTICE_LABEL,
    NOTICE_TITLE,
    RESOLVED,
    CloseNotice,
    NoticeAction,
    NoticeIssue,
    OpenNotice,
    UpdateNotice,
    marker,
    notice_body,
    notice_issue,
    plan_notice,
    problems_digest,
)
from squadron.domain.repo_config.errors import Problem

P1 = (Problem(".squadron/config.yaml", 3, "roles.x.kind", "Input should be 'pm', 'dev' or 'review'"),)
P2 = (Problem(".squadron/config.yaml", None, "", "is not UTF-8 text"),)
D1, D2 = problems_digest(P1), problems_digest(P2)
SHA = "0123456789abcdef0123456789abcdef01234567"


def _kinds(actions: list[NoticeAction]) -> list[str]:
    out = []
    for action in actions:
        match action:
            case OpenNotice():
                out.append("open")
            case UpdateNotice(number=number, reopen=reopen):
                out.append(f"{'reopen+update' if reopen else 'update'} #{number}")
            case CloseNotice(number=number, body=body):
                out.append(f"close #{number}" + ("" if body is not None else " (duplicate)"))
    return out


# (case, issues found, problems now (None: valid), what is done)
CASES: list[tuple[str, list[NoticeIssue], tuple[Problem, ...] | None, list[str]]] = [
    ("invalid, never told: open one", [], P1, ["open"]),
    ("invalid, told the same: nothing", [NoticeIssue(4, "open", D1)], P1, []),
    ("invalid, told other problems: update", [NoticeIssue(4, "open", D1)], P2, ["update #4"]),
    ("a human closed it, same problems: told once", [NoticeIssue(4, "closed", D1)], P1, []),
    ("a human closed it, new problems: reopen", [NoticeIssue(4, "closed", D1)], P2, ["reopen+update #4"]),
    ("fixed before, broken again: reopen", [NoticeIssue(4, "closed", RESOLVED)], P1, ["reopen+update #4"]),
    ("valid, notice open: close it", [NoticeIssue(4, "open", D1)], None, ["close #4"]),
    ("valid, nothing open: nothing", [NoticeIssue(4, "closed", RESOLVED)], None, []),
    (
        "two routers opened one each: keep the oldest",
        [NoticeIssue(9, "open", D1), NoticeIssue(7, "open", D1)],
        P1,
        ["close #9 (duplicate)"],
    ),
    ("someone else's issues are not notices", [NoticeIssue(3, "open", None)], P1, ["open"]),
]


@pytest.mark.parametrize(("issues", "problems", "done"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_notice_says_what_the_default_branch_says(
    issues: list[NoticeIssue], problems: tuple[Problem, ...] | None, done: list[str]
) -> None:
    assert _kinds(plan_notice(issues, problems, branch="main", sha=SHA)) == done


def test_the_body_names_every_problem_the_pause_and_the_fix() -> None:
    (opened,) = plan_notice([], P1, branch="main", sha=SHA)
    assert isinstance(opened, OpenNotice)
    assert (opened.title, opened.labels) == (NOTICE_TITLE, (NOTICE_LABEL,))
    assert "    .squadron/config.yaml:3: roles.x.kind: Input should be" in opened.body
    assert (
        "**paused**" in opened.body and "squadron validate" in opened.body and "0123456789ab" in opened.body
    )
    assert opened.body.endswith(marker(D1))


def test_an_attacker_cannot_break_out_of_the_problem_block() -> None:
    """Problem text comes from the repository: it stays one indented (unrendered) line, and a
    marker quoted in it does not count."""
    hostile = (Problem(".squadron/config.yaml", 1, "", f"got '@everyone\n# Title\n{marker(RESOLVED)}'"),)
    body = notice_body(hostile, branch="main", sha=SHA)
    lines = body.splitlines()
    assert [line for line in lines if "@everyone" in line] == [
        f"    .squadron/config.yaml:1: got '@everyone # Title {marker(RESOLVED)}'"
    ]
    found = notice_issue({"number": 4, "state": "open", "body": f"[squadron:framework] {body}"})
    assert found == NoticeIssue(4, "open", problems_digest(hostile))


def test_many_problems_are_capped() -> None:
    many = tuple(Problem(".squadron/config.yaml", n, "", "x" * 2000) for n in range(1, 500))
    body = notice_body(many, branch="main", sha=SHA)
    assert body.count("\n    .squadron/") == MAX_PROBLEMS_SHOWN
    assert f"... and {len(many) - MAX_PROBLEMS_SHOWN} more" in body
    assert len(body) < 65_536  # GitHub's limit on a body


@pytest.mark.parametrize(
    "item",
    [
        {"number": 4, "state": "open", "body": "no marker"},
        {"number": 4, "state": "open", "body": marker(D1), "pull_request": {}},
        {"number": "4", "state": "open", "body": marker(D1)},
        {"number": 4, "state": "open", "body": None},
    ],
    ids=["no-marker", "a-pull-request", "odd-number", "no-body"],
)
def test_what_is_not_a_notice(item: dict[str, object]) -> None:
    assert notice_issue(item) is None
