"""A retrospective's figures from a seeded history, exactly; what hostile text in events can do to
the rendered section; and the follow-up of the last retrospective's action items.

Regenerate the golden file after an intended change with ``UPDATE_GOLDEN=1``.
"""

from __future__ import annotations

import itertools
import os
import random
import re
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Literal

import pytest
from markdown_it import MarkdownIt

from squadron.domain.breakers import Limit
from squadron.domain.cost import ModelPrice, PriceTable
from squadron.domain.domain_events import (
    AgentEscalated,
    AgentStarted,
    BreakerTripped,
    DomainEvent,
    EventData,
    IssueReopened,
    PullRequestClosed,
    PullRequestMerged,
    PullRequestOpened,
    Repository,
    ReviewSubmitted,
    UsageRecorded,
    event_id,
    make_event,
)
from squadron.domain.history import PeriodError
from squadron.domain.retrospective import ActionItem, follow_up
from squadron.domain.retrospective_figures import (
    NO_REASON,
    IssueCost,
    LimitCount,
    MergeTime,
    ReasonCount,
    RetroFigures,
    RetrospectiveInputError,
    ReviewRounds,
    compute_figures,
)
from squadron.domain.retrospective_report import render_figures, text_cell
from squadron.domain.usage import ModelTokens
from tests.support.events import T0
from tests.support.world import World

GOLDEN = Path(__file__).parent / "golden" / "retrospective.md"
REPO = Repository(id=1, full_name="octo/shop")
START = datetime(2026, 11, 16, tzinfo=UTC)  # a Monday
END = START + timedelta(days=7)
PRICES = PriceTable(
    models={
        "model-a": ModelPrice(input_usd_per_million=2.0, output_usd_per_million=8.0),
        "model-b*": ModelPrice(input_usd_per_million=1.0, output_usd_per_million=4.0),
    },
    task_usd_per_hour=0.36,
)
_ids = itertools.count()


def at(day: int, hour: int = 0, minute: int = 0) -> datetime:
    """A time of November 2026 (the period is the 16th to the 23rd)."""
    return datetime(2026, 11, day, hour, minute, tzinfo=UTC)


def ev(
    data: EventData,
    when: datetime,
    *,
    issue: int | None = None,
    agent: str | None = None,
    repository: Repository = REPO,
) -> DomainEvent:
    return make_event(
        data,
        event_id=event_id(f"delivery-{next(_ids)}", 0),
        at=when,
        repository=repository,
        correlation_id="delivery",
        issue=issue,
        agent=agent,
    )


def started(issue: int, when: datetime, kind: Literal["dev", "review"] = "dev") -> DomainEvent:
    role = "feat-dev" if kind == "dev" else "reviewer"
    return ev(AgentStarted(role=role, generation=1, kind=kind), when, issue=issue, agent=f"1-{issue}-{role}")


def opened(pr: int, issue: int, when: datetime) -> DomainEvent:
    return ev(
        PullRequestOpened(pr_number=pr, branch=f"feat/issue-{issue}"), when, issue=issue, agent=dev(issue)
    )


def merged(pr: int, issue: int | None, when: datetime, *, agent: str | None = None) -> DomainEvent:
    return ev(PullRequestMerged(pr_number=pr, merged_by="ada"), when, issue=issue, agent=agent)


def closed(pr: int, issue: int, when: datetime) -> DomainEvent:
    return ev(PullRequestClosed(pr_number=pr, closed_by="ada"), when, issue=issue, agent=dev(issue))


def review(pr: int, review_id: int, state: str, when: datetime, summary: str | None = None) -> DomainEvent:
    data = ReviewSubmitted(pr_number=pr, reviewer="bob", state=state, review_id=review_id, summary=summary)
    return ev(data, when, issue=None)


def tripped(limit: Limit, when: datetime, issue: int = 40) -> DomainEvent:
    return ev(BreakerTripped(limit=limit, reason="over"), when, issue=issue, agent=dev(issue))


def escalated(reason: str, when: datetime, issue: int = 40) -> DomainEvent:
    data = AgentEscalated(role="feat-dev", generation=1, kind="dev", reason=reason)
    return ev(data, when, issue=issue, agent=dev(issue))


def used(issue: int | None, when: datetime, seconds: int, *tokens: tuple[str, int, int]) -> DomainEvent:
    data = UsageRecorded(
        outcome="idle",
        tool_calls=1,
        turns=1,
        iterations=0,
        active_seconds=seconds,
        tokens=tuple(ModelTokens(model=m, input_tokens=i, output_tokens=o) for m, i, o in tokens),
    )
    return ev(data, when, issue=issue, agent=dev(issue) if issue is not None else "1-pm")


def dev(issue: int) -> str:
    return f"1-{issue}-feat-dev"


# --- a seeded week -------------------------------------------------------------------------------

#: Before the period: context only (who started when, which PR is whose, changes asked before).
BEFORE = [
    started(38, at(10, 9)),
    opened(101, 38, at(12, 9)),
    review(101, 9001, "changes_requested", at(13, 9), "Tests fail"),  # a round of #101, not a reason
    tripped(Limit.TURNS, at(14, 9)),
    escalated("CI failed 9 times, over on_ci_failure.max_retries 3", at(14, 10)),
    used(38, at(15, 23, 59), 3600, ("model-a", 10**6, 0)),
    ev(IssueReopened(reopened_by="ada"), at(15, 12), issue=38, agent=dev(38)),
]
_REVIEW_9002 = review(101, 9002, "changes_requested", at(16, 10), "Tests fail")
#: In the period [Mon 16 00:00, Mon 23 00:00).
WEEK = [
    started(40, at(16, 8)),
    started(101, at(16, 8), kind="review"),  # a reviewer on #101: not an issue's dev agent
    opened(102, 40, at(16, 9)),
    _REVIEW_9002,
    _REVIEW_9002,  # the same event twice (a retried stream batch): once
    review(101, 9002, "changes_requested", at(16, 12), "Tests fail"),  # the same review, reported again
    merged(101, 38, at(17, 9), agent=dev(38)),
    review(102, 9003, "changes_requested", at(17, 10), "Missing docs"),
    review(102, 9004, "approved", at(17, 11), "LGTM"),
    merged(102, 40, at(18, 8), agent=dev(40)),
    started(41, at(18, 9)),
    opened(103, 41, at(18, 10)),
    review(103, 9005, "changes_requested", at(19, 9), "Tests fail"),
    closed(103, 41, at(19, 12)),
    started(42, at(19, 6)),
    opened(104, 42, at(19, 7)),
    closed(104, 42, at(20, 9)),  # closed, reopened, then merged: merged only
    merged(104, 42, at(21, 18), agent=dev(42)),
    merged(105, 43, at(20, 9), agent=dev(43)),  # an agent's PR whose start is not in the events
    merged(200, None, at(20, 10)),  # a person's PR
    review(200, 9006, "changes_requested", at(20, 8), "Style"),  # not an agent's PR: no reason counted
    tripped(Limit.TURNS, at(18, 12)),
    tripped(Limit.TURNS, at(19, 12), issue=41),
    tripped(Limit.TOOL_CALLS, at(20, 12), issue=42),
    escalated("CI failed 4 times, over on_ci_failure.max_retries 3", at(18, 13)),
    escalated("CI failed 5 times, over on_ci_failure.max_retries 3", at(19, 13), issue=41),
    escalated("it asked for humans", at(20, 13), issue=42),
    ev(IssueReopened(reopened_by="ada"), at(22, 9), issue=38, agent=dev(38)),
    ev(IssueReopened(reopened_by="ada"), at(22, 10), issue=77),  # no agent worked on #77
    used(38, at(16, 11), 3600, ("model-a", 1_000_000, 250_000)),
    used(101, at(17, 8), 1800, ("model-b-mini", 500_000, 0)),  # #101's reviewer: counts for #38
    used(None, at(17, 12), 600, ("model-unknown", 1000, 10)),  # the PM
    used(40, at(18, 7), 7200, ("model-a", 250_000, 125_000)),
]
#: At or after the end: ignored.
AFTER = [
    started(44, END),
    opened(106, 44, END),
    used(40, END, 3600, ("model-a", 10**6, 10**6)),
    merged(103, 41, END + timedelta(hours=1), agent=dev(41)),  # rejected this week whatever comes next
]
SEEDED = [*BEFORE, *WEEK, *AFTER]

EXPECTED = RetroFigures(
    start=START,
    end=END,
    events=len({e.id for e in WEEK}),
    opened=(102, 103, 104),
    merged=(101, 102, 104, 105),
    rejected=(103,),
    review_rounds=(
        ReviewRounds(pr_number=101, rounds=3),  # 9001 (before the period) and 9002
        ReviewRounds(pr_number=102, rounds=2),
        ReviewRounds(pr_number=104, rounds=1),
        ReviewRounds(pr_number=105, rounds=1),
    ),
    rounds_mean=1.75,
    rounds_max=3,
    rejection_reasons=(
        ReasonCount(reason="Tests fail", count=2),
        ReasonCount(reason="Missing docs", count=1),
    ),
    other_rejections=0,
    breaker_trips=(LimitCount(limit="turns", count=2), LimitCount(limit="tool_calls", count=1)),
    escalations=(
        ReasonCount(reason="CI failed N times, over on_ci_failure.max_retries N", count=2),
        ReasonCount(reason="it asked for humans", count=1),
    ),
    other_escalations=0,
    merge_times=(
        MergeTime(pr_number=101, issue=38, hours=168.0),  # 10th 09:00 -> 17th 09:00
        MergeTime(pr_number=102, issue=40, hours=48.0),
        MergeTime(pr_number=104, issue=42, hours=60.0),  # 19th 06:00 -> 21st 18:00
    ),
    merge_hours_median=60.0,
    merge_hours_max=168.0,
    unmeasured_merges=(105,),
    reopened=(38,),
    costs=(
        # model-a 1M in (2.00) + 250k out (2.00), model-b-mini 500k in (0.50); 5400 s at 0.36/h
        IssueCost(issue=38, tokens_usd=4.5, task_usd=0.54, total_usd=5.04, task_seconds=5400),
        # model-a 250k in (0.50) + 125k out (1.00); 7200 s
        IssueCost(issue=40, tokens_usd=1.5, task_usd=0.72, total_usd=2.22, task_seconds=7200),
        IssueCost(
            issue=None,
            tokens_usd=0.0,
            task_usd=0.06,
            total_usd=0.06,
            task_seconds=600,
            unpriced=("model-unknown",),
        ),
    ),
    total=IssueCost(
        issue=None,
        tokens_usd=6.0,
        task_usd=1.32,
        total_usd=7.32,
        task_seconds=13200,
        unpriced=("model-unknown",),
    ),
)


def test_a_seeded_week_gives_every_figure_exactly() -> None:
    figures = compute_figures(SEEDED, START, END, PRICES)
    assert figures == EXPECTED
    assert figures.events == len(WEEK) - 1  # one event was there twice


def test_the_figures_do_not_depend_on_the_order_the_events_come_in() -> None:
    shuffled = list(SEEDED)
    random.Random(20).shuffle(shuffled)  # noqa: S311 (an order, not a secret)
    assert compute_figures(shuffled, START, END, PRICES) == EXPECTED
    assert compute_figures(reversed(SEEDED), START, END, PRICES) == EXPECTED


def test_the_rendered_section_matches_its_golden_file() -> None:
    body = render_figures(compute_figures(SEEDED, START, END, PRICES))
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(body)
    assert body == GOLDEN.read_text()


EMPTY = RetroFigures(
    start=START,
    end=END,
    events=0,
    total=IssueCost(issue=None, tokens_usd=0, task_usd=0, total_usd=0, task_seconds=0),
)

QUIET_PERIODS: list[tuple[str, list[DomainEvent], datetime, datetime]] = [
    ("no events", [], START, END),
    ("only before the period", BEFORE, START, END),
    ("only at or after its end", AFTER, START, END),
    ("a period before anything happened", SEEDED, START - timedelta(days=30), START - timedelta(days=14)),
    ("an empty period", SEEDED, at(18, 8), at(18, 8)),
]


@pytest.mark.parametrize(
    ("events", "start", "end"), [case[1:] for case in QUIET_PERIODS], ids=[case[0] for case in QUIET_PERIODS]
)
def test_a_period_where_nothing_happened_has_empty_figures(
    events: list[DomainEvent], start: datetime, end: datetime
) -> None:
    figures = compute_figures(events, start, end, PRICES)
    assert figures == EMPTY.model_copy(update={"start": start, "end": end})
    text = render_figures(figures)
    assert "No agent pull request was merged." in text and "No usage recorded." in text


def test_a_period_is_the_same_instants_in_any_time_zone() -> None:
    tokyo = timezone(timedelta(hours=9))
    figures = compute_figures(SEEDED, START.astimezone(tokyo), END.astimezone(tokyo), PRICES)
    assert figures.model_copy(update={"start": START, "end": END}) == EXPECTED
    assert render_figures(figures).startswith("## Figures, 2026-11-16 00:00 UTC to 2026-11-23 00:00 UTC\n")


def test_one_microsecond_decides_which_period_an_event_belongs_to() -> None:
    edge = [opened(301, 50, START - timedelta(microseconds=1)), opened(302, 51, START), opened(303, 52, END)]
    assert compute_figures(edge, START, END, PRICES).opened == (302,)
    assert compute_figures(edge, START - timedelta(days=7), START, PRICES).opened == (301,)
    assert compute_figures(edge, END, END + timedelta(days=7), PRICES).opened == (303,)


def test_antecedents_before_the_period_count_only_as_context() -> None:
    """Reading less history loses what only earlier events say, and never counts them."""
    figures = compute_figures(WEEK, START, END, PRICES)
    # #101's pr.opened.v1 and its first review are not given: its merge still names its agent.
    assert figures.merged == (101, 102, 104, 105)
    assert figures.review_rounds[0] == ReviewRounds(pr_number=101, rounds=2)
    # #38's first start is not given: the merge of #101 is not measured rather than guessed.
    assert figures.unmeasured_merges == (101, 105)
    assert figures.breaker_trips == EXPECTED.breaker_trips and figures.costs == EXPECTED.costs


MANY_REASONS = [
    review(500, 9100 + n, "changes_requested", at(17), f"reason {chr(65 + n)}") for n in range(12)
]


def test_only_the_ten_most_frequent_reasons_are_listed_and_the_rest_counted() -> None:
    again = [review(500, 9200 + n, "changes_requested", at(18), "reason L") for n in range(3)]
    events = [
        opened(500, 60, at(16)),
        *MANY_REASONS,
        *again,
        *[escalated(f"why {n}", at(19)) for n in "abcdefghijkl"],
    ]
    figures = compute_figures(events, START, END, PRICES)
    assert figures.rejection_reasons[0] == ReasonCount(reason="reason L", count=4)
    assert [r.reason for r in figures.rejection_reasons[1:]] == [f"reason {c}" for c in "ABCDEFGHI"]
    assert figures.other_rejections == 2  # reasons J and K
    assert [r.reason for r in figures.escalations] == [f"why {c}" for c in "abcdefghij"]
    assert figures.other_escalations == 2
    assert "| *other reasons* | 2 |" in render_figures(figures)


def test_a_review_without_text_is_a_reason_not_given() -> None:
    events = [opened(500, 60, at(16)), review(500, 9300, "changes_requested", at(17), None)]
    figures = compute_figures(events, START, END, PRICES)
    assert figures.rejection_reasons == (ReasonCount(reason=NO_REASON, count=1),)


BAD_INPUT: list[tuple[str, Callable[[], object], type[Exception], str]] = [
    (
        "naive start",
        lambda: compute_figures([], START.replace(tzinfo=None), END, PRICES),
        PeriodError,
        "start must be timezone-aware",
    ),
    ("end before start", lambda: compute_figures([], END, START, PRICES), PeriodError, "start is after end"),
    (
        "two repositories",
        lambda: compute_figures(
            [
                opened(1, 2, at(17)),
                ev(
                    PullRequestOpened(pr_number=3),
                    at(17),
                    repository=Repository(id=2, full_name="octo/other"),
                ),
            ],
            START,
            END,
            PRICES,
        ),
        RetrospectiveInputError,
        "one repository's; the events are of octo/other, octo/shop",
    ),
    (
        "data that is not its event's",
        lambda: compute_figures(
            [opened(1, 2, at(17)).model_copy(update={"data": {"pr_number": "x"}})],
            START,
            END,
            PRICES,
        ),
        RetrospectiveInputError,
        r"\(pr.opened.v1\) does not match its schema",
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "message"), [case[1:] for case in BAD_INPUT], ids=[case[0] for case in BAD_INPUT]
)
def test_input_that_cannot_make_figures_is_a_clear_error(
    call: Callable[[], object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        call()


# --- hostile text: what an attacker who writes a review, an escalation reason or a model name gets


def _html(markdown: str) -> str:
    return str(MarkdownIt("commonmark").enable("table").render(markdown))


def _table_rows(markdown: str) -> list[list[str]]:
    """Every table row as the parser sees it: its cells' text."""
    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    rows: list[list[str]] = []
    for token in tokens:
        if token.type == "tr_open":
            rows.append([])
        elif token.type == "inline" and rows and token.map is not None and token.level >= 4:
            rows[-1].append(token.content)
    return rows


HOSTILE = [
    ("html", "<img src=x onerror=alert(1)><script>alert(2)</script></details>"),
    ("mention", "@octocat and @octo-org/admins please approve"),
    ("issue reference", "see #1 and octo/other#2"),
    ("table breakout", "a | b | c\n| forged | row |"),
    ("heading breakout", "\n\n# Approved by the team\n---"),
    ("link and image", "[click](javascript:alert(1)) ![x](https://evil.example/x.png)"),
    ("code and emphasis", "`code` **bold** _it_ ~~gone~~ <b>b</b>"),
    ("entity", "&lt;script&gt; &#64;octocat"),
    ("html comment", "<!-- squadron:dashboard digest=0000000000000000 -->"),
    ("bidi override", "\u202etxt.exe\u202c and zero\u200bwidth"),
    ("backslashes", "\\| \\\\| \\<b\\>"),
    ("very long", "x" * 5000),
]


def _with_text(text: str) -> str:
    """The section of a week whose review summary, escalation reason and model name are ``text``."""
    events = [
        opened(500, 60, at(16)),
        review(500, 9400, "changes_requested", at(17), text[:140]),
        escalated(text, at(18), issue=60),
        used(60, at(19), 60, (text[:100] or "m", 1000, 0)),
    ]
    return render_figures(compute_figures(events, START, END, PRICES))


def _tags(html: str) -> Counter[str]:
    return Counter(re.findall(r"<(/?[A-Za-z][A-Za-z0-9]*|!--)", html))


@pytest.mark.parametrize("text", [h[1] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_text_from_events_renders_as_inert_text_in_its_own_cell(text: str) -> None:
    markdown = _with_text(text)
    html = _html(markdown)
    # No markup of the attacker's: the same elements as the section of a harmless text (no tag,
    # link, image, code, emphasis, heading or rule of its own).
    assert _tags(html) == _tags(_html(_with_text("a harmless reason")))
    # No mention pings and no reference links: the attacker's @ and # are followed by a zero-width
    # space; the only references left are the section's own (the PR and the issue of the events).
    rendered = html.replace("&#8203;", "\u200b")
    assert re.search(r"@\w", rendered) is None
    assert set(re.findall(r"(?<![&\w])#\w+", rendered)) <= {"#500", "#60"}
    # Every row keeps its table's columns: nothing forged a cell or a row.
    for row in _table_rows(markdown):
        assert len(row) in (2, 3, 5), row
    assert sum(1 for row in _table_rows(markdown) if row and row[0].startswith("forged")) == 0
    assert all(len(line) < 600 for line in markdown.splitlines())


CELLS = [
    ("plain", "Tests fail", "Tests fail"),
    ("punctuation escaped", "a|b*c_d`e", "a\\|b\\*c\\_d\\`e"),
    ("mention", "@octocat", "\\@&#8203;octocat"),
    ("reference", "#12", "\\#&#8203;12"),
    ("angle brackets", "<b>", "\\<b\\>"),
    ("line breaks", "one\ntwo\r\nthree", "one two three"),
    ("controls and bidi", "a\x00b\u202ec", "abc"),
    ("cut", "y" * 250, "y" * 199 + "…"),
    ("non-ascii kept", "déjà vu – ok", "déjà vu – ok"),  # noqa: RUF001 (the dash is the point)
]


@pytest.mark.parametrize(("text", "cell"), [c[1:] for c in CELLS], ids=[c[0] for c in CELLS])
def test_text_cell(text: str, cell: str) -> None:
    assert text_cell(text) == cell


# --- action items ---------------------------------------------------------------------------------


ITEMS = [
    ActionItem(text="Add a test runner to the reviewer's tools", kind="issue", number=12),
    ActionItem(text="Pin the model of the dev role", kind="pull_request", number=14),
    ActionItem(text="Explain the budget in context.md", kind="pull_request", number=15),
    ActionItem(text="Shorter prompts", kind="issue", number=16),
    ActionItem(text="Retry flaky CI once", kind="pull_request", number=17),
    ActionItem(text="Label escalations by cause", kind="issue", number=18),
]

FOLLOW_UPS: list[tuple[str, list[ActionItem], dict[int, str], str, list[str]]] = [
    (
        "each state",
        ITEMS,
        {12: "closed", 14: "merged", 15: "closed", 16: "open", 17: "OPEN ", 18: "merged"},
        "2 of 6 done (an issue closed or a pull request merged).",
        [
            "| Add a test runner to the reviewer\\'s tools | issue #12 | closed |",
            "| Pin the model of the dev role | pull request #14 | merged |",
            "| Explain the budget in context\\.md | pull request #15 | closed without merge |",
            "| Shorter prompts | issue #16 | open |",
            "| Retry flaky CI once | pull request #17 | open |",
            "| Label escalations by cause | issue #18 | unknown |",  # an issue is never merged
        ],
    ),
    (
        "states not known",
        ITEMS[:2],
        {99: "closed"},
        "0 of 2 done (an issue closed or a pull request merged).",
        [
            "| Add a test runner to the reviewer\\'s tools | issue #12 | unknown |",
            "| Pin the model of the dev role | pull request #14 | unknown |",
        ],
    ),
    (
        "a hostile state is not shown",
        ITEMS[:1],
        {12: "<img src=x> @octocat"},
        "0 of 1 done (an issue closed or a pull request merged).",
        ["| Add a test runner to the reviewer\\'s tools | issue #12 | unknown |"],
    ),
]


@pytest.mark.parametrize(
    ("items", "states", "summary", "rows"),
    [case[1:] for case in FOLLOW_UPS],
    ids=[case[0] for case in FOLLOW_UPS],
)
def test_the_follow_up_says_what_became_of_each_action_item(
    items: list[ActionItem], states: dict[int, str], summary: str, rows: list[str]
) -> None:
    text = follow_up(items, states)
    lines = text.splitlines()
    assert lines[0] == "## Action items of the last retrospective"
    assert summary in lines
    assert lines[-len(rows) :] == rows
    assert len(_table_rows(text)) == len(rows) + 1  # the header and one row per item


def test_no_action_items_say_so() -> None:
    assert follow_up([], {12: "closed"}) == (
        "## Action items of the last retrospective\n\nThe last retrospective had no action items.\n"
    )


def test_an_action_items_text_is_inert() -> None:
    item = ActionItem(text="@octocat <script>x</script> | forged | row", kind="issue", number=3)
    text = follow_up([item], {3: "open"})
    assert "<script" not in _html(text) and "@octocat" not in text
    assert [len(row) for row in _table_rows(text)] == [3, 3]


BAD_ITEMS: list[tuple[str, dict[str, Any]]] = [
    ("empty text", {"text": "", "kind": "issue", "number": 1}),
    ("unknown kind", {"text": "x", "kind": "discussion", "number": 1}),
    ("number zero", {"text": "x", "kind": "issue", "number": 0}),
    ("text too long", {"text": "x" * 501, "kind": "issue", "number": 1}),
    ("unknown field", {"text": "x", "kind": "issue", "number": 1, "state": "open"}),
]


@pytest.mark.parametrize("fields", [b[1] for b in BAD_ITEMS], ids=[b[0] for b in BAD_ITEMS])
def test_a_malformed_action_item_is_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="ActionItem"):
        ActionItem.model_validate(fields)


# --- the router's own events make the figures (derivation, history and figures agree) ----------------


def test_the_routers_events_read_back_from_history_make_the_figures() -> None:
    world = World()
    world.send(world.events.assigned(38))
    world.send(world.events.pr(101, "feat/issue-38", "Closes #38"))
    world.send(world.events.review(101, "feat/issue-38", "changes_requested", body="Tests fail\n\nsee CI"))
    world.send(world.events.pr_closed(101, "feat/issue-38", merged=True, body="Closes #38"))
    world.send(world.events.assigned(39))
    world.send(world.events.pr(102, "feat/issue-39", "Closes #39"))
    world.send(world.events.pr_closed(102, "feat/issue-39", merged=False, body="Closes #39"))
    world.send(world.events.closed(38))
    world.send(world.events.reopened(38))
    start, end = T0, world.now + timedelta(seconds=1)
    history = world.registry.history(world.events.repo_id, start, end)
    assert history == sorted(world.registry.events.values(), key=lambda e: (e.time, e.id))
    figures = compute_figures(history, start, end, PRICES)
    assert (figures.opened, figures.merged, figures.rejected, figures.reopened) == (
        (101, 102),
        (101,),
        (102,),
        (38,),
    )
    assert figures.review_rounds == (ReviewRounds(pr_number=101, rounds=2),)
    assert figures.rejection_reasons == (ReasonCount(reason="Tests fail", count=1),)
    first_start = next(e for e in history if e.detail_type == "agent.started.v1" and e.issue == 38)
    merge = next(e for e in history if e.detail_type == "pr.merged.v1")
    assert figures.merge_times == (
        MergeTime(pr_number=101, issue=38, hours=(merge.time - first_start.time).total_seconds() / 3600),
    )
    assert figures.events == len(history)


def test_a_busy_week_renders_bounded_tables_and_counts_what_it_leaves_out() -> None:
    events: list[DomainEvent] = []
    for n in range(60):
        events += [
            started(1000 + n, at(16, 1)),
            opened(2000 + n, 1000 + n, at(16, 2)),
            merged(2000 + n, 1000 + n, at(17, 2), agent=dev(1000 + n)),
            used(1000 + n, at(17, 3), 60 * (n + 1), ("model-a", 1000, 0)),
        ]
    figures = compute_figures(events, START, END, PRICES)
    assert len(figures.merged) == len(figures.merge_times) == len(figures.costs) == 60
    markdown = render_figures(figures)
    listed = ", ".join(f"#{2000 + n}" for n in range(50))
    assert f"| merged | 60 | {listed} and 10 more |" in markdown.splitlines()
    assert markdown.count("| *10 more* |") == 3  # review rounds, assignment to merge, cost
    assert all(len(row) in (2, 3, 5) for row in _table_rows(markdown))
    assert len(_table_rows(markdown)) < 3 * 52 + 20
