"""A retrospective's figures, computed by code from a repository's domain events — pure.

The retrospective role writes the narrative; the figures it starts from are computed here,
exactly and deterministically, from the repository's history (:mod:`squadron.domain.history`):
:func:`compute_figures` counts, :func:`render_figures` writes them as a Markdown section for
the retrospective issue, and :func:`follow_up` says what became of the previous
retrospective's action items.

What is counted, precisely (the period is ``[start, end)``):

- **Events.** Each event counts once (by id), in the history's order (time, then id). Events
  at or after ``end`` are ignored. Events before ``start`` are *context only*: they say which
  pull request is an agent's and what issue it serves, when an issue's dev agent first
  started, and which changes a merged PR had requested of it before; they are never counted
  as something that happened in the period. A caller that wants those antecedents reads the
  history from earlier than ``start`` (for example four weeks before a weekly period).
- **Agent pull request.** A pull request a dev agent opened: one with a ``pr.opened.v1``, or a
  ``pr.merged.v1`` / ``pr.closed.v1`` naming an agent, before ``end``. Its issue is the one the
  latest of those events names.
- **Opened / merged / rejected.** Agent PRs with a ``pr.opened.v1`` / ``pr.merged.v1`` in the
  period; *rejected*: agent PRs with a ``pr.closed.v1`` (closed without merge) in the period
  and no ``pr.merged.v1`` in it (a PR closed, reopened and merged counts as merged only).
- **Review rounds** of a merged agent PR: ``1 +`` the changes-requested reviews
  (``review.submitted.v1`` with state ``changes_requested``, each review id once) it received
  up to its merge, before the period too. Reported per PR, with their mean and maximum.
- **Rejection reasons.** The changes-requested reviews of agent PRs submitted in the period,
  grouped by their summary (the review's first line; "(no reason given)" when it had no text),
  most frequent first (ties by text); the top :data:`TOP_REASONS`, and how many reviews had
  another reason.
- **Breaker trips.** ``breaker.tripped.v1`` in the period, by limit.
- **Escalations.** ``agent.escalated.v1`` in the period, grouped by reason with each run of
  digits replaced by ``N`` (so "CI failed 4 times" and "CI failed 5 times" are one reason),
  most frequent first; the top :data:`TOP_REASONS`, and how many had another reason.
- **Assignment to merge.** For each agent PR merged in the period, the hours from the first
  ``agent.started.v1`` of a dev agent of its issue (at or before the merge, before the period
  too) to its ``pr.merged.v1``; their median and maximum. A merged PR whose issue or whose
  agent's start is not in the events given is listed as unmeasured, never guessed.
- **Reopened issues.** Issues with an ``issue.reopened.v1`` in the period that name a dev agent
  (an issue Squadron worked on); issues no agent touched are not the agents' figures.
- **Cost.** ``usage.recorded.v1`` in the period, priced with a
  :class:`~squadron.domain.cost.PriceTable` (tokens per model, and task seconds at the task's
  hourly price). Each is counted for its issue; a review agent's usage (recorded on its pull
  request's number) counts for the issue that agent PR serves, and the PM's (no issue) for the
  repository. Amounts are US dollars rounded to the micro-dollar; the total is priced from all
  the usage at once. Models the table does not price are named, never counted as free.
"""

from __future__ import annotations

import re
import statistics
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from squadron.domain.cost import PriceTable, cost_of, usd
from squadron.domain.domain_events import (
    CATALOGUE,
    AgentEscalated,
    AgentStarted,
    BreakerTripped,
    DomainEvent,
    IssueReopened,
    PullRequestClosed,
    PullRequestMerged,
    PullRequestOpened,
    ReviewSubmitted,
    UsageRecorded,
)
from squadron.domain.history import check_period, history_order, utc_instant
from squadron.domain.usage import ModelTokens
from squadron.errors import SquadronError

#: Reasons (of rejections, of escalations) listed at most; the rest are counted together.
TOP_REASONS = 10
#: Issues listed in the rendered cost table at most (the rest are summed in one row), and rows of
#: the other tables (review rounds, assignment to merge).
MAX_COST_ROWS = 50
#: Numbers listed in one line or cell at most (the rest are counted).
MAX_LISTED = 50
#: The longest reason a figure keeps (longer ones are cut, the last character an ellipsis).
REASON_LENGTH = 140
NO_REASON = "(no reason given)"
_DIGITS = re.compile(r"[0-9]+")


class RetrospectiveInputError(SquadronError, ValueError):
    """Events that cannot make one repository's figures (several repositories, a malformed event)."""


class _Figure(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ReasonCount(_Figure):
    reason: str
    count: int = Field(ge=1)


class LimitCount(_Figure):
    limit: str
    count: int = Field(ge=1)


class ReviewRounds(_Figure):
    """A merged agent PR and its rounds of review: its changes-requested reviews + 1."""

    pr_number: int
    rounds: int = Field(ge=1)


class MergeTime(_Figure):
    """A merged agent PR, its issue, and the hours from the issue's first dev agent start to the merge."""

    pr_number: int
    issue: int
    hours: float = Field(ge=0)


class IssueCost(_Figure):
    """What one issue's agents cost in the period (``issue`` None: the repository's PM)."""

    issue: int | None
    tokens_usd: float = Field(ge=0)
    task_usd: float = Field(ge=0)
    total_usd: float = Field(ge=0)
    task_seconds: int = Field(ge=0)
    #: Models whose tokens the price table does not price (counted as nothing, named here).
    unpriced: tuple[str, ...] = ()


class RetroFigures(_Figure):
    """A repository's figures over ``[start, end)`` (the module's docstring defines each)."""

    start: datetime
    end: datetime
    #: Events that happened in the period (duplicates once).
    events: int = Field(ge=0)
    opened: tuple[int, ...] = ()
    merged: tuple[int, ...] = ()
    rejected: tuple[int, ...] = ()
    review_rounds: tuple[ReviewRounds, ...] = ()
    rounds_mean: float | None = None
    rounds_max: int | None = None
    rejection_reasons: tuple[ReasonCount, ...] = ()
    #: Changes-requested reviews whose reason is not among :attr:`rejection_reasons`.
    other_rejections: int = Field(default=0, ge=0)
    breaker_trips: tuple[LimitCount, ...] = ()
    escalations: tuple[ReasonCount, ...] = ()
    #: Escalations whose reason is not among :attr:`escalations`.
    other_escalations: int = Field(default=0, ge=0)
    merge_times: tuple[MergeTime, ...] = ()
    merge_hours_median: float | None = None
    merge_hours_max: float | None = None
    #: Agent PRs merged in the period whose issue's first dev agent start is not known.
    unmeasured_merges: tuple[int, ...] = ()
    reopened: tuple[int, ...] = ()
    costs: tuple[IssueCost, ...] = ()
    total: IssueCost


# --- computing ----------------------------------------------------------------------------------


def _reason(text: str | None, *, numbers: bool = True) -> str:
    """One line of a reason: no control or format characters, whitespace runs as one space,
    digit runs as ``N`` unless ``numbers``, cut to :data:`REASON_LENGTH`."""
    kept = "".join(
        " " if c.isspace() else c
        for c in (text or "")
        if c.isspace() or unicodedata.category(c) not in ("Cc", "Cf")
    )
    flat = " ".join(kept.split())
    if not numbers:
        flat = _DIGITS.sub("N", flat)
    if not flat:
        return NO_REASON
    return flat if len(flat) <= REASON_LENGTH else flat[: REASON_LENGTH - 1] + "…"


def _top(counter: Counter[str]) -> tuple[tuple[ReasonCount, ...], int]:
    ranked = sorted(counter.items(), key=lambda item: (-item[1], item[0]))
    top = tuple(ReasonCount(reason=reason, count=count) for reason, count in ranked[:TOP_REASONS])
    return top, sum(count for _, count in ranked[TOP_REASONS:])


def _price(
    issue: int | None, tokens: Mapping[str, tuple[int, int]], seconds: int, prices: PriceTable
) -> IssueCost:
    entries = [ModelTokens(model=m, input_tokens=i, output_tokens=o) for m, (i, o) in sorted(tokens.items())]
    cost = cost_of(entries, seconds, prices)
    return IssueCost(
        issue=issue,
        tokens_usd=round(cost.tokens_usd, 6),
        task_usd=round(cost.task_usd, 6),
        total_usd=round(cost.total_usd, 6),
        task_seconds=seconds,
        unpriced=tuple(sorted(cost.unpriced)),
    )


def _parsed(event: DomainEvent) -> object | None:
    model = CATALOGUE.get(event.detail_type)
    if model is None:
        return None  # a kind of event the figures do not read
    try:
        return model.model_validate(event.data)
    except ValidationError as exc:
        raise RetrospectiveInputError(
            f"event {event.id} ({event.detail_type}) does not match its schema: {exc.errors()[0]['msg']}"
        ) from exc


@dataclass
class _Tally:
    """What the events say, gathered in one pass in history order (see the module's docstring)."""

    start: datetime
    counted: int = 0
    agent_prs: set[int] = field(default_factory=set)
    #: Agent PR -> the issue it serves (the latest event naming one).
    pr_issue: dict[int, int] = field(default_factory=dict)
    first_dev_start: dict[int, datetime] = field(default_factory=dict)
    #: PR -> changes-requested review id -> when it was submitted.
    changes_requested: dict[int, dict[int, datetime]] = field(default_factory=dict)
    merged_at: dict[int, datetime] = field(default_factory=dict)
    opened: set[int] = field(default_factory=set)
    closed: set[int] = field(default_factory=set)
    #: (PR, reason) of each changes-requested review submitted in the period.
    rejections: list[tuple[int, str]] = field(default_factory=list)
    trips: Counter[str] = field(default_factory=Counter)
    escalations: Counter[str] = field(default_factory=Counter)
    reopened: set[int] = field(default_factory=set)
    usage: list[tuple[int | None, UsageRecorded]] = field(default_factory=list)

    def add(self, event: DomainEvent) -> None:
        at = utc_instant(event.time)
        inside = at >= self.start
        self.counted += inside
        data = _parsed(event)
        match data:
            case PullRequestOpened(pr_number=pr):
                self._agent_pr(pr, event.issue)
                if inside:
                    self.opened.add(pr)
            case PullRequestMerged(pr_number=pr) | PullRequestClosed(pr_number=pr) if event.agent is not None:
                self._agent_pr(pr, event.issue)
                if inside and isinstance(data, PullRequestMerged):
                    self.merged_at.setdefault(pr, at)
                elif inside:
                    self.closed.add(pr)
            case PullRequestMerged(pr_number=pr) if inside and pr in self.agent_prs:
                self.merged_at.setdefault(pr, at)
            case AgentStarted(kind="dev") if event.issue is not None:
                self.first_dev_start.setdefault(event.issue, at)
            case ReviewSubmitted(state="changes_requested", pr_number=pr, review_id=review, summary=summary):
                reviews = self.changes_requested.setdefault(pr, {})
                if review not in reviews:
                    reviews[review] = at
                    if inside:
                        self.rejections.append((pr, _reason(summary)))
            case BreakerTripped(limit=limit) if inside:
                self.trips[limit.value] += 1
            case AgentEscalated(reason=reason) if inside:
                self.escalations[_reason(reason, numbers=False)] += 1
            case IssueReopened() if inside and event.agent is not None and event.issue is not None:
                self.reopened.add(event.issue)
            case UsageRecorded() if inside:
                self.usage.append((event.issue, data))
            case _:
                pass

    def _agent_pr(self, pr: int, issue: int | None) -> None:
        self.agent_prs.add(pr)
        if issue is not None:
            self.pr_issue[pr] = issue

    def merged(self) -> list[int]:
        return sorted(pr for pr in self.merged_at if pr in self.agent_prs)

    def rounds(self) -> tuple[ReviewRounds, ...]:
        return tuple(
            ReviewRounds(
                pr_number=pr,
                rounds=1
                + sum(when <= self.merged_at[pr] for when in self.changes_requested.get(pr, {}).values()),
            )
            for pr in self.merged()
        )

    def merge_times(self) -> tuple[list[MergeTime], list[int]]:
        measured: list[MergeTime] = []
        unmeasured: list[int] = []
        for pr in self.merged():
            issue = self.pr_issue.get(pr)
            began = self.first_dev_start.get(issue) if issue is not None else None
            if issue is None or began is None or began > self.merged_at[pr]:
                unmeasured.append(pr)
                continue
            hours = (self.merged_at[pr] - began).total_seconds() / 3600
            measured.append(MergeTime(pr_number=pr, issue=issue, hours=hours))
        return measured, unmeasured

    def costs(self, prices: PriceTable) -> tuple[list[IssueCost], IssueCost]:
        per_issue: dict[int | None, tuple[dict[str, tuple[int, int]], int]] = {}
        all_tokens: dict[str, tuple[int, int]] = {}
        all_seconds = 0
        for number, used in self.usage:
            issue = self.pr_issue.get(number, number) if number is not None else None
            tokens, seconds = per_issue.setdefault(issue, ({}, 0))
            for entry in used.tokens:
                for bucket in (tokens, all_tokens):
                    i, o = bucket.get(entry.model, (0, 0))
                    bucket[entry.model] = (i + entry.input_tokens, o + entry.output_tokens)
            per_issue[issue] = (tokens, seconds + used.active_seconds)
            all_seconds += used.active_seconds
        costs = sorted(
            (_price(issue, tokens, seconds, prices) for issue, (tokens, seconds) in per_issue.items()),
            key=lambda c: (c.issue is None, -c.total_usd, c.issue or 0),
        )
        return costs, _price(None, all_tokens, all_seconds, prices)


def compute_figures(
    events: Iterable[DomainEvent], start: datetime, end: datetime, prices: PriceTable
) -> RetroFigures:
    """The figures of ``[start, end)`` from one repository's ``events`` (see the module's docstring).

    Raises :class:`~squadron.domain.history.PeriodError` for a period of naive times or one
    that ends before it starts, and :class:`RetrospectiveInputError` for events of several
    repositories or an event whose data does not match its schema.
    """
    check_period(start, end)
    hi = utc_instant(end)
    unique = {event.id: event for event in events}
    ordered = [e for e in sorted(unique.values(), key=history_order) if utc_instant(e.time) < hi]
    repositories = sorted({e.repository.full_name for e in ordered})
    if len(repositories) > 1:
        raise RetrospectiveInputError(
            f"the figures are one repository's; the events are of {', '.join(repositories)}"
        )
    tally = _Tally(start=utc_instant(start))
    for event in ordered:
        tally.add(event)
    merged = tally.merged()
    rounds = tally.rounds()
    rejections = Counter(reason for pr, reason in tally.rejections if pr in tally.agent_prs)
    top_rejections, other_rejections = _top(rejections)
    top_escalations, other_escalations = _top(tally.escalations)
    merge_times, unmeasured = tally.merge_times()
    hours = [m.hours for m in merge_times]
    costs, total = tally.costs(prices)
    return RetroFigures(
        start=start,
        end=end,
        events=tally.counted,
        opened=tuple(sorted(tally.opened)),
        merged=tuple(merged),
        rejected=tuple(sorted(tally.closed - set(merged))),
        review_rounds=rounds,
        rounds_mean=statistics.fmean(r.rounds for r in rounds) if rounds else None,
        rounds_max=max((r.rounds for r in rounds), default=None),
        rejection_reasons=top_rejections,
        other_rejections=other_rejections,
        breaker_trips=tuple(
            LimitCount(limit=limit, count=count)
            for limit, count in sorted(tally.trips.items(), key=lambda item: (-item[1], item[0]))
        ),
        escalations=top_escalations,
        other_escalations=other_escalations,
        merge_times=tuple(merge_times),
        merge_hours_median=statistics.median(hours) if hours else None,
        merge_hours_max=max(hours) if hours else None,
        unmeasured_merges=tuple(unmeasured),
        reopened=tuple(sorted(tally.reopened)),
        costs=tuple(costs),
        total=total,
    )


# --- rendering ----------------------------------------------------------------------------------

#: ASCII punctuation: each is backslash-escaped in text from events, so none of it is markup.
_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
#: After ``@`` (a mention) and ``#`` (an issue reference): a zero-width space, so neither pings
#: nor links (as Renovate writes users' text into its issues).
_ZERO_WIDTH = "&#8203;"


def text_cell(text: str, limit: int = 200) -> str:
    """Untrusted text as inert Markdown for one table cell or line.

    One line, no control or format characters, at most ``limit`` characters; every ASCII
    punctuation character backslash-escaped (no emphasis, link, image, code span, HTML tag,
    entity or table pipe survives); ``@`` and ``#`` followed by a zero-width space (no mention
    pings anyone, no reference links an issue).
    """
    kept = "".join(
        " " if c.isspace() else c for c in text if c.isspace() or unicodedata.category(c) not in ("Cc", "Cf")
    )
    flat = " ".join(kept.split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    out: list[str] = []
    for c in flat:
        if c in "@#":
            out.append(f"\\{c}{_ZERO_WIDTH}")
        elif c in _PUNCTUATION:
            out.append(f"\\{c}")
        else:
            out.append(c)
    return "".join(out)


def _when(at: datetime) -> str:
    return utc_instant(at).strftime("%Y-%m-%d %H:%M UTC")


def _numbers(numbers: Sequence[int]) -> str:
    """``#1, #2, …`` (the first :data:`MAX_LISTED`, then how many more), or ``none``."""
    if not numbers:
        return "none"
    shown = ", ".join(f"#{n}" for n in numbers[:MAX_LISTED])
    return shown if len(numbers) <= MAX_LISTED else f"{shown} and {len(numbers) - MAX_LISTED} more"


def _hours(value: float) -> str:
    return f"{value:.1f} h"


def _more(rows: int, columns: int) -> list[str]:
    """The row saying how many rows past :data:`MAX_COST_ROWS` a table leaves out (none if none)."""
    if rows <= MAX_COST_ROWS:
        return []
    return [f"| *{rows - MAX_COST_ROWS} more* |" + " |" * (columns - 1)]


def _reasons_table(title: str, what: str, rows: Sequence[ReasonCount], other: int) -> list[str]:
    lines = [f"**{title}**", ""]
    if not rows:
        return [*lines, "None.", ""]
    lines += [f"| {what} | Count |", "| --- | ---: |"]
    lines += [f"| {text_cell(row.reason)} | {row.count} |" for row in rows]
    if other:
        lines.append(f"| *other reasons* | {other} |")
    return [*lines, ""]


def render_figures(figures: RetroFigures) -> str:
    """The figures as a Markdown section of the retrospective issue (text from events made inert)."""
    f = figures
    lines = [
        f"## Figures, {_when(f.start)} to {_when(f.end)}",
        "",
        f"*Computed by Squadron from the repository's domain events ({f.events} in the period), not by a model.*",
        "",
        "**Agent pull requests**",
        "",
        "| | Count | Pull requests |",
        "| --- | ---: | --- |",
        f"| opened | {len(f.opened)} | {_numbers(f.opened)} |",
        f"| merged | {len(f.merged)} | {_numbers(f.merged)} |",
        f"| rejected (closed without merge) | {len(f.rejected)} | {_numbers(f.rejected)} |",
        "",
        "**Review rounds** (per merged agent pull request: changes requested + 1)",
        "",
    ]
    if f.review_rounds and f.rounds_mean is not None:
        lines += [
            f"Mean {f.rounds_mean:.2f}, max {f.rounds_max}.",
            "",
            "| Pull request | Rounds |",
            "| --- | ---: |",
        ]
        lines += [f"| #{r.pr_number} | {r.rounds} |" for r in f.review_rounds[:MAX_COST_ROWS]]
        lines += _more(len(f.review_rounds), 2)
    else:
        lines.append("No agent pull request was merged.")
    lines.append("")
    lines += _reasons_table(
        "Rejection reasons", "Changes requested because", f.rejection_reasons, f.other_rejections
    )
    lines += ["**Breaker trips**", ""]
    if f.breaker_trips:
        lines += ["| Limit | Trips |", "| --- | ---: |"]
        lines += [f"| {text_cell(t.limit)} | {t.count} |" for t in f.breaker_trips]
    else:
        lines.append("None.")
    lines.append("")
    lines += _reasons_table("Escalations", "Reason", f.escalations, f.other_escalations)
    lines += ["**Assignment to merge** (from the issue's first dev agent start to the merge)", ""]
    if f.merge_times and f.merge_hours_median is not None and f.merge_hours_max is not None:
        lines += [
            f"Median {_hours(f.merge_hours_median)}, max {_hours(f.merge_hours_max)}.",
            "",
            "| Pull request | Issue | Hours |",
            "| --- | --- | ---: |",
        ]
        lines += [f"| #{m.pr_number} | #{m.issue} | {m.hours:.1f} |" for m in f.merge_times[:MAX_COST_ROWS]]
        lines += _more(len(f.merge_times), 3)
    else:
        lines.append("Nothing measured.")
    if f.unmeasured_merges:
        lines += ["", f"Not measured (no recorded start): {_numbers(f.unmeasured_merges)}."]
    reopened = f"{_numbers(f.reopened)}." if f.reopened else "None."
    lines += ["", "**Reopened issues** (that an agent worked on)", "", reopened, ""]
    lines += _cost_lines(f)
    return "\n".join(lines).rstrip("\n") + "\n"


def _cost_lines(f: RetroFigures) -> list[str]:
    lines = ["**Cost**", ""]
    if not f.costs:
        return [*lines, "No usage recorded."]
    lines += ["| Issue | Tokens | Task time | Total | Task seconds |", "| --- | ---: | ---: | ---: | ---: |"]
    for cost in f.costs[:MAX_COST_ROWS]:
        who = f"#{cost.issue}" if cost.issue is not None else "the PM (no issue)"
        lines.append(
            f"| {who} | {usd(cost.tokens_usd)} | {usd(cost.task_usd)} | {usd(cost.total_usd)} | {cost.task_seconds} |"
        )
    rest = f.costs[MAX_COST_ROWS:]
    if rest:
        lines.append(
            f"| *{len(rest)} more* | | | {usd(sum(c.total_usd for c in rest))} | {sum(c.task_seconds for c in rest)} |"
        )
    t = f.total
    lines.append(
        f"| **total** | {usd(t.tokens_usd)} | {usd(t.task_usd)} | **{usd(t.total_usd)}** | {t.task_seconds} |"
    )
    if t.unpriced:
        lines += [
            "",
            "Not priced (no price in the table): " + ", ".join(text_cell(m, 100) for m in t.unpriced) + ".",
        ]
    return lines


# --- action items ---------------------------------------------------------------------------------


class ActionItem(BaseModel):
    """An action item of a retrospective, tracked as an issue or a pull request."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str = Field(min_length=1, max_length=500)
    kind: Literal["issue", "pull_request"]
    number: int = Field(ge=1)


#: What an item's state reads as, by kind; any other state (or none) is "unknown".
_STATES: Mapping[str, Mapping[str, str]] = {
    "issue": {"open": "open", "closed": "closed"},
    "pull_request": {"open": "open", "merged": "merged", "closed": "closed without merge"},
}
_DONE = {("issue", "closed"), ("pull_request", "merged")}


def follow_up(items: Sequence[ActionItem], states: Mapping[int, str]) -> str:
    """What became of the previous retrospective's action items, as a Markdown section.

    ``states``: each number's state on GitHub now (``open``, ``closed``, or ``merged`` for a pull
    request). An item whose number has no state, or a state its kind cannot have (an issue
    "merged"), reads as unknown. Done: an issue closed, a pull request merged.
    """
    lines = ["## Action items of the last retrospective", ""]
    if not items:
        return "\n".join([*lines, "The last retrospective had no action items."]) + "\n"
    rows: list[str] = []
    done = 0
    for item in items:
        state = str(states.get(item.number, "")).strip().lower()
        shown = _STATES[item.kind].get(state, "unknown")
        done += (item.kind, state) in _DONE
        where = "issue" if item.kind == "issue" else "pull request"
        rows.append(f"| {text_cell(item.text)} | {where} #{item.number} | {shown} |")
    lines += [
        f"{done} of {len(items)} done (an issue closed or a pull request merged).",
        "",
        "| Action item | Tracked in | Now |",
        "| --- | --- | --- |",
        *rows,
    ]
    return "\n".join(lines) + "\n"


# --- the retrospective itself ---------------------------------------------------------------------

#: The built-in role that holds retrospectives, the label of its issues (routed to it), and the
#: label its action items carry.
ROLE = "retrospective"
LABEL = "retrospective"
ACTION_LABEL = "retrospective-action"
#: The only paths a retrospective's pull request may change (the framework refuses any other
#: push of its agent), and which the merge gate always holds for a person.
PATHS = (".squadron/",)
#: History read before a period's start, as context for its figures (who opened which PR, when
#: an issue's agent started), never counted.
CONTEXT = timedelta(days=28)
#: Action items of one retrospective tracked at most.
MAX_ACTION_ITEMS = 20


class RetroRecord(BaseModel):
    """One retrospective: its period, its issue, and what it set in motion (tracked next time)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    repo_id: int
    repo_full_name: str
    issue_number: int = Field(ge=1)
    window_start: datetime
    window_end: datetime
    trigger: str = Field(max_length=32)
    milestone_number: int | None = None
    milestone_title: str | None = Field(default=None, max_length=256)
    opened_at: datetime
    items: tuple[ActionItem, ...] = Field(default=(), max_length=MAX_ACTION_ITEMS)
    pull_request: int | None = None
    version: int = Field(default=1, ge=1)

    def with_item(self, item: ActionItem) -> RetroRecord:
        """This record tracking ``item`` too (once per number; the first :data:`MAX_ACTION_ITEMS`)."""
        if any(i.number == item.number for i in self.items) or len(self.items) >= MAX_ACTION_ITEMS:
            return self
        update: dict[str, object] = {"items": (*self.items, item), "version": self.version + 1}
        if item.kind == "pull_request" and self.pull_request is None:
            update["pull_request"] = item.number
        return self.model_copy(update=update)


def period(
    end: datetime, *, start: datetime | None, previous: RetroRecord | None, days: int
) -> tuple[datetime, datetime]:
    """The period a retrospective covers: ``start`` when given; else from where the previous one
    ended (when that is before ``end``, and not more than a year back); else ``days`` before."""
    if start is not None:
        return start, end
    if (
        previous is not None
        and previous.window_end < end
        and end - previous.window_end <= timedelta(days=366)
    ):
        return previous.window_end, end
    return end - timedelta(days=days), end


def title(start: datetime, end: datetime, milestone: str | None) -> str:
    """The issue's title (plain text: GitHub renders no Markdown in a title)."""
    if milestone:
        name = " ".join("".join(ch for ch in milestone if ch.isprintable()).split())[:120]
        return f"Retrospective: milestone {name} ({_when(start)} to {_when(end)})"
    return f"Retrospective: {_when(start)} to {_when(end)}"


def issue_body(
    figures: RetroFigures,
    *,
    trigger: str,
    previous: RetroRecord | None,
    follow: str,
    milestone: str | None = None,
) -> str:
    """The retrospective issue: why it was held, the figures (code's), what became of the last
    one's action items, and what its agent is asked to do."""
    why = {
        "schedule": "the repository's retrospective schedule fired (`retrospective.schedule` in .squadron/config.yaml)",
        "milestone": f"milestone {text_cell(milestone or '?', 120)} closed",
        "operator": "an operator asked for it (`squadron retro start`)",
    }.get(trigger, trigger)
    before = f" The previous one is #{previous.issue_number}." if previous is not None else ""
    return "\n".join(
        [
            f"Squadron's agents look back on {_when(figures.start)} to {_when(figures.end)}: {why}.{before}",
            "",
            render_figures(figures).rstrip(),
            "",
            follow.rstrip()
            if previous is not None
            else "## Action items of the last retrospective\n\nThis is the first.",
            "",
            "## What happens next",
            "",
            f"The `{ROLE}` agent comments here with a narrative and the action items, opens an issue "
            f"labelled `{ACTION_LABEL}` for each (the next retrospective reports what became of them), "
            "and may propose changes to `.squadron/` (agent definitions, config, context) as a pull "
            "request. Squadron refuses any change outside `.squadron/` from it, and a person must approve "
            "and merge that pull request.",
        ]
    )
