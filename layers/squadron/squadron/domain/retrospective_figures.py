"""A retrospective's figures, computed by code from a repository's domain events — pure.

The retrospective role writes the narrative; the figures it starts from are computed here,
exactly and deterministically, from the repository's history (:mod:`squadron.domain.history`):
:func:`compute_figures` counts; :func:`squadron.domain.retrospective_report.render_figures`
writes them as a Markdown section for the retrospective issue
(:mod:`squadron.domain.retrospective` holds the retrospective itself).

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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from squadron.domain.cost import PriceTable, cost_of
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
