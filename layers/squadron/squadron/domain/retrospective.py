"""A retrospective: its period, its issue, and what it set in motion — pure.

The figures it starts from are computed by :mod:`squadron.domain.retrospective_figures` and
written by :mod:`squadron.domain.retrospective_report`; :func:`follow_up` says what became of
the previous retrospective's action items.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from squadron.domain.retrospective_figures import RetroFigures
from squadron.domain.retrospective_report import render_figures, text_cell, utc_minute

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
        return f"Retrospective: milestone {name} ({utc_minute(start)} to {utc_minute(end)})"
    return f"Retrospective: {utc_minute(start)} to {utc_minute(end)}"


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
            f"Squadron's agents look back on {utc_minute(figures.start)} to {utc_minute(figures.end)}: {why}.{before}",
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
