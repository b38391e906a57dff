"""What an agent reads is bounded: anyone can comment without end, and every word lands in
the model's context (and the gateway's answer, which a Lambda caps at 6 MB)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from squadron.agent.tools import ISSUE_BUDGET, issue_text
from squadron.domain.agents import INBOX_BODY_CHARS, INBOX_BODY_CUT, INBOX_PAGE_ITEMS, InboxItem, inbox_page
from squadron.domain.repo_config.limits import MAX_LISTED

ISSUE = {"state": "open", "title": "Export API", "body": "Add an export endpoint."}


def comment(i: int, size: int = 20) -> dict[str, Any]:
    return {"user": {"login": f"user{i}"}, "body": f"c{i}:" + "x" * size}


CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], list[str], list[str]]] = [
    # name, issue, comments, in the text, not in the text
    (
        "a small issue is shown whole",
        ISSUE,
        [comment(1), comment(2)],
        ["--- user1: c1:", "--- user2: c2:"],
        ["not shown"],
    ),
    (
        "a huge body is cut at a third of the budget",
        {**ISSUE, "body": "B" * (ISSUE_BUDGET * 2)},
        [comment(1)],
        ["(the issue's body is cut here)", "--- user1: c1:"],
        ["B" * (ISSUE_BUDGET // 3 + 1)],
    ),
    (
        "endless comments: the newest are kept and the rest counted",
        ISSUE,
        [comment(i, 1000) for i in range(500)],
        ["--- user499: c499:", "older comments not shown"],
        ["--- user0: c0:"],
    ),
    (
        "one giant newest comment is cut, not dropped",
        ISSUE,
        [comment(1), comment(2, ISSUE_BUDGET * 2)],
        ["--- user2: c2:", "(this comment is cut here)", "(1 older comment not shown)"],
        ["--- user1: c1:"],
    ),
    (
        "a list GitHub cut says the newest were not read",
        ISSUE,
        [comment(i, 0) for i in range(MAX_LISTED)],
        [f"only the first {MAX_LISTED} comments were read"],
        [],
    ),
    ("a comment without a user is anyone's", ISSUE, [{"user": None, "body": "hi"}], ["--- ?: hi"], []),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_read_issue_stays_within_its_budget(
    case: tuple[str, dict[str, Any], list[dict[str, Any]], list[str], list[str]],
) -> None:
    _, issue, comments, present, absent = case
    text = issue_text(38, issue, comments)
    assert text.startswith("#38 [open] Export API\n")
    assert len(text) <= ISSUE_BUDGET + 500  # the notes it adds, no more
    for part in present:
        assert part in text
    for part in absent:
        assert part not in text


def test_comments_keep_their_order() -> None:
    text = issue_text(38, ISSUE, [comment(i) for i in range(5)])
    assert [text.index(f"--- user{i}:") for i in range(5)] == sorted(
        text.index(f"--- user{i}:") for i in range(5)
    )


def item(i: int, body: str = "") -> InboxItem:
    return InboxItem(
        agent_id="1-38-feat-dev",
        delivery_id=f"d{i}",
        received_at=datetime(2026, 11, 24, tzinfo=UTC),
        kind="comment",
        summary=f"comment {i}",
        body=body,
    )


PAGES = [
    ("empty", [], 0, 0),
    ("a few", [item(i) for i in range(3)], 3, 0),
    ("exactly a page", [item(i) for i in range(INBOX_PAGE_ITEMS)], INBOX_PAGE_ITEMS, 0),
    ("a flood", [item(i) for i in range(1000)], INBOX_PAGE_ITEMS, 1000 - INBOX_PAGE_ITEMS),
]


@pytest.mark.parametrize(("name", "items", "given", "more"), PAGES, ids=[p[0] for p in PAGES])
def test_an_inbox_is_handed_over_a_page_at_a_time(
    name: str, items: list[InboxItem], given: int, more: int
) -> None:
    page, waiting = inbox_page(items)
    assert (len(page), waiting) == (given, more)
    assert [i.delivery_id for i in page] == [i.delivery_id for i in items[:given]]  # oldest first


def test_a_long_body_is_cut_and_the_item_still_acknowledges_itself() -> None:
    long = item(1, "y" * 65_536)
    (cut,) = inbox_page([long])[0]
    assert cut.body == "y" * INBOX_BODY_CHARS + INBOX_BODY_CUT
    # what identifies it (the registry deletes by these) is untouched
    assert (cut.agent_id, cut.delivery_id, cut.received_at, cut.kind) == (
        long.agent_id,
        long.delivery_id,
        long.received_at,
        long.kind,
    )
